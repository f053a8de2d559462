"""The Tile IR validator: defence in depth, the Tile IR of a safe kernel is checked before
its cubin is cached or loaded (docs/safety.md, "The trusted base").

The safety checker proves a kernel's source safe and the lowering turns it into plain
cuTile Python; this package checks what cuTile actually emitted, so that a bug in the
lowering (or in cuTile) cannot turn a safe kernel into one that writes where it should
not. It reads the text ``tileirdisasm -g`` prints and checks, for every entry:

* **writes**: the only memory writes are tile stores (``store_view_tko``) through a
  partition view of a tensor view made from exactly one argument's pointer, shape and
  strides, where that argument is a partition in ``lowered.store_params`` with kind
  ``Out`` or ``InOut``, the view's tile shape is the partition's, and the view keeps the
  array's dimension order. A smaller tile shape is accepted only for the guarded sub-tile
  store ``p.store(tile, offset=...)`` lowers to (:meth:`~.checks.Checker.is_sub_tile_store`):
  a partition in ``lowered.offset_store_params``, a shape dividing the partition's, inside
  a region, located at the one ``ct.store`` of the frozen ``sub_tile_store`` helper and
  called from the kernel's lowered text. Pointer stores (``store_ptr_tko``: scatters),
  atomics (``atomic_rmw_tko``, ``atomic_cas_tko``, ``atomic_red_view_tko``) and the
  multicast ops are refused.
* **unchecked accesses**: a view load marked ``inbounds`` (what ``check_bounds=False``
  becomes) must read an argument in ``lowered.unchecked_params`` through a view of that
  argument itself; an ``inbounds`` store needs a plan whose partitions the launch proved
  whole (``check_bounds=False``); a pointer load (``load_ptr_tko``: a gather) must carry a
  mask that bounds it by every dimension of the argument its pointers come from.
* **unknown ops**: the op names are an allowlist (:data:`NON_MEMORY_OPS`,
  :data:`READ_OPS`, :data:`WRITE_OPS`); any other op is refused, since it might write.

Arguments are matched to parameters by the ``cutile_python_v1`` calling convention
(:mod:`tilelab.compiler.calling_convention`, from ``spec.layouts``). A violation raises
:class:`InternalSafetyError` (a ``CompileError`` whose message starts "internal safety
check failed") at the user's source line of the offending op; a kernel that passes gets
a :class:`CheckReport` with the verdict on every memory op (:class:`OpVerdict`), which
the lab's Safety view shows.

The modules, in the order a check reads them:

* :mod:`.ops`: the op tables (what reads, writes, is refused, touches no memory);
* :mod:`.parser`: ``tileirdisasm`` text to entries, ops, scoped values and locations;
* :mod:`.checks`: the rules above, traced to the kernel's parameters, and
  :func:`check_tileir`, the entry point (with :mod:`.report`, what it answers);
* :mod:`.pdl`: the grid-dependency analysis of programmatic dependent launch (whether a
  kernel waits before its memory ops, triggers after its wait, reads before it);
* :mod:`.tile_limits` (with :mod:`.bytecode`, the reader of bytecode's type table):
  tiles past Tile IR's element limit, refused with a located error before tileiras runs.
"""
from __future__ import annotations

from tilelab.compiler.tileir.bytecode import bytecode_tile_shapes
from tilelab.compiler.tileir.checks import check_tileir
from tilelab.compiler.tileir.ops import (KNOWN_OPS, NON_MEMORY_OPS, READ_OPS, REFUSED_OPS,
                                         WRITE_OPS)
from tilelab.compiler.tileir.parser import TileIRModule, op_names
from tilelab.compiler.tileir.pdl import (reads_before_wait, triggers_after_wait,
                                         waits_before_memory)
from tilelab.compiler.tileir.report import CheckReport, InternalSafetyError, OpVerdict
from tilelab.compiler.tileir.tile_limits import check_bytecode_tiles, check_partition_tiles

__all__ = ["NON_MEMORY_OPS", "READ_OPS", "WRITE_OPS", "REFUSED_OPS", "KNOWN_OPS",
           "waits_before_memory", "reads_before_wait", "triggers_after_wait",
           "InternalSafetyError", "CheckReport", "OpVerdict", "TileIRModule",
           "check_tileir", "op_names", "bytecode_tile_shapes", "check_partition_tiles",
           "check_bytecode_tiles"]
