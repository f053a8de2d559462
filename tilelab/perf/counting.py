"""Minimal FLOP and byte counts of common kernels, for honest roofline points.

Why: a roofline point is (FLOPs / bytes, FLOPs / seconds). If each kernel counted its own
traffic its own way, points would not be comparable, and a kernel that re-reads its inputs
would look *better* (more bytes per second) than one that does not. So every count here
follows one convention, the minimal (compulsory) work of the operation:

* **Bytes**: every input tensor is read once and every output tensor written once, at its
  dtype's size (FP4 packed two to a byte, sizes rounded up to whole bytes per tensor). No
  re-reads from tiling, no halos, no scratch, no block-scale factors, no L2 effects. The
  achieved bandwidth from these bytes is the *useful* bandwidth, a lower bound on real DRAM
  traffic.
* **FLOPs**: a multiply-add counts 2; only the arithmetic the math needs, without padding
  waste. Transcendentals (exp) and comparisons (max) count 1 each. Attention counts only its
  two matrix products, as the FlashAttention papers do.
* **Precision**: each count names the ceiling it runs against (a key of
  :data:`tilelab.perf.specs.PRECISIONS`): tensor-core GEMMs by their input and accumulator
  dtypes, everything else on the CUDA cores ('fp32', or 'fp64' for float64 data).

Example:
    >>> w = gemm(4096, 4096, 4096, a_dtype="bfloat16")
    >>> w.flops, w.bytes, w.precision, round(w.intensity, 1)
    (137438953472, 100663296, 'bf16', 1365.3)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tilelab.perf.specs import check_precision

__all__ = [
    "Work", "dtype_size", "gemm_precision", "elementwise", "gemm", "batched_gemm", "gemv",
    "softmax", "layernorm", "rmsnorm", "attention_forward", "causal_pairs",
]


# --------------------------------------------------------------------------- result

@dataclass(frozen=True)
class Work:
    """The minimal work of one kernel launch: FLOPs, bytes read and written, and its ceiling.

    Example:
        >>> w = elementwise(1024, inputs=2, dtype="float32")
        >>> w.flops, w.bytes_read, w.bytes_written, w.bytes
        (1024, 8192, 4096, 12288)
    """

    name: str
    flops: int
    bytes_read: int
    bytes_written: int
    precision: str

    def __post_init__(self) -> None:
        check_precision(self.precision)
        if self.flops < 0 or self.bytes_read < 0 or self.bytes_written < 0:
            raise ValueError(f"{self.name}: counts must be non-negative")
        if self.bytes_read + self.bytes_written == 0:
            raise ValueError(f"{self.name}: a kernel that moves no bytes has no roofline point")

    @property
    def bytes(self) -> int:
        """Bytes read plus bytes written (B).

        Example:
            >>> gemv(4, 8, dtype="float32").bytes   # A 4x8, x 8, y 4 (float32)
            176
        """
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOP/B.

        Example:
            >>> elementwise(1000, inputs=2, dtype="float32").intensity   # 1 FLOP per 12 B
            0.08333333333333333
        """
        return self.flops / self.bytes

    def to_dict(self) -> dict[str, Any]:
        """Plain data for tables and JSON.

        Example:
            >>> sorted(elementwise(8).to_dict())
            ['bytes', 'bytes_read', 'bytes_written', 'flops', 'intensity', 'name', 'precision']
        """
        return {"name": self.name, "flops": self.flops, "bytes_read": self.bytes_read,
                "bytes_written": self.bytes_written, "bytes": self.bytes,
                "intensity": self.intensity, "precision": self.precision}


# --------------------------------------------------------------------------- dtypes

