"""Measured ceilings of the GPU at hand: copy bandwidth and bf16 GEMM rate.

Why: datasheet peaks are upper bounds no kernel reaches (an H200 copies at about 4.2 TB/s,
not 4.8; its dense bf16 GEMMs run near 600-750 TFLOP/s, not 989). A roofline that also
draws what *this* machine does with tilelab's own kernels tells a student how far a point
really is from the achievable. The numbers come from two runs:

* **copy**: a safe kernel ``z.store(tl.load_like(x, z))`` over buffers of about 1 GiB each,
  bytes = read + written; the best of a few tile sizes;
* **GEMM**: :func:`tilelab.kernels.examples.gemm` (bf16 in, fp32 accumulation, bf16 out),
  8192³ with 128×128×64 tiles in ``tl.grouped(8)`` order;

each timed with :func:`tilelab.bench` (warm-up, L2 flushed, CUDA events, median) after a
correctness check. Results are cached per process; :meth:`MeasuredCeilings.spec` turns
them into a :class:`~tilelab.perf.specs.GPUSpec` via
:func:`~tilelab.perf.specs.measured_spec`.

Example:
    >>> m = MeasuredCeilings(4.2e12, 6.0e14, gpu_name="NVIDIA H200", method="test")
    >>> m.spec().measured, round(m.ridge(), 1)
    (True, 142.9)
"""
from __future__ import annotations

import datetime as _dt
import math
import threading
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import tilelab as tl
from tilelab.errors import TilelabError

__all__ = ["MeasuredCeilings", "CeilingsUnavailable", "measure_ceilings", "current_ceilings",
           "clear_cache", "copy_rate", "gemm_rate", "copy_kernel"]


class CeilingsUnavailable(TilelabError):
    """Measuring ceilings needs a usable GPU; this says why there is none.

    Example:
        >>> str(CeilingsUnavailable("no GPU")).splitlines()[0]
        'no GPU'
    """


