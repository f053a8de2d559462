"""Matrix multiplication in the safe language: GEMM, batched GEMM, split-K and GEMV.

Every kernel but one-launch split-K writes its output through a partition, so blocks
own disjoint tiles and cannot race; the schedule (row-major, grouped, persistent) only decides which block
computes which tile. Inputs are bf16, fp16, fp32 (run on the tensor cores as tf32) or
fp8 (e4m3/e5m2, sm_89+), accumulated in fp32; an optional fused epilogue applies
``alpha * acc + bias``, an activation and a residual before the single rounding to the
output dtype. Edge tiles are zero-padded on load and clipped on store, so no shape has
to be a multiple of the tiles.

The host function :func:`matmul` validates its arguments, picks a :class:`MatmulConfig`
(:func:`default_config`) unless given one, and launches the right kernel:

- ``row_major`` / ``grouped``: one block per (tm, tn) tile of C (grouped = L2 swizzle);
- ``persistent``: a fixed set of blocks looping over the tiles;
- ``splitk``: small M (2..16, decode): each block computes a K slice of one tile into
  a partitioned fp32 scratch, a second safe kernel sums the slices and runs the epilogue
  (``split_mode="launch"``); or, in one launch (``split_mode="atomic"``), the slices add
  into a self-cleaning fp32 workspace with atomics and the last to arrive writes the
  tile (:func:`splitk_atomic_kernel`, the module's one ``unsafe=True`` kernel);
- ``gemv``: M == 1, a CUDA-core dot-product kernel aimed at memory bandwidth (with the
  same optional split-K).

Example:
    >>> import tilelab as tl
    >>> from tilelab.kernels.matmul import matmul
    >>> a = tl.randn(64, 48, dtype="bf16", device="cpu", seed=0)
    >>> b = tl.randn(48, 32, dtype="bf16", device="cpu", seed=1)
    >>> matmul(a, b, config=MatmulConfig(tm=32, tn=32, tk=16)).shape
    (64, 32)
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import cuda.tile as ct

import tilelab as tl
from tilelab.kernels._host import (CallCache, Plan, TensorResult, as_tensor as _wrap_array,
                                   has_workspace, hash_once, hinted, register_constant,
                                   state_without_hash, workspace)
from tilelab.kernels.elementwise import _pow2_ceil

__all__ = [
    "MatmulConfig", "ACTIVATIONS", "SCHEDULES", "Plan", "default_config", "search_space",
    "matmul", "bmm", "gemv", "plan_matmul", "plan_bmm", "compile_matmul",
    "matmul_kernel", "persistent_matmul_kernel", "batched_matmul_kernel",
    "splitk_partial_kernel", "splitk_reduce_kernel", "splitk_atomic_kernel", "gemv_kernel",
    "gemv_rows_kernel", "SPLIT_MODES",
]

#: activation name -> code used by the kernels (0 means none)
ACTIVATIONS: dict[str | None, int] = {None: 0, "relu": 1, "gelu": 2, "gelu_tanh": 2,
                                      "silu": 3, "gelu_erf": 4}
#: the schedules a :class:`MatmulConfig` can name
SCHEDULES = ("row_major", "grouped", "persistent", "splitk", "gemv")
#: how split-K sums its K slices: a second launch, or fp32 atomics in the same launch
SPLIT_MODES = ("launch", "atomic")

_FLOAT_INPUTS = ("float16", "bfloat16", "float32")
_FP8 = ("float8_e4m3fn", "float8_e5m2")
_OUT_DTYPES = ("float16", "bfloat16", "float32")


# ======================================================================================
# configuration


def _pow2(v: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1 and not v & (v - 1)


@dataclass(frozen=True)
class MatmulConfig:
    """Tiles, schedule and compiler hints of one GEMM launch (what an autotuner searches).

    ``tm, tn, tk``: tile sizes (powers of two); ``schedule``: one of :data:`SCHEDULES`;
    ``group_m``: tile rows per L2 group (grouped and persistent); ``num_blocks``:
    persistent blocks (None: one per SM); ``split_k``: K slices for ``splitk``/``gemv``;
    ``split_mode``: how the slices are summed, ``"launch"`` (each slice writes fp32
    partials, a second safe kernel sums them) or ``"atomic"`` (one launch: the slices
    add into a self-cleaning fp32 workspace and the last one of each tile writes it,
    see :func:`splitk_atomic_kernel`);
    ``latency``: cuTile's load latency hint (1..10) for the A/B loads, None lets the
    compiler infer it (tileiras picks the pipeline depth itself: cuTile exposes no
    ``num_stages``); ``occupancy``, ``num_ctas``, ``num_worker_warps``: cuTile kernel
    hints (8 worker warps make tileiras warp-specialize the kernel on sm_90: a producer
    warpgroup feeding two consumer warpgroups, 384 threads); ``fast_acc``:
    fp8 fast accumulation (Hopper); ``swap_ab``: compute each tile transposed, as
    B^T A^T, so that B's ``tn`` columns fill the MMA's rows and A's few ``tm`` rows its
    columns (an MMA is at least 64 rows tall on sm_90, but can be 16 columns wide): for
    M <= 16; the latency hint then applies to B's loads only.

    Example:
        >>> MatmulConfig(tm=128, tn=256, schedule="persistent").with_(group_m=4).group_m
        4
    """

    tm: int = 128
    tn: int = 128
    tk: int = 64
    schedule: str = "grouped"
    group_m: int = 8
    num_blocks: int | None = None
    split_k: int = 1
    split_mode: str = "launch"
    latency: int | None = None
    occupancy: int | None = None
    num_ctas: int | None = None
    num_worker_warps: int | None = None
    fast_acc: bool = False
    swap_ab: bool = False

    __hash__ = hash_once            # computed once: calls key on their config
    __getstate__ = state_without_hash

    def __post_init__(self):
        for name in ("tm", "tn", "tk"):
            if not _pow2(getattr(self, name)):
                raise ValueError(f"MatmulConfig.{name}={getattr(self, name)!r}: tile sizes "
                                 "must be powers of two (cuTile tiles are)")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"MatmulConfig.schedule={self.schedule!r}: choose one of "
                             f"{', '.join(SCHEDULES)}")
        for name in ("group_m", "split_k"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"MatmulConfig.{name}={v!r} must be a positive int")
        if self.num_blocks is not None and (not isinstance(self.num_blocks, int)
                                            or self.num_blocks < 1):
            raise ValueError(f"MatmulConfig.num_blocks={self.num_blocks!r} must be a "
                             "positive int or None")
        if self.latency is not None and not (isinstance(self.latency, int)
                                             and 1 <= self.latency <= 10):
            raise ValueError(f"MatmulConfig.latency={self.latency!r}: cuTile's latency "
                             "hint is an int from 1 (low) to 10 (high), or None")
        if self.occupancy is not None and not (isinstance(self.occupancy, int)
                                               and 1 <= self.occupancy <= 32):
            raise ValueError(f"MatmulConfig.occupancy={self.occupancy!r} must be 1..32 "
                             "or None")
        if self.num_worker_warps is not None and not (_pow2(self.num_worker_warps)
                                                      and self.num_worker_warps <= 32):
            raise ValueError(f"MatmulConfig.num_worker_warps={self.num_worker_warps!r} must "
                             "be a power of two up to 32, or None")
        if self.num_ctas is not None and not (_pow2(self.num_ctas) and self.num_ctas <= 16):
            raise ValueError(f"MatmulConfig.num_ctas={self.num_ctas!r} must be a power of "
                             "two up to 16, or None")
        if self.split_mode not in SPLIT_MODES:
            raise ValueError(f"MatmulConfig.split_mode={self.split_mode!r}: choose one of "
                             f"{', '.join(SPLIT_MODES)}")
        if self.split_mode == "atomic" and self.schedule == "gemv" and self.split_k > 1 \
                and self.occupancy is not None:
            # observed on the H200 with tileiras 13.4.92 (2026-11-30): the one-launch
            # split-K GEMV compiled with occupancy 2 or 4 never finished (the same kernel
            # without the hint, and the 16/64-row variants with it, ran correctly)
            raise ValueError("MatmulConfig(schedule='gemv', split_mode='atomic') takes no "
                             f"occupancy hint (got occupancy={self.occupancy}): with one "
                             "it hung the H200 (tileiras 13.4); leave occupancy=None")
        if self.schedule == "gemv" and self.tm != 1:
            raise ValueError("MatmulConfig(schedule='gemv') computes one row: set tm=1")
        if not isinstance(self.swap_ab, bool):
            raise ValueError(f"MatmulConfig.swap_ab={self.swap_ab!r} must be a bool")
        if self.swap_ab and self.schedule == "gemv":
            raise ValueError("MatmulConfig(swap_ab=True) swaps the tensor-core operands; "
                             "schedule='gemv' multiplies on the CUDA cores: pick another "
                             "schedule or swap_ab=False")

    def with_(self, **changes: Any) -> "MatmulConfig":
        """A copy with some fields changed.

        Example:
            >>> MatmulConfig().with_(tk=32).tk
            32
        """
        return dataclasses.replace(self, **changes)


def default_config(m: int, n: int, k: int, dtype: Any = "bfloat16", *,
                   num_sms: int = 132, b_transposed: bool = False) -> MatmulConfig:
    """A good starting configuration for an (m, k) @ (k, n) GEMM on Hopper.

    Large problems use 128x128 tiles (tk 64 for 16-bit inputs, 128 for fp8, 32 for
    tf32) in the persistent schedule, the fastest on the H200 for every square from
    2048 and every Qwen3-8B projection at M >= 2048 (benchmarks/results/sweep_h200_*);
    with fewer 128x128 tiles than half the SMs, M <= 128 uses 64x64 tiles and larger M
    64x128; when N has fewer 64-wide columns than a quarter of the SMs (the k/v
    projection) 16-bit 16 < M <= 128 uses 64x32 tiles 256 deep. 16-bit 1 < M <= 16
    computes 16x64 tiles 512 deep transposed (``swap_ab``), and so does M = 1 unless N
    is narrow or wide; those, and fp32 or fp8 at M = 1, use the GEMV kernel (16-column
    panels 1024 deep when N is narrow; fp32 then splits K in one launch,
    ``split_mode="atomic"``). fp32 and fp8 at M <= 16 use tm = 16 tiles.
    ``b_transposed``: B is the ``.T`` view of an (N, K) weight; M = 1 then streams
    whole weight rows (``gemv_rows_kernel``), ``tn`` rows per block.

    Example:
        >>> default_config(8192, 8192, 8192).schedule, default_config(1, 12288, 4096).schedule
        ('persistent', 'gemv')
        >>> default_config(1, 4096, 4096, b_transposed=True).tn
        16
        >>> default_config(16, 1024, 4096).swap_ab
        True
    """
    name = _dtype_name(dtype)
    if m == 1 and b_transposed:
        # 16 weight rows of 512 per step, two blocks per SM: the fastest of 24 configs
        # on the H200 for q/o, gate/up and down (sweep3_h200_*.json); 4 rows when 16
        # would leave SMs without a block (k/v, N = 1024)
        tk = {"float32": 256}.get(name, 1024 if name in _FP8 else 512)
        tn = 16 if n // 16 >= num_sms else 4
        return MatmulConfig(tm=1, tn=tn, tk=tk, schedule="gemv", occupancy=2)
    # Skinny problems read B once and are bound by memory: on the H200 one launch with
    # no split-K was fastest for every Qwen3-8B projection at M = 1 and 16, with wide
    # tiles only when they still give half the SMs a block (sweep_h200_*.json).
    wide = n // 128 >= num_sms // 2
    narrow = -(-n // 64) < num_sms // 4   # 64-wide panels leave most SMs idle (k/v)
    if m == 1:
        if narrow and name in ("bfloat16", "float16"):
            # 16-column panels with 1024-deep K steps: 64 blocks for k/v (N = 1024),
            # 9.1 us against 11.4 for one-launch split-K and cuBLAS's 9.5 (sweep10_h200_*)
            return MatmulConfig(tm=1, tn=16, tk=1024, schedule="gemv")
        if narrow and name not in _FP8:
            # fp32: slices of K summed in one launch (sweep6-8_h200_*)
            tiles, k_tiles = -(-n // 128), -(-k // 128)
            split = max(1, min(num_sms // tiles, k_tiles // 2, 64))
            if split > 1:
                return MatmulConfig(tm=1, tn=128, tk=128, schedule="gemv", split_k=split,
                                    split_mode="atomic")
        if not wide and name in ("bfloat16", "float16"):
            # the M <= 16 swapped tiles below, A's one row zero-padded to 16: q/o and
            # down (N = 4096) in 13.5 and 29.8 us against 14.5 and 31.6 for the GEMV and
            # cuBLAS's 15.0 and 30.7 (sweep17_h200_*); gate/up keeps the GEMV (28.5 us)
            return _swapped_decode_tiles(k)
        tn, tk = (128, 64) if wide else (64, 128)
        return MatmulConfig(tm=1, tn=tn, tk=tk * (2 if name in _FP8 else 1),
                            schedule="gemv")
    if m <= 16 and name in ("bfloat16", "float16"):
        # B^T A^T: 64 weight columns fill the MMA's 64 rows, the <= 16 tokens its 16
        # columns, 512 deep: the fastest of 11 swapped and split configs at M = 16 for
        # q/o, k/v and down, within 0.1% for gate/up (sweep16_h200_*): k/v 9.4 us against
        # 11.4-12.1 for the unswapped tiles (cuBLAS 9.3-9.9), q/o 13.2 against 14.2, down
        # 28.4 against 29.9
        return _swapped_decode_tiles(k)
    if m <= 128 and narrow and name in ("bfloat16", "float16"):
        # so few 64-wide columns that most SMs idle (k/v, N = 1024: 16-32 tiles): narrow,
        # deep tiles (A padded to 64 rows below M = 64): at M = 128 10.7-11.1 us against
        # 13.4 for 64x64x64 (cuBLAS 10.6-10.8; sweep10-11_h200_*)
        return MatmulConfig(tm=64, tn=32, tk=256)
    if m <= 16:
        tn, tk = (128, 128) if wide else (32, 256)
        return MatmulConfig(tm=16, tn=tn, tk=tk)
    tk = {"float32": 32}.get(name, 128 if name in _FP8 else 64)
    if m <= 64:
        return MatmulConfig(tm=64, tn=128, tk=tk)
    tiles = -(-m // 128) * -(-n // 128)
    if m <= 128 and tiles < num_sms // 2:
        return MatmulConfig(tm=64, tn=64, tk=tk)      # more blocks for a skinny problem
    if tiles < num_sms // 2:
        # a small problem (1024^2: 64 tiles of 128x128): 64x128 tiles give every SM a
        # block, 8.1-8.4 vs 11.6 us at 1024^3 (torch 8.6-9.2; sweep8_h200_*)
        return MatmulConfig(tm=64, tn=128, tk=tk)
    # tf32 keeps the grouped schedule: its persistent loop spills registers on sm_90
    return MatmulConfig(tm=128, tn=128, tk=tk,
                        schedule="grouped" if name == "float32" else "persistent")


def _swapped_decode_tiles(k: int) -> MatmulConfig:
    """The swapped 16x64 tiles of decode-sized M: 512 deep, or K rounded up (>= 16)."""
    return MatmulConfig(tm=16, tn=64, tk=min(512, max(16, _pow2_ceil(k))), swap_ab=True)


def search_space(m: int, n: int, k: int, dtype: Any = "bfloat16", *,
                 b_transposed: bool = False) -> list[MatmulConfig]:
    """Configurations worth timing for one GEMM shape on Hopper (the default first).

    Tiles, schedules (grouped / persistent), group sizes and load-latency hints for
    large problems; narrow deep tiles for M <= 128; GEMV or split-K variants (both
    split modes) for M <= 16.

    Example:
        >>> space = search_space(4096, 4096, 4096)
        >>> space[0] == default_config(4096, 4096, 4096), len(space) > 10
        (True, True)
    """
    base = default_config(m, n, k, dtype, b_transposed=b_transposed)
    space = [base]

    def add(cfg: MatmulConfig) -> None:
        if cfg not in space:
            space.append(cfg)

    if m == 1 and b_transposed:       # rows of the weight per block, K step, occupancy
        for tn in (2, 4, 8, 16, 32):
            for tk in (256, 512, 1024):
                add(base.with_(tn=tn, tk=tk))
        for occ in (2, 4):
            add(base.with_(occupancy=occ))
        return space
    if m <= 128:   # narrow deep tiles (sweep10-11_h200_*: the k/v projection)
        if m == 1:
            for tn, tk in ((16, 512), (16, 1024), (32, 256), (64, 128), (64, 256),
                           (128, 64)):
                add(MatmulConfig(tm=1, tn=tn, tk=tk, schedule="gemv"))
        else:
            for tn in (16, 32):
                add(MatmulConfig(tm=64, tn=tn, tk=256))
    if m <= 16:   # transposed tiles (swap_ab) and the unswapped 16-row ones
        for tn, tk in ((64, 256), (64, 512), (128, 256)):
            for lat in (None, 4):
                add(MatmulConfig(tm=16, tn=tn, tk=tk, latency=lat, swap_ab=True))
        for tn, tk in ((32, 256), (128, 128)):
            add(MatmulConfig(tm=16, tn=tn, tk=tk))
    if m <= 16:
        # split-K variants of the default (of the GEMV at M = 1, swapped or not)
        split_base = MatmulConfig(tm=1, tn=64, tk=128, schedule="gemv") \
            if m == 1 and base.schedule != "gemv" else base
        for tn in (32, 64, 128):
            fill = _split_for(n, k, tn, split_base.tk, 132)
            for split in sorted({1, 2, fill, 2 * fill}):
                sched = "gemv" if m == 1 else ("splitk" if split > 1 else "grouped")
                add(split_base.with_(tn=tn, split_k=split, schedule=sched,
                                     split_mode="launch"))
                if split > 1:
                    add(split_base.with_(tn=tn, split_k=split, schedule=sched,
                                         split_mode="atomic"))
        return space
    for tm, tn in ((128, 128), (128, 256), (256, 128), (64, 128), (128, 64), (64, 64)):
        for sched in ("grouped", "persistent"):
            for group_m in (8, 16):
                add(base.with_(tm=tm, tn=tn, schedule=sched, group_m=group_m))
    for lat in (2, 4, 8):
        add(base.with_(latency=lat))
    add(base.with_(tk=2 * base.tk))
    add(base.with_(occupancy=2, tm=64))
    return space


def _split_for(n: int, k: int, tn: int, tk: int, num_sms: int) -> int:
    """K slices so that (n / tn) * slices fills two blocks per SM, >= 2 K tiles each."""
    blocks = -(-n // tn)
    k_tiles = -(-k // tk)
    want = -(-2 * num_sms // blocks)
    return max(1, min(want, k_tiles // 2, 64))


# ======================================================================================
# device-side helpers (plain cuTile, inlined into the kernels)


def zero_padded_load(arr, index, shape, order, LAT):
    """``ct.load`` of a zero-padded tile; LAT > 0 passes cuTile's latency hint, 0 none
    (the hint is a compile-time choice: the branch folds). Shared by the GEMM and
    attention kernels.

    Example:
        >>> zero_padded_load(a, (m, k), (128, 64), "C", 0)         # doctest: +SKIP
    """
    if LAT > 0:
        return ct.load(arr, index=index, shape=shape, order=order,
                       padding_mode=ct.PaddingMode.ZERO, latency=LAT)
    return ct.load(arr, index=index, shape=shape, order=order,
                   padding_mode=ct.PaddingMode.ZERO)


def _load_a(a, m, k, TM, TK, LAT):
    """A's (TM, TK) tile (m, k), zero-padded; LAT > 0 passes the latency hint."""
    return zero_padded_load(a, (m, k), (TM, TK), "C", LAT)


