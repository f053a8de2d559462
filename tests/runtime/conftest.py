"""Shared by the runtime tests: the stand-in libcuda (:mod:`support.fake_libcuda`), built once
a session, for the native launch module to bind to without a GPU."""
from __future__ import annotations

from pathlib import Path

import pytest

from support.fake_libcuda import NO_NATIVE, build


@pytest.fixture(scope="session")
def fake_libcuda(tmp_path_factory) -> Path:
    if NO_NATIVE:
        pytest.skip(NO_NATIVE)
    return build(tmp_path_factory.mktemp("fakecuda"))
