"""Matrix multiplication in the safe language: GEMM, batched GEMM, split-K and GEMV.

Every kernel but one-launch split-K writes its output through a partition, so blocks
own disjoint tiles and cannot race; the schedule (row-major, grouped, persistent) only
decides which block computes which tile. Inputs are bf16, fp16, fp32 (run on the tensor
cores as tf32) or fp8 (e4m3/e5m2, sm_89+), accumulated in fp32; an optional fused
epilogue applies ``alpha * acc + bias``, an activation and a residual before the single
rounding to the output dtype. Edge tiles are zero-padded on load and clipped on store,
so no shape has to be a multiple of the tiles.

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

The code is in three modules: this one (the host functions and their launches),
:mod:`tilelab.kernels.matmul.config` (:class:`MatmulConfig`, the tuned defaults and
the search space) and :mod:`tilelab.kernels.matmul.kernels` (the kernels); their public
names are importable from here.

Example:
    >>> import tilelab as tl
    >>> from tilelab.kernels.matmul import matmul
    >>> a = tl.randn(64, 48, dtype="bf16", device="cpu", seed=0)
    >>> b = tl.randn(48, 32, dtype="bf16", device="cpu", seed=1)
    >>> matmul(a, b, config=MatmulConfig(tm=32, tn=32, tk=16)).shape
    (64, 32)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import tilelab as tl
from tilelab.kernels._host import (CallCache, Plan, TensorResult, dtype_name, has_workspace,
                                   hinted, launch_args, planning_sms, register_constant,
                                   tensor_arg, workspace)
from tilelab.kernels.activation import ACTIVATIONS, ActivationLike, activation_code
from tilelab.kernels.matmul.config import (FLOAT_INPUTS, FP8, OUT_DTYPES, SCHEDULES,
                                           SPLIT_MODES, MatmulConfig, bmm_config,
                                           default_config, search_space)
from tilelab.kernels.matmul.kernels import (batched_matmul_kernel, gemv_kernel,
                                            gemv_rows_kernel, matmul_kernel,
                                            persistent_matmul_kernel, splitk_atomic_kernel,
                                            splitk_partial_kernel, splitk_reduce_kernel)

__all__ = [
    "MatmulConfig", "ACTIVATIONS", "SCHEDULES", "Plan", "default_config", "search_space",
    "matmul", "bmm", "gemv", "plan_matmul", "plan_bmm", "compile_matmul",
    "matmul_kernel", "persistent_matmul_kernel", "batched_matmul_kernel",
    "splitk_partial_kernel", "splitk_reduce_kernel", "splitk_atomic_kernel", "gemv_kernel",
    "gemv_rows_kernel", "SPLIT_MODES",
]


# ======================================================================================
# arguments


def _as_tensor(x: Any, name: str, who: str = "matmul") -> tl.Tensor:
    """A tl.Tensor, or a foreign array borrowed where it lives (as a launch does)."""
    return tensor_arg(x, name, who)


@dataclass(frozen=True)
class _Epilogue:
    """Epilogue operands and flags, as the kernels take them (tensors or specs)."""

    bias: Any
    res: Any
    alpha: float = 1.0
    has_bias: bool = False
    act: int = 0
    has_res: bool = False

    def named(self) -> dict[str, Any]:
        """The epilogue's launch arguments by kernel parameter name: its operands
        (``bias``, ``res``, ``alpha``) and compile-time flags (``SCALE``, ``HAS_BIAS``,
        ``ACT``, ``HAS_RES``)."""
        return {"bias": self.bias, "res": self.res, "alpha": self.alpha,
                "SCALE": self.alpha != 1.0, "HAS_BIAS": self.has_bias, "ACT": self.act,
                "HAS_RES": self.has_res}


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
    if t.dtype.name not in FLOAT_INPUTS:
        raise TypeError(f"{who}: {name} must be float16, bfloat16 or float32, got "
                        f"{t.dtype.name}")
    if tuple(t.shape) != shape:
        what = "one value per output column" if name == "bias" else "the output's shape"
        raise ValueError(f"{who}: {name} has shape {t.shape}; it must be {shape} ({what})")
    if t.device != device:
        raise ValueError(f"{who}: {name} lives on {t.device}, the operands on {device}")
    return t


def _epilogue_args(out_shape: tuple[int, ...], device: str, bias: Any, residual: Any,
                   activation: ActivationLike, alpha: float, who: str) -> _Epilogue:
    act = int(activation_code(activation, who))
    if bias is not None:
        bias = _epilogue_operand(bias, "bias", (out_shape[-1],), device, who)
    if residual is not None:
        residual = _epilogue_operand(residual, "residual", tuple(out_shape), device, who)
    return _Epilogue(bias if bias is not None else _placeholder(device, 1),
                     residual if residual is not None
                     else _placeholder(device, len(out_shape)),
                     float(alpha), bias is not None, act, residual is not None)


def _input_dtype(a: Any, b: Any, who: str) -> str:
    da, db = dtype_name(a.dtype), dtype_name(b.dtype)
    if da not in FLOAT_INPUTS + FP8 or db not in FLOAT_INPUTS + FP8:
        raise TypeError(f"{who}: inputs must be float16, bfloat16, float32 or fp8 "
                        f"(float8_e4m3fn, float8_e5m2); got {da} and {db}")
    if da != db:
        raise TypeError(f"{who}: a is {da} but b is {db}; cast one of them (cuTile's mma "
                        "multiplies equal types, fp8 kinds included)")
    return da


def _check_arch(device: str, dtype: str, who: str) -> None:
    if dtype in FP8 and device != "cpu":
        from tilelab.runtime.device import current_arch

        arch = current_arch() or ""
        digits = "".join(ch for ch in arch if ch.isdigit())
        if digits and int(digits) < 89:
            raise TypeError(f"{who}: fp8 inputs need sm_89 or newer (this GPU is {arch})")


def _out_dtype(out_dtype: Any, in_dtype: str, who: str) -> str:
    want = dtype_name(out_dtype) if out_dtype is not None else (
        "bfloat16" if in_dtype in FP8 else in_dtype)
    if want not in OUT_DTYPES:
        raise TypeError(f"{who}: out_dtype={want} is not supported; choose one of "
                        f"{', '.join(OUT_DTYPES)}")
    return want


def _output(out: Any, shape: tuple[int, ...], out_dtype: Any, in_dtype: str, device: str,
            who: str) -> tl.Tensor:
    if out is None:
        return tl.empty(shape, _out_dtype(out_dtype, in_dtype, who), device=device)
    out = _as_tensor(out, "out", who)
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{who}: out has shape {out.shape}, the product has {shape}")
    if out_dtype is not None and out.dtype.name != dtype_name(out_dtype):
        raise TypeError(f"{who}: out is {out.dtype.name} but out_dtype="
                        f"{dtype_name(out_dtype)}")
    if out.dtype.name not in OUT_DTYPES:
        raise TypeError(f"{who}: out must be one of {', '.join(OUT_DTYPES)}, got "
                        f"{out.dtype.name}")
    if out.device != device:
        raise ValueError(f"{who}: out lives on {out.device}, the operands on {device}")
    return out


def _b_operand(b: tl.Tensor) -> tuple[tl.Tensor, bool]:
    """(tensor to pass, TRANS_B): a column-major B (a .T view) is read K-major."""
    if b.shape[0] > 1 and b.shape[1] > 1 and b.strides[0] == 1 and b.strides[1] != 1:
        return b.T, True
    return b, False


# ======================================================================================
# launches


def _variant(kernel: tl.Kernel, cfg: MatmulConfig) -> tl.Kernel:
    """``kernel`` with ``cfg``'s cuTile hints (itself when it has none)."""
    return hinted(kernel, occupancy=cfg.occupancy, num_ctas=cfg.num_ctas,
                  num_worker_warps=cfg.num_worker_warps)


