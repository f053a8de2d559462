"""Differential tests of the interpreter against float64 numpy references, in the style of
cuTile's samples and tests: kernels written against ``cuda.tile`` run unmodified, results
are compared with the tolerances cuTile's tests use (``torch.testing.assert_close``
defaults: float32 rtol 1.3e-6 / atol 1e-5, float16 rtol 1e-3 / atol 1e-5, bfloat16 rtol
1.6e-2 / atol 1e-5), and float32 MMA is held to 1e-5 against float64 accumulation.

Covered: full-fp32 MMA and tf32 only when cast, batched and N-d matmul, FFT-style complex
arithmetic on real/imaginary tiles, torch and numpy dtypes inside kernels, torch CPU
tensors of every dtype, raw-memory loads/stores/atomics, useful-work FLOP counts, races
through aliasing views, and lock-protected accumulation (split-K, LayerNorm-backward
weight gradients) next to their lock-free twins.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import cuda.tile as ct
from tilelab import config
from tilelab.errors import LaunchError
from tilelab.interp import interpret

try:  # kernels below name torch dtypes as cuTile kernels do; they skip without torch
    import torch
except ImportError:  # pragma: no cover - CI installs the torch extra
    torch = None

RTOL_F32, ATOL_F32 = 1e-5, 1e-5     # float32 MMA against float64 accumulation
ZERO = ct.PaddingMode.ZERO


def _torch():
    """torch, or a skip with the reason (a failure under TILELAB_REQUIRE_TORCH=1, as in CI)."""
    try:
        import torch
    except ImportError as e:
        reason = f"torch is not installed ({e}); pip install -e '.[torch]'"
        if config.require_torch():
            pytest.fail(reason + " (TILELAB_REQUIRE_TORCH=1)")
        pytest.skip(reason)
    return torch


def _f64(a) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


def _tf32(a: np.ndarray) -> np.ndarray:
    """float32 -> tf32 to nearest even (what ``astype(ct.tfloat32)`` does), as float32."""
    bits = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    lsb = (bits >> 13) & 1
    return ((bits + 0xFFF + lsb) & 0xFFFFE000).astype(np.uint32).view(np.float32)


# ---- float32 MMA: full fp32, tf32 only when cast -----------------------------------------

@ct.kernel
def gemm_f32(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int],
             TF32: ct.Constant[bool]):
    bm, bn = ct.bid(0), ct.bid(1)
    acc = ct.full((TM, TN), 0.0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, 1, (TM, TK))):
        a = ct.load(A, (bm, k), (TM, TK), padding_mode=ZERO)
        b = ct.load(B, (k, bn), (TK, TN), padding_mode=ZERO)
        if TF32:
            a = a.astype(ct.tfloat32)
            b = b.astype(ct.tfloat32)
        acc = ct.mma(a, b, acc)
    ct.store(C, (bm, bn), acc)


@pytest.mark.parametrize("m,n,k", [(64, 64, 64), (100, 70, 300), (33, 129, 1000)])
def test_float32_mma_is_full_precision(m, n, k):
    rng = np.random.default_rng(m + n + k)
    A = rng.standard_normal((m, k)).astype(np.float32)
    B = rng.standard_normal((k, n)).astype(np.float32)
    C = np.zeros((m, n), np.float32)
    trace = interpret(gemm_f32, A, B, C, 32, 32, 16, False, grid=(-(-m // 32), -(-n // 32)))
    ref = _f64(A) @ _f64(B)
    np.testing.assert_allclose(C, ref, rtol=RTOL_F32, atol=ATOL_F32)
    assert trace.flops_mma == 2 * m * n * k and not trace.has_races


def test_tf32_only_when_operands_are_cast():
    rng = np.random.default_rng(7)
    A = rng.standard_normal((64, 256)).astype(np.float32)
    B = rng.standard_normal((256, 32)).astype(np.float32)
    C = np.zeros((64, 32), np.float32)
    interpret(gemm_f32, A, B, C, 32, 32, 32, True, grid=(2, 1))
    full = _f64(A) @ _f64(B)
    # tf32 operands: exact products of the rounded inputs, summed in float32
    np.testing.assert_allclose(C, _f64(_tf32(A)) @ _f64(_tf32(B)), rtol=RTOL_F32, atol=1e-4)
    err = np.max(np.abs(C - full)) / np.max(np.abs(full))
    assert 1e-5 < err < 1e-2          # 10-bit mantissas: clearly not full fp32
    C32 = np.zeros_like(C)
    interpret(gemm_f32, A, B, C32, 32, 32, 32, False, grid=(2, 1))
    assert np.max(np.abs(C32 - full)) / np.max(np.abs(full)) < 1e-6


@ct.kernel
def bmm_f32(A, B, C, TB: ct.Constant[int], TM: ct.Constant[int], TN: ct.Constant[int],
            TK: ct.Constant[int]):
    bb, bm, bn = ct.bid(0), ct.bid(1), ct.bid(2)
    acc = ct.zeros((TB, TM, TN), ct.float32)
    for k in range(ct.num_tiles(A, 2, (TB, TM, TK))):
        a = ct.load(A, (bb, bm, k), (TB, TM, TK), padding_mode=ZERO)
        b = ct.load(B, (bb, k, bn), (TB, TK, TN), padding_mode=ZERO)
        acc = ct.mma(a, b, acc)
    ct.store(C, (bb, bm, bn), acc)


def test_batched_mma_full_fp32():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((6, 40, 100)).astype(np.float32)
    B = rng.standard_normal((6, 100, 24)).astype(np.float32)
    C = np.zeros((6, 40, 24), np.float32)
    trace = interpret(bmm_f32, A, B, C, 2, 16, 16, 32, grid=(3, 3, 2))
    np.testing.assert_allclose(C, np.matmul(_f64(A), _f64(B)), rtol=RTOL_F32, atol=ATOL_F32)
    assert trace.flops_mma == 2 * 6 * 40 * 24 * 100
    assert trace.flops_mma_executed == 2 * 2 * 16 * 16 * 32 * 4 * 18


@ct.kernel
def nd_matmul(X, Y, Z, V, ZV, VZ, SX: ct.Constant, SY: ct.Constant, SV: ct.Constant):
    x = ct.load(X, (0, 0, 0, 0), SX)                 # (cuTile repeats no tuple: written out)
    y = ct.load(Y, (0, 0, 0, 0), SY)
    z = x @ y                                        # batch dims broadcast: (2,1) x (1,4)
    ct.store(Z, (0, 0, 0, 0), z)
    v = ct.load(V, (0,), SV)
    m = ct.reshape(ct.extract(z, (1, 3, 0, 0), (1, 1, SX[2], SY[3])), (SX[2], SY[3]))
    ct.store(ZV, (0,), ct.matmul(m, v))              # matrix @ vector
    ct.store(VZ, (0,), ct.matmul(ct.load(V, (0,), (SX[2],)), m))    # vector @ matrix


def test_nd_and_vector_matmul_full_fp32():
    rng = np.random.default_rng(11)
    X = rng.standard_normal((2, 1, 16, 64)).astype(np.float32)
    Y = rng.standard_normal((1, 4, 64, 16)).astype(np.float32)
    V = rng.standard_normal(16).astype(np.float32)
    Z = np.zeros((2, 4, 16, 16), np.float32)
    ZV, VZ = np.zeros(16, np.float32), np.zeros(16, np.float32)
    interpret(nd_matmul, X, Y, Z, V, ZV, VZ, X.shape, Y.shape, (16,), grid=(1,))
    ref = np.matmul(_f64(X), _f64(Y))
    np.testing.assert_allclose(Z, ref, rtol=RTOL_F32, atol=ATOL_F32)
    m = _f64(Z[1, 3])
    np.testing.assert_allclose(ZV, m @ _f64(V), rtol=RTOL_F32, atol=ATOL_F32)
    np.testing.assert_allclose(VZ, _f64(V) @ m, rtol=RTOL_F32, atol=ATOL_F32)


# ---- FFT-like complex arithmetic on real / imaginary tiles --------------------------------

@ct.kernel
def fft_four_step(xr, xi, yr, yi, N1: ct.Constant[int], N2: ct.Constant[int]):
    """A length-N1*N2 DFT per block: x[N2*n1 + n2] -> X[k1 + N1*k2], all complex products
    written on real and imaginary tiles (three DFT/twiddle stages, matmuls in fp32)."""
    b = ct.bid(0)
    n = N1 * N2
    ar = ct.reshape(ct.load(xr, (b, 0), (1, n)), (N1, N2))
    ai = ct.reshape(ct.load(xi, (b, 0), (1, n)), (N1, N2))
    i1 = ct.arange(N1, dtype=ct.float32)
    i2 = ct.arange(N2, dtype=ct.float32)
    w1 = (-2 * math.pi / N1) * (i1[:, None] * i1[None, :])       # F1[k1, n1]
    f1r, f1i = ct.cos(w1), ct.sin(w1)
    br = f1r @ ar - f1i @ ai
    bi = f1r @ ai + f1i @ ar
    wt = (-2 * math.pi / n) * (i1[:, None] * i2[None, :])          # twiddle W_N^(k1 n2)
    tr, ti = ct.cos(wt), ct.sin(wt)
    cr = br * tr - bi * ti
    ci = br * ti + bi * tr
    w2 = (-2 * math.pi / N2) * (i2[:, None] * i2[None, :])         # F2[n2, k2]
    f2r, f2i = ct.cos(w2), ct.sin(w2)
    dr = cr @ f2r - ci @ f2i
    di = cr @ f2i + ci @ f2r
    ct.store(yr, (b, 0), ct.reshape(ct.transpose(dr), (1, n)))     # X[k1 + N1*k2] = D[k1, k2]
    ct.store(yi, (b, 0), ct.reshape(ct.transpose(di), (1, n)))


@pytest.mark.parametrize("n1,n2", [(8, 8), (16, 8), (4, 32)])
def test_fft_with_real_and_imaginary_tiles(n1, n2):
    rng = np.random.default_rng(n1 * n2)
    batch, n = 4, n1 * n2
    x = (rng.standard_normal((batch, n)) + 1j * rng.standard_normal((batch, n)))
    xr, xi = x.real.astype(np.float32), x.imag.astype(np.float32)
    yr, yi = np.zeros_like(xr), np.zeros_like(xi)
    trace = interpret(fft_four_step, xr, xi, yr, yi, n1, n2, grid=(batch,))
    ref = np.fft.fft(xr.astype(np.float64) + 1j * xi.astype(np.float64), axis=1)
    scale = np.sqrt(n)   # |X| grows like sqrt(n) for unit-variance inputs
    np.testing.assert_allclose(yr, ref.real, rtol=1e-4, atol=1e-5 * scale * 10)
    np.testing.assert_allclose(yi, ref.imag, rtol=1e-4, atol=1e-5 * scale * 10)
    assert not trace.has_races
    per_block = 4 * 2 * n1 * n1 * n2 + 4 * 2 * n1 * n2 * n2
    assert trace.flops_mma == batch * per_block


# ---- torch and numpy dtypes inside kernels ---------------------------------------------------

def test_numpy_dtypes_wherever_a_dtype_is_expected():
    @ct.kernel
    def k(x, out, DT: ct.Constant, T: ct.Constant[int]):
        i = ct.arange(T, dtype=np.int32)
        t = ct.load(x, (0,), (T,)).astype(np.float32) + i.astype(np.dtype("float32"))
        h = ct.full((T,), 0.5, dtype=np.float16)
        ct.static_assert(x.dtype == np.float16 and DT == ct.float16 and DT == np.float16)
        ct.store(out, (0,), (t * h.astype(ct.float32)).astype(DT))

    x = np.arange(8, dtype=np.float16)
    out = np.zeros(8, np.float16)
    interpret(k, x, out, np.float16, 8, grid=(1,))
    assert out.tolist() == [float(v) for v in np.arange(8)]


@ct.kernel
def torch_dtype_kernel(x, out, idx_out, DT: ct.Constant, T: ct.Constant[int]):
    i = ct.arange(T, dtype=torch.int32)
    t = ct.load(x, (ct.bid(0),), (T,)).astype(torch.float32)
    half = ct.full((T,), torch.float16(0.5), dtype=torch.float16)
    y = (t + i.astype(torch.float32)) * half.astype(torch.float32)
    if DT == ct.bfloat16 and out.dtype == torch.bfloat16 and t.dtype == torch.float32:
        y = y * torch.float32(2)
    ct.store(out, (ct.bid(0),), y.astype(DT))
    ct.scatter(idx_out, i + ct.bid(0) * T, i.astype(torch.int64))


def test_torch_dtypes_inside_kernels():
    torch = _torch()
    x = torch.arange(32, dtype=torch.float16)
    out = torch.zeros(32, dtype=torch.bfloat16)
    idx = torch.zeros(32, dtype=torch.int64)
    trace = interpret(torch_dtype_kernel, x, out, idx, torch.bfloat16, 16, grid=(2,))
    expect = torch.arange(32, dtype=torch.float32) + torch.arange(16).repeat(2)
    assert torch.equal(out.float(), expect)          # written in place, through DLPack
    assert torch.equal(idx, torch.arange(16).repeat(2))
    assert not trace.has_races


def test_torch_cpu_tensors_of_every_dtype_are_borrowed_without_a_copy():
    torch = _torch()
    import tilelab as tl

    @ct.kernel
    def scale(a, b, T: ct.Constant[int]):
        t = ct.load(a, (ct.bid(0),), (T,)).astype(ct.float32)
        ct.store(b, (ct.bid(0),), (t * 2).astype(b.dtype))

    for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn,
               torch.float8_e5m2):
        a = torch.arange(32).to(dt)
        b = torch.zeros(32, dtype=dt)
        interpret(scale, a, b, 16, grid=(2,))
        assert torch.equal(b.float(), (a.float() * 2).to(dt).float()), dt
        b2 = torch.zeros(32, dtype=dt)
        tl.interpret(scale, a, b2, 16, grid=(2,))           # the reported failure (bf16)
        assert torch.equal(b2.float(), b.float()), dt
    # a strided view is borrowed as it is: writes land in the base tensor
    base = torch.zeros(4, 8, dtype=torch.bfloat16)
    col = base[:, 2]
    src = torch.arange(4, dtype=torch.bfloat16)
    interpret(scale, src, col, 4, grid=(1,))
    assert base[:, 2].tolist() == [0, 2, 4, 6] and float(base.sum()) == 12
    # float8_e8m0fnu (scales) is viewed too
    e8 = torch.tensor([1.0, 2.0, 4.0, 8.0]).to(torch.float8_e8m0fnu)

    @ct.kernel
    def read_scales(s, out):
        ct.store(out, (0,), ct.load(s, (0,), (4,)).astype(ct.float32))

    out = np.zeros(4, np.float32)
    interpret(read_scales, e8, out, grid=(1,), arch="sm_100")   # (e8m0: sm_100 on)
    assert out.tolist() == [1, 2, 4, 8]


def test_dlpack_bf16_and_fp8_from_any_producer_without_a_copy():
    """numpy's own DLPack import refuses bfloat16/float8; the interpreter views them."""
    import tilelab.runtime.tensor as T

    @ct.kernel
    def double(a, T_: ct.Constant[int]):
        t = ct.load(a, (ct.bid(0),), (T_,))
        ct.store(a, (ct.bid(0),), (t.astype(ct.float32) * 2).astype(a.dtype))

    for dtype in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        t = T.tensor(np.arange(16, dtype=np.float32), dtype=dtype, device="cpu")
        with pytest.raises((BufferError, TypeError, RuntimeError)):
            np.from_dlpack(t)
        dt = t.numpy().dtype
        ref = (np.arange(16).astype(dt).astype(np.float32) * 2).astype(dt)
        interpret(double, t, 8, grid=(2,))                 # writes land in the tensor
        assert np.array_equal(t.numpy().astype(np.float32), ref.astype(np.float32)), dtype


