"""The CPU backend for a test module, whatever the environment that started pytest says.

Import a fixture into a test module to use it there; these are ``autouse`` fixtures, so the
import alone turns them on for every test of that module::

    from support.backends import cpu_backend  # noqa: F401 (autouse fixture)
"""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def cpu_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """Launches run on the CPU backend, and the lab shows its default view (not the one
    ``TILELAB_LAB_VIEW`` of the caller's shell names)."""
    monkeypatch.setenv("TILELAB_BACKEND", "cpu")
    monkeypatch.delenv("TILELAB_LAB_VIEW", raising=False)


@pytest.fixture(autouse=True)
def cpu_backend_private_cache(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Launches run on the CPU backend with a compile cache of the test's own (empty at
    the start, gone with ``tmp_path``): what the benchmark tests time or count is never a
    hit of another test."""
    monkeypatch.setenv("TILELAB_BACKEND", "cpu")
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path / "cache"))
