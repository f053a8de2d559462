"""What a newcomer reads from the CLI: where ``tilelab demo`` put its files, cache sizes in
the README's binary units, and a test run that cleans up its temporary cache."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilelab import config
from tilelab.cli import main as cli_main
from tilelab.compiler.cache import CacheStats, binary_size


def test_cache_info_prints_binary_units(tmp_path, capsys):
    with config.override(cache_dir=str(tmp_path / "cache"), cache_max_bytes=config.DEFAULT):
        assert cli_main(["cache", "info"]) == 0
    text = capsys.readouterr().out
    assert "of 1.0 GiB" in text, text      # the README: "1 GiB by default"
    assert " MB" not in text


@pytest.mark.parametrize("n, shown", [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"),
                                      (5 * 1024 ** 2, "5.0 MiB"), (1 << 30, "1.0 GiB"),
                                      (3 * 1024 ** 4, "3.0 TiB")])
def test_binary_size(n, shown):
    assert binary_size(n) == shown


def test_cache_stats_reads_like_the_readme(tmp_path):
    text = str(CacheStats(tmp_path, 3, 3 * 1024 ** 2, 1 << 30))
    assert text.endswith("3 kernels, 3.0 MiB of 1.0 GiB"), text


def test_demo_says_where_its_files_went(tmp_path, monkeypatch, capsys):
    import tilelab.demo as demo

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(demo, "run_tour", lambda device: [])
    monkeypatch.setattr(demo, "_measured_ceilings", lambda device: None)
    monkeypatch.setattr(demo, "_roofline_png", lambda results, path, current: "no roofline")
    assert demo.run_demo(backend="cpu", compile=False) == 0
    text = capsys.readouterr().out
    where = tmp_path.resolve() / "tilelab-demo"
    assert f"demo files written to {where}" in text, text
    assert (where / "summary.csv").exists()


def test_demo_output_is_ignored_by_git():
    root = Path(__file__).resolve().parents[1]
    lines = (root / ".gitignore").read_text().splitlines()
    assert "tilelab-demo/" in lines


@pytest.mark.subprocess
def test_a_test_session_removes_its_private_cache(tmp_path):
    """conftest.py makes ``tilelab-test-cache-*`` when no cache is named; it goes at the end."""
    root = Path(__file__).resolve().parents[1]
    probe = tmp_path / "test_probe.py"
    probe.write_text("import os\n\ndef test_cache():\n"
                     "    print('CACHE=' + os.environ['TILELAB_CACHE_DIR'])\n")
    env = {k: v for k, v in os.environ.items() if k != "TILELAB_CACHE_DIR"}
    env["TMPDIR"] = str(tmp_path)
    # the copied conftest loads its plugins from tests/ (pyproject's pythonpath there)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root / "tests"),
                                                      env.get("PYTHONPATH")]))
    (tmp_path / "conftest.py").write_text((root / "tests" / "conftest.py").read_text())
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), str(probe)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cache = next(line.split("=", 1)[1] for line in proc.stdout.splitlines()
                 if line.startswith("CACHE="))
    assert Path(cache).name.startswith("tilelab-test-cache-")
    assert not Path(cache).exists()


@pytest.mark.subprocess
def test_the_compile_benchmark_writes_byte_code_only_in_its_own_folder(tmp_path):
    """The compile group's ``bytecode`` variant lets its processes write ``.pyc`` files:
    into its work folder (``PYTHONPYCACHEPREFIX``), never beside the sources (a test run
    of the group once left ``__pycache__`` folders in the checkout)."""
    from benchmarks.host.compile_times import variant_envs

    caller = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX="/elsewhere")
    envs = variant_envs(caller, tmp_path / "work")
    assert set(envs) == {"bytecode", "no_bytecode"}
    assert "PYTHONDONTWRITEBYTECODE" not in envs["bytecode"]
    assert envs["no_bytecode"]["PYTHONDONTWRITEBYTECODE"] == "1"
    for name, env in envs.items():
        assert Path(env["PYTHONPYCACHEPREFIX"]).parent == tmp_path / "work", name
    # a process of the bytecode variant imports a module of a source tree
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "probe_module.py").write_text("VALUE = 1\n")
    proc = subprocess.run([sys.executable, "-c", "import probe_module"], cwd=tree,
                          env=envs["bytecode"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tree.iterdir()) == ["probe_module.py"]
    assert list((tmp_path / "work" / "pyc").rglob("probe_module*.pyc"))