def _load_b(b, k, n, TK, TN, TRANS_B, LAT):
    """B's (TK, TN) tile (k, n); with TRANS_B, ``b`` holds B^T (N, K), read K-major."""
    return zero_padded_load(b, (k, n), (TK, TN), (1, 0) if TRANS_B else "C", LAT)


def _mma_step(x, y, acc, FAST_ACC):
    """acc += x @ y on the tensor cores (fp32 operands as tf32)."""
    if x.dtype == ct.float32:
        x = x.astype(ct.tfloat32)
        y = y.astype(ct.tfloat32)
    return ct.mma(x, y, acc, use_fast_acc=FAST_ACC)


def _load_bt(b, k, n, TK, TN, TRANS_B, LAT):
    """B^T's (TN, TK) tile (n, k): _load_b's tile, transposed by the load itself."""
    return zero_padded_load(b, (n, k), (TN, TK), "C" if TRANS_B else (1, 0), LAT)


def _mainloop(a, b, m, n, k_begin, k_end, TM, TN, TK, TRANS_B, LAT, FAST_ACC, SWAP):
    """fp32 (TM, TN) tile of A[m-rows, K tiles k_begin..k_end) @ B[..., n-cols].

    SWAP accumulates the transposed tile B^T A^T, (TN, TM), and transposes it once at
    the end: with M <= 16 the weight's columns then fill the MMA's 64 rows instead of
    zero padding (the k/v projection at M = 16: 9.5 against 12.1 us on the H200,
    benchmarks/results/skinny_probe_h200_2026-11-30c.json). The small A^T tile is read
    without the latency hint.
    """
    if SWAP:
        acc_t = ct.full((TN, TM), 0, dtype=ct.float32)
        for k in range(k_begin, k_end):
            y = _load_bt(b, k, n, TK, TN, TRANS_B, LAT)
            x = ct.load(a, index=(k, m), shape=(TK, TM), order=(1, 0),
                        padding_mode=ct.PaddingMode.ZERO)
            acc_t = _mma_step(y, x, acc_t, FAST_ACC)
        return ct.transpose(acc_t)
    acc = ct.full((TM, TN), 0, dtype=ct.float32)
    for k in range(k_begin, k_end):
        x = _load_a(a, m, k, TM, TK, LAT)
        y = _load_b(b, k, n, TK, TN, TRANS_B, LAT)
        acc = _mma_step(x, y, acc, FAST_ACC)
    return acc


