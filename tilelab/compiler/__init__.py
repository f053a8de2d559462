"""tilelab.compiler: from a kernel's source text to a checked, cached cubin, with no GPU
and no driver (docs/architecture.md, "From source to launch").

The stages, in the order a kernel goes through them, each with its modules:

1. **Capture** (:mod:`.capture`; the kernel language in :mod:`.language`): ``@tl.kernel``
   reads the kernel's source text once; that text is all that is ever checked, lowered,
   compiled or interpreted.
2. **Safety check** (:mod:`.safety`): the allowlist over the kernel and every helper it
   reaches; what the check resolved is snapshotted and compared at each compile and
   launch. :mod:`.definition` runs stages 1 and 2 at definition and drives the rest.
3. **Specialize** (:mod:`.specialize`, :mod:`.signature`, :mod:`.values`,
   :mod:`.dtypes`, :mod:`.tile_shapes`): the arguments become a signature (dtypes,
   ranks, tile shapes, schedule, constants) and each parameter's layout under the
   calling convention (:mod:`.calling_convention`); the launch's bounds proof is made
   here (:mod:`.safety.bounds`). A partition past Tile IR's tile-size limit is refused
   here, before anything compiles (:mod:`.tileir.tile_limits`).
4. **Lower** (:mod:`.lower`, :mod:`.frozen`, :mod:`.tile_index`): the checked text
   becomes plain cuTile Python, run in namespaces built from the check alone; stores go
   to the block's own tile, whose index the schedule's math in :mod:`.tile_index` gives.
5. **Cache lookup** (:mod:`.cache`, :mod:`.cache_trust`, :mod:`.versions`): the key hashes
   everything the cubin depends on; a signed entry found is validated (stage 7) before
   it is used, and the compile stops there.
6. **Export** (:mod:`.export`, :mod:`.toolchain`, :mod:`.shape_errors`): cuTile's frontend
   turns the lowered function into Tile IR bytecode (a tile past the element limit is
   refused with a located error, :mod:`.tileir.tile_limits`), and ``tileirdisasm``
   prints its Tile IR text.
7. **Validate** (:mod:`.tileir`): the Tile IR of a safe kernel writes only through its
   ``Out``/``InOut`` partitions and reads unchecked only where the launch proved it;
   nothing is cached or loaded otherwise.
8. **tileiras** (:mod:`.export`, run through :mod:`.toolchain`): Tile IR bytecode to a
   cubin for the target arch.
9. **Artifacts** (:mod:`.artifacts`, the readers of :mod:`.binary`): the cubin, Tile IR,
   PTX, SASS, resources and remarks of the compile, in one object.
10. **Cache store** (:mod:`.cache`, :mod:`.input_fingerprints`): the entry is written
    atomically and signed; ``tilelab compile`` also records a shortcut keyed by its
    inputs' fingerprints.

Every error, remark and verdict of stages 4 to 9 points at the user's source through
:mod:`.locations` (and the lowered text's :mod:`.source_map`). The trusted base among
these modules is small and named in docs/safety.md ("The trusted base"): the lowering
(:mod:`.lower`, :mod:`.frozen`, :mod:`.tile_index`) and the Tile IR validator
(:mod:`.tileir`); :mod:`.binary` only describes what was built.

This package imports nothing: ``import tilelab`` loads it, and each stage is imported
where it is first needed.
"""