def test_non_viewable_foreign_arrays_are_refused_with_the_reason():
    torch = _torch()
    packed = torch.zeros(4, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)

    @ct.kernel
    def k(x):
        pass

    with pytest.raises(LaunchError, match="could not be viewed as a numpy array"):
        interpret(k, packed, grid=(1,))


# ---- raw memory ---------------------------------------------------------------------------

@ct.kernel
def histogram(vals, bins, T: ct.Constant[int]):
    v = ct.load(vals, (ct.bid(0),), (T,), padding_mode=ZERO)
    in_range = ct.arange(T, dtype=ct.int32) + ct.bid(0) * T < vals.shape[0]
    bins.get_raw_memory().atomic_add_offset(v, 1, mask=in_range)


def test_raw_memory_atomic_histogram():
    vals = np.random.default_rng(0).integers(0, 16, 1000).astype(np.int32)
    bins = np.zeros(16, np.int32)
    trace = interpret(histogram, vals, bins, 128, grid=(8,), order="shuffled")
    assert np.array_equal(bins, np.bincount(vals, minlength=16))
    assert not trace.has_races
    atomics = trace.regions("bins", kind="atomic")
    assert sum(a.count for a in atomics) == 1000
    assert all(a.op == "RawArrayMemory.atomic_add_offset" and a.offsets is not None
               for a in atomics)
    # the values are read once, and each atomic update reads and writes its bin word
    assert trace.bytes_written == 1000 * 4 and trace.bytes_read == 2 * 1000 * 4


