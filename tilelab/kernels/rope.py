"""Rotary position embeddings (RoPE), NeoX / "rotate half" style, for q and k together.

For a head vector split in halves ``x = [x1, x2]`` (``d = head_dim / 2``) and a position
``p``: ``out = [x1 * cos - x2 * sin, x2 * cos + x1 * sin]`` with ``cos = cos_table[p]``,
``sin = sin_table[p]`` of shape ``(d,)``. This is the layout of GPT-NeoX, Llama and Qwen
in Hugging Face (``rotate_half``); tables may be given as ``(max_pos, d)`` or as the
Hugging Face ``(max_pos, head_dim)`` (whose two halves are equal: only the first half
is read). Interleaved (GPT-J) pairs are not supported.

Tensors are ``(batch, seq, heads, head_dim)`` (position = index in seq) or
``(tokens, heads, head_dim)`` (position = token index, or ``positions[token]``). A block
owns ``block_t`` tokens with all their heads; it gathers the ``block_t`` table rows
once and applies them to every head (of q and of k). ``head_dim`` must be a power of
two so that each half is one tile. Outputs are written through a ``(tokens, heads *
head_dim)`` view in ``(block_t, pow2(heads) * head_dim)`` tiles, a 2-D tile grid (a
3-D one would put the tokens in CUDA's grid z, capped at 65535).
"""
from __future__ import annotations

from typing import Any

import cuda.tile as ct
import numpy as np

import tilelab as tl
from tilelab.kernels._host import (TILE_ELEMS, Call, CallCache, check_block, check_float,
                                   check_same_device, grid_schedule, output, PairResult,
                                   pow2_ceil, row_kernel, tensor_arg, TensorResult)

__all__ = ["rope", "apply_rope", "rope_tables"]


# ======================================================================================
# kernel helpers
# ======================================================================================


def _seq_positions(m, bt, seq_len):
    """Positions of the bt tokens of token tile m when tokens are (batch, seq) rows."""
    return (m * bt + ct.arange(bt, dtype=ct.int32)) % seq_len


def _table_rows(table, pos, bt, half):
    """(bt, 1, half) float32 rows ``table[pos]`` (out-of-range positions read zeros)."""
    cols = ct.arange(half, dtype=ct.int32)
    rows = ct.gather(table, (ct.reshape(pos, (bt, 1)), ct.reshape(cols, (1, half))))
    return ct.reshape(rows.astype(ct.float32), (bt, 1, half))


def _rotate(x, m, bt, bh, half, c, s):
    """Rotated tokens m*bt.. of x (tokens, heads, head_dim), all heads, as a float32
    (bt, bh * 2 * half) tile: the row layout of the (tokens, heads * head_dim) output."""
    x1 = ct.load(x, index=(m, 0, 0), shape=(bt, bh, half), padding_mode=ct.PaddingMode.ZERO)
    x2 = ct.load(x, index=(m, 0, 1), shape=(bt, bh, half), padding_mode=ct.PaddingMode.ZERO)
    x1 = x1.astype(ct.float32)
    x2 = x2.astype(ct.float32)
    r = ct.cat((x1 * c - x2 * s, x2 * c + x1 * s), axis=2)
    return ct.reshape(r, (bt, bh * 2 * half))


# ======================================================================================
# kernels: one tensor or q and k, positions from the row index or from a tensor.
# Outputs are viewed as (tokens, heads * head_dim) and tiled (block_t, pow2(heads) *
# head_dim): one tile per block_t tokens, a 2-D grid that can leave CUDA's grid-y limit.
# ======================================================================================