_SIZES: dict[str, float] = {
    "float64": 8, "fp64": 8, "f64": 8, "double": 8,
    "float32": 4, "fp32": 4, "f32": 4, "float": 4, "tf32": 4,
    "bfloat16": 2, "bf16": 2,
    "float16": 2, "fp16": 2, "f16": 2, "half": 2,
    "float8_e4m3fn": 1, "float8_e4m3": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1, "fp8": 1, "e4m3": 1, "e5m2": 1, "f8e4m3fn": 1, "f8e5m2": 1,
    "float4_e2m1fn": 0.5, "fp4": 0.5, "e2m1": 0.5, "nvfp4": 0.5, "mxfp4": 0.5,
    "int64": 8, "uint64": 8, "int32": 4, "uint32": 4, "int16": 2, "uint16": 2,
    "int8": 1, "uint8": 1, "bool": 1,
}
_KIND: dict[str, str] = {
    **dict.fromkeys(("float64", "fp64", "f64", "double"), "f64"),
    **dict.fromkeys(("float32", "fp32", "f32", "float", "tf32"), "f32"),
    **dict.fromkeys(("bfloat16", "bf16"), "bf16"),
    **dict.fromkeys(("float16", "fp16", "f16", "half"), "f16"),
    **dict.fromkeys(("float8_e4m3fn", "float8_e4m3", "float8_e5m2", "float8_e4m3fnuz",
                     "float8_e5m2fnuz", "fp8", "e4m3", "e5m2", "f8e4m3fn", "f8e5m2"), "f8"),
    **dict.fromkeys(("float4_e2m1fn", "fp4", "e2m1", "nvfp4", "mxfp4"), "f4"),
    **dict.fromkeys(("int8", "uint8"), "i8"),
}
"""dtype name -> operand kind for choosing a tensor-core ceiling (other integers: 'int')."""


def _dtype_name(dtype: Any) -> str:
    """A lower-case name for a dtype given as a string, numpy/ml_dtypes dtype or type."""
    if isinstance(dtype, str):
        return dtype.strip().lower()
    name = getattr(dtype, "name", None)
    if isinstance(name, str):
        return name.lower()
    try:
        import numpy as np
        return np.dtype(dtype).name.lower()
    except Exception:
        return str(dtype).lower()


def dtype_size(dtype: Any) -> float:
    """Bytes per element of ``dtype`` (0.5 for FP4, which tensor cores read packed).

    Accepts names ('bf16', 'float8_e4m3fn', ...), numpy and ml_dtypes dtypes.

    Example:
        >>> dtype_size("bf16"), dtype_size("float8_e4m3fn"), dtype_size("fp4")
        (2, 1, 0.5)
    """
    name = _dtype_name(dtype)
    if name in _SIZES:
        return _SIZES[name]
    raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(sorted(_SIZES))}")


def _kind(dtype: Any) -> str:
    name = _dtype_name(dtype)
    dtype_size(name)
    return _KIND.get(name, "int")


def _tensor_bytes(elements: int, dtype: Any) -> int:
    """Bytes of a tensor of ``elements`` elements, rounded up to a whole byte."""
    return math.ceil(elements * dtype_size(dtype))


def _dim(name: str, value: Any) -> int:
    """A positive integer dimension, or a ValueError naming the argument."""
    try:
        as_int = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive integer, got {value!r}") from None
    if as_int != value or as_int < 1 or isinstance(value, bool):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return as_int


def _vector_precision(dtype: Any) -> str:
    """CUDA-core ceiling of non-GEMM math: FP64 for float64 data, FP32 otherwise."""
    return "fp64" if _kind(dtype) == "f64" else "fp32"


def gemm_precision(a_dtype: Any, b_dtype: Any = None, *, acc_dtype: Any = "float32",
                   allow_tf32: bool = False) -> str:
    """The ceiling key of a matrix product of these operand and accumulator dtypes.

    Mixed operands (bf16 x fp8) run at the rate of the wider one. FP32 operands use the
    FP32 CUDA-core ceiling unless ``allow_tf32``; FP64 uses the FP64 tensor cores.

    Example:
        >>> gemm_precision("bf16"), gemm_precision("fp16", acc_dtype="fp16")
        ('bf16', 'fp16_acc16')
        >>> gemm_precision("float8_e4m3fn", "float8_e5m2"), gemm_precision("f32", allow_tf32=True)
        ('fp8', 'tf32')
    """
    kinds = [_kind(a_dtype), _kind(b_dtype if b_dtype is not None else a_dtype)]
    order = ["f4", "i8", "f8", "f16", "bf16", "f32", "f64"]
    for k in kinds:
        if k not in order:
            raise ValueError(f"no tensor-core rate for operand dtype {a_dtype!r}/{b_dtype!r}")
    if "i8" in kinds and kinds != ["i8", "i8"]:
        raise ValueError("integer GEMMs need int8 for both operands")
    kind = max(kinds, key=order.index)
    acc16 = _kind(acc_dtype) == "f16"
    if acc16 and kind not in ("f16", "f8"):
        raise ValueError(f"FP16 accumulation exists for fp16 and fp8 operands, not {kind}")
    return {
        "f64": "fp64_tc", "f32": "tf32" if allow_tf32 else "fp32", "bf16": "bf16",
        "f16": "fp16_acc16" if acc16 else "fp16", "f8": "fp8_acc16" if acc16 else "fp8",
        "f4": "fp4", "i8": "int8",
    }[kind]


