"""The native launch call: a small C module, built once per machine, that calls
``cuLaunchKernel`` for prepared launches and, on Python 3.11+, runs a repeated
``kernel.launch_async`` on the default stream entirely in C (``hot``: the same checks,
ledger record and future as ``launch.prepared.PreparedLaunch.run``, which takes every
rarer case). The kernel library's call cache uses it too: ``call_hit`` finds a call
repeated with the very same arguments and rebuilds its launches (the lookup of
``kernels._calls.CallCache.prepare``), ``torch_holds`` checks its torch tensors.

Why: the binding call (cuda-bindings converting eleven arguments on every launch) and
the Python bookkeeping were most of a repeated launch's host time; a prepared launch
packs the arguments once into a C record, so each launch is one C call (on the H200
machine the safe async launch went from 1.3-1.6x a bare ``cuda.core.launch`` to
1.01x). Like Triton's launcher stubs, the module is
compiled at first GPU use with the system C compiler (``$CC``, else ``cc``) and the
Python headers, into ``<cache dir>/native/`` keyed by its source, the Python ABI and
the compiler, and signed with the user's cache key (``<key>.mac`` beside it): later
processes load it in a millisecond, and only if the key signed it (a module the key did
not sign is rebuilt, never loaded: docs/safety.md, "Caches: the trust model"). Without a
compiler or headers, or in a cache directory others can write, launches go through
cuda-bindings as before, and :func:`status` says why.

``TILELAB_LAUNCH`` picks the path: ``native`` (the default: this module when it
builds), ``driver`` (cuda-bindings' ``cuLaunchKernel``) or ``cuda.core``;
``TILELAB_HOT=0`` keeps async launches on the Python path.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path
from types import ModuleType

__all__ = ["load", "status", "build"]

_SOURCE = Path(__file__).with_name("native_launch.c")
_MODULE = "_tilelab_native"
_LOCK = threading.Lock()
#: [module or None, reason string]; None until the first load()
_STATE: list = [None, None]


def _compiler() -> str | None:
    cc = os.environ.get("CC") or (sysconfig.get_config_var("CC") or "").split(" ")[0] or "cc"
    return shutil.which(cc) or shutil.which("cc") or shutil.which("gcc")


def _cache_root() -> Path:
    from tilelab.compiler.cache import _default_dir

    return _default_dir() / "native"


def build(out_dir: Path | None = None) -> Path:
    """Compile the native module (or find it already built); returns the ``.so`` path.

    Raises OSError saying what is missing (a C compiler, the Python headers) or what
    the compiler printed.

    Example:
        >>> from tilelab.runtime import native
        >>> native.build().name.startswith("_tilelab_native")   # doctest: +SKIP
        True
    """
    cc = _compiler()
    if cc is None:
        raise OSError("no C compiler found (set CC or install gcc)")
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        raise OSError(f"the Python headers are missing ({include}/Python.h; install "
                      f"python{sys.version_info.major}.{sys.version_info.minor}-dev)")
    source = _SOURCE.read_bytes()
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    key = hashlib.sha256(source + suffix.encode() + cc.encode() + include.encode()
                         ).hexdigest()[:16]
    root = out_dir or _cache_root()
    target_dir = root / key
    target = target_dir / f"{_MODULE}{suffix}"
    # a module found in the cache is loaded only if this user's cache key signed it
    # (docs/safety.md, "Caches: the trust model")
    secret = _signing_key(root)
    tag = root / f"{key}.mac"
    if target.exists() and _signed(target, tag, secret):
        return target
    target_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=suffix, dir=target_dir)
    os.close(fd)
    cmd = [cc, "-O2", "-shared", "-fPIC", "-I", include, str(_SOURCE), "-o", tmp, "-ldl"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise OSError(f"{' '.join(cmd)} failed:\n{(done.stderr or done.stdout)[-2000:]}")
        os.replace(tmp, target)   # atomic: a concurrent process sees all of it or none
        _sign(target, tag, secret)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def _signing_key(root: Path) -> bytes:
    """The cache key that signs modules under ``root``; OSError (launches then go
    through cuda-bindings) when ``root`` is not the user's own or no key can be made."""
    from tilelab.compiler.cache import signing_key

    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    secret = signing_key(root)
    if secret is None:
        raise OSError(f"{root} cannot be trusted to hold a native module (see the "
                      "warning about the tilelab cache)")
    return secret


def _digest(path: Path) -> dict:
    return {"name": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def _signed(path: Path, tag: Path, secret: bytes) -> bool:
    """Whether ``tag`` holds this user's MAC of the module at ``path``."""
    from tilelab.compiler.cache_trust import verify

    try:
        return verify(secret, "native-module", _digest(path), tag.read_text().strip())
    except OSError:
        return False


def _sign(path: Path, tag: Path, secret: bytes) -> None:
    from tilelab.compiler.cache_trust import mac

    fd, tmp = tempfile.mkstemp(prefix=f".{tag.name}-", dir=tag.parent)
    with os.fdopen(fd, "w") as f:
        f.write(mac(secret, "native-module", _digest(path)))
    os.replace(tmp, tag)


def _import(path: Path) -> ModuleType:
    loader = importlib.machinery.ExtensionFileLoader(_MODULE, str(path))
    spec = importlib.util.spec_from_file_location(_MODULE, path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def load(libcuda: str = "libcuda.so.1") -> ModuleType | None:
    """The native module bound to the driver, or None when it cannot be used (then
    :func:`status` says why). Built on the first call of a process that finds no copy.

    Example:
        >>> from tilelab.runtime import native
        >>> mod = native.load()       # doctest: +SKIP
        >>> native.status()           # doctest: +SKIP
        'native: /home/me/.cache/tilelab/native/3f0c.../_tilelab_native....so'
    """
    with _LOCK:
        if _STATE[1] is not None:
            return _STATE[0]
        from tilelab import config

        mode = config.launch()
        if mode != "native":
            _STATE[:] = [None, f"off: TILELAB_LAUNCH={mode}"]
            return None
        try:
            path = build()
            mod = _import(path)
            mod.init(libcuda)
        except Exception as e:   # noqa: BLE001 - any failure means: use cuda-bindings
            _STATE[:] = [None, f"unavailable ({type(e).__name__}: {e}); launches go "
                               "through cuda-bindings"]
            return None
        _STATE[:] = [mod, f"native: {path}"]
        return mod


def status() -> str:
    """How repeated launches reach the driver: ``native: <path>``, or why not (``off:``,
    ``unavailable (...)``, ``not loaded yet``).

    Example:
        >>> from tilelab.runtime import native
        >>> native.status()          # doctest: +SKIP
        'not loaded yet'
    """
    return _STATE[1] or "not loaded yet"


def _reset() -> None:
    """Forget the loaded module (tests)."""
    with _LOCK:
        _STATE[:] = [None, None]