def _activate(x, ACT):
    """The fused activation in fp32. ACT: 0 none, 1 relu, 2 gelu (tanh form, as
    x * sigmoid(2u): no cancellation in 1 + tanh(u) for negative x), 3 silu, 4 gelu
    (erf form; cuTile has no erf: Abramowitz-Stegun 7.1.26 for erfc, |error| < 1.5e-7)."""
    if ACT == 1:
        x = ct.maximum(x, 0.0)
    elif ACT == 2:
        u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        x = x / (1.0 + ct.exp(-2.0 * u))
    elif ACT == 3:
        x = x / (1.0 + ct.exp(-x))
    elif ACT == 4:
        z = ct.abs(x) * 0.7071067811865476
        t = 1.0 / (1.0 + 0.3275911 * z)
        poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (
            -1.453152027 + t * 1.061405429))))
        erfc = poly * ct.exp(-z * z)              # erfc(|x| / sqrt(2))
        x = 0.5 * x * ct.where(x >= 0.0, 2.0 - erfc, erfc)
    return x


def _epilogue(acc, bias, n, TN, alpha, SCALE, HAS_BIAS, ACT):
    """alpha * acc + bias[n-cols], then the activation; all in fp32."""
    if SCALE:
        acc = acc * alpha
    if HAS_BIAS:
        bt = ct.load(bias, index=(n,), shape=(TN,), padding_mode=ct.PaddingMode.ZERO)
        acc = acc + ct.reshape(bt.astype(ct.float32), (1, TN))
    return _activate(acc, ACT)


