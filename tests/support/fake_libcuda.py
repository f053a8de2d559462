"""A stand-in libcuda (tests/runtime/fake_libcuda.c) built with the C compiler, for the native
launch module to bind to without a GPU; the runtime tests' fixture builds it, and a test reads
its call records through :func:`recorder`.

Kept here, not in tests/runtime/conftest.py, because a test that imported ``conftest`` got
whichever folder's conftest module a session had loaded last.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

__all__ = ["CC", "NO_NATIVE", "SOURCE", "build", "recorder"]

CC = shutil.which("cc") or shutil.which("gcc")
#: why the native launch module cannot be built here (None: it can)
NO_NATIVE = ("no C compiler" if CC is None else
             None if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
             else "no Python headers")
SOURCE = Path(__file__).resolve().parent.parent / "runtime" / "fake_libcuda.c"


def build(out_dir: Path) -> Path:
    """Compile the fake libcuda into ``out_dir``; returns the shared library's path."""
    out = out_dir / "libfakecuda.so"
    subprocess.run([CC, "-shared", "-fPIC", str(SOURCE), "-o", str(out)], check=True)
    return out


def recorder(lib: Path) -> ctypes.CDLL:
    """The fake libcuda's own functions (the same library the native module bound)."""
    rec = ctypes.CDLL(str(lib))
    rec.fake_call.restype = ctypes.c_uint64
    rec.fake_last_synced.restype = ctypes.c_uint64
    rec.fake_reset()
    return rec
