"""What each Tile IR op does, in a line: the tooltips of the Source ↔ Tile IR listing.

Why: a reader meets ``gdc_wait_tko`` or ``join_tokens`` at the top of every listing and
cannot ask what they are. The names are those ``tileirdisasm`` prints (the ``cuda_tile``
dialect); the ``_tko`` suffix marks *token-ordered* memory ops, which take and return a
memory token that orders them against each other. :func:`describe_op` reads an op name
off a listing line and returns its description, or None for a line that is not an op
(or an op this table does not know).

Example:
    >>> describe_op("  %4 = join_tokens %0, %2, %1 : token").split(":")[0]
    'join_tokens'
    >>> describe_op("  %8 = mmaf %tile, %tile_43, %iterArg0 : tile<64x32xf16>")[:34]
    'mmaf: matrix multiply-accumulate o'
"""
from __future__ import annotations

import re

__all__ = ["OPS", "AUX_OPS", "op_name", "describe_op"]

_FLOAT_INT = {
    "abs": "absolute value", "add": "element-wise addition", "sub": "element-wise subtraction",
    "mul": "element-wise multiplication", "div": "element-wise division",
    "rem": "element-wise remainder", "neg": "negation", "max": "element-wise maximum",
    "min": "element-wise minimum", "cmp": "element-wise comparison (a tile of i1)",
}

#: one line per op of the ``cuda_tile`` dialect that a listing shows
OPS: dict[str, str] = {
    **{f"{op}f": f"{what} of float tiles" for op, what in _FLOAT_INT.items()},
    **{f"{op}i": f"{what} of integer tiles" for op, what in _FLOAT_INT.items()},
    "andi": "bitwise and", "ori": "bitwise or", "xori": "bitwise xor",
    "shli": "shift left", "shri": "shift right", "mulhii": "high half of an integer product",
    "exti": "widen an integer", "trunci": "narrow an integer",
    "ftof": "convert between float types (rounding as stated)",
    "ftoi": "convert float to integer", "itof": "convert integer to float",
    "bitcast": "reinterpret the bits as another type of the same width",
    "exp": "e^x, element-wise", "exp2": "2^x, element-wise", "log": "natural logarithm",
    "log2": "base-2 logarithm", "sqrt": "square root", "rsqrt": "reciprocal square root",
    "sin": "sine", "cos": "cosine", "tan": "tangent", "sinh": "hyperbolic sine",
    "cosh": "hyperbolic cosine", "tanh": "hyperbolic tangent", "atan2": "arctangent of y/x",
    "floor": "round down", "ceil": "round up", "fma": "fused multiply-add a·b + c",
    "fpowf": "x to a float power", "fpowi": "x to an integer power",
    "select": "choose element-wise between two tiles by a condition (ct.where)",
    "constant": "a constant tile (every element the same value)",
    "iota": "the tile 0, 1, 2, … (ct.arange)",
    "broadcast": "repeat a tile along dimensions of size 1",
    "reshape": "the same elements in another shape", "permute": "reorder the dimensions",
    "cat": "concatenate two tiles", "extract": "a sub-tile", "insert": "write a sub-tile into "
    "a tile (a value, not memory)", "pack": "pack elements", "unpack": "unpack elements",
    "reduce": "reduce a tile along a dimension with the body's operation (ct.sum, ct.max, …)",
    "scan": "prefix reduction along a dimension (ct.cumsum, …)",
    "mmaf": "matrix multiply-accumulate of float tiles, acc + a @ b (ct.mma; tensor cores "
            "where the types allow)",
    "mmaf_scaled": "block-scaled matrix multiply-accumulate (fp8/fp4 with scale factors)",
    "mmai": "matrix multiply-accumulate of integer tiles",
    "get_tile_block_id": "this block's index in the grid (ct.bid)",
    "get_num_tile_blocks": "the grid's size (ct.num_blocks)",
    "get_tensor_shape": "a tensor view's shape at run time",
    "get_index_space_shape": "how many tiles a partition view has (ct.num_tiles)",
    "make_tensor_view": "describe an array argument (pointer, shape, strides) as a tensor view",
    "make_partition_view": "split a tensor view into tiles of a fixed shape; loads and stores "
                           "then name a tile by its index",
    "make_strided_view": "a strided view of a tensor",
    "make_gather_scatter_view": "a view for gathers and scatters by index tiles",
    "load_view_tko": "load one tile of a partition view (ct.load; may become a TMA copy); "
                     "token-ordered",
    "store_view_tko": "store one tile into a partition view (a partition store); "
                      "token-ordered",
    "load_ptr_tko": "load a tile through a tile of pointers (gather); token-ordered",
    "store_ptr_tko": "store a tile through a tile of pointers (scatter); token-ordered",
    "atomic_rmw_tko": "atomic read-modify-write; token-ordered",
    "atomic_cas_tko": "atomic compare-and-swap; token-ordered",
    "atomic_red_view_tko": "atomic reduction into a view; token-ordered",
    "offset": "advance a tile of pointers by element offsets",
    "int_to_ptr": "integer to pointer", "ptr_to_int": "pointer to integer",
    "ptr_to_ptr": "pointer to another pointee type",
    "make_token": "a fresh memory-ordering token (orders nothing yet; no instruction)",
    "join_tokens": "join memory-ordering tokens: ops that take the result wait for every "
                   "joined access; bookkeeping of the memory order, no instruction of its own",
    "memory_fence_alias_tko": "a memory fence between views that may alias",
    "gdc_wait_tko": "grid-dependency control: wait until the previous kernel of the stream "
                    "has finished (programmatic dependent launch); tilelab's prologue runs "
                    "it before any memory access, and it returns at once when the kernel "
                    "was launched normally",
    "gdc_launch_dependents_tko": "grid-dependency control: let the next kernel of the "
                                 "stream start launching (it waits with its own "
                                 "gdc_wait_tko before touching memory)",
    "assume": "a fact the compiler may rely on (divisibility, bounds), from the launch's "
              "specialization; no instruction",
    "assert": "check a condition at run time", "print_tko": "print from the device",
    "for": "a counted loop (range(...) in the kernel)", "loop": "a loop with a condition",
    "if": "a branch", "yield": "the values a region passes on", "continue": "the values the "
    "loop body carries into its next iteration", "break": "leave the loop",
    "return": "end of the kernel", "entry": "the kernel's entry point and its arguments",
    "alloca": "a local buffer", "global": "a module-level global",
    "get_global": "the address of a global",
}

#: ops that order memory or state facts but compute nothing: shown dimmed
AUX_OPS = frozenset({"join_tokens", "make_token"})

_OP = re.compile(r"^\s*(?:%[\w$.#-]+(?:\s*,\s*%[\w$.#-]+)*\s*=\s*)?([a-z_][a-z0-9_]*)\b")


def op_name(text: str) -> str | None:
    """The op a Tile IR listing line holds (``addf``, ``for``, ...), or None.

    Example:
        >>> op_name("%blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>")
        'get_tile_block_id'
        >>> op_name("}") is None
        True
    """
    m = _OP.match(text)
    return m.group(1) if m else None


def describe_op(text: str) -> str | None:
    """``"name: what it does"`` for the op of a listing line, or None.

    Example:
        >>> describe_op("  return")
        'return: end of the kernel'
    """
    name = op_name(text)
    what = OPS.get(name or "")
    return f"{name}: {what}" if what else None