# ======================================================================================
# kernels


@tl.kernel
def matmul_kernel(c: tl.Out, a: tl.In, b: tl.In, bias: tl.In, res: tl.In, alpha: float,
            TK: ct.Constant[int], TRANS_B: ct.Constant[bool], LAT: ct.Constant[int],
            FAST_ACC: ct.Constant[bool], SWAP: ct.Constant[bool], SCALE: ct.Constant[bool],
            HAS_BIAS: ct.Constant[bool], ACT: ct.Constant[int], HAS_RES: ct.Constant[bool]):
    """C = act(alpha * A @ B + bias) + res; one (tm, tn) tile of C per block.

    The schedule of ``c``'s partition (row-major or grouped) picks each block's tile.
    ``bias`` and ``res`` are only read when HAS_BIAS / HAS_RES (pass any small tensor
    otherwise). With TRANS_B, ``b`` is B^T, shape (N, K). SWAP computes the tile as
    (B^T A^T)^T (``MatmulConfig.swap_ab``).

    Example:
        >>> matmul_kernel(c.partition((128, 128), schedule=tl.grouped(8)), a, b,
        ...               a, a, 1.0, 64, False, 0, False, False, False, False, 0,
        ...               False)  # doctest: +SKIP
    """
    tm, tn = c.tile_shape
    m, n = c.tile_index
    acc = _mainloop(a, b, m, n, 0, ct.cdiv(a.shape[1], TK), tm, tn, TK, TRANS_B, LAT,
                    FAST_ACC, SWAP)
    acc = _epilogue(acc, bias, n, tn, alpha, SCALE, HAS_BIAS, ACT)
    if HAS_RES:
        acc = acc + tl.load_like(res, c).astype(ct.float32)
    c.store(acc.astype(c.dtype))


@tl.kernel
def persistent_matmul_kernel(c: tl.Out, a: tl.In, b: tl.In, bias: tl.In, res: tl.In,
                       alpha: float, TK: ct.Constant[int], TRANS_B: ct.Constant[bool],
                       LAT: ct.Constant[int], FAST_ACC: ct.Constant[bool],
                       SWAP: ct.Constant[bool], SCALE: ct.Constant[bool],
                       HAS_BIAS: ct.Constant[bool], ACT: ct.Constant[int],
                       HAS_RES: ct.Constant[bool]):
    """:func:`matmul_kernel` with a fixed set of blocks, each looping over its tiles.

    Example:
        >>> persistent_matmul_kernel(c.partition((128, 128), schedule=tl.persistent(
        ...     group_m=8)), a, b, a, a, 1.0, 64, False, 0, False, False, False, False,
        ...     0, False)  # doctest: +SKIP
    """
    tm, tn = c.tile_shape
    num_k = ct.cdiv(a.shape[1], TK)
    for t in c.tiles():
        m, n = c.tile_index_of(t)
        acc = _mainloop(a, b, m, n, 0, num_k, tm, tn, TK, TRANS_B, LAT, FAST_ACC, SWAP)
        acc = _epilogue(acc, bias, n, tn, alpha, SCALE, HAS_BIAS, ACT)
        if HAS_RES:
            acc = acc + tl.load_like(res, c, at=t).astype(ct.float32)
        c.store(acc.astype(c.dtype), at=t)


@tl.kernel
def batched_matmul_kernel(c: tl.Out, a: tl.In, b: tl.In, bias: tl.In, res: tl.In, alpha: float,
                    TK: ct.Constant[int], B_BATCHED: ct.Constant[bool],
                    LAT: ct.Constant[int], SCALE: ct.Constant[bool],
                    HAS_BIAS: ct.Constant[bool], ACT: ct.Constant[int],
                    HAS_RES: ct.Constant[bool]):
    """Batched C[g] = act(alpha * A[g] @ B[g] + bias) + res[g]; tile (1, tm, tn) of C.

    ``c`` is partitioned (1, tm, tn), usually with ``tl.grouped(group_m)`` (grouped
    within each batch); ``b`` is (G, K, N), or (K, N) shared by every batch when
    B_BATCHED is False.

    Example:
        >>> batched_matmul_kernel(c.partition((1, 128, 128), schedule=tl.grouped(8)),
        ...                       a, b, a, a, 1.0, 64, True, 0, False, False, 0,
        ...                       False)  # doctest: +SKIP
    """
    _, tm, tn = c.tile_shape
    g, m, n = c.tile_index
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for k in range(ct.cdiv(a.shape[2], TK)):
        x = zero_padded_load(a, (g, m, k), (1, tm, TK), "C", LAT)
        if B_BATCHED:
            y = ct.reshape(zero_padded_load(b, (g, k, n), (1, TK, tn), "C", LAT), (TK, tn))
        else:
            y = _load_b(b, k, n, TK, tn, False, LAT)
        acc = _mma_step(ct.reshape(x, (tm, TK)), y, acc, False)
    acc = _epilogue(acc, bias, n, tn, alpha, SCALE, HAS_BIAS, ACT)
    if HAS_RES:
        acc = acc + ct.reshape(tl.load_like(res, c), (tm, tn)).astype(ct.float32)
    c.store(ct.reshape(acc.astype(c.dtype), (1, tm, tn)))


def _gemv_loop(a, b, m, n, k_begin, k_end, TN, TK, TRANS_B, LAT):
    """fp32 (1, TN) row m of A @ B over K tiles [k_begin, k_end), on the CUDA cores.

    The products accumulate element-wise in a (TK, TN) tile and are reduced over K once,
    after the loop: a reduction per step would cost a cross-thread exchange per tile.
    """
    acc = ct.full((TK, TN), 0, dtype=ct.float32)
    for k in range(k_begin, k_end):
        x = _load_a(a, m, k, 1, TK, LAT)
        w = _load_b(b, k, n, TK, TN, TRANS_B, LAT)
        acc = acc + ct.reshape(x.astype(ct.float32), (TK, 1)) * w.astype(ct.float32)
    return ct.sum(acc, axis=0, keepdims=True)


def _split_slice(a, b, s, m, n, PER, TM, TN, TK, TRANS_B, LAT, FAST_ACC, SWAP):
    """fp32 (TM, TN) tile (m, n) over K slice s (K tiles [s * PER, (s + 1) * PER)): the
    GEMV loop for TM == 1, the tensor cores otherwise."""
    k_begin = s * PER
    k_end = min(k_begin + PER, ct.cdiv(a.shape[1], TK))
    if TM == 1:
        acc = _gemv_loop(a, b, m, n, k_begin, k_end, TN, TK, TRANS_B, LAT)
    else:
        acc = _mainloop(a, b, m, n, k_begin, k_end, TM, TN, TK, TRANS_B, LAT, FAST_ACC,
                        SWAP)
    return acc


@tl.kernel
def splitk_partial_kernel(p: tl.Out, a: tl.In, b: tl.In, TK: ct.Constant[int],
                    K_TILES_PER_SPLIT: int, TRANS_B: ct.Constant[bool],
                    LAT: ct.Constant[int], FAST_ACC: ct.Constant[bool],
                    SWAP: ct.Constant[bool]):
    """Split-K phase 1: P[s] = A[:, K slice s] @ B[K slice s, :] in fp32.

    ``p`` is the (splits, M, N) fp32 scratch partitioned (1, tm, tn); block (s, m, n)
    sums K tiles [s * K_TILES_PER_SPLIT, (s + 1) * K_TILES_PER_SPLIT). With tm == 1
    (GEMV) it multiplies on the CUDA cores, a dot product per column, instead of the
    tensor cores.

    Example:
        >>> splitk_partial_kernel(p.partition((1, 16, 64)), a, b, 128, 8, False, 0,
        ...                       False, False)  # doctest: +SKIP
    """
    _, tm, tn = p.tile_shape
    s, m, n = p.tile_index
    acc = _split_slice(a, b, s, m, n, K_TILES_PER_SPLIT, tm, tn, TK, TRANS_B, LAT, FAST_ACC,
                       SWAP)
    p.store(ct.reshape(acc, (1, tm, tn)))


