"""tilelab's settings: every ``TILELAB_*`` environment variable, its default and meaning.

Each setting is read from the environment when it is used (so a variable set takes
effect at once), unless :func:`override` holds a value for it: code and tests that
want a setting for a while say so with ``with config.override(backend="cpu"):``
rather than by changing the environment. A value that is not allowed raises
:class:`~tilelab.errors.ConfigError` naming the variable, the value and what it
accepts. :data:`SETTINGS` is the one table of them: :func:`get` reads any of them by
key, and each has an accessor function of this module made from its row
(``config.backend()``, ``config.cache_enabled()``, ...; :attr:`Setting.accessor`
names it). docs/configuration.md is the same table for readers.

Example:
    >>> import tilelab.config as config
    >>> with config.override(backend="cpu"):
    ...     config.backend()
    'cpu'
    >>> config.setting("backend").env, config.setting("cache").accessor
    ('TILELAB_BACKEND', 'cache_enabled')
"""
from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from tilelab.errors import ConfigError
from tilelab.limits import ARCHS, arch_name

# (and every setting's accessor: added where they are made, at the end of the module)
__all__ = ["Setting", "SETTINGS", "DEFAULT", "setting", "get", "override"]

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Setting:
    """One ``TILELAB_*`` variable: its name, default, accepted values and meaning.

    ``parse`` turns the variable's (stripped, non-empty) text into the setting's value,
    raising ValueError with what it accepts (its return annotation is the accessor's);
    ``tests`` marks variables that only the test suite and ``.ci/run`` read;
    ``function`` names the setting's accessor in this module when that is not its key
    (None: no accessor, for a variable tilelab itself never reads).

    Example:
        >>> setting("cache").default, setting("cache").accessor
        (True, 'cache_enabled')
    """

    key: str
    env: str
    default: Any
    accepts: str
    doc: str
    parse: Callable[[str], Any]
    tests: bool = False
    function: str | None = ""

    @property
    def accessor(self) -> str | None:
        """The name of this setting's accessor function in :mod:`tilelab.config`, or
        None when it has none."""
        return self.key if self.function == "" else self.function


def _choice(*values: str, aliases: dict[str, str] | None = None) -> Callable[[str], str]:
    def parse(text: str) -> str:
        word = text.lower()
        word = (aliases or {}).get(word, word)
        if word not in values:
            raise ValueError
        return word
    return parse


def _flag(text: str) -> bool:
    word = text.lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError


def _positive_int(text: str) -> int:
    n = int(text)
    if n < 1:
        raise ValueError
    return n


def _positive_float(text: str) -> float:
    x = float(text)
    if not x > 0:
        raise ValueError
    return x


def _arch(text: str) -> str:
    name = arch_name(text)
    if name is None:
        raise ValueError
    return name


def _path(text: str) -> Path:
    return Path(text).expanduser()


_FLAG = "1/0 (also true/false, yes/no, on/off)"