def test_raw_memory_addresses_the_allocation_not_the_view():
    @ct.kernel
    def k(col, out, N: ct.Constant[int]):
        raw = col.get_raw_memory()
        offs = ct.arange(N, dtype=ct.int32)
        ct.store(out, (0,), raw.load_offset(offs))             # row-major neighbours
        raw.store_offset(offs * 0 + 1, raw.dtype(-1), mask=offs == 0)   # the next column
        ct.static_assert(raw.dtype == ct.float32)

    buf = np.arange(32, dtype=np.float32).reshape(4, 8)
    col = buf[:, 2]                                   # a strided view of a larger array
    out = np.zeros(8, np.float32)
    trace = interpret(k, col, out, 8, grid=(1,))
    assert out.tolist() == list(range(2, 10))
    assert buf[0, 3] == -1 and buf[0, 2] == 2
    reads = trace.regions("col", kind="read")
    assert reads[0].offsets.tolist() == list(range(8))
    assert reads[0].indices.tolist() == [0]           # only offset 0 is an element of col


def test_raw_memory_out_of_allocation_is_a_launch_error_naming_the_line():
    @ct.kernel
    def k(x):
        raw = x.get_raw_memory()
        offs = ct.arange(8, dtype=ct.int32) + 2
        ok = raw.load_offset(offs, mask=offs < 8, padding_value=-1)   # masked: fine
        raw.store_offset(offs, ok)                                    # lanes 6, 7: outside

    x = np.zeros(8, np.float32)
    with pytest.raises(LaunchError, match=r"element offset 8 .* outside its allocation") as e:
        interpret(k, x, grid=(1,))
    assert "raw.store_offset(offs, ok)" in e.value.location.source_line()
    with pytest.raises(LaunchError, match="outside its allocation"):
        @ct.kernel
        def neg(x):
            x.get_raw_memory().load_offset(-1)
        interpret(neg, x, grid=(1,))