@tl.kernel
def rope_seq_kernel(out: tl.Out, x: tl.In, cos: tl.In, sin: tl.In, seq_len: int,
                    HEAD_DIM: ct.Constant[int]):
    """RoPE of x (tokens, heads, head_dim); token t sits at position t % seq_len.

    Example:
        >>> rope_seq_kernel(o.partition((4, 32 * 128)), x, cos, sin, 2048, 128)  # doctest: +SKIP
    """
    bt, width = out.tile_shape
    m, _ = out.tile_index
    half = HEAD_DIM // 2
    pos = _seq_positions(m, bt, seq_len)
    c = _table_rows(cos, pos, bt, half)
    s = _table_rows(sin, pos, bt, half)
    out.store(_rotate(x, m, bt, width // HEAD_DIM, half, c, s).astype(out.dtype))


@tl.kernel
def rope_pos_kernel(out: tl.Out, x: tl.In, cos: tl.In, sin: tl.In, positions: tl.In,
                    HEAD_DIM: ct.Constant[int]):
    """RoPE of x (tokens, heads, head_dim) at ``positions[t]`` (int32/int64).

    Example:
        >>> rope_pos_kernel(o.partition((4, 32 * 128)), x, cos, sin, pos, 128)  # doctest: +SKIP
    """
    bt, width = out.tile_shape
    m, _ = out.tile_index
    half = HEAD_DIM // 2
    pos = ct.load(positions, index=(m,), shape=(bt,), padding_mode=ct.PaddingMode.ZERO)
    c = _table_rows(cos, pos, bt, half)
    s = _table_rows(sin, pos, bt, half)
    out.store(_rotate(x, m, bt, width // HEAD_DIM, half, c, s).astype(out.dtype))


@tl.kernel
def rope_qk_seq_kernel(q_out: tl.Out, k_out: tl.Out, q: tl.In, k: tl.In, cos: tl.In,
                       sin: tl.In, seq_len: int, HEAD_DIM: ct.Constant[int]):
    """RoPE of q and k (tokens, heads, head_dim) in one launch; position t % seq_len.

    q and k may have different head counts (GQA): their tiles share the token axis.

    Example:
        >>> rope_qk_seq_kernel(qo.partition((4, 32 * 128)), ko.partition((4, 8 * 128)),
        ...                    q, k, cos, sin, 2048, 128)                 # doctest: +SKIP
    """
    bt, q_width = q_out.tile_shape
    k_width = k_out.tile_shape[1]
    m, _ = q_out.tile_index
    half = HEAD_DIM // 2
    pos = _seq_positions(m, bt, seq_len)
    c = _table_rows(cos, pos, bt, half)
    s = _table_rows(sin, pos, bt, half)
    q_out.store(_rotate(q, m, bt, q_width // HEAD_DIM, half, c, s).astype(q_out.dtype))
    k_out.store(_rotate(k, m, bt, k_width // HEAD_DIM, half, c, s).astype(k_out.dtype))


@tl.kernel
def rope_qk_pos_kernel(q_out: tl.Out, k_out: tl.Out, q: tl.In, k: tl.In, cos: tl.In,
                       sin: tl.In, positions: tl.In, HEAD_DIM: ct.Constant[int]):
    """RoPE of q and k (tokens, heads, head_dim) at ``positions[t]``, one launch.

    Example:
        >>> rope_qk_pos_kernel(qo.partition((4, 32 * 128)), ko.partition((4, 8 * 128)),
        ...                    q, k, cos, sin, pos, 128)                  # doctest: +SKIP
    """
    bt, q_width = q_out.tile_shape
    k_width = k_out.tile_shape[1]
    m, _ = q_out.tile_index
    half = HEAD_DIM // 2
    pos = ct.load(positions, index=(m,), shape=(bt,), padding_mode=ct.PaddingMode.ZERO)
    c = _table_rows(cos, pos, bt, half)
    s = _table_rows(sin, pos, bt, half)
    q_out.store(_rotate(q, m, bt, q_width // HEAD_DIM, half, c, s).astype(q_out.dtype))
    k_out.store(_rotate(k, m, bt, k_width // HEAD_DIM, half, c, s).astype(k_out.dtype))


# ======================================================================================
# host
# ======================================================================================


def rope_tables(max_pos: int, head_dim: int, *, base: float = 10000.0,
                dtype: Any = "float32", device: Any = None) -> tuple[tl.Tensor, tl.Tensor]:
    """``(cos, sin)`` tables of shape ``(max_pos, head_dim // 2)``.

    Frequency ``i`` is ``base ** (-2i / head_dim)``, angles are computed in float64.

    Example:
        >>> from tilelab.kernels.rope import rope_tables
        >>> cos, sin = rope_tables(16, 8, device="cpu")
        >>> cos.shape, float(cos.numpy()[0, 0]), float(sin.numpy()[0, 0])
        ((16, 4), 1.0, 0.0)
    """
    if head_dim < 2 or head_dim % 2:
        raise ValueError(f"rope_tables(): head_dim must be even and >= 2, got {head_dim}")
    inv = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    ang = np.outer(np.arange(max_pos, dtype=np.float64), inv)
    return (tl.tensor(np.cos(ang), dtype=dtype, device=device),
            tl.tensor(np.sin(ang), dtype=dtype, device=device))


def _tokens_view(t: tl.Tensor, name: str, fn: str) -> tuple[tl.Tensor, int]:
    """(t as (tokens, heads, head_dim), seq_len) for a 3-D or 4-D q/k tensor."""
    if t.ndim == 4:
        b, s, h, d = t.shape
        v = t.reshape(b * s, h, d) if t.is_contiguous else t.contiguous().reshape(b * s, h, d)
        return v, s
    if t.ndim == 3:
        return t, t.shape[0]
    raise ValueError(f"{fn}(): {name} must be (batch, seq, heads, head_dim) or (tokens, "
                     f"heads, head_dim), got shape {t.shape}")


def _table(t: Any, name: str, half: int, fn: str) -> tl.Tensor:
    tt = tensor_arg(t, name, fn)
    check_float(tt, name, fn)
    if tt.ndim != 2 or tt.shape[1] not in (half, 2 * half):
        raise ValueError(f"{fn}(): {name} must be (max_pos, {half}) or (max_pos, "
                         f"{2 * half}), got {tt.shape}")
    return tt[:, :half] if tt.shape[1] != half else tt


def _qk_views(fn: str, q: Any, k: Any) -> tuple:
    """(q, k or None, q as tokens, k as tokens or None, seq_len, head_dim), checked."""
    qt = tensor_arg(q, "q", fn)
    check_float(qt, "q", fn)
    kt = None if k is None else tensor_arg(k, "k", fn)
    if kt is not None:
        check_float(kt, "k", fn)
    hd = qt.shape[-1] if qt.ndim else 0
    if hd < 2 or hd & (hd - 1):
        raise ValueError(f"{fn}(): head_dim must be a power of two >= 2 (each half is a "
                         f"tile), got {hd}")
    qv, seq_len = _tokens_view(qt, "q", fn)
    kv = None
    if kt is not None:
        kv, _ = _tokens_view(kt, "k", fn)
        lead = qt.shape[:-2]
        if kt.ndim != qt.ndim or kt.shape[:-2] != lead or kt.shape[-1] != hd:
            raise ValueError(f"{fn}(): k {kt.shape} must match q {qt.shape} in every "
                             "dimension but heads")
    return qt, kt, qv, kv, seq_len, hd


def _positions(fn: str, positions: Any, qt: tl.Tensor, tokens: int, seq_len: int,
               max_pos: int, check_positions: bool) -> tl.Tensor | None:
    """The checked ``positions`` tensor, or None (then the seq index is the position)."""
    if positions is None:
        if seq_len > max_pos:
            raise ValueError(f"{fn}(): sequence length {seq_len} exceeds the tables' "
                             f"{max_pos} positions")
        return None
    if qt.ndim == 4:
        raise ValueError(f"{fn}(): positions are for (tokens, heads, head_dim) tensors; "
                         "(batch, seq, heads, head_dim) ones take the seq index (view "
                         "them as (batch * seq, heads, head_dim) to pass positions)")
    pt = tensor_arg(positions, "positions", fn)
    if pt.dtype.name not in ("int32", "int64"):
        raise TypeError(f"{fn}(): positions must be int32 or int64, got "
                        f"{pt.dtype.name}")
    if pt.shape != (tokens,):
        raise ValueError(f"{fn}(): positions must have shape ({tokens},) (one per "
                         f"token), got {pt.shape}")
    if check_positions and tokens:
        p = pt.numpy()
        bad = np.flatnonzero((p < 0) | (p >= max_pos))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"{fn}(): positions[{i}] = {int(p[i])} is outside the "
                             f"tables (0..{max_pos - 1})")
    return pt


def _rope_outputs(fn: str, out: Any, qt: tl.Tensor, kt: tl.Tensor | None,
                  device: str) -> tuple[tl.Tensor, tl.Tensor | None]:
    """(q_out, k_out or None)."""
    outs = out if (kt is not None and out is not None) else (out, None)
    if kt is not None and out is not None and (not isinstance(out, tuple) or len(out) != 2):
        raise TypeError(f"{fn}(): out must be a pair (q_out, k_out)")
    qo = output(outs[0], qt.shape, qt.dtype, device, "q_out", fn)
    ko = None if kt is None else output(outs[1], kt.shape, kt.dtype, device, "k_out", fn)
    return qo, ko


def _rope_call(fn: str, q: Any, k: Any, cos: Any, sin: Any, positions: Any,
               block_t: int | None, check_positions: bool, out: Any) -> Call:
    """The launch of :func:`rope` / :func:`apply_rope` (``k`` None: one tensor)."""
    block_t = check_block(block_t, "block_t", fn)
    qt, kt, qv, kv, seq_len, hd = _qk_views(fn, q, k)
    half = hd // 2
    ct_, st_ = _table(cos, "cos", half, fn), _table(sin, "sin", half, fn)
    if ct_.shape[0] != st_.shape[0]:
        raise ValueError(f"{fn}(): cos {ct_.shape} and sin {st_.shape} differ in length")
    tokens = qv.shape[0]
    pt = _positions(fn, positions, qt, tokens, seq_len, ct_.shape[0], check_positions)
    device = check_same_device(fn, q=qt, k=kt, cos=ct_, sin=st_, positions=pt)
    qo, ko = _rope_outputs(fn, out, qt, kt, device)
    result = qo if ko is None else (qo, ko)
    heads = [qv.shape[1]] + ([kv.shape[1]] if kt is not None else [])
    if tokens == 0 or 0 in heads:
        return Call(rope_seq_kernel, None, result)
    bhs = [pow2_ceil(h) for h in heads]
    bt = block_t or max(1, min(pow2_ceil(tokens), TILE_ELEMS // (max(bhs) * hd)))
    sched = grid_schedule(-(-tokens // bt))
    # outputs are contiguous (see output): view them as (tokens, heads * head_dim)
    parts = [qo.reshape(tokens, heads[0] * hd).partition((bt, bhs[0] * hd), schedule=sched)]
    ins = [qv]
    if kt is not None:
        parts.append(ko.reshape(tokens, heads[1] * hd).partition((bt, bhs[1] * hd),
                                                                 schedule=sched))
        ins.append(kv)
    last = pt if pt is not None else seq_len
    if kt is None:
        kernel = row_kernel(rope_pos_kernel if pt is not None else rope_seq_kernel,
                            "rope", device)
    else:
        kernel = rope_qk_pos_kernel if pt is not None else rope_qk_seq_kernel
    return Call(kernel, (*parts, *ins, ct_, st_, last, hd), result)


#: prepared calls (see tilelab.kernels._host)
_ROPE = CallCache("rope")


def _rope(fn: str, q: Any, k: Any, cos: Any, sin: Any, positions: Any,
          block_t: int | None, check_positions: bool, out: Any, sync: bool,
          stream: Any) -> Any:
    """Run RoPE, through the call cache unless ``positions`` must be checked (that
    reads them on the host, so it is done on every call)."""
    if positions is not None and check_positions:
        call = _rope_call(fn, q, k, cos, sin, positions, block_t, check_positions, out)
    else:
        call = _ROPE.prepare(_rope_call, fn, q, k, cos, sin, positions, block_t,
                             check_positions, out=out)
    return call.run(sync, stream)


def rope(q: Any, k: Any, cos: Any, sin: Any, *, positions: Any = None,
         block_t: int | None = None, check_positions: bool = True, out: Any = None,
         sync: bool = True, stream: Any = None) -> PairResult:
    """Apply RoPE to q and k in one launch; returns ``(q_rotated, k_rotated)``.

    ``q``/``k``: ``(batch, seq, heads, head_dim)`` or ``(tokens, heads, head_dim)``
    (head counts may differ); ``cos``/``sin``: ``(max_pos, head_dim/2)`` or
    ``(max_pos, head_dim)`` tables (see :func:`rope_tables`); ``positions``: optional
    int32/int64 ``(tokens,)`` positions for the 3-D layout (default: the token index;
    the 4-D layout always uses the seq index). Out-of-range positions raise ValueError (a host check that
    reads ``positions``; with ``check_positions=False`` they read zero tables and give
    zero vectors). ``block_t`` tokens per tile (power of two). ``sync=False``
    launches without waiting (on ``stream``, default the caller's) and returns
    ``((q_rotated, k_rotated), future)`` (see :mod:`tilelab.kernels`).

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.rope import rope, rope_tables
        >>> cos, sin = rope_tables(8, 4, device="cpu")
        >>> q = tl.tensor(np.ones((2, 3, 2, 4), np.float32), device="cpu")   # (b, s, h, d)
        >>> k = tl.tensor(np.ones((2, 3, 1, 4), np.float32), device="cpu")
        >>> qr, kr = rope(q, k, cos, sin)
        >>> np.round(qr.numpy()[0, 1, 0], 4)    # position 1: angles 1 and 0.01
        array([-0.3012,  0.99  ,  1.3818,  1.0099], dtype=float32)
    """
    if k is None:
        raise TypeError("rope(): k is required; use apply_rope(x, cos, sin) for one tensor")
    return _rope("rope", q, k, cos, sin, positions, block_t, check_positions, out, sync,
                 stream)


def apply_rope(x: Any, cos: Any, sin: Any, *, positions: Any = None,
               block_t: int | None = None, check_positions: bool = True,
               out: Any = None, sync: bool = True, stream: Any = None) -> TensorResult:
    """Apply RoPE to one tensor (see :func:`rope` for layouts and tables).

    ``sync=False`` returns ``(out, future)``.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.rope import apply_rope, rope_tables
        >>> cos, sin = rope_tables(8, 2, device="cpu")
        >>> x = tl.tensor(np.array([[[1.0, 0.0]], [[1.0, 0.0]]], np.float32), device="cpu")
        >>> np.round(apply_rope(x, cos, sin).numpy()[:, 0], 4)   # rotates by the position
        array([[1.    , 0.    ],
               [0.5403, 0.8415]], dtype=float32)
    """
    return _rope("apply_rope", x, None, cos, sin, positions, block_t, check_positions, out,
                 sync, stream)
