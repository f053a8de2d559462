"""Patterns of the cuTile samples and TileGym ops that a safe kernel refuses on purpose,
each as its author would first write it, with the rule it breaks and the words of the
advice its refusal must give (how to write it safely).

These are not false refusals: each one lets a block choose where it writes, write an
input, read without a bounds check the launch cannot prove, or run code the checker does
not see. tests/compiler/test_acceptance_corpus.py checks that every one is refused with
its rule and a hint that names the safe construct; the corpus' ports show that
construct at work.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import cuda.tile as ct

import tilelab as tl

__all__ = ["DesignRefusal", "BY_DESIGN"]


@dataclass(frozen=True)
class DesignRefusal:
    """A pattern refused on purpose: its rule, and a phrase its hint must contain."""

    name: str
    fn: Callable
    rule: str
    hint_says: str
    #: why the hint is missing or wrong today (a strict xfail), None when it is right
    gap: str | None = None


BY_DESIGN: dict[str, DesignRefusal] = {}


def refused(name: str, rule: str, hint_says: str, gap: str | None = None) -> Callable:
    def deco(fn: Callable) -> Callable:
        BY_DESIGN[name] = DesignRefusal(name, fn, rule, hint_says, gap)
        return fn
    return deco


@refused("ct_store_to_output", "write-partition", "C.store(tile)")
def matmul_own_store(A, B, C: tl.Out, tm: ct.Constant[int], tn: ct.Constant[int]):
    bidx, bidy = C.tile_index
    acc = ct.mma(ct.load(A, index=(bidx, 0), shape=(tm, 16)),
                 ct.load(B, index=(0, bidy), shape=(16, tn)),
                 ct.zeros((tm, tn), dtype=ct.float32))
    ct.store(C, index=(bidx, bidy), tile=acc.astype(C.dtype))   # the sample's store


@refused("scatter_to_output", "write-partition", "output.store(tile)")
def softmax_scatter(output: tl.Out, input, TILE_SIZE: ct.Constant[int]):
    row_idx, _ = output.tile_index
    offsets = ct.arange(TILE_SIZE, dtype=ct.int32)
    row = ct.gather(input, (row_idx, offsets), padding_value=-math.inf)
    ct.scatter(output, (row_idx, offsets), row, check_bounds=True)


@refused("computed_check_bounds", "unchecked-read", "keep check_bounds on")
def softmax_check_bound(output: tl.Out, input, N: ct.Constant[int],
                        TILE_SIZE: ct.Constant[int]):
    row_idx, _ = output.tile_index
    offsets = ct.arange(TILE_SIZE, dtype=ct.int32)
    check_bound = TILE_SIZE != N
    row = ct.gather(input, (row_idx, offsets), check_bounds=check_bound,
                    padding_value=-math.inf)
    output.store(ct.reshape(row, (1, TILE_SIZE)))


@refused("nested_def_combiner", "statement", "write the combiner as a module-level def")
def scan_nested_def(x, y: tl.Out, T: ct.Constant[int], N: ct.Constant[int]):
    def f(a, b):
        return a + b

    px, _ = y.tile_index
    tile = ct.load(x, index=(px, 0), shape=(T, N))
    y.store(ct.scan(tile, axis=1, func=f, identity=0))


@refused("rope_in_place_on_inputs", "write-input", "tl.Out")
def rope_in_place(q, cos, sin, TILE_H: ct.Constant[int], TILE_RD: ct.Constant[int]):
    bid = ct.bid(0)
    c = ct.load(cos, index=(bid, 0), shape=(1, TILE_RD))
    s = ct.load(sin, index=(bid, 0), shape=(1, TILE_RD))
    x1 = ct.load(q, index=(bid, 0, 0), shape=(1, TILE_H, TILE_RD)).reshape((TILE_H, TILE_RD))
    x2 = ct.load(q, index=(bid, 0, 1), shape=(1, TILE_H, TILE_RD)).reshape((TILE_H, TILE_RD))
    ct.store(q, index=(bid, 0, 0), tile=(x1 * c - x2 * s).reshape((1, TILE_H, TILE_RD)))


def store_tile(output, idx, tile):
    ct.store(output, index=idx, tile=tile)


@refused("partition_to_storing_helper", "partition-escape", "return a tile")
def helper_stores(x, output: tl.Out, B: ct.Constant[int], N: ct.Constant[int]):
    px, _ = output.tile_index
    store_tile(output, (px, 0), ct.load(x, index=(px, 0), shape=(B, N)) + 1)


@refused("grid_stride_row_loop", "at-not-persistent", "tl.persistent()")
def softmax_grid_stride(output: tl.Out, input, N_ROWS: int, TILE_SIZE: ct.Constant[int]):
    for row_idx in range(ct.bid(0), N_ROWS, ct.num_blocks(0)):
        row = ct.load(input, index=(row_idx, 0), shape=(1, TILE_SIZE))
        output.store(row, at=row_idx)


@refused("lock_with_atomics", "write-partition", "reduce the partials in a second launch")
def partial_sums_with_lock(counts: tl.Out, x, T: ct.Constant[int]):
    (i,) = counts.tile_index
    ct.atomic_add(counts, (0,), ct.sum(ct.load(x, index=(i,), shape=(T,))))


@refused("keyword_only_parameter", "param-form", "make it a positional parameter")
def keyword_only_tile(x, y: tl.Out, *, T: ct.Constant[int]):
    (i,) = y.tile_index
    y.store(ct.load(x, index=(i,), shape=(T,)))