def test_raw_memory_cas_xchg_and_dtype_rules():
    @ct.kernel
    def k(x, old):
        raw = x.get_raw_memory()
        offs = ct.arange(4, dtype=ct.int32)
        got = raw.atomic_cas_offset(offs, 0, 42)
        ct.store(old, (0,), got)
        raw.atomic_xchg_offset(offs + 4, 7)
        raw.atomic_max_offset(offs, 50, mask=offs < 2)
        raw.atomic_or_offset(offs + 4, ct.int32(8))

    x = np.array([0, 1, 0, 1, 0, 0, 0, 0], np.int32)
    old = np.zeros(4, np.int32)
    interpret(k, x, old, grid=(1,))
    assert old.tolist() == [0, 1, 0, 1]
    assert x.tolist() == [50, 50, 42, 1, 15, 15, 15, 15]
    from tilelab.errors import CompileError

    @ct.kernel
    def bad(x):
        x.get_raw_memory().atomic_max_offset(0, 1.0)

    with pytest.raises(CompileError, match="Unsupported array dtype"):
        interpret(bad, np.zeros(4, np.float32), grid=(1,))


def test_raw_memory_races_are_found_on_addresses():
    @ct.kernel
    def k(x):
        if ct.bid(0) == 0:
            ct.store(x, (0,), ct.full((8,), 1.0, ct.float32))          # a tile store
        else:
            x.get_raw_memory().store_offset(ct.arange(2, dtype=ct.int32) + 3, 2.0)

    trace = interpret(k, np.zeros(8, np.float32), grid=(2,))
    [race] = trace.races
    assert race.kind == "write-write" and race.raw and race.count == 2
    assert race.examples == [(3,), (4,)] and "get_raw_memory() offset" not in str(race)
    assert "offsets 3, 4 of x.get_raw_memory()" in str(race)