def _default_out(dtype: Any) -> Any:
    """Output dtype when the caller names none: bf16 for 8/4-bit floats, int32 for int8."""
    kind = _kind(dtype)
    return {"f8": "bfloat16", "f4": "bfloat16", "i8": "int32"}.get(kind, dtype)


# --------------------------------------------------------------------------- kernels

def elementwise(n: int, *, inputs: int = 2, outputs: int = 1, dtype: Any = "float32",
                out_dtype: Any = None, flops_per_element: int | None = None,
                name: str = "elementwise") -> Work:
    """An n-ary elementwise op over ``n`` elements: each input read once, each output written.

    ``flops_per_element`` defaults to ``max(1, inputs - 1)`` (a + b: 1; a * b + c: 2;
    a unary op: 1).

    Example:
        >>> w = elementwise(1 << 20, inputs=3, dtype="bf16")   # e.g. a * b + c
        >>> w.flops, w.bytes, w.precision
        (2097152, 8388608, 'fp32')
    """
    n = _dim("n", n)
    inputs = _dim("inputs", inputs)
    outputs = _dim("outputs", outputs)
    per = max(1, inputs - 1) if flops_per_element is None else int(flops_per_element)
    if per < 0:
        raise ValueError("flops_per_element must be non-negative")
    out_dtype = dtype if out_dtype is None else out_dtype
    return Work(name, n * per, inputs * _tensor_bytes(n, dtype),
                outputs * _tensor_bytes(n, out_dtype), _vector_precision(dtype))


def gemm(m: int, n: int, k: int, *, a_dtype: Any = "bfloat16", b_dtype: Any = None,
         c_dtype: Any = None, acc_dtype: Any = "float32", read_c: bool = False,
         allow_tf32: bool = False, name: str | None = None) -> Work:
    """C[m, n] = A[m, k] @ B[k, n]: 2·m·n·k FLOPs; A and B read once, C written once.

    ``c_dtype`` defaults to the operand dtype (bf16 for 8/4-bit floats, int32 for int8).
    ``read_c`` adds one read of C (C = A @ B + beta * C).

    Example:
        >>> w = gemm(128, 256, 64, a_dtype="fp16")
        >>> w.flops == 2 * 128 * 256 * 64, w.bytes == (128 * 64 + 64 * 256 + 128 * 256) * 2
        (True, True)
    """
    m, n, k = _dim("m", m), _dim("n", n), _dim("k", k)
    b_dtype = a_dtype if b_dtype is None else b_dtype
    c_dtype = _default_out(a_dtype) if c_dtype is None else c_dtype
    read = _tensor_bytes(m * k, a_dtype) + _tensor_bytes(k * n, b_dtype)
    if read_c:
        read += _tensor_bytes(m * n, c_dtype)
    return Work(name or f"gemm {m}x{n}x{k}", 2 * m * n * k, read, _tensor_bytes(m * n, c_dtype),
                gemm_precision(a_dtype, b_dtype, acc_dtype=acc_dtype, allow_tf32=allow_tf32))