@tl.kernel
def splitk_reduce_kernel(c: tl.Out, p: tl.In, bias: tl.In, res: tl.In, alpha: float,
                   SCALE: ct.Constant[bool], HAS_BIAS: ct.Constant[bool],
                   ACT: ct.Constant[int], HAS_RES: ct.Constant[bool]):
    """Split-K phase 2: C = act(alpha * sum_s P[s] + bias) + res, one tile per block.

    Example:
        >>> splitk_reduce_kernel(c.partition((16, 64)), p, a, a, 1.0, False, False, 0,
        ...                      False)  # doctest: +SKIP
    """
    tm, tn = c.tile_shape
    m, n = c.tile_index
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for s in range(p.shape[0]):
        part = ct.load(p, index=(s, m, n), shape=(1, tm, tn),
                       padding_mode=ct.PaddingMode.ZERO)
        acc = acc + ct.reshape(part, (tm, tn))
    acc = _epilogue(acc, bias, n, tn, alpha, SCALE, HAS_BIAS, ACT)
    if HAS_RES:
        acc = acc + tl.load_like(res, c).astype(ct.float32)
    c.store(acc.astype(c.dtype))


@tl.kernel(unsafe=True)
def splitk_atomic_kernel(c: tl.Raw, a: tl.In, b: tl.In, bias: tl.In, res: tl.In, ws: tl.Raw,
                   count: tl.Raw, alpha: float, TM: ct.Constant[int], TN: ct.Constant[int],
                   TK: ct.Constant[int], K_TILES_PER_SPLIT: int, TRANS_B: ct.Constant[bool],
                   LAT: ct.Constant[int], FAST_ACC: ct.Constant[bool],
                   SWAP: ct.Constant[bool], SCALE: ct.Constant[bool],
                   HAS_BIAS: ct.Constant[bool], ACT: ct.Constant[int],
                   HAS_RES: ct.Constant[bool]):
    """Split-K in one launch: block (s, m, n) adds its K slice of tile (m, n) into an fp32
    workspace with atomics; the last of the tile's blocks to arrive writes C.

    Why ``unsafe=True``: the blocks of one output tile meet in memory (the workspace
    ``ws`` and the per-tile arrival counter ``count``), which a partition cannot express.
    Every slice adds into ``ws`` and ``count`` with atomics, and ``c``'s tile (m, n) is
    written by exactly one block: the one whose ``atomic_add`` on ``count`` returned
    ``splits - 1``. That add is acquire-release, so the other blocks' (relaxed) adds to
    ``ws``, made before their own release on ``count``, are visible to it. It reads the
    sums back with a plain load (no block touches that tile of ``ws`` any more), stores
    zeros there and resets the counter, so ``ws`` and ``count`` are all zeros again after
    every launch, as the next launch needs them (``tests/kernels/test_matmul_splitk.py``
    runs it under the race detector in shuffled block orders). Reading back with
    ``atomic_xchg`` instead cost 5-10x the whole GEMM on the H200: its default
    acquire-release order fences every element.
    The grid is (splits, tiles of M, tiles of N); ``ws`` is (M, N) fp32 and ``count``
    holds one int32 per tile of C.

    Example:
        >>> splitk_atomic_kernel(c, a, b, a, a, ws, count, 1.0, 16, 64, 128, 8, False,
        ...                      0, False, False, False, False, 0, False,
        ...                      grid=(4, 1, 16))  # doctest: +SKIP
    """
    s = ct.bid(0)
    m = ct.bid(1)
    n = ct.bid(2)
    acc = _split_slice(a, b, s, m, n, K_TILES_PER_SPLIT, TM, TN, TK, TRANS_B, LAT, FAST_ACC,
                       SWAP)
    ws.tiled_view((TM, TN)).atomic_store_add((m, n), acc)
    tile = m * ct.num_blocks(2) + n
    arrived = ct.atomic_add(count, tile, 1)
    if arrived == ct.num_blocks(0) - 1:
        # the acquire above orders these plain (non-TMA) accesses after every slice's adds
        total = ct.load(ws, index=(m, n), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO,
                        allow_tma=False)
        ct.store(ws, index=(m, n), tile=ct.full((TM, TN), 0, dtype=ct.float32),
                 allow_tma=False)
        out = _epilogue(total, bias, n, TN, alpha, SCALE, HAS_BIAS, ACT)
        if HAS_RES:
            out = out + ct.load(res, index=(m, n), shape=(TM, TN),
                                padding_mode=ct.PaddingMode.ZERO).astype(ct.float32)
        ct.store(c, index=(m, n), tile=out.astype(c.dtype))
        ct.atomic_xchg(count, tile, 0)


@tl.kernel
def gemv_kernel(c: tl.Out, a: tl.In, b: tl.In, bias: tl.In, res: tl.In, alpha: float,
          TK: ct.Constant[int], TRANS_B: ct.Constant[bool], LAT: ct.Constant[int],
          SCALE: ct.Constant[bool], HAS_BIAS: ct.Constant[bool], ACT: ct.Constant[int],
          HAS_RES: ct.Constant[bool]):
    """Row-vector times matrix, c (1, N) = act(alpha * a (1, K) @ b + bias) + res.

    Memory-bound: each block streams a (K, tn) column panel of B once and keeps (TK, tn)
    fp32 partial products, reduced once at the end; ``c`` is partitioned (1, tn).

    Example:
        >>> gemv_kernel(c.partition((1, 64)), a, b, a, a, 1.0, 256, False, 0, False,
        ...             False, 0, False)  # doctest: +SKIP
    """
    _, tn = c.tile_shape
    m, n = c.tile_index
    acc = _gemv_loop(a, b, m, n, 0, ct.cdiv(a.shape[1], TK), tn, TK, TRANS_B, LAT)
    acc = _epilogue(acc, bias, n, tn, alpha, SCALE, HAS_BIAS, ACT)
    if HAS_RES:
        acc = acc + tl.load_like(res, c).astype(ct.float32)
    c.store(acc.astype(c.dtype))


@tl.kernel
def gemv_rows_kernel(c: tl.Out, a: tl.In, w: tl.In, bias: tl.In, res: tl.In, alpha: float,
               TK: ct.Constant[int], LAT: ct.Constant[int], SCALE: ct.Constant[bool],
               HAS_BIAS: ct.Constant[bool], ACT: ct.Constant[int],
               HAS_RES: ct.Constant[bool]):
    """Decode GEMV on a row-major weight: c (1, N) = act(alpha * w (N, K) @ a[0] + bias) + res.

    Each block owns ``tn`` outputs and streams their ``tn`` weight rows along K in
    contiguous (tn, TK) tiles (the layout the weight is stored in, so every load is a
    run of whole rows), multiplying on the CUDA cores into a (tn, TK) fp32 accumulator
    that is reduced once, after the loop. One launch, no split-K scratch: the tile
    height picks the block count. ``c`` is partitioned (1, tn).

    Example:
        >>> gemv_rows_kernel(c.partition((1, 8)), x, w, x, x, 1.0, 512, 0, False, False,
        ...                  0, False)  # doctest: +SKIP
    """
    _, tn = c.tile_shape
    m, n = c.tile_index
    acc = ct.full((tn, TK), 0, dtype=ct.float32)
    for k in range(ct.cdiv(a.shape[1], TK)):
        x = _load_a(a, m, k, 1, TK, LAT)
        wt = _load_a(w, n, k, tn, TK, LAT)
        acc = acc + wt.astype(ct.float32) * x.astype(ct.float32)
    out = ct.reshape(ct.sum(acc, axis=1), (1, tn))
    out = _epilogue(out, bias, n, tn, alpha, SCALE, HAS_BIAS, ACT)
    if HAS_RES:
        out = out + tl.load_like(res, c).astype(ct.float32)
    c.store(out.astype(c.dtype))