# ---- useful work ----------------------------------------------------------------------------

def test_flops_count_in_bounds_work_and_executed_lanes_apart():
    @ct.kernel
    def add(x, y, z, T: ct.Constant[int]):
        b = ct.bid(0)
        ct.store(z, (b,), ct.load(x, (b,), (T,)) + ct.load(y, (b,), (T,)))

    x = np.ones(1000, np.float32)
    z = np.zeros_like(x)
    trace = interpret(add, x, x, z, 256, grid=(4,))
    assert trace.flops == 1000 and trace.flops_executed == 1024
    assert trace.bytes == 3 * 4 * 1000
    assert trace.arithmetic_intensity == pytest.approx(1000 / 12000)
    assert "1.02k executed" in trace.summary()

    @ct.kernel
    def row_sum(x, out, T: ct.Constant[int]):
        t = ct.load(x, (ct.bid(0), 0), (1, T), padding_mode=ZERO)
        ct.store(out, (ct.bid(0),), ct.sum(t * 2.0, axis=1))

    x = np.ones((3, 100), np.float32)
    out = np.zeros(3, np.float32)
    trace = interpret(row_sum, x, out, 128, grid=(3,))
    assert out.tolist() == [200.0] * 3
    assert trace.flops == 3 * (100 + 99)                  # multiplies + adds of 100 elements
    assert trace.flops_executed == 3 * (128 + 127)


