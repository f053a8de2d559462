"""tilelab.config: every TILELAB_* variable, read at use, typed, overridable, documented."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tilelab import config
from tilelab.errors import ConfigError, TilelabError

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tilelab"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for s in config.SETTINGS.values():
        monkeypatch.delenv(s.env, raising=False)


def test_defaults_when_unset_or_empty(monkeypatch):
    assert config.backend() == "auto" and config.launch() == "native"
    assert config.cache_enabled() is True and config.hot() is True
    assert config.cache_dir() is None and config.cache_max_bytes() is None
    assert config.cpu_persistent_blocks() == 4 and config.lab_view() == "auto"
    assert config.theme() == "auto" and config.tileiras() is None
    assert config.hypothesis_scale() == 5.0 and config.require_torch() is False
    monkeypatch.setenv("TILELAB_BACKEND", "  ")
    assert config.backend() == "auto"


def test_values_are_read_at_use_and_parsed(monkeypatch, tmp_path):
    monkeypatch.setenv("TILELAB_BACKEND", " CPU ")
    assert config.backend() == "cpu"
    monkeypatch.setenv("TILELAB_BACKEND", "cuda")
    assert config.backend() == "gpu"
    monkeypatch.setenv("TILELAB_CACHE", "off")
    assert config.cache_enabled() is False
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    assert config.cache_dir() == tmp_path
    monkeypatch.setenv("TILELAB_CACHE_MAX_BYTES", "4096")
    assert config.cache_max_bytes() == 4096
    monkeypatch.setenv("TILELAB_LAUNCH", "cuda.core")
    assert config.launch() == "cuda.core"
    monkeypatch.setenv("TILELAB_HOT", "0")
    assert config.hot() is False


@pytest.mark.parametrize("env, value, accepts", [
    ("TILELAB_BACKEND", "tpu", "auto, cpu, gpu"),
    ("TILELAB_CACHE", "maybe", "1/0"),
    ("TILELAB_CACHE_MAX_BYTES", "1GB", "a positive integer"),
    ("TILELAB_CPU_PERSISTENT_BLOCKS", "0", "a positive integer"),
    ("TILELAB_LAUNCH", "fast", "native, driver, cuda.core"),
    ("TILELAB_LAB_VIEW", "fancy", "auto, widget, html"),
    ("TILELAB_THEME", "solarized", "auto, light, dark"),
    ("TILELAB_HOT", "2", "1/0"),
])
def test_invalid_values_name_variable_value_and_allowed(monkeypatch, env, value, accepts):
    monkeypatch.setenv(env, value)
    key = next(k for k, s in config.SETTINGS.items() if s.env == env)
    with pytest.raises(ConfigError) as e:
        config.get(key)
    assert isinstance(e.value, TilelabError) and isinstance(e.value, ValueError)
    assert e.value.message.startswith(f"{env}={value!r} is not allowed; it takes {accepts}")
    assert f"set {env} to" in e.value.hint and "unset it for the default" in e.value.hint


def test_override_wins_over_the_environment_and_restores(monkeypatch):
    monkeypatch.setenv("TILELAB_BACKEND", "gpu")
    with config.override(backend="cpu"):
        assert config.backend() == "cpu"
        with config.override(backend="auto", cache=False):
            assert config.backend() == "auto" and config.cache_enabled() is False
        assert config.backend() == "cpu" and config.cache_enabled() is True
    assert config.backend() == "gpu"
    with config.override(backend=None):   # None leaves the setting alone
        assert config.backend() == "gpu"


def test_override_to_default_hides_the_environment(monkeypatch):
    monkeypatch.setenv("TILELAB_ARCH", "sm_100")
    monkeypatch.setenv("TILELAB_LAB_VIEW", "html")
    with config.override(arch=config.DEFAULT, lab_view=config.DEFAULT):
        assert config.arch() is None and config.lab_view() == "auto"
    assert config.arch() == "sm_100" and config.lab_view() == "html"
    assert repr(config.DEFAULT) == "config.DEFAULT"


def test_override_checks_values_and_keys():
    with pytest.raises(ConfigError, match="TILELAB_BACKEND='tpu' is not allowed"):
        with config.override(backend="tpu"):
            pass
    with pytest.raises(KeyError, match="no tilelab setting 'bakend'"):
        with config.override(bakend="cpu"):
            pass
    with config.override(cpu_persistent_blocks=3, hypothesis_scale=2):
        assert config.cpu_persistent_blocks() == 3 and config.hypothesis_scale() == 2.0
    assert not config._OVERRIDES


def test_override_restores_after_an_exception():
    with pytest.raises(RuntimeError):
        with config.override(theme="dark"):
            raise RuntimeError("boom")
    assert config.theme() == "auto"


ACCESSORS = {"arch", "backend", "cache_enabled", "cache_dir", "cache_key", "cache_max_bytes",
             "cpu_persistent_blocks", "hot", "lab_view", "launch", "pdl", "theme", "tileiras",
             "require_browser", "require_torch", "screenshot_dir", "chromium",
             "hypothesis_scale"}


def test_every_accessor_is_made_from_its_row_of_the_table():
    made = {s.accessor: s for s in config.SETTINGS.values() if s.accessor is not None}
    assert set(made) == ACCESSORS            # the public names, all kept
    assert config.setting("cache").accessor == "cache_enabled"
    assert config.setting("source").accessor is None and not hasattr(config, "source")
    for name, s in made.items():
        fn = getattr(config, name)
        assert name in config.__all__ and fn.__name__ == name
        assert fn.__module__ == "tilelab.config"
        assert fn.__doc__.startswith(f"``{s.env}``: {s.doc}")
        assert f"It takes {s.accepts}" in fn.__doc__
    assert config.backend.__annotations__ == {"return": "str"}
    assert config.cache_dir.__annotations__ == {"return": "Path | None"}
    assert config.hot.__annotations__ == {"return": "bool"}
    assert config.cache_max_bytes.__annotations__ == {"return": "int | None"}


def test_accessors_read_overrides_and_the_environment(monkeypatch):
    values = {"arch": ("sm_100", "sm_100"), "backend": ("cuda", "gpu"),
              "cache": ("off", False), "cpu_persistent_blocks": ("2", 2),
              "hypothesis_scale": ("0.5", 0.5), "chromium": ("/opt/c", Path("/opt/c"))}
    for key, (text, value) in values.items():
        fn = getattr(config, config.setting(key).accessor)
        with config.override(**{key: text}):
            assert fn() == value
        monkeypatch.setenv(config.setting(key).env, text)
        assert fn() == value
    monkeypatch.setenv("TILELAB_LAUNCH", "fast")
    with pytest.raises(ConfigError, match="TILELAB_LAUNCH='fast' is not allowed"):
        config.launch()


def test_backend_override_reaches_the_runtime(monkeypatch):
    from tilelab.runtime import device

    monkeypatch.setenv("TILELAB_BACKEND", "tpu")
    with config.override(backend="cpu"):
        assert device.backend() == "cpu"
    with pytest.raises(ConfigError, match="TILELAB_BACKEND"):
        device.backend()


def _environ_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, variable) of each os.environ / os.getenv use naming a TILELAB_* string."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            target, args = node.func, node.args
        elif isinstance(node, ast.Subscript):
            target, args = node.value, [node.slice]
        elif isinstance(node, ast.Compare):
            target, args = node.comparators[0], [node.left]
        else:
            continue
        if "environ" not in ast.unparse(target) and "getenv" not in ast.unparse(target):
            continue
        for a in args:
            if isinstance(a, ast.Constant) and isinstance(a.value, str) and \
                    a.value.startswith("TILELAB_"):
                found.append((node.lineno, a.value))
    return found


def test_environ_reader_finds_every_form():
    code = ('import os\nos.environ.get("TILELAB_X")\nos.environ["TILELAB_Y"]\n'
            'os.getenv("TILELAB_Z", "1")\n"TILELAB_W" in os.environ\nos.environ.get("HOME")\n')
    assert _environ_reads(ast.parse(code)) == [(2, "TILELAB_X"), (3, "TILELAB_Y"),
                                               (4, "TILELAB_Z"), (5, "TILELAB_W")]


def test_only_config_reads_tilelab_variables():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "config.py":
            continue
        for line, name in _environ_reads(ast.parse(path.read_text(), str(path))):
            offenders.append(f"{path.relative_to(ROOT)}:{line}: {name}")
    assert not offenders, ("read TILELAB_* through tilelab.config, not os.environ:\n"
                           + "\n".join(offenders))


def test_every_variable_in_the_repo_is_a_setting():
    known = {s.env for s in config.SETTINGS.values()}
    used: set[str] = set()
    for folder in ("tilelab", "tests", ".ci"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in ("", ".py", ".sh", ".ipy") and \
                    path != Path(__file__).resolve():   # (this file's examples)
                used |= _names(path.read_text(errors="replace"))
    assert "TILELAB_BACKEND" in used and "TILELAB_CACHE_DIR" in used   # (the search works)
    assert used - known == set(), ("TILELAB_* variables missing from tilelab.config: "
                                   f"{sorted(used - known)}")


def _names(text: str) -> set[str]:
    """TILELAB_* names read from the environment in a file's text (shell or Python)."""
    shell = re.findall(r"\$\{?(TILELAB_[A-Z0-9_]+)", text)
    python = re.findall(r"(?:environ|getenv|setenv|delenv)\W{1,12}(TILELAB_[A-Z0-9_]+)", text)
    return set(shell) | set(python)


def shown_default(value) -> str:
    """A default as docs/configuration.md writes it."""
    if value is None:
        return "(none)"
    return f"`{int(value)}`" if isinstance(value, bool) else f"`{value}`"


def test_docs_list_every_setting():
    doc = (ROOT / "docs" / "configuration.md").read_text()
    for s in config.SETTINGS.values():
        row = next((ln for ln in doc.splitlines() if ln.startswith(f"| `{s.env}`")), None)
        assert row is not None, f"docs/configuration.md has no row for {s.env}"
        default = shown_default(s.default)
        assert default in row, f"{s.env}: the docs' row does not give the default {default}"
