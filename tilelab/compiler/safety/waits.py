"""Where a kernel waits for the previous kernel of its stream.

By default the lowering makes that wait the kernel's first statement. A kernel may move
it down with ``tl.wait_for_previous_kernel()``, so that the statements above it load
weights while the previous kernel finishes. Those statements may then run while the
previous kernel is still writing its outputs, so above the wait a kernel may only read
``tl.In`` arrays: no store, no ``p.load()`` of an InOut partition, no ``p.tiles()``
loop. Which of those reads may overlap the previous kernel's writes is decided at
launch, from the Tile IR (:func:`tilelab.compiler.tileir.reads_before_wait`) and
the borrows of the two launches (docs/safety.md, "Programmatic dependent launch").
"""
from __future__ import annotations

import ast

from tilelab.compiler.safety.partitions import Site

__all__ = ["WaitRules"]

#: partition constructs that touch the partition's memory (the others only compute
#: indices and shapes)
_MEMORY_SITES = {"store": "{p}.store", "load": "{p}.load()",
                 "tiles": "the loop over {p}.tiles()"}


class WaitRules:
    """Mixin of the function checker: ``tl.wait_for_previous_kernel()``."""

    def check_wait_marker(self, call: ast.Call) -> None:
        """Record the marker as a site, or refuse a misplaced one."""
        stmt = self.parents.get(call)
        where = "a statement of its own in the kernel body itself"
        if not getattr(self, "is_kernel", False):
            self.fail("wait-form", call, "tl.wait_for_previous_kernel() is called in a "
                                         f"helper; it must be {where}",
                      hint="call it in the @tl.kernel function, not in a helper")
        if not (isinstance(stmt, ast.Expr) and stmt in self.func.body):
            self.fail("wait-form", call, f"tl.wait_for_previous_kernel() must be {where} "
                                         "(not inside a loop, branch or expression)")
        if call.args or call.keywords:
            self.fail("wait-form", call, "tl.wait_for_previous_kernel() takes no arguments")
        if any(s.kind == "wait" for s in self.sites):
            self.fail("wait-form", call, "the kernel already waits for the previous kernel "
                                         "above: tl.wait_for_previous_kernel() may appear "
                                         "once")
        self.sites.append(Site("wait", "", call))

    def check_before_wait(self) -> None:
        """No partition memory is touched above the marker."""
        wait = next((s for s in self.sites if s.kind == "wait"), None)
        if wait is None:
            return
        stmt = self.parents[wait.node]
        above = {id(n) for s in self.func.body[:self.func.body.index(stmt)]
                 for n in ast.walk(s)}
        for site in self.sites:
            what = _MEMORY_SITES.get(site.kind)
            if what is not None and id(site.node) in above:
                self.fail("before-wait", site.node,
                          f"{self.text(site.node)} ({what.format(p=site.partition)}) "
                          "comes before tl.wait_for_previous_kernel(): until that wait the "
                          "previous kernel of the stream may still be reading or writing "
                          f"{site.partition!r}")