# ---- aliasing views --------------------------------------------------------------------------

@ct.kernel
def copy_tiles(src, dst, T: ct.Constant[int]):
    b = ct.bid(0)
    ct.store(dst, (b,), ct.load(src, (b,), (T,)))


def test_races_through_arguments_that_view_the_same_buffer():
    buf = np.arange(64, dtype=np.float32)
    trace = interpret(copy_tiles, buf[:32], buf[8:40], 8, grid=(4,))
    assert trace.has_races
    race = trace.races[0]
    assert race.kind == "read-write" and race.other_arg == "dst" and race.arg == "src"
    assert race.blocks == ((0, 0, 0), (1, 0, 0)) and race.examples[0] == (8,)
    assert "aliasing 'dst'" in str(race)
    # the same buffer as both arguments, each block on its own tile: no race
    same = np.arange(64, dtype=np.float32)
    assert not interpret(copy_tiles, same, same, 8, grid=(8,)).has_races
    # interleaved views of one buffer never touch the same bytes
    inter = np.arange(64, dtype=np.float32)
    assert not interpret(copy_tiles, inter[0::2], inter[1::2], 8, grid=(4,)).has_races


def test_races_through_a_view_whose_elements_overlap():
    @ct.kernel
    def write_rows(x, T: ct.Constant[int]):
        ct.store(x, (ct.bid(0), 0), ct.full((1, T), ct.bid(0), ct.int32))

    buf = np.zeros(16, np.int32)
    windows = np.lib.stride_tricks.as_strided(buf, shape=(4, 8), strides=(8, 4))  # overlap
    trace = interpret(write_rows, windows, 8, grid=(4,))
    kinds = {(r.kind, r.blocks[0][0], r.blocks[1][0]) for r in trace.races}
    assert ("write-write", 0, 1) in kinds and ("write-write", 1, 2) in kinds
    # each row after the first rewrites 6 of the 8 elements earlier rows wrote
    assert sum(r.count for r in trace.races) == 3 * 6
    assert [r.count for r in trace.races if r.blocks == ((0, 0, 0), (1, 0, 0))] == [6]
    distinct = np.lib.stride_tricks.as_strided(np.zeros(32, np.int32), shape=(4, 8),
                                               strides=(32, 4))
    assert not interpret(write_rows, distinct, 8, grid=(4,)).has_races


def test_bitcast_views_of_one_buffer_share_the_addresses():
    @ct.kernel
    def k(words, halves):
        if ct.bid(0) == 0:
            ct.store(words, (0,), ct.full((2,), 1, ct.int32))
        else:
            ct.store(halves, (1,), ct.full((2,), 7, ct.int16))    # bytes 4..8 = words[1]

    buf = np.zeros(4, np.int32)
    trace = interpret(k, buf, buf.view(np.int16), grid=(2,))
    [race] = trace.races
    assert race.arg == "halves" and race.other_arg == "words" and race.count == 2


# ---- locks --------------------------------------------------------------------------------