def _variant(kernel: tl.Kernel, cfg: MatmulConfig) -> tl.Kernel:
    """``kernel`` with ``cfg``'s cuTile hints (itself when it has none)."""
    return hinted(kernel, occupancy=cfg.occupancy, num_ctas=cfg.num_ctas,
                  num_worker_warps=cfg.num_worker_warps)


# ======================================================================================
# host side


def _dtype_name(dtype: Any) -> str:
    from tilelab.compiler.dtypes import dtype_name

    return dtype_name(dtype)


def _as_tensor(x: Any, name: str, who: str = "matmul") -> tl.Tensor:
    """A tl.Tensor, or a foreign array borrowed where it lives (as a launch does)."""
    if isinstance(x, tl.Tensor):
        return x
    try:
        return _wrap_array(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{who}: {name} must be a tilelab tensor or an array, got "
                        f"{type(x).__name__} ({e})") from None


@dataclass(frozen=True)
class _Epilogue:
    """Epilogue operands and flags, as the kernels take them (tensors or specs)."""

    bias: Any
    res: Any
    alpha: float = 1.0
    has_bias: bool = False
    act: int = 0
    has_res: bool = False

    def args(self) -> tuple:
        return (self.bias, self.res, self.alpha)

    def flags(self) -> tuple:
        return (self.alpha != 1.0, self.has_bias, self.act, self.has_res)


_PLACEHOLDERS: dict[tuple[str, int], tl.Tensor] = {}


def _placeholder(device: str, ndim: int) -> tl.Tensor:
    """A tiny tensor passed for an absent bias/residual (never read)."""
    t = _PLACEHOLDERS.get((device, ndim))
    if t is None:
        t = _PLACEHOLDERS[(device, ndim)] = register_constant(
            tl.zeros((1,) * ndim, "float32", device=device))
    return t


def _epilogue_operand(x: Any, name: str, shape: tuple[int, ...], device: str,
                      who: str) -> tl.Tensor:
    t = _as_tensor(x, name, who)
    if t.dtype.name not in _FLOAT_INPUTS:
        raise TypeError(f"{who}: {name} must be float16, bfloat16 or float32, got "
                        f"{t.dtype.name}")
    if tuple(t.shape) != shape:
        what = "one value per output column" if name == "bias" else "the output's shape"
        raise ValueError(f"{who}: {name} has shape {t.shape}; it must be {shape} ({what})")
    if t.device != device:
        raise ValueError(f"{who}: {name} lives on {t.device}, the operands on {device}")
    return t


def _epilogue_args(out_shape: tuple[int, ...], device: str, bias: Any, residual: Any,
                   activation: str | None, alpha: float, who: str) -> _Epilogue:
    if activation not in ACTIVATIONS:
        raise ValueError(f"{who}: activation={activation!r} is not one of "
                         f"{', '.join(repr(k) for k in ACTIVATIONS)}")
    if bias is not None:
        bias = _epilogue_operand(bias, "bias", (out_shape[-1],), device, who)
    if residual is not None:
        residual = _epilogue_operand(residual, "residual", tuple(out_shape), device, who)
    return _Epilogue(bias if bias is not None else _placeholder(device, 1),
                     residual if residual is not None
                     else _placeholder(device, len(out_shape)),
                     float(alpha), bias is not None, ACTIVATIONS[activation],
                     residual is not None)


def _input_dtype(a: Any, b: Any, who: str) -> str:
    da, db = _dtype_name(a.dtype), _dtype_name(b.dtype)
    if da not in _FLOAT_INPUTS + _FP8 or db not in _FLOAT_INPUTS + _FP8:
        raise TypeError(f"{who}: inputs must be float16, bfloat16, float32 or fp8 "
                        f"(float8_e4m3fn, float8_e5m2); got {da} and {db}")
    if da != db:
        raise TypeError(f"{who}: a is {da} but b is {db}; cast one of them (cuTile's mma "
                        "multiplies equal types, fp8 kinds included)")
    return da


def _check_arch(device: str, dtype: str, who: str) -> None:
    if dtype in _FP8 and device != "cpu":
        from tilelab.runtime.device import current_arch

        arch = current_arch() or ""
        digits = "".join(ch for ch in arch if ch.isdigit())
        if digits and int(digits) < 89:
            raise TypeError(f"{who}: fp8 inputs need sm_89 or newer (this GPU is {arch})")


def _out_dtype(out_dtype: Any, in_dtype: str, who: str) -> str:
    want = _dtype_name(out_dtype) if out_dtype is not None else (
        "bfloat16" if in_dtype in _FP8 else in_dtype)
    if want not in _OUT_DTYPES:
        raise TypeError(f"{who}: out_dtype={want} is not supported; choose one of "
                        f"{', '.join(_OUT_DTYPES)}")
    return want


def _output(out: Any, shape: tuple[int, ...], out_dtype: Any, in_dtype: str, device: str,
            who: str) -> tl.Tensor:
    if out is None:
        return tl.empty(shape, _out_dtype(out_dtype, in_dtype, who), device=device)
    out = _as_tensor(out, "out", who)
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{who}: out has shape {out.shape}, the product has {shape}")
    if out_dtype is not None and out.dtype.name != _dtype_name(out_dtype):
        raise TypeError(f"{who}: out is {out.dtype.name} but out_dtype="
                        f"{_dtype_name(out_dtype)}")
    if out.dtype.name not in _OUT_DTYPES:
        raise TypeError(f"{who}: out must be one of {', '.join(_OUT_DTYPES)}, got "
                        f"{out.dtype.name}")
    if out.device != device:
        raise ValueError(f"{who}: out lives on {out.device}, the operands on {device}")
    return out


def _b_operand(b: tl.Tensor) -> tuple[tl.Tensor, bool]:
    """(tensor to pass, TRANS_B): a column-major B (a .T view) is read K-major."""
    if b.shape[0] > 1 and b.shape[1] > 1 and b.strides[0] == 1 and b.strides[1] != 1:
        return b.T, True
    return b, False


def _sms(device: str) -> int:
    if device == "cpu":
        return 132      # plan for an H200, so CPU runs take the GPU's code paths
    from tilelab.runtime.device import num_sms

    return num_sms(device)