def batched_gemm(batch: int, m: int, n: int, k: int, *, a_dtype: Any = "bfloat16",
                 b_dtype: Any = None, c_dtype: Any = None, acc_dtype: Any = "float32",
                 shared_b: bool = False, allow_tf32: bool = False,
                 name: str | None = None) -> Work:
    """``batch`` independent GEMMs; with ``shared_b`` one B (e.g. weights) serves every batch
    entry and is counted once.

    Example:
        >>> one = gemm(64, 64, 64)
        >>> many = batched_gemm(8, 64, 64, 64)
        >>> many.flops == 8 * one.flops, many.bytes == 8 * one.bytes
        (True, True)
        >>> batched_gemm(8, 64, 64, 64, shared_b=True).bytes_read == 8 * 64 * 64 * 2 + 64 * 64 * 2
        True
    """
    batch = _dim("batch", batch)
    one = gemm(m, n, k, a_dtype=a_dtype, b_dtype=b_dtype, c_dtype=c_dtype, acc_dtype=acc_dtype,
               allow_tf32=allow_tf32)
    b_bytes = _tensor_bytes(k * n, a_dtype if b_dtype is None else b_dtype)
    read = batch * one.bytes_read - ((batch - 1) * b_bytes if shared_b else 0)
    return Work(name or f"batched gemm {batch}x({m}x{n}x{k})", batch * one.flops, read,
                batch * one.bytes_written, one.precision)


def gemv(m: int, n: int, *, dtype: Any = "bfloat16", x_dtype: Any = None, y_dtype: Any = None,
         precision: str | None = None, name: str | None = None) -> Work:
    """y[m] = A[m, n] @ x[n]: 2·m·n FLOPs; A and x read once, y written once.

    GEMV is memory-bound and runs on the CUDA cores, so its ceiling is 'fp32' unless
    ``precision`` says otherwise.

    Example:
        >>> w = gemv(4096, 4096, dtype="bf16")
        >>> w.flops, w.bytes, round(w.intensity, 3)
        (33554432, 33570816, 1.0)
    """
    m, n = _dim("m", m), _dim("n", n)
    x_dtype = dtype if x_dtype is None else x_dtype
    y_dtype = x_dtype if y_dtype is None else y_dtype
    read = _tensor_bytes(m * n, dtype) + _tensor_bytes(n, x_dtype)
    return Work(name or f"gemv {m}x{n}", 2 * m * n, read, _tensor_bytes(m, y_dtype),
                precision or _vector_precision(dtype))


def softmax(rows: int, cols: int, *, dtype: Any = "float32", out_dtype: Any = None,
            name: str | None = None) -> Work:
    """Row softmax of a rows x cols matrix: 5 FLOPs per element (max, subtract, exp, sum,
    scale by the reciprocal); input read once, output written once.

    Example:
        >>> w = softmax(4, 1000, dtype="bf16")
        >>> w.flops, w.bytes
        (20000, 16000)
    """
    rows, cols = _dim("rows", rows), _dim("cols", cols)
    out_dtype = dtype if out_dtype is None else out_dtype
    count = rows * cols
    return Work(name or f"softmax {rows}x{cols}", 5 * count, _tensor_bytes(count, dtype),
                _tensor_bytes(count, out_dtype), _vector_precision(dtype))


def layernorm(rows: int, cols: int, *, dtype: Any = "float32", out_dtype: Any = None,
              weight: bool = True, bias: bool = True, param_dtype: Any = None,
              save_stats: bool = False, name: str | None = None) -> Work:
    """LayerNorm over the last axis: 5 FLOPs per element (mean-add, subtract, square-add as
    a multiply and an add, scale by rstd) plus 1 each for weight and bias.

    x is read and y written once; weight and bias (``cols`` each) are read once;
    ``save_stats`` writes mean and rstd (fp32, one each per row).

    Example:
        >>> w = layernorm(2, 1024, dtype="float32")
        >>> w.flops, w.bytes_read, w.bytes_written
        (14336, 16384, 8192)
    """
    rows, cols = _dim("rows", rows), _dim("cols", cols)
    per = 5 + int(weight) + int(bias)
    return _norm(name or f"layernorm {rows}x{cols}", rows, cols, per, dtype, out_dtype,
                 int(weight) + int(bias), param_dtype, 2 if save_stats else 0)


def rmsnorm(rows: int, cols: int, *, dtype: Any = "float32", out_dtype: Any = None,
            weight: bool = True, param_dtype: Any = None, save_stats: bool = False,
            name: str | None = None) -> Work:
    """RMSNorm over the last axis: 3 FLOPs per element (square and add, scale by rstd) plus
    1 for the weight; x read and y written once, the weight read once; ``save_stats`` writes
    rstd (fp32, one per row).

    Example:
        >>> w = rmsnorm(8, 4096, dtype="bf16")
        >>> w.flops, w.bytes
        (131072, 139264)
    """
    rows, cols = _dim("rows", rows), _dim("cols", cols)
    return _norm(name or f"rmsnorm {rows}x{cols}", rows, cols, 3 + int(weight), dtype,
                 out_dtype, int(weight), param_dtype, 1 if save_stats else 0)


