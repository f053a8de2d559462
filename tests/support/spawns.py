"""Which tests start processes, held against their markers (a pytest plugin).

The README's loops select tests by marker: ``toolchain`` (runs tileiras, ptxas or nvdisasm)
and ``subprocess`` (starts a Python, IPython, Jupyter, pytest or ``tilelab`` process). A
marker that is missing puts a slow test into the fast loop, so this plugin watches every
process a test starts (the ``subprocess.Popen`` audit event, setup and teardown included)
and, at the end of the run, lists each test that started a process of a kind its markers
do not name: the lines ``spawns: <nodeid>: needs @pytest.mark.<marker> (started <program>)``.

The list is a report, not a failure: a test that compiles only on a cold cache starts
tileiras in one run and not in the next, so the list of a run is what that run saw.
``tests/conftest.py`` loads the plugin (``pytest_plugins``).

Example:
    >>> kind_of(["/venv/bin/tileiras", "--gpu-name", "sm_90"]), kind_of(["python3", "-c", ""])
    ('toolchain', 'subprocess')
    >>> kind_of(["cc", "-shared"]) is None
    True
"""
from __future__ import annotations

import os
import sys
from pathlib import PurePath

import pytest

#: program names (the first word's base name, a version suffix stripped) by marker
TOOLCHAIN = frozenset({"tileiras", "ptxas", "nvdisasm", "nvcc", "cuobjdump"})
PYTHONS = frozenset({"python", "python3", "ipython", "ipython3", "jupyter", "pytest",
                     "tilelab"})

_current: list[str] = []          # the node id of the test running now (empty between tests)
_seen: dict[str, dict[str, str]] = {}   # node id -> marker -> the first program it started


def kind_of(args) -> str | None:
    """The marker a process started with ``args`` (a list, or one string) calls for:
    ``"toolchain"``, ``"subprocess"`` or None (a C compiler, ``git``, ...)."""
    first = args if isinstance(args, (str, bytes, os.PathLike)) else next(iter(args), "")
    name = PurePath(os.fsdecode(first)).name.split()[0] if first else ""
    stem = name.rstrip("0123456789.")
    if name in TOOLCHAIN or stem in TOOLCHAIN:
        return "toolchain"
    if name in PYTHONS or stem in PYTHONS or os.fsdecode(first) == sys.executable:
        return "subprocess"
    return None


def _audit(event: str, args: tuple) -> None:
    if event != "subprocess.Popen" or not _current:
        return
    executable, argv = args[0], args[1]
    kind = kind_of(argv if argv else executable) or (kind_of(executable) if executable else None)
    if kind is not None:
        name = PurePath(os.fsdecode(executable or next(iter(argv), ""))).name
        _seen.setdefault(_current[0], {}).setdefault(kind, name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Attribute what runs from this test's setup to its teardown to the test."""
    _current[:] = [item.nodeid]
    try:
        yield
    finally:
        _current.clear()
        started = _seen.get(item.nodeid, {})
        missing = {k: v for k, v in started.items() if item.get_closest_marker(k) is None}
        if missing:
            _seen[item.nodeid] = missing
        else:
            _seen.pop(item.nodeid, None)


def pytest_configure(config) -> None:
    sys.addaudithook(_audit)


def pytest_terminal_summary(terminalreporter) -> None:
    """The tests whose markers miss a kind of process they started."""
    if not _seen:
        return
    terminalreporter.section("tests that start processes their markers do not name")
    for nodeid, kinds in sorted(_seen.items()):
        for kind, program in sorted(kinds.items()):
            terminalreporter.write_line(
                f"spawns: {nodeid}: needs @pytest.mark.{kind} (started {program})")
