"""Shared by the runtime tests: a stand-in libcuda (fake_libcuda.c) built with the C
compiler, for the native launch module to bind to without a GPU."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

CC = shutil.which("cc") or shutil.which("gcc")
#: why the native launch module cannot be built here (None: it can)
NO_NATIVE = ("no C compiler" if CC is None else
             None if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
             else "no Python headers")


@pytest.fixture(scope="session")
def fake_libcuda(tmp_path_factory) -> Path:
    if NO_NATIVE:
        pytest.skip(NO_NATIVE)
    src = Path(__file__).with_name("fake_libcuda.c")
    out = tmp_path_factory.mktemp("fakecuda") / "libfakecuda.so"
    subprocess.run([CC, "-shared", "-fPIC", str(src), "-o", str(out)], check=True)
    return out


def recorder(lib: Path) -> ctypes.CDLL:
    """The fake libcuda's own functions (the same library the native module bound)."""
    rec = ctypes.CDLL(str(lib))
    rec.fake_call.restype = ctypes.c_uint64
    rec.fake_last_synced.restype = ctypes.c_uint64
    rec.fake_reset()
    return rec