def _launches_2d(cfg: MatmulConfig, c: Any, a: Any, bop: Any, trans_b: bool,
                 epi: _Epilogue, fast: bool, alloc: Callable,
                 scratch_zeros: Callable | None = None) -> list[tuple]:
    """The (kernel, args) launches of a 2-D GEMM (tensors, or specs for compiling).

    ``alloc(shape, dtype)`` makes scratch; ``scratch_zeros(shape, dtype)`` the zeroed
    self-cleaning workspace of atomic split-K (default: ``alloc``)."""
    m, n = c.shape
    sched = cfg.schedule
    if sched == "gemv" and m != 1:
        raise ValueError(f"matmul: schedule 'gemv' needs M == 1, got M = {m}")
    if sched in ("gemv", "splitk") and cfg.split_k > 1:
        return _splitk_launches(cfg, c, a, bop, trans_b, epi, fast, alloc,
                                scratch_zeros or alloc)
    lat = cfg.latency or 0
    if sched == "gemv":
        part = c.partition((1, cfg.tn))
        if trans_b:   # the weight is stored (N, K): stream whole rows of it
            return [(_variant(gemv_rows_kernel, cfg),
                     launch_args(gemv_rows_kernel, c=part, a=a, w=bop, TK=cfg.tk, LAT=lat,
                                 **epi.named()))]
        return [(_variant(gemv_kernel, cfg),
                 launch_args(gemv_kernel, c=part, a=a, b=bop, TK=cfg.tk, TRANS_B=trans_b,
                             LAT=lat, **epi.named()))]
    if sched == "persistent":
        part = c.partition((cfg.tm, cfg.tn), schedule=tl.persistent(cfg.num_blocks,
                                                                    cfg.group_m))
        kern = persistent_matmul_kernel
    else:
        schedule = tl.grouped(cfg.group_m) if sched == "grouped" else tl.row_major
        part = c.partition((cfg.tm, cfg.tn), schedule=schedule)
        kern = matmul_kernel
    return [(_variant(kern, cfg),
             launch_args(kern, c=part, a=a, b=bop, TK=cfg.tk, TRANS_B=trans_b, LAT=lat,
                         FAST_ACC=fast, SWAP=cfg.swap_ab, **epi.named()))]