def _norm(name: str, rows: int, cols: int, per: int, dtype: Any, out_dtype: Any,
          params: int, param_dtype: Any, stats_per_row: int) -> Work:
    out_dtype = dtype if out_dtype is None else out_dtype
    param_dtype = dtype if param_dtype is None else param_dtype
    read = _tensor_bytes(rows * cols, dtype) + params * _tensor_bytes(cols, param_dtype)
    written = _tensor_bytes(rows * cols, out_dtype) + stats_per_row * rows * 4
    return Work(name, per * rows * cols, read, written, _vector_precision(dtype))


def causal_pairs(seq_q: int, seq_k: int) -> int:
    """(query, key) pairs a causal mask keeps, aligned bottom-right as FlashAttention does:
    query i sees keys j <= i + seq_k - seq_q. For seq_q == seq_k == S it is S(S+1)/2.

    Example:
        >>> causal_pairs(4, 4), causal_pairs(1, 100), causal_pairs(3, 5)
        (10, 100, 12)
    """
    seq_q, seq_k = _dim("seq_q", seq_q), _dim("seq_k", seq_k)
    offset = seq_k - seq_q
    first = max(0, -offset)            # queries before this one see no key at all
    count = seq_q - first
    if count <= 0:
        return 0
    lo, hi = first + offset + 1, seq_k  # keys seen by the first and the last query
    return count * (lo + hi) // 2


def attention_forward(batch: int, heads: int, seq_q: int, seq_k: int, head_dim: int, *,
                      kv_heads: int | None = None, head_dim_v: int | None = None,
                      causal: bool = False, dtype: Any = "bfloat16", out_dtype: Any = None,
                      acc_dtype: Any = "float32", save_lse: bool = False,
                      name: str | None = None) -> Work:
    """Flash-attention forward O = softmax(Q K^T) V without materializing the scores.

    FLOPs are the two matrix products, 2·pairs·(head_dim + head_dim_v) per (batch, head),
    where pairs = seq_q·seq_k, or :func:`causal_pairs` with ``causal`` (about half). Q, K, V
    are read once (K and V have ``kv_heads`` heads for GQA/MQA), O written once, plus the
    fp32 log-sum-exp per query row with ``save_lse``.

    Example:
        >>> full = attention_forward(1, 8, 1024, 1024, 128)
        >>> full.flops == 4 * 8 * 1024 * 1024 * 128
        True
        >>> attention_forward(1, 8, 1024, 1024, 128, causal=True).flops / full.flops
        0.50048828125
    """
    batch, heads = _dim("batch", batch), _dim("heads", heads)
    seq_q, seq_k, head_dim = _dim("seq_q", seq_q), _dim("seq_k", seq_k), _dim("head_dim", head_dim)
    kv_heads = heads if kv_heads is None else _dim("kv_heads", kv_heads)
    head_dim_v = head_dim if head_dim_v is None else _dim("head_dim_v", head_dim_v)
    if heads % kv_heads:
        raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
    out_dtype = dtype if out_dtype is None else out_dtype
    pairs = causal_pairs(seq_q, seq_k) if causal else seq_q * seq_k
    flops = 2 * batch * heads * pairs * (head_dim + head_dim_v)
    read = (_tensor_bytes(batch * heads * seq_q * head_dim, dtype)
            + _tensor_bytes(batch * kv_heads * seq_k * head_dim, dtype)
            + _tensor_bytes(batch * kv_heads * seq_k * head_dim_v, dtype))
    written = _tensor_bytes(batch * heads * seq_q * head_dim_v, out_dtype)
    if save_lse:
        written += batch * heads * seq_q * 4
    label = name or (f"attention fwd b{batch} h{heads} q{seq_q} k{seq_k} d{head_dim}"
                     + (" causal" if causal else ""))
    return Work(label, flops, read, written, gemm_precision(dtype, acc_dtype=acc_dtype))