def _launches_2d(cfg: MatmulConfig, c: Any, a: Any, bop: Any, trans_b: bool,
                 epi: _Epilogue, fast: bool, alloc: Callable,
                 scratch_zeros: Callable | None = None) -> list[tuple]:
    """The (kernel, args) launches of a 2-D GEMM (tensors, or specs for compiling).

    ``alloc(shape, dtype)`` makes scratch; ``scratch_zeros(shape, dtype)`` the zeroed
    self-cleaning workspace of atomic split-K (default: ``alloc``)."""
    lat = cfg.latency or 0
    m, n = c.shape
    sched = cfg.schedule
    if sched == "gemv" and m != 1:
        raise ValueError(f"matmul: schedule 'gemv' needs M == 1, got M = {m}")
    if sched in ("gemv", "splitk") and cfg.split_k > 1:
        k_tiles = -(-a.shape[1] // cfg.tk)
        per = -(-k_tiles // cfg.split_k)
        tm = 1 if sched == "gemv" else cfg.tm
        splits = -(-k_tiles // per)                               # no empty K slice
        if cfg.split_mode == "atomic":
            zeros = scratch_zeros or alloc
            (mt, nt), sums, counts = _atomic_workspaces(m, n, cfg)
            kern = _variant(splitk_atomic_kernel, cfg).with_grid((splits, mt, nt))
            return [(kern, (c, a, bop, epi.bias, epi.res, zeros(sums, "float32"),
                            zeros(counts, "int32"), epi.alpha, tm, cfg.tn, cfg.tk, per,
                            trans_b, lat, fast, cfg.swap_ab, *epi.flags()))]
        scratch = alloc((splits, m, n), "float32")
        return [(_variant(splitk_partial_kernel, cfg),
                 (scratch.partition((1, tm, cfg.tn)), a, bop, cfg.tk, per, trans_b, lat,
                  fast, cfg.swap_ab)),
                (splitk_reduce_kernel,
                 (c.partition((tm, cfg.tn)), scratch, *epi.args(), *epi.flags()))]
    if sched == "gemv" and trans_b:
        # the weight is stored (N, K): stream whole rows of it (see gemv_rows_kernel)
        return [(_variant(gemv_rows_kernel, cfg),
                 (c.partition((1, cfg.tn)), a, bop, *epi.args(), cfg.tk, lat,
                  *epi.flags()))]
    if sched == "gemv":
        return [(_variant(gemv_kernel, cfg),
                 (c.partition((1, cfg.tn)), a, bop, *epi.args(), cfg.tk, trans_b, lat,
                  *epi.flags()))]
    if sched == "persistent":
        part = c.partition((cfg.tm, cfg.tn), schedule=tl.persistent(cfg.num_blocks,
                                                                    cfg.group_m))
        kern = _variant(persistent_matmul_kernel, cfg)
    else:
        schedule = tl.grouped(cfg.group_m) if sched == "grouped" else tl.row_major
        part = c.partition((cfg.tm, cfg.tn), schedule=schedule)
        kern = _variant(matmul_kernel, cfg)
    return [(kern, (part, a, bop, *epi.args(), cfg.tk, trans_b, lat, fast, cfg.swap_ab,
                    *epi.flags()))]


def _atomic_workspaces(m: int, n: int, cfg: MatmulConfig) -> tuple:
    """Atomic split-K's tile grid of C and the shapes of its two workspaces: the fp32
    sums (M, N) and one int32 arrival counter per tile."""
    tm = 1 if cfg.schedule == "gemv" else cfg.tm
    mt, nt = -(-m // tm), -(-n // cfg.tn)
    return (mt, nt), (m, n), (mt * nt,)


def _workspace_ready(device: str, m: int, n: int, cfg: MatmulConfig) -> bool:
    """Whether atomic split-K can get its workspace: outside a graph capture it is made
    on first use; inside one only an existing workspace will do."""
    from tilelab.runtime.capture import current_graph

    if current_graph() is None:
        return True
    _, sums, counts = _atomic_workspaces(m, n, cfg)
    return has_workspace(device, sums, "float32") and has_workspace(device, counts, "int32")


def plan_matmul(a: Any, b: Any, *, out: Any = None, out_dtype: Any = None, bias: Any = None,
                activation: str | None = None, residual: Any = None, scale_a: float = 1.0,
                scale_b: float = 1.0, config: MatmulConfig | None = None) -> Plan:
    """Check the arguments of :func:`matmul` and plan its launches without running them.

    Example:
        >>> import tilelab as tl
        >>> a = tl.randn(40, 32, device="cpu", seed=0)
        >>> p = plan_matmul(a, a.T, config=MatmulConfig(tm=16, tn=16, tk=16))
        >>> [k.name for k, _ in p.launches], p.out.shape
        (['matmul_kernel'], (40, 40))
    """
    who = "matmul"
    a, b = _as_tensor(a, "a"), _as_tensor(b, "b")
    if a.ndim not in (1, 2) or b.ndim != 2:
        raise ValueError(f"{who}: a must be (M, K) or (K,) and b (K, N); got shapes "
                         f"{a.shape} and {b.shape} (use bmm for batches)")
    vector = a.ndim == 1
    a2 = a[None] if vector else a
    (m, k), (kb, n) = a2.shape, b.shape
    if k != kb:
        raise ValueError(f"{who}: inner dimensions differ: a is {a.shape}, b is {b.shape}")
    if a.device != b.device:
        raise ValueError(f"{who}: a lives on {a.device} but b on {b.device}")
    if k < 1:
        raise ValueError(f"{who}: K = 0 ({a.shape} @ {b.shape}): nothing to multiply")
    in_dtype = _input_dtype(a, b, who)
    _check_arch(a.device, in_dtype, who)
    if config is not None and not isinstance(config, MatmulConfig):
        raise TypeError(f"{who}: config must be a MatmulConfig, got {type(config).__name__}")
    bop, trans_b = _b_operand(b)
    cfg = config or default_config(m, n, k, in_dtype, num_sms=_sms(a.device),
                                   b_transposed=trans_b)
    out_t = _output(out, (n,) if vector else (m, n), out_dtype, in_dtype, a.device, who)
    if m == 0 or n == 0:
        return Plan(out_t, [])                  # an empty result needs no launch
    if vector and residual is not None:
        residual = _as_tensor(residual, "residual", who)
        residual = residual[None] if residual.ndim == 1 else residual
    epi = _epilogue_args((m, n), a.device, bias, residual, activation, scale_a * scale_b,
                         who)
    fast = bool(cfg.fast_acc and in_dtype in _FP8)
    dev = a.device
    if config is None and cfg.split_mode == "atomic" and cfg.split_k > 1 and \
            not _workspace_ready(dev, m, n, cfg):
        cfg = cfg.with_(split_k=1)      # in a graph capture: no allocation possible
    launches = _launches_2d(cfg, out_t[None] if vector else out_t, a2, bop, trans_b, epi,
                            fast, lambda shape, dt: tl.empty(shape, dt, device=dev),
                            lambda shape, dt: workspace(dev, shape, dt))
    return Plan(out_t, launches)


#: prepared calls (see tilelab.kernels._host): with ``out=`` given, a repeated call with
#: the same tensors relaunches the same argument objects (the runtime's fast path)
_MATMUL = CallCache("matmul")
_GEMV = CallCache("gemv")
_BMM = CallCache("bmm")


def matmul(a: Any, b: Any, *, out: Any = None, out_dtype: Any = None, bias: Any = None,
           activation: str | None = None, residual: Any = None, scale_a: float = 1.0,
           scale_b: float = 1.0, config: MatmulConfig | None = None, sync: bool = True,
           stream: Any = None) -> TensorResult:
    """``act(scale_a * scale_b * a @ b + bias) + residual`` with fp32 accumulation.

    ``a`` is (M, K) or (K,); ``b`` is (K, N) (a transposed view of an (N, K) weight is
    read K-major, the fast layout for fp8). Inputs: bf16, fp16, fp32 (tf32 tensor cores)
    or fp8 e4m3/e5m2 (with optional per-tensor dequantization scales). The output is
    ``out`` or a new tensor of ``out_dtype`` (default: the input dtype; bf16 for fp8).
    ``activation``: None, "relu", "gelu" (= "gelu_tanh"), "gelu_erf" or "silu".
    ``config`` overrides the tiles and schedule chosen by :func:`default_config`.
    ``sync=False`` launches without waiting (on ``stream``, default tilelab's) and
    returns ``(out, future)``; the future is the last launch's (split-K has two), which
    stream order makes cover the first (see :mod:`tilelab.kernels`).

    Example:
        >>> import tilelab as tl
        >>> a = tl.randn(5, 40, dtype="f16", device="cpu", seed=0)
        >>> w = tl.randn(40, 24, dtype="f16", device="cpu", seed=1)
        >>> y = matmul(a, w, bias=tl.zeros(24, device="cpu"), activation="relu",
        ...            config=MatmulConfig(tm=16, tn=32, tk=16))
        >>> bool((y.numpy().astype("float32") >= 0).all())
        True
    """
    return _MATMUL.prepare(plan_matmul, a, b, out=out, out_dtype=out_dtype, bias=bias,
                           activation=activation, residual=residual, scale_a=scale_a,
                           scale_b=scale_b, config=config).run(sync, stream)


def _plan_gemv(w: Any, x: Any, **kwargs: Any) -> Plan:
    """:func:`plan_matmul` of ``x`` with ``w.T``, after checking the GEMV shapes."""
    who = "gemv"
    w, x = _as_tensor(w, "w", who), _as_tensor(x, "x", who)
    if w.ndim != 2 or x.ndim != 1:
        raise ValueError(f"{who}: w must be (N, K) and x (K,); got {w.shape} and {x.shape}")
    if w.shape[1] != x.shape[0]:
        raise ValueError(f"{who}: w is {w.shape} but x has {x.shape[0]} elements")
    return plan_matmul(x, w.T, **kwargs)


def gemv(w: Any, x: Any, *, out: Any = None, out_dtype: Any = None, bias: Any = None,
         activation: str | None = None, residual: Any = None, scale_a: float = 1.0,
         scale_b: float = 1.0, config: MatmulConfig | None = None, sync: bool = True,
         stream: Any = None) -> TensorResult:
    """``act(w @ x + bias) + residual`` for a weight ``w`` (N, K) and a vector ``x`` (K,).

    The decode step of a linear layer (``nn.Linear`` keeps its weight as (N, K)): this is
    :func:`matmul` of ``x`` with ``w.T``, so the weight is streamed K-major by the GEMV
    kernel (split over K when N alone gives too few blocks). Returns an (N,) tensor;
    ``sync=False`` returns ``(out, future)`` as :func:`matmul` does.

    Example:
        >>> import tilelab as tl
        >>> w = tl.randn(48, 64, dtype="bf16", device="cpu", seed=0)
        >>> gemv(w, tl.randn(64, dtype="bf16", device="cpu", seed=1)).shape
        (48,)
    """
    return _GEMV.prepare(_plan_gemv, w, x, out=out, out_dtype=out_dtype, bias=bias,
                         activation=activation, residual=residual, scale_a=scale_a,
                         scale_b=scale_b, config=config).run(sync, stream)


def _bmm_config(m: int, dtype: str) -> MatmulConfig:
    """Tiles for batched GEMM: 128x128 (64 or 16 rows for short matrices)."""
    tm = 128 if m > 64 else 64 if m > 16 else 16
    return MatmulConfig(tm=tm, tn=128, tk=32 if dtype == "float32" else 64)


def _launches_bmm(cfg: MatmulConfig, c: Any, a: Any, b: Any, epi: _Epilogue) -> list[tuple]:
    if cfg.schedule not in ("grouped", "row_major"):
        raise ValueError(f"bmm: schedule {cfg.schedule!r} is not available for batches; "
                         "use 'grouped' or 'row_major'")
    if cfg.swap_ab:
        raise ValueError("bmm: swap_ab=True is not available for batches (matmul has it); "
                         "use swap_ab=False")
    schedule = tl.grouped(cfg.group_m) if cfg.schedule == "grouped" else tl.row_major
    return [(_variant(batched_matmul_kernel, cfg),
             (c.partition((1, cfg.tm, cfg.tn), schedule=schedule), a, b, *epi.args(),
              cfg.tk, b.ndim == 3, cfg.latency or 0, *epi.flags()))]


def plan_bmm(a: Any, b: Any, *, out: Any = None, out_dtype: Any = None, bias: Any = None,
             activation: str | None = None, residual: Any = None, scale_a: float = 1.0,
             scale_b: float = 1.0, config: MatmulConfig | None = None) -> Plan:
    """Check the arguments of :func:`bmm` and plan its launch without running it.

    Example:
        >>> import tilelab as tl
        >>> a = tl.randn(2, 8, 16, device="cpu", seed=0)
        >>> plan_bmm(a, tl.randn(16, 8, device="cpu")).out.shape
        (2, 8, 8)
    """
    who = "bmm"
    a, b = _as_tensor(a, "a", who), _as_tensor(b, "b", who)
    if a.ndim != 3 or b.ndim not in (2, 3):
        raise ValueError(f"{who}: a must be (G, M, K) and b (G, K, N) or (K, N); got "
                         f"{a.shape} and {b.shape}")
    g, m, k = a.shape
    kb, n = b.shape[-2:]
    if k != kb or (b.ndim == 3 and b.shape[0] != g):
        raise ValueError(f"{who}: shapes do not match: a is {a.shape}, b is {b.shape}")
    if a.device != b.device:
        raise ValueError(f"{who}: a lives on {a.device} but b on {b.device}")
    if k < 1:
        raise ValueError(f"{who}: K = 0 ({a.shape} @ {b.shape}): nothing to multiply")
    in_dtype = _input_dtype(a, b, who)
    if in_dtype in _FP8:
        raise TypeError(f"{who}: fp8 batches are not supported; call matmul per batch")
    cfg = config or _bmm_config(max(m, 1), in_dtype)
    out_t = _output(out, (g, m, n), out_dtype, in_dtype, a.device, who)
    if min(g, m, n) == 0:
        return Plan(out_t, [])
    epi = _epilogue_args((g, m, n), a.device, bias, residual, activation,
                         scale_a * scale_b, who)
    return Plan(out_t, _launches_bmm(cfg, out_t, a, b, epi))


def bmm(a: Any, b: Any, *, out: Any = None, out_dtype: Any = None, bias: Any = None,
        activation: str | None = None, residual: Any = None, scale_a: float = 1.0,
        scale_b: float = 1.0, config: MatmulConfig | None = None, sync: bool = True,
        stream: Any = None) -> TensorResult:
    """Batched ``a[g] @ b[g]`` with the epilogue of :func:`matmul`.

    ``a`` is (G, M, K); ``b`` is (G, K, N), or (K, N) shared by every batch. The output
    (G, M, N) is partitioned (1, tm, tn) and grouped per batch (``config.group_m``);
    fp8 inputs are not batched here (use :func:`matmul` per batch). ``sync=False``
    returns ``(out, future)`` as :func:`matmul` does.

    Example:
        >>> import tilelab as tl
        >>> a = tl.randn(3, 20, 16, dtype="bf16", device="cpu", seed=0)
        >>> b = tl.randn(3, 16, 24, dtype="bf16", device="cpu", seed=1)
        >>> bmm(a, b, config=MatmulConfig(tm=16, tn=16, tk=16)).shape
        (3, 20, 24)
    """
    return _BMM.prepare(plan_bmm, a, b, out=out, out_dtype=out_dtype, bias=bias,
                        activation=activation, residual=residual, scale_a=scale_a,
                        scale_b=scale_b, config=config).run(sync, stream)


def compile_matmul(m: int, n: int, k: int, dtype: Any = "bfloat16", *,
                   out_dtype: Any = None, config: MatmulConfig | None = None,
                   trans_b: bool = False, bias: bool = False, activation: str | None = None,
                   residual: bool = False, batch: int | None = None,
                   arch: str = "sm_90") -> list:
    """Compile (without data or a GPU) the kernels :func:`matmul` would launch.

    Returns one ``Artifacts`` per launch (split-K has two), so that their SASS,
    resources and remarks can be inspected (HGMMA/QGMMA, TMA, spills). ``trans_b``
    describes B given as a transposed (N, K) view; ``batch`` compiles :func:`bmm`.

    Example:
        >>> arts = compile_matmul(8192, 8192, 8192, "bf16")        # doctest: +SKIP
        >>> "HGMMA" in arts[0].sass                                 # doctest: +SKIP
        True
    """
    in_dtype = _dtype_name(dtype)
    out_name = _out_dtype(out_dtype, in_dtype, "compile_matmul")
    spec = tl.spec
    lead = () if batch is None else (batch,)
    epi = _Epilogue(spec(n, "float32") if bias else spec(1, "float32"),
                    spec(lead + (m, n), "float32") if residual
                    else spec((1,) * (len(lead) + 2), "float32"),
                    1.0, bias, ACTIVATIONS[activation], residual)
    c = spec(lead + (m, n), out_name)
    a = spec(lead + (m, k), in_dtype)
    if batch is not None:
        cfg = config or _bmm_config(m, in_dtype)
        launches = _launches_bmm(cfg, c, a, spec((batch, k, n), in_dtype), epi)
    else:
        cfg = config or default_config(m, n, k, in_dtype, b_transposed=trans_b)
        bop = spec((n, k), in_dtype) if trans_b else spec((k, n), in_dtype)
        fast = bool(cfg.fast_acc and in_dtype in _FP8)
        launches = _launches_2d(cfg, c, a, bop, trans_b, epi, fast, spec)
    return [kern.compile(*args, arch=arch) for kern, args in launches]
