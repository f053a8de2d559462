"""The checker's rules: one id per rule, with what it protects and the default advice.

Every ``SafetyError`` the checker raises carries ``.rule``, an id of this table, so the
soundness corpus, the docs and the lab can refer to a rule without matching message
text. The message itself says what was found where; the hint defaults to the rule's.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import NoReturn

from tilelab.errors import SafetyError, SourceLocation

__all__ = ["Rule", "RULES", "raise_rule"]


@dataclass(frozen=True)
class Rule:
    """One rule: its id, what it protects, and the usual way out."""

    id: str
    protects: str
    hint: str | None = None


_HELPERS = "define helpers with 'def' at module level and call them by their global name"
_RAW = ("opt out locally with @tl.kernel(unsafe=True) and a tl.Raw parameter, and run the "
        "kernel on the CPU interpreter to look for races")

RULES: dict[str, Rule] = {r.id: r for r in (
    # -- what a kernel may contain -------------------------------------------------
    Rule("statement", "kernels are straight tile code: no imports, classes, nested "
         "functions, with/try/del/global statements, generators or async code",
         "import and define at module level; kernels use tile ops, partitions and helpers"),
    Rule("source", "a function is checked from its own source text, which must be "
         "readable and be the 'def' that made it",
         "define kernels in a .py file, a Jupyter/IPython cell or a %%tile cell"),
    Rule("reserved-name", "names beginning with '__tl' belong to the code tilelab "
         "generates", "rename the variable"),
    Rule("assert-form", "'assert cond, message' runs as cuTile's ct.assert_(cond, "
         "message), whose message is a constant string (and which evaluates it always, "
         "not only on failure)", "write the message as a string literal: "
         "assert cond, \"what went wrong\""),
    Rule("private-attribute", "attributes beginning with '_' reach interpreter and "
         "runtime internals", "use the public attributes (shape, dtype, ndim, ...)"),
    Rule("assign-target", "kernels assign only names: item or attribute assignment "
         "could write memory", "bind the new value to a name"),
    Rule("unresolved-name", "every name a kernel uses must be defined when it is "
         "compiled", "define it at module level before compiling the kernel"),
    Rule("global-value", "values a kernel reads from its module, and a function's default "
         "values, are numbers, strings, tuples, dtypes and cuTile constants, which cannot "
         "change under it",
         "pass other data as a kernel argument, or a ct.Constant"),
    Rule("global-attribute", "dotted names in a kernel go through modules only",
         "import the value at module level under its own name"),
    # -- calls: the allowlist -----------------------------------------------------
    Rule("call-local", "a name used as a call target may not be bound inside the "
         "function: the checker resolves every call when the kernel is checked", _HELPERS),
    Rule("call-computed", "call targets are names or dotted names the checker can "
         "resolve", _HELPERS),
    Rule("call-unknown", "a kernel calls only classified cuTile ops, tl.load_like, "
         "allowlisted builtins and plain Python helpers", _HELPERS),
    Rule("call-host", "tilelab's and cuTile's host API (tensors, schedules, kernels, "
         "launches) has no meaning inside a kernel",
         "choose tensors and schedules on the host, at launch"),
    Rule("call-dynamic", "names looked up at run time cannot be checked",
         "refer to ops, helpers and constants by their names; for compile-time "
         "computation use ct.static_eval"),
    Rule("method-unknown", "methods of tiles are allowlisted by name (astype, reshape, "
         "permute, transpose, extract, insert, item)",
         "use the cuTile function form, e.g. ct.reshape(t, shape)"),
    Rule("call-star", "the checker must see every argument of a cuTile op (a hidden "
         "check_bounds=False or destination)", "write the arguments out"),
    Rule("func-argument", "the combining function of ct.reduce / ct.scan is checked code: "
         "a module-level helper (checked like any helper), a lambda written in the call "
         "(checked with the function it is written in), or one of cuTile's combiners "
         "(operator.add, mul, and_, or_, xor; max, min; ct.add, mul, maximum, minimum, "
         "bitwise_and, bitwise_or, bitwise_xor), recognized by identity",
         "write the combiner as a module-level def, or as a lambda in the call"),
    Rule("helper-lambda", "helpers are checked from their source, one 'def' at a time",
         "define the helper with 'def'"),
    Rule("helper-source", "a helper whose source cannot be read cannot be checked",
         "define helpers in a .py file or notebook cell"),
    Rule("helper-decorated", "a decorated helper runs code the checker does not see",
         "remove the decorator (only @ct.function is allowed)"),
    # -- the wait for the previous kernel ------------------------------------------
    Rule("wait-form", "tl.wait_for_previous_kernel() marks one point of the kernel body "
         "itself, so the lowering knows what runs before the wait (a safe kernel does not "
         "call the grid-dependency ops itself)",
         "write it once, as a statement of its own in the @tl.kernel function's body"),
    Rule("before-wait", "until a kernel waits for the previous kernel of its stream, it "
         "only reads tl.In arrays: the previous kernel may still be using the others",
         "move the store or p.load() below tl.wait_for_previous_kernel()"),
    # -- writes --------------------------------------------------------------------
    Rule("write-safe", "a safe kernel writes only through its partitions, whose "
         "destinations are fixed per block", "write p.store(tile) on a tl.Out/tl.InOut "
         "partition, or " + _RAW),
    Rule("write-input", "kernels never write their inputs (tl.In, unannotated arrays)",
         "declare an output parameter 'z: tl.Out', launch with z.partition(tile_shape) "
         "and write z.store(tile); for cross-block writes (atomics, scatter) use "
         "@tl.kernel(unsafe=True) and 'x: tl.Raw'"),
    Rule("write-partition", "partitions are written only by p.store(tile)",
         "write p.store(tile)"),
    Rule("write-untraced", "an unsafe kernel writes only arrays it can trace back to a "
         "tl.Raw parameter", "write through the tl.Raw parameter itself, e.g. "
         "ct.store(raw, index=..., tile=...)"),
    Rule("raw-op", "raw pointers, unchecked indexing and unchecked promises to the "
         "compiler can reach any address", _RAW),
    Rule("view-op", "array views (slice, tiled_view) whose bounds the checker cannot "
         "prove could extend past the array", "load tiles of the array itself with "
         "ct.load / tl.load_like, or " + _RAW),
    Rule("raw-param", "tl.Raw parameters exist only in unsafe kernels",
         "decorate with @tl.kernel(unsafe=True) to opt out locally, or use "
         "tl.Out/tl.InOut partitions"),
    Rule("param-form", "kernel parameters are plain positional parameters (a launch "
         "passes every argument by position), and a function's defaults are those its "
         "'def' gives", "write every parameter as a positional one, e.g. "
         "def k(x, y: tl.Out, T: ct.Constant[int])"),
    # -- bounds --------------------------------------------------------------------
    Rule("unchecked-read", "a read without bounds checks in a safe kernel must be one "
         "the launch proves in bounds", "keep check_bounds on (the default), read the "
         "block's tile with tl.load_like, or " + _RAW),
    # -- partitions ----------------------------------------------------------------
    Rule("partition-escape", "a partition never leaves the kernel body's own uses: "
         "renamed, put in a tuple, returned or passed on, other code could pick its "
         "destination", "use the partition directly where you need it"),
    Rule("partition-reassigned", "a partition parameter keeps meaning the partition",
         "bind new values to another name"),
    Rule("partition-attribute", "a partition offers store, load, tiles, tile_shape, "
         "tile_index, tile_index_of, shape, ndim and dtype",
         "write p.store(tile), p.load() (tl.InOut) or tl.load_like(x, p), and use "
         "p.tile_index, p.tile_shape or p.shape for positions"),
    Rule("partition-method-value", "partition methods are called directly: a method "
         "taken as a value could be called where the checker cannot see"),
    Rule("partition-store", "the destination of every safe store is fixed by the "
         "partition", "write p.store(tile); to choose destinations yourself, use "
         "@tl.kernel(unsafe=True) with a tl.Raw parameter"),
    Rule("offset-store", "p.store(tile, offset=...) writes a sub-tile of the block's "
         "own tile: offset is a tuple literal of one integer per axis of the partition "
         "(in units of the tile's shape, which divides the partition's); an offset "
         "outside the own tile writes nothing, so any value, data-dependent included, "
         "stays inside it", "write p.store(sub_tile, offset=(o0, o1, ...)) with one "
         "entry per axis of p"),
    Rule("partition-read-out", "tl.Out partitions are write-only",
         "declare it tl.InOut to read this block's tile with p.load()"),
    Rule("partition-load", "p.load() reads this block's own tile and takes no index"),
    Rule("partition-other-tile", "a block reads only its own tile of a partition "
         "(other blocks may be writing the others)", "read this block's tile with "
         "p.load()"),
    Rule("partition-to-op", "partitions are used only through their own methods",
         "use p.shape, p.tile_shape or p.tile_index"),
    Rule("load-like-form", "tl.load_like(x, p) takes an array parameter and a partition "
         "parameter (and at=t in persistent kernels, and constant hints), so the launch "
         "can prove each block's tile meets the array"),
    Rule("hint-value", "the performance hints of p.store, p.load() and tl.load_like "
         "(latency=, allow_tma=, padding_mode=) are constants the checker sees: they "
         "change how a tile moves, never which elements, and carry nothing else",
         "write the hint as a literal (latency=3, allow_tma=False, "
         "padding_mode=ct.PaddingMode.ZERO), a ct.Constant parameter or a module-level "
         "constant"),
    Rule("tiles-loop", "'for t in p.tiles()' hands each tile to exactly one block: it is "
         "a plain, unnested for loop over one name, with no arguments"),
    Rule("tile-reassigned", "the tile variable minted by p.tiles() keeps naming the "
         "tile the loop gave this block", "use another name for the new value"),
    Rule("at-not-persistent", "at= and tile_index_of() name a minted tile, which only "
         "persistent kernels have", "remove at=, or walk tiles with 'for t in "
         "p.tiles():' and launch with schedule=tl.persistent()"),
    Rule("at-not-minted", "a persistent kernel accesses only tiles its loop minted",
         "write p.store(tile, at=t) inside 'for t in p.tiles():'"),
    Rule("missing-at", "in a persistent kernel every partition access names the tile "
         "the loop minted", "write it inside the loop with at=t"),
    Rule("tile-index-persistent", "p.tile_index is one tile; persistent blocks own many",
         "use p.tile_index_of(t) for the tile t of 'for t in p.tiles()'"),
)}


def raise_rule(rule: str, message: str, *, location: SourceLocation | None,
               context: str | None = None, hint: str | None = None) -> NoReturn:
    """Raise the SafetyError of ``rule`` (message, location, the rule's hint)."""
    r = RULES[rule]
    text = f"{message} (in {context})" if context else message
    err = SafetyError(text, location=location, hint=hint if hint is not None else r.hint)
    err.rule = rule
    raise err


def node_location(src, node: ast.AST | None) -> SourceLocation | None:
    return src.location(node) if (src is not None and node is not None) else None
