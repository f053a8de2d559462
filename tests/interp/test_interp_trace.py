"""Traces: regions, bytes and FLOPs per block, queries, sampling, presentation."""
from __future__ import annotations

import numpy as np
import pytest

import cuda.tile as ct
from tilelab.interp import interpret

from .test_interp_kernels import gemm, vector_add


def test_per_block_regions_bytes_and_flops():
    x = np.ones(100, np.float32)
    z = np.zeros_like(x)
    trace = interpret(vector_add, x, x.copy(), z, 32, grid=(4,))
    last = trace.block(3)
    assert last.index == (3, 0, 0) and last.linear == 3
    assert [a.box for a in last.reads["x"]] == [((96, 100),)]  # clipped to the array
    assert last.writes["z"][0].count == 4
    assert last.bytes_read == 2 * 4 * 4 and last.bytes_written == 16
    assert last.flops_elementwise == 4 and last.flops_mma == 0      # in-bounds lanes
    assert last.flops_elementwise_executed == 32 and last.flops_executed == 32
    assert trace.bytes_read == 800 and trace.bytes_written == 400
    assert trace.block((1, 0, 0)).writes["z"][0].box == ((32, 64),)
    assert trace.regions("z", block=2)[0].op == "ct.store"
    assert trace.regions("x", kind="read")[0].location.line > 0


def test_footprint_and_owner_map():
    A = np.ones((64, 32), np.float16)
    B = np.ones((32, 64), np.float16)
    C = np.zeros((64, 64), np.float32)
    trace = interpret(gemm, A, B, C, 32, 32, 16, grid=(2, 2))
    fp = trace.footprint("A", block=(1, 0, 0), kind="read")
    assert fp[32:].all() and not fp[:32].any()
    owners = trace.owners("C")
    assert owners[0, 0] == 0 and owners[40, 0] == 1 and owners[0, 40] == 2
    assert owners[40, 40] == 3
    readers = trace.owners("B", kind="read")
    assert set(np.unique(readers).tolist()) == {0, 2}
    assert trace.flops_mma == 2 * 64 * 64 * 32
    with pytest.raises(KeyError, match="no array argument named 'D'"):
        trace.regions("D")


def test_gather_and_atomic_accesses_are_element_sets():
    @ct.kernel
    def k(x, h):
        idx = ct.arange(8, dtype=ct.int32) * 3
        v = ct.gather(x, idx)
        ct.atomic_add(h, idx % 4, v)

    trace = interpret(k, np.arange(16, dtype=np.int32), np.zeros(4, np.int32), grid=(1,))
    read = trace.regions("x", kind="read")[0]
    assert read.box is None and read.count == 6 and sorted(read.indices.tolist()) == \
        [0, 3, 6, 9, 12, 15]
    atomic = trace.regions("h", kind="atomic")[0]
    assert atomic.count == 8
    assert trace.bytes_read == 6 * 4 + 8 * 4 and trace.bytes_written == 8 * 4


def test_sampling_extrapolates_and_says_so():
    x = np.ones(1 << 12, np.float32)
    z = np.zeros_like(x)
    full = interpret(vector_add, x, x.copy(), z, 64, grid=(64,))
    part = interpret(vector_add, x, x.copy(), np.zeros_like(x), 64, grid=(64,),
                     sample_blocks=8, seed=3)
    assert part.sampled and len(part.execution_order) == 8
    assert part.bytes_read == full.bytes_read and part.flops == full.flops
    spread = sorted(part.execution_order)
    assert spread[0] < 8 and spread[-1] >= 56
    assert "race detection covered only the sampled blocks" in part.summary()
    again = interpret(vector_add, x, x.copy(), np.zeros_like(x), 64, grid=(64,),
                      sample_blocks=8, seed=3)
    assert again.execution_order == part.execution_order


def test_summary_repr_and_trace_off():
    x = np.ones(64, np.float32)
    trace = interpret(vector_add, x, x.copy(), np.zeros_like(x), 32, grid=(2,))
    assert repr(trace).startswith("<Trace vector_add grid=(2, 1, 1) blocks=2/2")
    text = trace.summary()
    assert "bytes read 512, written 256" in text and "no inter-block races" in text
    assert trace.table()[1]["bytes_read"] == 256
    off = interpret(vector_add, x, x.copy(), np.zeros_like(x), 32, grid=(2,), trace=False)
    assert not off.traced and off.blocks == [] and "tracing was off" in off.summary()