@ct.kernel
def splitk_gemm(A, B, C, locks, TM: ct.Constant[int], TN: ct.Constant[int],
                TK: ct.Constant[int], SPLIT: ct.Constant[int], LOCK: ct.Constant[bool]):
    """Split-K GEMM: every K-slice block adds its partial tile into C under the tile's
    lock (a spin lock through atomic_cas, released with atomic_xchg)."""
    bm, bn, s = ct.bid(0), ct.bid(1), ct.bid(2)
    acc = ct.zeros((TM, TN), ct.float32)
    for k in range(s, ct.num_tiles(A, 1, (TM, TK)), SPLIT):
        a = ct.load(A, (bm, k), (TM, TK), padding_mode=ZERO)
        b = ct.load(B, (k, bn), (TK, TN), padding_mode=ZERO)
        acc = ct.mma(a, b, acc)
    tile = bm * ct.num_blocks(1) + bn
    if LOCK:
        while ct.atomic_cas(locks, tile, 0, 1, memory_order=ct.MemoryOrder.ACQUIRE,
                            memory_scope=ct.MemoryScope.DEVICE) == 1:
            pass
    c = ct.load(C, (bm, bn), (TM, TN), padding_mode=ZERO)
    ct.store(C, (bm, bn), c + acc)
    if LOCK:
        ct.atomic_xchg(locks, tile, 0, memory_order=ct.MemoryOrder.RELEASE)


@pytest.mark.parametrize("order", ["sequential", "shuffled"])
def test_split_k_under_a_lock_per_tile_is_race_free_and_its_lock_free_twin_races(order):
    rng = np.random.default_rng(5)
    A = rng.standard_normal((64, 200)).astype(np.float32)
    B = rng.standard_normal((200, 48)).astype(np.float32)
    ref = _f64(A) @ _f64(B)
    C = np.zeros((64, 48), np.float32)
    locks = np.zeros(6, np.int32)
    trace = interpret(splitk_gemm, A, B, C, locks, 32, 16, 16, 4, True, grid=(2, 3, 4),
                      order=order, seed=3)
    np.testing.assert_allclose(C, ref, rtol=RTOL_F32, atol=ATOL_F32)
    assert not trace.has_races, trace.race_report()
    assert not locks.any()
    twin = np.zeros_like(C)
    bad = interpret(splitk_gemm, A, B, twin, np.zeros(6, np.int32), 32, 16, 16, 4, False,
                    grid=(2, 3, 4), order=order, seed=3)
    assert {r.kind for r in bad.races} == {"read-write", "write-write"}
    assert {r.arg for r in bad.races} == {"C"}


def test_accesses_after_the_release_are_not_protected():
    @ct.kernel
    def early_release(acc, locks):
        while ct.atomic_cas(locks, 0, 0, 1) == 1:
            pass
        v = ct.load(acc, (0,), (4,))
        ct.atomic_xchg(locks, 0, 0)
        ct.store(acc, (0,), v + 1.0)          # after the release: unprotected

    acc = np.zeros(4, np.float32)
    trace = interpret(early_release, acc, np.zeros(1, np.int32), grid=(3,))
    assert trace.has_races
    assert {r.kind for r in trace.races} >= {"write-write"}


def test_a_scalar_accumulated_under_a_lock():
    @ct.kernel
    def count(total, locks, LOCK: ct.Constant[bool]):
        if LOCK:
            while ct.atomic_cas(locks, 0, 0, 1) == 1:
                pass
        ct.store(total, (), ct.load(total, (), ()) + 1.0)
        if LOCK:
            ct.atomic_xchg(locks, 0, 0)

    total = np.zeros((), np.float32)
    assert not interpret(count, total, np.zeros(1, np.int32), True, grid=(4,)).has_races
    assert float(total) == 4.0
    assert interpret(count, total, np.zeros(1, np.int32), False, grid=(4,)).has_races


def test_lock_held_through_a_plain_store_release_and_raw_memory_locks():
    @ct.kernel
    def store_release(acc, locks):
        while locks.get_raw_memory().atomic_cas_offset(0, 0, 1) == 1:
            pass
        ct.store(acc, (0,), ct.load(acc, (0,), (4,)) + 1.0)
        ct.store(locks, (0,), ct.zeros((1,), ct.int32))        # release by a plain store

    acc = np.zeros(4, np.float32)
    locks = np.zeros(1, np.int32)
    trace = interpret(store_release, acc, locks, grid=(5,), order="shuffled")
    assert acc.tolist() == [5.0] * 4 and not trace.has_races, trace.race_report()