def _splitk_launches(cfg: MatmulConfig, c: Any, a: Any, bop: Any, trans_b: bool,
                     epi: _Epilogue, fast: bool, alloc: Callable,
                     zeros: Callable) -> list[tuple]:
    """Split-K: one atomic launch, or the partial products and their sum."""
    m, n = c.shape
    k_tiles = -(-a.shape[1] // cfg.tk)
    per = -(-k_tiles // cfg.split_k)
    tm = 1 if cfg.schedule == "gemv" else cfg.tm
    splits = -(-k_tiles // per)                               # no empty K slice
    slice_args = {"a": a, "b": bop, "TK": cfg.tk, "K_TILES_PER_SPLIT": per,
                  "TRANS_B": trans_b, "LAT": cfg.latency or 0, "FAST_ACC": fast,
                  "SWAP": cfg.swap_ab}
    if cfg.split_mode == "atomic":
        (mt, nt), sums, counts = _atomic_workspaces(m, n, cfg)
        kern = _variant(splitk_atomic_kernel, cfg).with_grid((splits, mt, nt))
        return [(kern, launch_args(splitk_atomic_kernel, c=c, ws=zeros(sums, "float32"),
                                   count=zeros(counts, "int32"), TM=tm, TN=cfg.tn,
                                   **slice_args, **epi.named()))]
    scratch = alloc((splits, m, n), "float32")
    return [(_variant(splitk_partial_kernel, cfg),
             launch_args(splitk_partial_kernel, p=scratch.partition((1, tm, cfg.tn)),
                         **slice_args)),
            (splitk_reduce_kernel,
             launch_args(splitk_reduce_kernel, c=c.partition((tm, cfg.tn)), p=scratch,
                         **epi.named()))]


def _atomic_workspaces(m: int, n: int, cfg: MatmulConfig) -> tuple:
    """Atomic split-K's tile grid of C and the shapes of its two workspaces: the fp32
    sums (M, N) and one int32 arrival counter per tile."""
    tm = 1 if cfg.schedule == "gemv" else cfg.tm
    mt, nt = -(-m // tm), -(-n // cfg.tn)
    return (mt, nt), (m, n), (mt * nt,)


def _workspace_ready(device: str, m: int, n: int, cfg: MatmulConfig) -> bool:
    """Whether atomic split-K can get its workspace: outside a graph capture it is made
    on first use; inside one only an existing workspace will do."""
    from tilelab.runtime.graph_capture import current_graph

    if current_graph() is None:
        return True
    _, sums, counts = _atomic_workspaces(m, n, cfg)
    return has_workspace(device, sums, "float32") and has_workspace(device, counts, "int32")


def plan_matmul(a: Any, b: Any, *, out: Any = None, out_dtype: Any = None, bias: Any = None,
                activation: ActivationLike = None, residual: Any = None, scale_a: float = 1.0,
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
    cfg = config or default_config(m, n, k, in_dtype, num_sms=planning_sms(a.device),
                                   b_transposed=trans_b)
    out_t = _output(out, (n,) if vector else (m, n), out_dtype, in_dtype, a.device, who)
    if m == 0 or n == 0:
        return Plan(out_t, [])                  # an empty result needs no launch
    if vector and residual is not None:
        residual = _as_tensor(residual, "residual", who)
        residual = residual[None] if residual.ndim == 1 else residual
    epi = _epilogue_args((m, n), a.device, bias, residual, activation, scale_a * scale_b,
                         who)
    fast = bool(cfg.fast_acc and in_dtype in FP8)
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
           activation: ActivationLike = None, residual: Any = None, scale_a: float = 1.0,
           scale_b: float = 1.0, config: MatmulConfig | None = None, sync: bool = True,
           stream: Any = None) -> TensorResult:
    """``act(scale_a * scale_b * a @ b + bias) + residual`` with fp32 accumulation.

    ``a`` is (M, K) or (K,); ``b`` is (K, N) (a transposed view of an (N, K) weight is
    read K-major, the fast layout for fp8). Inputs: bf16, fp16, fp32 (tf32 tensor cores)
    or fp8 e4m3/e5m2 (with optional per-tensor dequantization scales). The output is
    ``out`` or a new tensor of ``out_dtype`` (default: the input dtype; bf16 for fp8).
    ``activation``: None, an :class:`~tilelab.kernels.Activation` or its name ("relu",
    "gelu" = "gelu_tanh", "gelu_erf", "silu", "sigmoid", "exp"), applied in fp32 before
    the residual is added.
    ``config`` overrides the tiles and schedule chosen by :func:`default_config`.
    ``sync=False`` launches without waiting (on ``stream``, default the caller's) and
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
         activation: ActivationLike = None, residual: Any = None, scale_a: float = 1.0,
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


def _launches_bmm(cfg: MatmulConfig, c: Any, a: Any, b: Any, epi: _Epilogue) -> list[tuple]:
    if cfg.schedule not in ("grouped", "row_major"):
        raise ValueError(f"bmm: schedule {cfg.schedule!r} is not available for batches; "
                         "use 'grouped' or 'row_major'")
    if cfg.swap_ab:
        raise ValueError("bmm: swap_ab=True is not available for batches (matmul has it); "
                         "use swap_ab=False")
    schedule = tl.grouped(cfg.group_m) if cfg.schedule == "grouped" else tl.row_major
    part = c.partition((1, cfg.tm, cfg.tn), schedule=schedule)
    return [(_variant(batched_matmul_kernel, cfg),
             launch_args(batched_matmul_kernel, c=part, a=a, b=b, TK=cfg.tk,
                         B_BATCHED=b.ndim == 3, LAT=cfg.latency or 0, **epi.named()))]


def plan_bmm(a: Any, b: Any, *, out: Any = None, out_dtype: Any = None, bias: Any = None,
             activation: ActivationLike = None, residual: Any = None, scale_a: float = 1.0,
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
    if in_dtype in FP8:
        raise TypeError(f"{who}: fp8 batches are not supported; call matmul per batch")
    cfg = config or bmm_config(max(m, 1), in_dtype)
    out_t = _output(out, (g, m, n), out_dtype, in_dtype, a.device, who)
    if min(g, m, n) == 0:
        return Plan(out_t, [])
    epi = _epilogue_args((g, m, n), a.device, bias, residual, activation,
                         scale_a * scale_b, who)
    return Plan(out_t, _launches_bmm(cfg, out_t, a, b, epi))


def bmm(a: Any, b: Any, *, out: Any = None, out_dtype: Any = None, bias: Any = None,
        activation: ActivationLike = None, residual: Any = None, scale_a: float = 1.0,
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
                   trans_b: bool = False, bias: bool = False, activation: ActivationLike = None,
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
    in_dtype = dtype_name(dtype)
    out_name = _out_dtype(out_dtype, in_dtype, "compile_matmul")
    spec = tl.spec
    lead = () if batch is None else (batch,)
    epi = _Epilogue(spec(n, "float32") if bias else spec(1, "float32"),
                    spec(lead + (m, n), "float32") if residual
                    else spec((1,) * (len(lead) + 2), "float32"),
                    1.0, bias, int(activation_code(activation, "compile_matmul")), residual)
    c = spec(lead + (m, n), out_name)
    a = spec(lead + (m, k), in_dtype)
    if batch is not None:
        cfg = config or bmm_config(m, in_dtype)
        launches = _launches_bmm(cfg, c, a, spec((batch, k, n), in_dtype), epi)
    else:
        cfg = config or default_config(m, n, k, in_dtype, b_transposed=trans_b)
        bop = spec((n, k), in_dtype) if trans_b else spec((k, n), in_dtype)
        fast = bool(cfg.fast_acc and in_dtype in FP8)
        launches = _launches_2d(cfg, c, a, bop, trans_b, epi, fast, spec)
    return [kern.compile(*args, arch=arch) for kern, args in launches]