#: every setting, by key (the name :func:`get` and :func:`override` take)
SETTINGS: dict[str, Setting] = {s.key: s for s in (
    Setting("arch", "TILELAB_ARCH", None, ", ".join(ARCHS) + " (also written 90, 9.0)",
            "The GPU that kernel.compile() targets without arch= and that the CPU backend "
            "stands for (default: this machine's GPU, else sm_90): the CPU backend refuses "
            "what cuTile refuses for it, e.g. float4 before sm_100. GPU launches always "
            "compile for the GPU they run on.", _arch),
    Setting("backend", "TILELAB_BACKEND", "auto", "auto, cpu, gpu (cuda means gpu)",
            "Where kernels run and new tensors live: the GPU when one is usable, else the "
            "CPU interpreter (auto); gpu without a usable GPU raises LaunchError.",
            _choice("auto", "cpu", "gpu", aliases={"cuda": "gpu"})),
    Setting("cache", "TILELAB_CACHE", True, _FLAG,
            "Whether compiled kernels and autotuning results are kept on disk.", _flag,
            function="cache_enabled"),
    Setting("cache_dir", "TILELAB_CACHE_DIR", None, "a directory path",
            "Where the disk cache lives (default: $XDG_CACHE_HOME/tilelab, else "
            "~/.cache/tilelab).", _path),
    Setting("cache_key", "TILELAB_CACHE_KEY", None, "a file path",
            "The secret key that signs the disk cache's entries: 32 random bytes, made "
            "on first use with mode 0600 (default: $XDG_CONFIG_HOME/tilelab/cache.key, "
            "else ~/.config/tilelab/cache.key). It must be a private file of yours "
            "outside the cache directory; an entry it does not sign is never loaded.",
            _path),
    Setting("cache_max_bytes", "TILELAB_CACHE_MAX_BYTES", None, "a positive integer",
            "Size above which the disk cache evicts its least recently used kernels "
            "(default 1 GiB).", _positive_int),
    Setting("cpu_persistent_blocks", "TILELAB_CPU_PERSISTENT_BLOCKS", 4,
            "a positive integer",
            "How many blocks a persistent schedule (tl.persistent) launches on the CPU "
            "backend; few keep traces and ownership maps readable.", _positive_int),
    Setting("hot", "TILELAB_HOT", True, _FLAG,
            "Whether repeated async launches on the default stream run in the native C "
            "module (0 keeps them on the Python path).", _flag),
    Setting("lab_view", "TILELAB_LAB_VIEW", "auto", "auto, widget, html",
            "How %%tile publishes its view: a widget when a widget frontend is there "
            "(auto), always a widget, or static HTML tabs.",
            _choice("auto", "widget", "html")),
    Setting("launch", "TILELAB_LAUNCH", "native", "native, driver, cuda.core",
            "How GPU launches reach the driver: tilelab's native C module (falling back "
            "to driver when it cannot be built), cuda-bindings' cuLaunchKernel, or "
            "cuda.core.launch.", _choice("native", "driver", "cuda.core")),
    Setting("pdl", "TILELAB_PDL", True, _FLAG,
            "Whether GPU launches of kernels that begin by waiting for the previous "
            "kernel use programmatic dependent launch (sm_90 and newer): the next "
            "kernel is scheduled while this one finishes.", _flag),
    Setting("source", "TILELAB_SOURCE", None, "a pip requirement (a wheel, a git URL)",
            "Notebooks: what their set-up cell installs when tilelab is missing and the "
            "notebook does not sit in a clone of the repository (the cell reads it itself: "
            "tilelab is not installed yet).", str, function=None),
    Setting("theme", "TILELAB_THEME", "auto", "auto, light, dark",
            "Colours of the lab's figures: JupyterLab's saved theme (auto), or forced.",
            _choice("auto", "light", "dark")),
    Setting("tileiras", "TILELAB_TILEIRAS", None, "a path to a tileiras executable",
            "The tileiras to compile with, before the pip packages, PATH and CUDA_HOME.",
            _path),
    Setting("require_browser", "TILELAB_REQUIRE_BROWSER", False, _FLAG,
            "Tests: fail (rather than skip) the browser tests when Chromium or "
            "playwright is missing (.ci/run sets it).", _flag, tests=True),
    Setting("require_torch", "TILELAB_REQUIRE_TORCH", False, _FLAG,
            "Tests: fail (rather than skip) the tests that need torch or transformers "
            "(.ci/run sets it).", _flag, tests=True),
    Setting("screenshot_dir", "TILELAB_SCREENSHOT_DIR", None, "a directory path",
            "Tests: where the browser tests also save their screenshots.", _path,
            tests=True),
    Setting("chromium", "TILELAB_CHROMIUM", Path("/usr/bin/chromium"),
            "a path to a Chromium executable",
            "Tests: the browser the browser tests drive (also read by "
            ".ci/install-browser).", _path, tests=True),
    Setting("hypothesis_scale", "TILELAB_HYPOTHESIS_SCALE", 5.0, "a positive number",
            "Tests: multiplies the example counts of the interpreter's property tests.",
            _positive_float, tests=True),
)}

class _Default:
    """The type of :data:`DEFAULT`."""

    def __repr__(self) -> str:
        return "config.DEFAULT"


#: a value for :func:`override`: the setting's default, whatever the environment says
DEFAULT = _Default()

