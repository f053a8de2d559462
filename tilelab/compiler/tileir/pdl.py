"""What the Tile IR says about programmatic dependent launch: whether a kernel waits for
the previous kernel of its stream before it touches memory, whether it lets the next one
start only after that wait, and which parameters it reads before the wait.

The launcher uses programmatic dependent launch only for a kernel that waits first
(``art.waits_for_previous_grid``), and a graph starts a kernel early only after one
that triggers after its wait (``art.triggers_after_wait``) and when its predecessor
writes none of the parameters it reads early (:func:`reads_before_wait`). Only a wait
at an entry's top level orders what follows it: control flow is structured, so an op
written later cannot run earlier, and a wait inside a branch or loop may not run.
"""
from __future__ import annotations

from typing import Any

from tilelab.compiler.safety.kinds import read_only
from tilelab.compiler.tileir.checks import Checker
from tilelab.compiler.tileir.ops import MEMORY_OPS, TRIGGER_OP, WAIT_OP
from tilelab.compiler.tileir.parser import Entry, Op, TileIRModule

__all__ = ["waits_before_memory", "triggers_after_wait", "reads_before_wait"]


def _up_to_wait(e: Entry, names: frozenset) -> tuple[list[Op], bool]:
    """The ops named in ``names`` that come before the entry's first wait at its top
    level (program order: control flow is structured, so an op written later cannot
    run earlier, and a wait inside a branch or loop may not run at all), and whether
    there is such a wait (without one: every such op of the entry)."""
    found = []
    for op in e.ops:
        if op.name == WAIT_OP and op.scope is not None and op.scope.parent is None:
            return found, True
        if op.name in names:
            found.append(op)
    return found, False


def _before_wait(module: TileIRModule) -> list[list[Op]] | None:
    """Per entry, the memory ops before its top-level wait (:func:`_up_to_wait`); None
    when an entry has no such wait or the text has lines the validator cannot read."""
    if not module.entries or module.unknown_lines:
        return None
    out = []
    for e in module.entries:
        early, waits = _up_to_wait(e, MEMORY_OPS)
        if not waits:
            return None
        out.append(early)
    return out


def triggers_after_wait(tileir: str | None) -> bool:
    r"""Whether the kernel lets the next kernel of its stream start only after its own
    wait for the previous one: no ``gdc_launch_dependents_tko`` before the first wait at
    an entry's top level (none at all in an entry without such a wait; a kernel that
    never triggers lets the next one start when it exits). A kernel that reads before
    its wait may be started early only after such a kernel: every kernel before that
    one has then finished.

    Example:
        >>> e = "entry @k(%arg0: tile<i32>) {{\n  {}\n  {}\n  return\n}}"
        >>> wait = "%1 = gdc_wait_tko token = %0 -> token"
        >>> trigger = "gdc_launch_dependents_tko"
        >>> triggers_after_wait(e.format(wait, trigger)), triggers_after_wait(
        ...     e.format(trigger, wait))
        (True, False)
    """
    if not tileir or TRIGGER_OP not in tileir:
        return True
    module = TileIRModule(tileir)
    if not module.entries or module.unknown_lines:
        return False
    return not any(_up_to_wait(e, frozenset({TRIGGER_OP}))[0] for e in module.entries)


def waits_before_memory(tileir: str | None) -> bool:
    r"""Whether every entry of the Tile IR text waits for the previous kernel of the
    stream (``gdc_wait_tko`` at the entry's top level) before its first memory op.
    Launching the kernel with programmatic dependent launch is then sound: nothing it
    reads or writes is touched before the previous kernel of the stream is done. False
    without Tile IR text or without such a wait.

    Example:
        >>> def entry(body):
        ...     return "entry @k(%arg0: tile<i32>) {\n" + body + "\n  return\n}"
        >>> load = "  %t, %u = load_view_tko weak %v[%arg0] token = %0 : a -> b"
        >>> waits_before_memory(entry("  %1 = gdc_wait_tko token = %0 -> token\n" + load))
        True
        >>> waits_before_memory(entry(load + "\n  %1 = gdc_wait_tko token = %0 -> token"))
        False
        >>> waits_before_memory(entry("  if %c {\n  %1 = gdc_wait_tko token = %0 -> token"
        ...                           "\n  } else {\n" + load + "\n  }"))
        False
    """
    if not tileir or WAIT_OP not in tileir:
        return False
    early = _before_wait(TileIRModule(tileir))
    return early is not None and not any(early)


def reads_before_wait(tileir: str | None, lowered: Any, spec: Any) -> frozenset[str] | None:
    """The parameters a kernel reads before it waits for the previous kernel of the
    stream (``tl.wait_for_previous_kernel()``), when everything it does before the wait
    is a bounds-checked tile load of a ``tl.In`` array argument (traced to the
    argument's own pointer, shape and strides); None otherwise (no top-level wait, a
    write, a gather, a partition's or an untraceable read before it).

    A graph may then start the kernel while its one predecessor still runs, if that
    predecessor writes none of these parameters' memory (``tilelab.runtime.graph``);
    an empty set means the kernel waits before any memory access
    (:func:`waits_before_memory`).

    Example (a kernel that loads ``w`` above its wait)::

        >>> reads_before_wait(art.tileir, lowered, spec)          # doctest: +SKIP
        frozenset({'w'})
    """
    if not tileir or WAIT_OP not in tileir:
        return None
    module = TileIRModule(tileir)
    early = _before_wait(module)
    if early is None:
        return None
    checker = Checker(module, lowered, spec, getattr(lowered, "name", "?"))
    params = set()
    for op in (op for ops in early for op in ops):
        if op.name != "load_view_tko" or checker.inbounds(op):
            return None
        view = checker.view_operand(op)
        p, _pvtype, problem = checker.view_param(op, view, for_store=False) \
            if view is not None else (None, None, "no view")
        if p is None or problem is not None or not read_only(checker.kinds.get(p)):
            return None
        params.add(p)
    return frozenset(params)