@dataclass(frozen=True)
class MeasuredCeilings:
    """What this GPU achieved: copy bandwidth (B/s, read + written) and GEMM rate (FLOP/s).

    Example:
        >>> m = MeasuredCeilings(4.0e12, 5.0e14, gpu_name="NVIDIA H200", method="m")
        >>> m.to_dict()["precision"], m.spec().peak("bf16")
        ('bf16', 500000000000000.0)
    """

    copy_bytes_per_s: float
    gemm_flops_per_s: float
    precision: str = "bf16"
    method: str = ""
    gpu_name: str = ""
    date: str = ""
    compute_capability: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        for name in ("copy_bytes_per_s", "gemm_flops_per_s"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive number, got {v!r}")

    def spec(self) -> Any:
        """A measured :class:`~tilelab.perf.specs.GPUSpec` (key ``"current"``) to draw.

        Example:
            >>> MeasuredCeilings(1e12, 1e14, gpu_name="NVIDIA H200").spec().key
            'current'
        """
        from tilelab.perf.specs import measured_spec, spec_for_device

        base = spec_for_device(self.gpu_name) if self.gpu_name else None
        cc = None if base is not None else (self.compute_capability or (9, 0))
        return measured_spec(self.gpu_name or "this GPU", copy_bandwidth=self.copy_bytes_per_s,
                             gemm_flops=self.gemm_flops_per_s, precision=self.precision,
                             method=self.method, compute_capability=cc)

    def ridge(self) -> float:
        """FLOP/B where the measured GEMM rate meets the measured copy bandwidth.

        Example:
            >>> MeasuredCeilings(2e12, 4e14).ridge()
            200.0
        """
        return self.gemm_flops_per_s / self.copy_bytes_per_s

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-able).

        Example:
            >>> sorted(MeasuredCeilings(1e12, 1e14).to_dict())[:3]
            ['compute_capability', 'copy_bytes_per_s', 'date']
        """
        return asdict(self)

    def __str__(self) -> str:
        from tilelab.perf.units import format_bandwidth, format_flops

        return (f"{self.gpu_name or 'this GPU'}: copy {format_bandwidth(self.copy_bytes_per_s)}, "
                f"{self.precision} GEMM {format_flops(self.gemm_flops_per_s)} "
                f"(measured {self.date}; {self.method})")


# ---------------------------------------------------------------------------- pure parts

def copy_rate(nbytes: int, seconds: float) -> float:
    """Copy bandwidth in B/s of moving ``nbytes`` (read once, written once) in ``seconds``.

    Example:
        >>> copy_rate(1 << 30, 0.5e-3) / 1e12   # 1 GiB each way in 0.5 ms
        4.294967296
    """
    if nbytes <= 0 or not seconds > 0:
        raise ValueError("copy_rate needs positive bytes and seconds")
    return 2 * nbytes / seconds


def gemm_rate(m: int, n: int, k: int, seconds: float) -> float:
    """FLOP/s of an m×n×k matrix product (2·m·n·k FLOPs) done in ``seconds``.

    Example:
        >>> round(gemm_rate(8192, 8192, 8192, 1.8e-3) / 1e12, 1)
        610.8
    """
    if not seconds > 0 or min(m, n, k) < 1:
        raise ValueError("gemm_rate needs positive sizes and seconds")
    return 2.0 * m * n * k / seconds


def _copy_kernel():
    # defined on first use (checking and capturing a kernel costs a little), at module
    # scope of names: its annotations 'tl.Out'/'tl.In' resolve in this module's globals
    @tl.kernel
    def copy(z: tl.Out, x: tl.In):
        """z = x, one tile per block: the simplest memory-bound kernel."""
        z.store(tl.load_like(x, z))

    return copy


_COPY: list = []


def copy_kernel() -> Any:
    """The safe copy kernel the bandwidth is measured with (``z.store(tl.load_like(x, z))``).

    Example:
        >>> copy_kernel().name
        'copy'
    """
    if not _COPY:
        _COPY.append(_copy_kernel())
    return _COPY[0]


# ---------------------------------------------------------------------------- measuring

_cache: dict[tuple, MeasuredCeilings] = {}
_lock = threading.Lock()


def clear_cache() -> None:
    """Forget measured ceilings (the next call measures again).

    Example:
        >>> clear_cache()
    """
    with _lock:
        _cache.clear()


def _require_gpu(device: str) -> Any:
    from tilelab.runtime.device import gpu, gpu_unavailable_reason

    if str(device).lower() not in ("cuda", "cuda:0", "gpu", "gpu:0"):
        raise ValueError(f"measure_ceilings measures a GPU; device must be 'cuda', got "
                         f"{device!r}")
    reason = gpu_unavailable_reason()
    if reason:
        raise CeilingsUnavailable(
            f"cannot measure ceilings: no usable GPU ({reason})",
            hint="rooflines then show the datasheet ceilings only; predicted points come "
                 "from counted bytes and FLOPs")
    return gpu()


def _free(*tensors: Any) -> None:
    """Release the buffers now: the kernels' prepared launches would keep them alive."""
    for t in tensors:
        try:
            t.free()
        except Exception:  # noqa: BLE001 - an early free is only an optimisation
            pass