@ct.kernel
def relay(data, out, locks, RELAY: ct.Constant[bool]):
    """Block 0 writes under lock 0; block 1 takes lock 0, then lock 1, and hands both on;
    block 2 reads under lock 1 only: ordered through block 1 (when it relays)."""
    b = ct.bid(0)
    if b == 0:
        while ct.atomic_cas(locks, 0, 0, 1) == 1:
            pass
        ct.store(data, (0,), ct.full((4,), 7.0, ct.float32))
        ct.atomic_xchg(locks, 0, 0)
    elif b == 1:
        if RELAY:
            while ct.atomic_cas(locks, 0, 0, 1) == 1:
                pass
            while ct.atomic_cas(locks, 1, 0, 1) == 1:
                pass
            ct.atomic_xchg(locks, 0, 0)
            ct.atomic_xchg(locks, 1, 0)
    else:
        while ct.atomic_cas(locks, 1, 0, 1) == 1:
            pass
        ct.store(out, (0,), ct.load(data, (0,), (4,)))
        ct.atomic_xchg(locks, 1, 0)


def test_lock_hand_overs_chain_through_blocks_in_between():
    data, out = np.zeros(4, np.float32), np.zeros(4, np.float32)
    trace = interpret(relay, data, out, np.zeros(2, np.int32), True, grid=(3,))
    assert out.tolist() == [7.0] * 4 and not trace.has_races, trace.race_report()
    twin = interpret(relay, data, out, np.zeros(2, np.int32), False, grid=(3,))
    [race] = twin.races
    assert race.kind == "read-write" and race.blocks == ((0, 0, 0), (2, 0, 0))


@ct.kernel
def layernorm_dw(X, DY, MEAN, RSTD, DW_PART, LOCKS, COUNT, G: ct.Constant[int],
                 ROWS: ct.Constant[int], N: ct.Constant[int], LOCK: ct.Constant[bool]):
    """LayerNorm backward, the weight-gradient part: each block reduces dy * x_hat over its
    rows and accumulates the partial sum into group ``bid % G`` of DW_PART under that
    group's lock; the first block of a group stores instead of adding (Count)."""
    b = ct.bid(0)
    x = ct.load(X, (b, 0), (ROWS, N), padding_mode=ZERO)
    dy = ct.load(DY, (b, 0), (ROWS, N), padding_mode=ZERO)
    mean = ct.load(MEAN, (b,), (ROWS,), padding_mode=ZERO)
    rstd = ct.load(RSTD, (b,), (ROWS,), padding_mode=ZERO)
    xhat = (x - mean[:, None]) * rstd[:, None]
    part = ct.sum(dy * xhat, axis=0, keepdims=True)
    g = b % G
    if LOCK:
        while ct.atomic_cas(LOCKS, g, 0, 1) == 1:
            pass
    count = ct.load(COUNT, (g,), (1,))
    if ct.sum(count) == 0:
        ct.atomic_xchg(COUNT, g, 1)
    else:
        part = part + ct.load(DW_PART, (g, 0), (1, N))
    ct.store(DW_PART, (g, 0), part)
    if LOCK:
        ct.atomic_xchg(LOCKS, g, 0)


@pytest.mark.parametrize("order", ["sequential", "shuffled"])
def test_layernorm_backward_weight_gradient_under_locks(order):
    rng = np.random.default_rng(9)
    M, N, ROWS, G = 96, 64, 8, 4
    X = rng.standard_normal((M, N)).astype(np.float32)
    DY = rng.standard_normal((M, N)).astype(np.float32)
    mean = X.mean(axis=1).astype(np.float32)
    rstd = (1 / np.sqrt(X.var(axis=1) + 1e-5)).astype(np.float32)
    xhat = (_f64(X) - _f64(mean)[:, None]) * _f64(rstd)[:, None]
    ref = (_f64(DY) * xhat).sum(axis=0)

    def run(lock):
        part = np.zeros((G, N), np.float32)
        trace = interpret(layernorm_dw, X, DY, mean, rstd, part, np.zeros(G, np.int32),
                          np.zeros(G, np.int32), G, ROWS, N, lock, grid=(M // ROWS,),
                          order=order, seed=1)
        return part, trace

    part, trace = run(True)
    np.testing.assert_allclose(part.sum(axis=0), ref, rtol=1e-4, atol=1e-4)
    assert not trace.has_races, trace.race_report()
    _part, twin = run(False)
    assert twin.has_races and {r.arg for r in twin.races} <= {"DW_PART", "COUNT"}
    assert "DW_PART" in {r.arg for r in twin.races}
