"""GPU tests: they run only where tilelab can use a GPU (sm_80+, CUDA 13 driver) and skip
cleanly elsewhere, saying why."""
from __future__ import annotations

import os

import pytest

from tilelab.runtime.device import gpu_available, gpu_unavailable_reason

_HERE = os.path.dirname(os.path.abspath(__file__))


def pytest_collection_modifyitems(config, items):
    """Mark every test under tests/gpu with the 'gpu' marker (``-m "not gpu"`` works)."""
    for item in items:
        if os.path.abspath(str(item.fspath)).startswith(_HERE + os.sep):
            item.add_marker(pytest.mark.gpu)


@pytest.fixture(autouse=True)
def _require_gpu():
    if not gpu_available():
        pytest.skip(f"no usable GPU: {gpu_unavailable_reason()}")
