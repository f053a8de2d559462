"""GEMM configurations: :class:`MatmulConfig`, the tuned defaults (:func:`default_config`)
and the autotuner's search space (:func:`search_space`).

The defaults are heuristics measured on the H200 (the result files named next to each
rule are in ``benchmarks/results``); :func:`search_space` lists the variants around
them that are worth timing. Nothing here launches: :mod:`tilelab.kernels.matmul` turns
a config into launches.

Example:
    >>> default_config(4096, 4096, 4096).schedule, default_config(16, 1024, 4096).tm
    ('persistent', 16)
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from tilelab.kernels._host import dtype_name, hash_once, is_pow2, pow2_ceil, state_without_hash

__all__ = ["MatmulConfig", "SCHEDULES", "SPLIT_MODES", "FLOAT_INPUTS", "FP8", "OUT_DTYPES",
           "default_config", "search_space", "bmm_config"]

#: the schedules a :class:`MatmulConfig` can name
SCHEDULES = ("row_major", "grouped", "persistent", "splitk", "gemv")
#: how split-K sums its K slices: a second launch, or fp32 atomics in the same launch
SPLIT_MODES = ("launch", "atomic")

#: input dtypes of the tensor-core paths besides fp8, and the fp8 kinds
FLOAT_INPUTS = ("float16", "bfloat16", "float32")
FP8 = ("float8_e4m3fn", "float8_e5m2")
#: dtypes a GEMM can write
OUT_DTYPES = ("float16", "bfloat16", "float32")


@dataclass(frozen=True)
class MatmulConfig:
    """Tiles, schedule and compiler hints of one GEMM launch (what an autotuner searches).

    ``tm, tn, tk``: tile sizes (powers of two); ``schedule``: one of :data:`SCHEDULES`;
    ``group_m``: tile rows per L2 group (grouped and persistent); ``num_blocks``:
    persistent blocks (None: one per SM); ``split_k``: K slices for ``splitk``/``gemv``;
    ``split_mode``: how the slices are summed, ``"launch"`` (each slice writes fp32
    partials, a second safe kernel sums them) or ``"atomic"`` (one launch: the slices
    add into a self-cleaning fp32 workspace and the last one of each tile writes it,
    see :func:`~tilelab.kernels.matmul.kernels.splitk_atomic_kernel`);
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
        self._check_tiles()
        self._check_hints()
        self._check_combination()

    def _check_tiles(self) -> None:
        for name in ("tm", "tn", "tk"):
            if not is_pow2(getattr(self, name)):
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

    def _check_hints(self) -> None:
        if self.latency is not None and not (isinstance(self.latency, int)
                                             and 1 <= self.latency <= 10):
            raise ValueError(f"MatmulConfig.latency={self.latency!r}: cuTile's latency "
                             "hint is an int from 1 (low) to 10 (high), or None")
        if self.occupancy is not None and not (isinstance(self.occupancy, int)
                                               and 1 <= self.occupancy <= 32):
            raise ValueError(f"MatmulConfig.occupancy={self.occupancy!r} must be 1..32 "
                             "or None")
        if self.num_worker_warps is not None and not (is_pow2(self.num_worker_warps)
                                                      and self.num_worker_warps <= 32):
            raise ValueError(f"MatmulConfig.num_worker_warps={self.num_worker_warps!r} must "
                             "be a power of two up to 32, or None")
        if self.num_ctas is not None and not (is_pow2(self.num_ctas) and self.num_ctas <= 16):
            raise ValueError(f"MatmulConfig.num_ctas={self.num_ctas!r} must be a power of "
                             "two up to 16, or None")

    def _check_combination(self) -> None:
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
    2048 and every Qwen3-8B projection at M >= 2048
    (benchmarks/results/claims/tile-sweeps-h200/sweep_h200_*);
    16-bit problems of at least :data:`BIG_TILES` such tiles with K >= :data:`BIG_K`
    use warp-specialized 128x256 tiles instead (power-capped, they keep pace with
    cuBLAS back to back where 128x128 tiles fall behind); with fewer 128x128 tiles
    than half the SMs, M <= 128 uses 64x64 tiles and larger M 64x128; when N has
    fewer 64-wide columns than a quarter of the SMs (the k/v projection) 16-bit
    16 < M <= 128 uses 64x32 tiles 256 deep. 16-bit 1 < M <= 16
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
        >>> big = default_config(16384, 16384, 16384); big.tn, big.num_worker_warps
        (256, 8)
    """
    name = dtype_name(dtype)
    if m == 1 and b_transposed:
        return _weight_rows_config(n, name, num_sms)
    # Skinny problems read B once and are bound by memory: on the H200 one launch with
    # no split-K was fastest for every Qwen3-8B projection at M = 1 and 16, with wide
    # tiles only when they still give half the SMs a block
    # (claims/tile-sweeps-h200/sweep_h200_*.json).
    wide = n // 128 >= num_sms // 2
    narrow = -(-n // 64) < num_sms // 4   # 64-wide panels leave most SMs idle (k/v)
    if m == 1:
        return _vector_config(n, k, name, num_sms, wide, narrow)
    if m <= 128:
        cfg = _skinny_config(m, k, name, wide, narrow)
        if cfg is not None:
            return cfg
    return _tiled_config(m, n, k, name, num_sms)


def _weight_rows_config(n: int, name: str, num_sms: int) -> MatmulConfig:
    """M = 1 with B the .T view of an (N, K) weight: stream whole weight rows."""
    # 16 weight rows of 512 per step, two blocks per SM: the fastest of 24 configs
    # on the H200 for q/o, gate/up and down (claims/tile-sweeps-h200/sweep3_h200_*.json); 4
    # rows when 16 would leave SMs without a block (k/v, N = 1024)
    tk = {"float32": 256}.get(name, 1024 if name in FP8 else 512)
    tn = 16 if n // 16 >= num_sms else 4
    return MatmulConfig(tm=1, tn=tn, tk=tk, schedule="gemv", occupancy=2)


def _vector_config(n: int, k: int, name: str, num_sms: int, wide: bool,
                   narrow: bool) -> MatmulConfig:
    """M = 1 with a K-major B: the GEMV kernel, or the swapped M <= 16 tiles."""
    if narrow and name in ("bfloat16", "float16"):
        # 16-column panels with 1024-deep K steps: 64 blocks for k/v (N = 1024),
        # 9.1 us against 11.4 for one-launch split-K and cuBLAS's 9.5
        # (claims/tile-sweeps-h200/sweep10_h200_*)
        return MatmulConfig(tm=1, tn=16, tk=1024, schedule="gemv")
    if narrow and name not in FP8:
        # fp32: slices of K summed in one launch (claims/tile-sweeps-h200/sweep6-8_h200_*)
        tiles, k_tiles = -(-n // 128), -(-k // 128)
        split = max(1, min(num_sms // tiles, k_tiles // 2, 64))
        if split > 1:
            return MatmulConfig(tm=1, tn=128, tk=128, schedule="gemv", split_k=split,
                                split_mode="atomic")
    if not wide and name in ("bfloat16", "float16"):
        # the M <= 16 swapped tiles below, A's one row zero-padded to 16: q/o and
        # down (N = 4096) in 13.5 and 29.8 us against 14.5 and 31.6 for the GEMV and
        # cuBLAS's 15.0 and 30.7 (claims/tile-sweeps-h200/sweep17_h200_*); gate/up keeps the
        # GEMV (28.5 us)
        return _swapped_decode_tiles(k)
    tn, tk = (128, 64) if wide else (64, 128)
    return MatmulConfig(tm=1, tn=tn, tk=tk * (2 if name in FP8 else 1), schedule="gemv")


def _skinny_config(m: int, k: int, name: str, wide: bool,
                   narrow: bool) -> MatmulConfig | None:
    """1 < M <= 128: swapped or narrow deep tiles where they win; None otherwise."""
    if m <= 16 and name in ("bfloat16", "float16"):
        # B^T A^T: 64 weight columns fill the MMA's 64 rows, the <= 16 tokens its 16
        # columns, 512 deep: the fastest of 11 swapped and split configs at M = 16 for
        # q/o, k/v and down, within 0.1% for gate/up
        # (claims/tile-sweeps-h200/sweep16_h200_*): k/v 9.4 us against 11.4-12.1 for the
        # unswapped tiles (cuBLAS 9.3-9.9), q/o 13.2 against 14.2, down 28.4 against 29.9
        return _swapped_decode_tiles(k)
    if narrow and name in ("bfloat16", "float16"):
        # so few 64-wide columns that most SMs idle (k/v, N = 1024: 16-32 tiles): narrow,
        # deep tiles (A padded to 64 rows below M = 64): at M = 128 10.7-11.1 us against
        # 13.4 for 64x64x64 (cuBLAS 10.6-10.8; claims/tile-sweeps-h200/sweep10-11_h200_*)
        return MatmulConfig(tm=64, tn=32, tk=256)
    if m <= 16:
        tn, tk = (128, 128) if wide else (32, 256)
        return MatmulConfig(tm=16, tn=tn, tk=tk)
    return None


#: 128x128 output tiles from which (with K >= BIG_K) 16-bit GEMMs use warp-specialized
#: 128x256 tiles: 10240^2 has 6400
BIG_TILES, BIG_K = 6400, 8192


def _tiled_config(m: int, n: int, k: int, name: str, num_sms: int) -> MatmulConfig:
    """M > 16 tensor-core tiles: 64-row tiles for few tiles, warp-specialized 128x256
    tiles for big 16-bit problems, else 128x128 persistent."""
    tk = {"float32": 32}.get(name, 128 if name in FP8 else 64)
    if m <= 64:
        return MatmulConfig(tm=64, tn=128, tk=tk)
    tiles = -(-m // 128) * -(-n // 128)
    if m <= 128 and tiles < num_sms // 2:
        return MatmulConfig(tm=64, tn=64, tk=tk)      # more blocks for a skinny problem
    if tiles < num_sms // 2:
        # a small problem (1024^2: 64 tiles of 128x128): 64x128 tiles give every SM a
        # block, 8.1-8.4 vs 11.6 us at 1024^3 (torch 8.6-9.2;
        # claims/tile-sweeps-h200/sweep8_h200_*)
        return MatmulConfig(tm=64, tn=128, tk=tk)
    if tiles >= BIG_TILES and k >= BIG_K and name in ("bfloat16", "float16"):
        # Big GEMMs run power-capped (an H100 under a loop of them clocks at 1.25-1.45
        # GHz, not 1.98): 128x256 tiles move a quarter fewer bytes per MMA than 128x128
        # ones, and a producer warpgroup feeding two consumers (8 worker warps) keeps
        # them fed. On an H100 (gemm_tiles_h100_2026-12-07.json) they ran 10240^3,
        # 12288^3, 16384^3 and 16384^2 x 8192 at 0.94-1.05x cuBLAS back to back where
        # 128x128 reached 0.86-0.96x (0.70x at 16384^3 on another H100), and at
        # 0.96-0.97x alone against 0.86-0.96x; at 8192^3 and 8192^2 x 16384 128x128 was
        # ahead, with K = 4096 the two split
        return MatmulConfig(tm=128, tn=256, tk=tk, schedule="persistent", group_m=4,
                            num_worker_warps=8)
    # tf32 keeps the grouped schedule: its persistent loop spills registers on sm_90
    return MatmulConfig(tm=128, tn=128, tk=tk,
                        schedule="grouped" if name == "float32" else "persistent")


def _swapped_decode_tiles(k: int) -> MatmulConfig:
    """The swapped 16x64 tiles of decode-sized M: 512 deep, or K rounded up (>= 16)."""
    return MatmulConfig(tm=16, tn=64, tk=min(512, max(16, pow2_ceil(k))), swap_ab=True)


def bmm_config(m: int, dtype: str) -> MatmulConfig:
    """Tiles for batched GEMM: 128x128 (64 or 16 rows for short matrices).

    Example:
        >>> c = bmm_config(20, "bfloat16"); c.tm, c.tn, c.tk, c.schedule
        (64, 128, 64, 'grouped')
    """
    tm = 128 if m > 64 else 64 if m > 16 else 16
    return MatmulConfig(tm=tm, tn=128, tk=32 if dtype == "float32" else 64)


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
    if m == 1 and b_transposed:
        found = _weight_rows_space(base)
    elif m <= 16:
        found = _skinny_space(m, n, k, base)
    elif m <= 128:
        found = [MatmulConfig(tm=64, tn=tn, tk=256) for tn in (16, 32)] + _large_space(base)
    else:
        found = _large_space(base)
    space = [base]
    for cfg in found:
        if cfg not in space:
            space.append(cfg)
    return space


def _weight_rows_space(base: MatmulConfig) -> list[MatmulConfig]:
    """Rows of the weight per block, K step and occupancy of the row-streaming GEMV."""
    found = [base.with_(tn=tn, tk=tk) for tn in (2, 4, 8, 16, 32) for tk in (256, 512, 1024)]
    return found + [base.with_(occupancy=occ) for occ in (2, 4)]


def _skinny_space(m: int, n: int, k: int, base: MatmulConfig) -> list[MatmulConfig]:
    """M <= 16: narrow deep tiles (claims/tile-sweeps-h200/sweep10-11_h200_*: the k/v
    projection), swapped and unswapped 16-row tiles, then split-K variants of the default
    (of the GEMV at M = 1, swapped or not) in both split modes."""
    if m == 1:
        found = [MatmulConfig(tm=1, tn=tn, tk=tk, schedule="gemv")
                 for tn, tk in ((16, 512), (16, 1024), (32, 256), (64, 128), (64, 256),
                                (128, 64))]
    else:
        found = [MatmulConfig(tm=64, tn=tn, tk=256) for tn in (16, 32)]
    found += [MatmulConfig(tm=16, tn=tn, tk=tk, latency=lat, swap_ab=True)
              for tn, tk in ((64, 256), (64, 512), (128, 256)) for lat in (None, 4)]
    found += [MatmulConfig(tm=16, tn=tn, tk=tk) for tn, tk in ((32, 256), (128, 128))]
    split_base = MatmulConfig(tm=1, tn=64, tk=128, schedule="gemv") \
        if m == 1 and base.schedule != "gemv" else base
    for tn in (32, 64, 128):
        fill = _split_for(n, k, tn, split_base.tk, 132)
        for split in sorted({1, 2, fill, 2 * fill}):
            sched = "gemv" if m == 1 else ("splitk" if split > 1 else "grouped")
            modes = ("launch", "atomic") if split > 1 else ("launch",)
            found += [split_base.with_(tn=tn, split_k=split, schedule=sched, split_mode=mode)
                      for mode in modes]
    return found


def _large_space(base: MatmulConfig) -> list[MatmulConfig]:
    """M > 16: tiles x schedules x group sizes, warp-specialized 128x256 and 256x128
    tiles, latency hints, a deeper K step and an occupancy-2 64-row variant."""
    found = [base.with_(tm=tm, tn=tn, schedule=sched, group_m=group_m, num_worker_warps=None)
             for tm, tn in ((128, 128), (128, 256), (256, 128), (64, 128), (128, 64), (64, 64))
             for sched in ("grouped", "persistent") for group_m in (8, 16)]
    found += [base.with_(tm=tm, tn=tn, schedule="persistent", group_m=group_m,
                         num_worker_warps=8)
              for tm, tn in ((128, 256), (256, 128)) for group_m in (4, 8)]
    found += [base.with_(latency=lat) for lat in (2, 4, 8)]
    return found + [base.with_(tk=2 * base.tk), base.with_(occupancy=2, tm=64)]


def _split_for(n: int, k: int, tn: int, tk: int, num_sms: int) -> int:
    """K slices so that (n / tn) * slices fills two blocks per SM, >= 2 K tiles each."""
    blocks = -(-n // tn)
    k_tiles = -(-k // tk)
    want = -(-2 * num_sms // blocks)
    return max(1, min(want, k_tiles // 2, 64))
