"""The tilelab command: compile, emit, and the messages for bad input."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tilelab import config


def tilelab(*args):
    return subprocess.run([sys.executable, "-m", "tilelab", *args], capture_output=True,
                          text=True, timeout=300)


@pytest.mark.subprocess
def test_compile_emits_requested_artifacts(kernel_file):
    r = tilelab("compile", f"{kernel_file}::add", "--arch", "sm_90",
                "--emit", "tileir,ptx,resources,lowered,timings")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "add -> add_" in out and "for sm_90" in out
    assert "===== tileir =====" in out and "entry @add_" in out
    assert "===== ptx =====" in out and ".target sm_90" in out
    assert "===== resources =====" in out
    assert "===== lowered =====" in out and "ct.store(z, index=" in out


@pytest.mark.subprocess
def test_compile_with_args_expression(kernel_file):
    r = tilelab("compile", f"{kernel_file}::add", "--arch", "sm_120", "--emit", "tileir",
                "--args", "X.partition(512), X, X")
    assert r.returncode == 0, r.stderr
    assert "for sm_120" in r.stdout


@pytest.mark.subprocess
def test_compile_unknown_kernel_lists_kernels(kernel_file):
    r = tilelab("compile", f"{kernel_file}::nope")
    assert r.returncode != 0 and "no @tl.kernel named 'nope'" in r.stderr
    assert "kernels there: add" in r.stderr


@pytest.mark.subprocess
def test_compile_bad_emit(kernel_file):
    r = tilelab("compile", f"{kernel_file}::add", "--emit", "tileir,bogus")
    assert r.returncode != 0 and "unknown --emit ['bogus']" in r.stderr


@pytest.mark.subprocess
def test_compile_error_is_reported_not_raised(tmp_path):
    f = tmp_path / "bad.py"
    f.write_text(textwrap.dedent('''
        import tilelab as tl
        import cuda.tile as ct

        @tl.kernel
        def k(z: tl.Out, x: tl.In):
            z.store(ct.load(x, index=(0,), shape=(64,)))

        X = tl.spec(4096, "float32")
        TILELAB_EXAMPLES = {"k": (X.partition(256), X)}
        '''))
    r = tilelab("compile", f"{f}::k", "--arch", "sm_90")
    assert r.returncode == 1
    assert "bad.py:7" in r.stderr and "the tile is (64,), but z is partitioned into " \
        "tiles of (256,)" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.subprocess
def test_compile_needs_example_args(tmp_path):
    f = tmp_path / "noargs.py"
    f.write_text("import tilelab as tl\n@tl.kernel\ndef k(z: tl.Out):\n    pass\n")
    r = tilelab("compile", f"{f}::k")
    assert r.returncode != 0 and "needs example arguments" in r.stderr


# ---- the warm path: a shortcut in the cache, taken only while nothing it read changed ----

_PROBE = ("import sys\n"
          "from tilelab.cli import main\n"
          "code = main(sys.argv[1:])\n"
          "print('PATH=' + ('full' if 'cuda.tile' in sys.modules else 'shortcut'))\n"
          "sys.exit(code)\n")


def compile_probe(*args: str, env: dict | None = None) -> tuple[str, str]:
    """``tilelab compile ARGS`` in a new process: (its output, "shortcut" when the cache's
    shortcut answered without loading the file or cuTile, else "full")."""
    r = subprocess.run([sys.executable, "-c", _PROBE, "compile", *args], capture_output=True,
                       text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    out, _, path = r.stdout.rpartition("PATH=")
    return out, path.strip()


@pytest.fixture
def tuned_file(tmp_path):
    """A kernel whose example sizes come from a module beside it, a data file and an
    environment variable: every one of them is an input of the compile."""
    (tmp_path / "tile.txt").write_text("256")
    (tmp_path / "tuned_sizes.py").write_text("N = 4096\n")
    f = tmp_path / "tuned.py"
    f.write_text(textwrap.dedent('''
        import os
        from pathlib import Path

        import tilelab as tl
        from tuned_sizes import N

        @tl.kernel
        def add(z: tl.Out, x: tl.In, y: tl.In):
            z.store(tl.load_like(x, z) + tl.load_like(y, z))

        TILE = int((Path(__file__).parent / "tile.txt").read_text())
        X = tl.spec(N * int(os.environ.get("TUNED_SCALE", "1")), "float32")
        TILELAB_EXAMPLES = {"add": (X.partition(TILE), X, X)}
        '''))
    return f


@pytest.mark.subprocess
def test_warm_compile_takes_the_shortcut_with_the_same_output(kernel_file):
    args = (f"{kernel_file}::add", "--arch", "sm_90", "--emit", "tileir,resources,lowered")
    full, how = compile_probe(*args)
    assert how == "full"
    warm, how = compile_probe(*args)
    assert how == "shortcut" and "(disk cache hit)" in warm
    assert warm.split("=====", 1)[1] == full.split("=====", 1)[1]   # every emitted section
    assert full.splitlines()[0].split(" (disk")[0] == warm.splitlines()[0].split(" (disk")[0]


@pytest.mark.subprocess
def test_a_changed_input_of_the_file_is_never_answered_by_the_shortcut(tuned_file, tmp_path):
    """Bytes changed in the data file, the imported module or the environment: the file
    is loaded again (the same kernel then comes from the cache proper)."""
    target = f"{tuned_file}::add"
    compile_probe(target)
    assert compile_probe(target)[1] == "shortcut"
    (tmp_path / "tile.txt").write_text("256\n")
    out, how = compile_probe(target)
    assert how == "full" and "(disk cache hit)" in out and "_I256 " in out
    assert compile_probe(target)[1] == "shortcut"    # the full run made a new shortcut
    (tmp_path / "tuned_sizes.py").write_text("N = 4096  # the same size\n")
    assert compile_probe(target)[1] == "full"
    env = dict(os.environ, TUNED_SCALE="1")
    assert compile_probe(target, env=env)[1] == "full"


@pytest.mark.subprocess
def test_a_changed_data_file_compiles_the_new_kernel(tuned_file, tmp_path):
    target = f"{tuned_file}::add"
    compile_probe(target)
    (tmp_path / "tile.txt").write_text("512")
    out, how = compile_probe(target, "--emit", "tileir")
    assert how == "full" and "_I512 " in out and "tile=(512)" in out


@pytest.mark.subprocess
def test_a_changed_source_or_option_is_a_miss(kernel_file):
    target = f"{kernel_file}::add"
    compile_probe(target)
    text = kernel_file.read_text()
    kernel_file.write_text(text.replace("tl.load_like(x, z) + tl.load_like(y, z)",
                                        "tl.load_like(x, z) * tl.load_like(y, z)"))
    out, how = compile_probe(target, "--emit", "tileir")
    assert how == "full" and "(disk cache hit)" not in out and "mulf" in out
    kernel_file.write_text(text.replace("@tl.kernel\n", "@tl.kernel(occupancy=2)\n"))
    out, how = compile_probe(target, "--emit", "tileir")
    assert how == "full" and "(disk cache hit)" not in out and "addf" in out
    assert "occupancy" in out     # the hint is in the Tile IR's optimization_hints


def command_key(*argv: str) -> str:
    from tilelab.cli import _command_key, build_parser

    ns = build_parser().parse_args(["compile", *argv])
    path, kname = ns.target.rsplit("::", 1)
    return _command_key(ns, path, kname)


def test_the_shortcut_key_covers_the_command_and_the_environment(monkeypatch):
    base = command_key("k.py::add", "--arch", "sm_90")
    assert command_key("k.py::add", "--arch", "sm_90", "--emit", "ptx") == base
    for other in (("k.py::add", "--arch", "sm_80"), ("k.py::mul", "--arch", "sm_90"),
                  ("j.py::add", "--arch", "sm_90"),
                  ("k.py::add", "--arch", "sm_90", "--args", "X, X, X")):
        assert command_key(*other) != base, other
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")   # no compile reads it
    assert command_key("k.py::add", "--arch", "sm_90") == base
    monkeypatch.setenv("TUNED_SCALE", "2")              # what a file may read
    assert command_key("k.py::add", "--arch", "sm_90") != base


def test_no_shortcut_without_the_cache():
    from tilelab.cli import _shortcut_cache, build_parser

    ns = build_parser().parse_args(["compile", "k.py::add", "--no-cache"])
    assert _shortcut_cache(ns) is None
    with config.override(cache="0"):
        assert _shortcut_cache(build_parser().parse_args(["compile", "k.py::add"])) is None


@pytest.mark.subprocess
def test_a_kernel_the_checker_refuses_is_one_located_error(tmp_path):
    """The checker refuses the kernel while the file is loaded: the command prints the
    error at its line and column with the hint, and no traceback."""
    f = tmp_path / "writes_input.py"
    f.write_text(textwrap.dedent('''
        import tilelab as tl
        import cuda.tile as ct

        @tl.kernel
        def k(z: tl.Out, x: tl.In):
            ct.store(x, index=(0,), tile=ct.zeros((16,), ct.float32))

        X = tl.spec(4096, "float32")
        TILELAB_EXAMPLES = {"k": (X.partition(256), X)}
        '''))
    r = tilelab("compile", f"{f}::k", "--arch", "sm_90")
    assert r.returncode == 1 and r.stdout == ""
    first = r.stderr.splitlines()[0]
    assert first.startswith(f"error: {f}:7:5: ct.store() writes to 'x', which is tl.In")
    assert "\nhint: declare an output parameter" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.subprocess
def test_a_cache_key_others_can_read_is_one_error(kernel_file, tmp_path):
    key = tmp_path / "conf" / "cache.key"
    env = dict(os.environ, TILELAB_CACHE_KEY=str(key), TILELAB_CACHE_DIR=str(tmp_path / "c"))
    assert compile_probe(f"{kernel_file}::add", env=env)[1] == "full"
    key.chmod(0o644)
    for extra in ((), ("--force",)):      # the shortcut's path and the compiler's
        r = subprocess.run([sys.executable, "-m", "tilelab", "compile", f"{kernel_file}::add",
                            *extra], capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 1, r.stdout + r.stderr
        assert r.stderr.startswith(f"error: tilelab cache key {key} can be read or written "
                                   "by others (mode 0644)")
        assert f"hint: chmod 600 {key}" in r.stderr and "Traceback" not in r.stderr


_SITE_PROBE = ("import os, site\n"
               "site.PREFIXES.append(os.environ['EXTRA_SITE_PREFIX'])\n" + _PROBE)


@pytest.mark.subprocess
def test_an_installed_module_edited_in_place_is_seen(tmp_path):
    """A kernel file under site-packages (fingerprinted by its metadata, not hashed)
    edited in place to the same size with its modification time put back: the warm
    command sees the change (the change time cannot be put back) and compiles anew."""
    import site

    prefix = tmp_path / "prefix"
    site_dir = Path(site.getsitepackages([str(prefix)])[0])
    site_dir.mkdir(parents=True)
    module = site_dir / "installed_kernels.py"
    module.write_text(_INSTALLED_ADD)
    env = dict(os.environ, EXTRA_SITE_PREFIX=str(prefix), PYTHONDONTWRITEBYTECODE="1")

    def probe(*args: str) -> tuple[str, str]:
        r = subprocess.run([sys.executable, "-c", _SITE_PROBE, "compile",
                            f"{module}::add", "--emit", "tileir", *args],
                           capture_output=True, text=True, timeout=600, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        out, _, how = r.stdout.rpartition("PATH=")
        return out, how.strip()

    out, how = probe()
    assert how == "full" and "addf" in out
    out, how = probe()
    assert how == "shortcut" and "addf" in out
    record = _shortcut_naming(module)
    assert record["inputs"][str(module)].startswith("stat:")   # metadata, not content
    before = os.stat(module)
    module.write_text(_INSTALLED_ADD.replace("tl.load_like(x, z) + tl.load_like(y, z)",
                                             "tl.load_like(x, z) * tl.load_like(y, z)"))
    os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(module)
    # what the fingerprint of an installed file used to be cannot tell the two apart
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == \
        (before.st_size, before.st_mtime_ns, before.st_ino)
    out, how = probe()
    assert how == "full" and "mulf" in out and "addf" not in out
    assert probe()[1] == "shortcut"


_INSTALLED_ADD = textwrap.dedent('''
    import tilelab as tl

    @tl.kernel
    def add(z: tl.Out, x: tl.In, y: tl.In):
        z.store(tl.load_like(x, z) + tl.load_like(y, z))

    X = tl.spec(4096, "float32")
    TILELAB_EXAMPLES = {"add": (X.partition(256), X, X)}
    ''')


def _shortcut_naming(path: Path) -> dict:
    """The one shortcut record of the test cache whose inputs include ``path``."""
    folder = Path(os.environ["TILELAB_CACHE_DIR"]) / "shortcuts-v1"
    records = [json.loads(p.read_text()) for p in folder.glob("*.json")]
    [record] = [r for r in records if str(path) in r["inputs"]]
    return record