def _measure_copy(nbytes: int, tiles: Sequence[int], rep: int, warmup: int) -> tuple[float, int]:
    import numpy as np

    n = max(1 << 20, nbytes // 4)
    x = tl.tensor(np.arange(n, dtype=np.float32), device="cuda")
    z = tl.empty(n, dtype="float32", device="cuda")
    k = copy_kernel()
    best, best_tile = 0.0, tiles[0]
    for tile in tiles:
        zp = z.partition(int(tile))
        k(zp, x)
        tl.synchronize()
        head, tail = z[:4096].numpy(), z[n - 4096:].numpy()
        if not (np.array_equal(head, np.arange(4096, dtype=np.float32))
                and np.array_equal(tail, x[n - 4096:].numpy())):
            raise TilelabError(f"the copy kernel produced wrong values (tile {tile}); the "
                               "measured bandwidth would be meaningless")
        r = tl.bench(lambda: k.launch_async(zp, x), rep=rep, warmup=warmup,
                     name=f"copy tile {tile}")
        rate = copy_rate(n * 4, r.median)
        if rate > best:
            best, best_tile = rate, int(tile)
    _free(x, z)
    return best, best_tile


def _measure_gemm(size: int, rep: int, warmup: int) -> float:
    import numpy as np

    from tilelab.kernels.examples import gemm

    a = tl.randn(size, size, dtype="bfloat16", device="cuda", seed=1)
    b = tl.randn(size, size, dtype="bfloat16", device="cuda", seed=2)
    c = tl.empty((size, size), dtype="bfloat16", device="cuda")
    cp = c.partition((128, 128), schedule=tl.grouped(8))
    gemm(cp, a, b, 64)
    tl.synchronize()
    # check a 64-row band against a float64 reference before trusting the timing
    rows = slice(size // 2, size // 2 + 64)
    ref = a[rows].numpy().astype(np.float64) @ b.numpy().astype(np.float64)
    got = c[rows].numpy().astype(np.float64)
    err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    if not err < 1e-2:
        raise TilelabError(f"the GEMM used to measure the compute ceiling is wrong "
                           f"(relative error {err:.2e}); not trusting its timing")
    r = tl.bench(lambda: gemm.launch_async(cp, a, b, 64), rep=rep, warmup=warmup,
                 name=f"gemm bf16 {size}^3")
    _free(a, b, c)
    return gemm_rate(size, size, size, r.median)


def measure_ceilings(device: str = "cuda", *, copy_bytes: int = 1 << 30,
                     copy_tiles: Sequence[int] = (1024, 4096), gemm_size: int = 8192,
                     rep: int = 20, warmup: int = 5, refresh: bool = False) -> MeasuredCeilings:
    """Measure copy bandwidth and bf16 GEMM rate on this GPU with tilelab's own kernels.

    Takes a few seconds the first time (two compiles, then timing); later calls in the
    process return the cached result unless ``refresh``. Raises
    :class:`CeilingsUnavailable` without a usable GPU (see :func:`current_ceilings` for a
    None instead).

    Example:
        >>> m = measure_ceilings()                      # doctest: +SKIP
        >>> print(m)                                    # doctest: +SKIP
        NVIDIA H200: copy 4.2 TB/s, bf16 GEMM 600 TFLOP/s (measured 2026-12-01; ...)
    """
    g = _require_gpu(device)
    key = (g.name, int(copy_bytes), tuple(copy_tiles), int(gemm_size))
    with _lock:
        if not refresh and key in _cache:
            return _cache[key]
        copy_bw, tile = _measure_copy(int(copy_bytes), tuple(copy_tiles), rep, warmup)
        flops = _measure_gemm(int(gemm_size), rep, warmup)
        gib = copy_bytes / 2**30
        method = (f"tilelab copy kernel, {gib:g} GiB each way, tile {tile} (best of "
                  f"{list(copy_tiles)}); tilelab gemm bf16 {gemm_size}^3, 128x128x64 tiles, "
                  f"tl.grouped(8), fp32 accumulation; tl.bench median of {rep}, L2 flushed")
        result = MeasuredCeilings(copy_bw, flops, "bf16", method, g.name,
                                  _dt.date.today().isoformat(),
                                  tuple(getattr(g, "compute_capability", (0, 0))) or None)
        _cache[key] = result
        return result


def current_ceilings(**kwargs: Any) -> MeasuredCeilings | None:
    """:func:`measure_ceilings` on this GPU, or None when there is no usable GPU.

    Example:
        >>> from tilelab.runtime.device import gpu_available
        >>> gpu_available() or current_ceilings() is None
        True
    """
    try:
        return measure_ceilings(**kwargs)
    except CeilingsUnavailable:
        return None