_LOCK = threading.Lock()
#: values held by open override() blocks, by key (process-wide, as the environment is)
_OVERRIDES: dict[str, Any] = {}
_UNSET = object()


def setting(key: str) -> Setting:
    """The :class:`Setting` named ``key`` (KeyError listing the keys otherwise).

    Example:
        >>> setting("launch").default
        'native'
    """
    try:
        return SETTINGS[key]
    except KeyError:
        raise KeyError(f"no tilelab setting {key!r}; settings: {', '.join(SETTINGS)}") \
            from None


def _parse(s: Setting, text: str) -> Any:
    try:
        return s.parse(text.strip())
    except ValueError:
        raise ConfigError(f"{s.env}={text!r} is not allowed; it takes {s.accepts}",
                          hint=f"set {s.env} to {s.accepts}, or unset it for the default "
                               f"({s.default if s.default is not None else 'none'})"
                          ) from None


def get(key: str) -> Any:
    """The value of setting ``key``: an :func:`override`, else its variable, else its
    default (an unset or empty variable means the default).

    Raises :class:`~tilelab.errors.ConfigError` for a value the setting does not take.

    Example:
        >>> import os
        >>> os.environ["TILELAB_CPU_PERSISTENT_BLOCKS"] = "8"
        >>> get("cpu_persistent_blocks")
        8
        >>> del os.environ["TILELAB_CPU_PERSISTENT_BLOCKS"]
    """
    if _OVERRIDES and key in _OVERRIDES:
        return _OVERRIDES[key]
    s = setting(key)
    text = os.environ.get(s.env)
    if text is None or not text.strip():
        return s.default
    return _parse(s, text)


@contextlib.contextmanager
def override(**values: Any) -> Iterator[None]:
    """Hold settings at these values inside the block, whatever the environment says
    (a value of None leaves that setting alone; :data:`DEFAULT` holds its default, as
    an unset variable would). Values are given as the variable would be written
    (``backend="cpu"``, ``cache="0"``) or as the setting's value (``cache=False``);
    they are checked as the variable's would be. This is how code and tests change a
    setting for a while; the environment is for what a child process must see.

    Example:
        >>> with override(backend="cpu", cache=False):
        ...     backend(), cache_enabled()
        ('cpu', False)
        >>> with override(arch="sm_100"):
        ...     with override(arch=DEFAULT):
        ...         arch() is None
        True
    """
    parsed = {}
    for key, value in values.items():
        if value is None:
            continue
        s = setting(key)
        if value is DEFAULT:
            value = s.default
        elif isinstance(value, str):
            value = _parse(s, value)
        elif isinstance(value, bool) and s.parse is _flag:
            pass
        else:
            value = _parse(s, str(value))
        parsed[key] = value
    with _LOCK:
        saved = {k: _OVERRIDES.get(k, _UNSET) for k in parsed}
        _OVERRIDES.update(parsed)
    try:
        yield
    finally:
        with _LOCK:
            for k, old in saved.items():
                if old is _UNSET:
                    _OVERRIDES.pop(k, None)
                else:
                    _OVERRIDES[k] = old


def _accessor(s: Setting) -> Callable[[], Any]:
    """The accessor function of setting ``s``: :func:`get` of its key, named, typed
    (by its parser's return annotation) and documented from its row of the table."""
    key = s.key

    def read() -> Any:
        return get(key)

    returns = getattr(s.parse, "__annotations__", {}).get("return", "str")
    if s.default is None:
        returns = f"{returns} | None"
    default = "none" if s.default is None else f"``{s.default}``"
    read.__name__ = read.__qualname__ = s.accessor
    read.__module__ = __name__
    read.__annotations__ = {"return": returns}
    read.__doc__ = (f"``{s.env}``: {s.doc}\n\n"
                    f"It takes {s.accepts}; unset or empty: {default}. The same as "
                    f"``get({key!r})``: an :func:`override` first, else the variable.")
    return read


#: the accessors, one per setting that has one: config.backend(), config.cache_enabled(), ...
for _s in SETTINGS.values():
    if _s.accessor is not None:
        globals()[_s.accessor] = _accessor(_s)
        __all__.append(_s.accessor)
del _s
