"""The op tables of the Tile IR validator: which ops of the Tile IR dialect (13.4) read
memory, which write it, which no safe kernel lowers to, and which touch no memory.

The validator is an allowlist: an op named in none of these tables is refused, since it
might write. A new cuTile release that emits a new op therefore fails loudly until the
op is classified here (``tests/compiler/test_tileir_check.py`` reads cuTile's own op
encoder and fails on an op this module does not name).
"""
from __future__ import annotations

__all__ = ["WRITE_OPS", "READ_OPS", "REFUSED_OPS", "NON_MEMORY_OPS", "KNOWN_OPS",
           "MEMORY_OPS", "TRACED_OPS", "WAIT_OP", "TRIGGER_OP", "PARSED_OPS", "LIGHT_OPS"]


#: ops that write memory; only ``store_view_tko`` through a partition is accepted
WRITE_OPS = frozenset({"store_view_tko", "store_ptr_tko", "atomic_rmw_tko", "atomic_cas_tko",
                       "atomic_red_view_tko", "multimem_store_view_tko",
                       "multimem_reduce_view_tko"})
#: ops that read memory: view loads (bounds-checked unless marked ``inbounds``) and
#: pointer loads (gathers, bounded by their mask)
READ_OPS = frozenset({"load_view_tko", "load_ptr_tko"})
#: ops no safe lowering emits and the validator does not analyse (refused)
REFUSED_OPS = frozenset({"multimem_load_reduce_view_tko", "preview_call"})
#: every other op of the Tile IR dialect (13.4): arithmetic, control flow, views, pointer
#: arithmetic, tokens, printing, asserts and the grid-dependency synchronisation of
#: programmatic dependent launch (``gdc_*``); none of them writes memory. A pointer made
#: by one of them (``offset``, ``int_to_ptr``, ``get_global``, ``alloca``) can only be
#: written through a write op, and those are checked.
NON_MEMORY_OPS = frozenset("""
    absf absi addf addi alloca andi assert assume atan2 bitcast break broadcast cat ceil
    cmpf cmpi constant continue cos cosh divf divi entry exp exp2 exti extract floor fma
    for fpowf fpowi ftof ftoi gdc_launch_dependents_tko gdc_wait_tko get_global
    get_index_space_shape get_num_tile_blocks get_tensor_shape get_tile_block_id global
    if insert int_to_ptr iota itof join_tokens log log2 loop make_gather_scatter_view
    make_partition_view make_strided_view make_tensor_view make_token maxf maxi
    memory_fence_alias_tko minf mini mmaf mmaf_scaled mmai module mulf mulhii muli negf
    negi offset ori pack permute print_tko ptr_to_int ptr_to_ptr reduce remf remi reshape
    return rsqrt scan select shli shri sin sinh sqrt subf subi tan tanh trunci unpack xori
    yield
""".split())
KNOWN_OPS = NON_MEMORY_OPS | READ_OPS | WRITE_OPS | REFUSED_OPS
#: the ops the checks trace through (parsed in full; other non-memory ops are only named)
TRACED_OPS = frozenset({"assume", "make_tensor_view", "make_partition_view", "offset",
                         "broadcast", "reshape", "exti", "andi", "cmpi"})
#: the wait for the previous kernel of the stream (``gdc_wait_tko``): parsed, so that
#: its region is known (only a wait at an entry's top level orders what follows it)
WAIT_OP = "gdc_wait_tko"
#: the op that lets the next kernel of the stream start (``gdc_launch_dependents_tko``)
TRIGGER_OP = "gdc_launch_dependents_tko"
#: the ops the parser reads in full (their operands, results and location)
PARSED_OPS = TRACED_OPS | READ_OPS | WRITE_OPS | {WAIT_OP, TRIGGER_OP}
#: the ops of which the parser reads only the name
LIGHT_OPS = NON_MEMORY_OPS - PARSED_OPS
#: every op that touches memory (what must come after a grid-dependency wait)
MEMORY_OPS = READ_OPS | WRITE_OPS | REFUSED_OPS
