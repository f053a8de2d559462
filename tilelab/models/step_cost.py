"""Bytes and FLOPs of every kernel of a Qwen3 decode step, for rooflines.

One row per kernel kind of :class:`~tilelab.models.decode_step.DecodeStep`, summed
over the layers, in the order the step first launches them: how many launches a step
makes of it, the bytes they move and the FLOPs they do (for each form of the step:
``fuse_norms``, ``rope_attention``). Counts follow :mod:`tilelab.perf.counting`: each
tensor a kernel reads is counted once, each it writes once, at its dtype's size — with
one addition: the fp32 partials that split attention and the lm_head's argmax write
and their combine kernels read are counted, because those kernels really move them. A
multiply-add is 2 FLOPs. ``context`` is the number of cached positions the step attends to (the new
token's included).

Example:
    >>> from types import SimpleNamespace
    >>> cfg = SimpleNamespace(vocab_size=151936, hidden_size=2560, intermediate_size=9728,
    ...                       num_hidden_layers=36, num_attention_heads=32,
    ...                       num_key_value_heads=8, head_dim=128, tie_word_embeddings=True)
    >>> rows = step_cost(cfg, context=1024)
    >>> [r.kernel for r in rows][:3]
    ['embed', 'norm_qkv_gemv', 'qk_norm_rope_kv']
    >>> round(sum(r.bytes for r in rows) / 1e9, 2)                # GB per token
    8.24
    >>> sum(r.launches for r in rows), sum(r.launches for r in step_cost(
    ...     cfg, context=1024, fuse_norms=False))                 # 5 + 7 L, 5 + 9 L
    (257, 329)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tilelab.perf import counting
from tilelab.perf.counting import Work, dtype_size

__all__ = ["CostRow", "step_cost", "decode_bytes_per_token", "cost_table"]


@dataclass(frozen=True)
class CostRow:
    """One kernel kind of the step: launches per step and their summed bytes and FLOPs.

    ``work`` is the same as a :class:`tilelab.perf.counting.Work` (name = kernel), which
    :func:`tilelab.perf.roofline.predict` and ``Roofline.add_work`` take.

    Example:
        >>> row = CostRow("advance", 1, Work("advance", 1, 4, 4, "fp32"))
        >>> row.bytes, row.flops, row.intensity
        (8, 1, 0.125)
    """

    kernel: str
    launches: int
    work: Work

    @property
    def bytes(self) -> int:
        """Bytes moved per step by these launches."""
        return self.work.bytes

    @property
    def flops(self) -> int:
        """FLOPs per step of these launches."""
        return self.work.flops

    @property
    def intensity(self) -> float:
        """FLOP/B."""
        return self.work.intensity

    def to_dict(self) -> dict[str, Any]:
        """Plain data for tables and JSON.

        Example:
            >>> sorted(CostRow("advance", 1, Work("advance", 1, 4, 4, "fp32")).to_dict())
            ['bytes', 'flops', 'intensity', 'kernel', 'launches', 'precision']
        """
        return {"kernel": self.kernel, "launches": self.launches, "bytes": self.bytes,
                "flops": self.flops, "intensity": self.intensity,
                "precision": self.work.precision}


def _times(w: Work, n: int, name: str) -> Work:
    return Work(name, w.flops * n, w.bytes_read * n, w.bytes_written * n, w.precision)


def _w(name: str, flops: float, read: float, written: float, precision: str = "fp32") -> Work:
    return Work(name, int(flops), int(read), int(written), precision)


_Row = tuple[str, Work]


def _norm_gemvs(c: Any, s: float, first: bool) -> tuple[None, _Row, None, _Row]:
    """The fused form's norm + qkv and norm + gate/up GEMVs of one layer (no norm
    launches): each reads its input (two parts after layer 0: ``h`` and the last
    ``down``) and the norm weight."""
    h, inter = c.hidden_size, c.intermediate_size
    n = (c.num_attention_heads + 2 * c.num_key_value_heads) * c.head_dim
    parts = 1 if first else 2
    # x side per element: the add of the second part, square and add, times the weight
    x_flops = (parts - 1 + 3) * h
    return (None, ("norm_qkv_gemv", _w("norm_qkv_gemv", 2 * n * h + x_flops + n,
                                       (n * h + (parts + 1) * h) * s, n * s)),
            None, ("norm_gate_up_silu_gemv", _w("norm_gate_up_silu_gemv",
                                                4 * inter * h + 7 * inter + 3 * h,
                                                (2 * inter * h + 2 * h) * s, inter * s)))


def _plain_gemvs(c: Any, s: float, first: bool) -> tuple[_Row, _Row, _Row, _Row]:
    """The unfused form's norm before the layer, qkv GEMV, second norm and gate/up GEMV."""
    h, inter = c.hidden_size, c.intermediate_size
    n = (c.num_attention_heads + 2 * c.num_key_value_heads) * c.head_dim
    norm = counting.rmsnorm(1, h, dtype="bfloat16")
    first_norm = ("rms_norm", norm) if first else (
        "add_rms_norm", _w("add_rms_norm", 5 * h, 3 * h * s, 2 * h * s))
    return (first_norm, ("qkv_gemv", counting.gemv(n, h, dtype="bfloat16")),
            ("rms_norm", norm),
            ("gate_up_silu_gemv", _w("gate_up_silu_gemv", 4 * inter * h + 5 * inter,
                                     (2 * inter * h + h) * s, inter * s)))


def _attention(attn: Any, reads: float, splits: int, partials: int, merge_flops: int,
               out_bytes: float) -> list[tuple[str, Work]]:
    """Decode attention's rows: one pass (``attn``) when ``splits`` is 0, else the
    splits' partials (``attn_split``) and their combine (``attn_combine``)."""
    if splits == 0:
        return [("attn", _w("attn", attn.flops, reads, out_bytes, attn.precision))]
    return [("attn_split", _w("attn_split", attn.flops, reads, partials, attn.precision)),
            ("attn_combine", _w("attn_combine", merge_flops, partials, out_bytes))]


def _rope_attention(c: Any, attn: Any, context: int, s: float,
                    first: bool) -> tuple[str, Work]:
    """The fused one-pass form's ``rope_attn``: the raw q, k and v, the norm weights
    and cos/sin rows, the cache (the rows before the new one; the new one is spliced in
    registers, counted with the cache as the plain kernel's is), then the output, the
    staged key and value, and after layer 0 the previous layer's staged row read and
    written into its cache."""
    hq, hk, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
    nq, nkv = hq * d, hk * d
    prev = 0 if first else 2 * nkv * s
    return ("rope_attn", _w("rope_attn", attn.flops + 8 * (nq + nkv),
                            (nq + 2 * nkv + 2 * d + 2 * hk * context * d) * s
                            + 2 * (d // 2) * 4 + 4 + prev,
                            (nq + 2 * nkv) * s + prev, attn.precision))


def _layer(c: Any, context: int, s: float, splits: int, fused: bool,
           first: bool, rope_attention: bool = False) -> list[tuple[str, Work]]:
    """The per-launch work of each kernel of one layer, in launch order (layer 0 has no
    previous down projection to add, and with ``rope_attention`` no previous layer's
    key and value to write)."""
    h, inter = c.hidden_size, c.intermediate_size
    hq, hk, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
    nq, nkv = hq * d, hk * d
    g = hq // hk
    attn = counting.attention_forward(1, hq, 1, context, d, kv_heads=hk, dtype="bfloat16")
    partials = splits * hk * (g * d + g) * 4
    qkv_in, qkv, post_norm, gate_up = (_norm_gemvs if fused else _plain_gemvs)(c, s, first)
    res = 2 if fused and not first else 1          # residual vectors o adds
    if rope_attention and splits == 0:
        attention = [_rope_attention(c, attn, context, s, first)]
    else:
        attention = [
            ("qk_norm_rope_kv", _w("qk_norm_rope_kv", 8 * (nq + nkv),
                                   (nq + 2 * nkv + 2 * d) * s + 2 * (d // 2) * 4 + 4,
                                   (nq + 2 * nkv) * s)),
            *_attention(attn, nq * s + 2 * hk * context * d * s + 4, splits, partials,
                        3 * splits * hk * g * d, nq * s)]
    rows = [qkv_in, qkv, *attention,
            ("o_gemv_residual", _w("o_gemv_residual", 2 * h * nq + res * h,
                                   (h * nq + nq + res * h) * s, h * s)),
            post_norm, gate_up, ("down_gemv", counting.gemv(h, inter, dtype="bfloat16"))]
    return [r for r in rows if r is not None]


def step_cost(config: Any, context: int, *, dtype: str = "bfloat16",
              splits: int | None = None, head_rows: int = 16,
              fuse_norms: bool = True, one_pass: bool = False,
              rope_attention: bool = False) -> list[CostRow]:
    """The cost rows of one decode step attending to ``context`` positions.

    ``splits``: KV splits of decode attention (default: two blocks per SM of an H200
    over the KV heads, as the step picks); ``one_pass``: the one-pass attention kernel
    instead (``StepConfig(attn_splits=1)``: no partials, no combine); ``head_rows``: rows per block of the lm_head
    (sets the number of argmax partials); ``fuse_norms``: the step's form
    (``StepConfig.fuse_norms``: the norms inside the GEMVs, or kernels of their own);
    ``rope_attention``: with ``one_pass``, the q/k norm and RoPE inside the attention
    (``StepConfig.fuse_rope_attention``: ``rope_attn`` per layer and one ``kv_store``).
    The embedding row read is counted in ``embed``; the lm_head reads the whole
    (vocab, hidden) matrix.

    Example:
        >>> from types import SimpleNamespace
        >>> cfg = SimpleNamespace(vocab_size=300, hidden_size=96, intermediate_size=160,
        ...                       num_hidden_layers=2, num_attention_heads=4,
        ...                       num_key_value_heads=2, head_dim=16,
        ...                       tie_word_embeddings=False)
        >>> {r.kernel: r.launches for r in step_cost(cfg, 8)}["norm_qkv_gemv"]
        2
        >>> sum(r.launches for r in step_cost(cfg, 8, fuse_norms=False))    # 5 + 9 * 2
        23
        >>> sum(r.launches for r in step_cost(cfg, 8, one_pass=True,
        ...                                   rope_attention=True))          # 6 + 5 * 2
        16
    """
    c, s = config, dtype_size(dtype)
    if context < 1:
        raise ValueError(f"step_cost(): context must be >= 1 (the new token), got {context}")
    h, v, layers = c.hidden_size, c.vocab_size, c.num_hidden_layers
    splits = 0 if one_pass else splits or max(1, -(-2 * 132 // c.num_key_value_heads))
    rows: dict[str, list] = {}

    def add(kind: str, w: Work) -> None:
        entry = rows.setdefault(kind, [0, None])
        entry[0] += 1
        prev = entry[1]
        entry[1] = w if prev is None else Work(
            kind, prev.flops + w.flops, prev.bytes_read + w.bytes_read,
            prev.bytes_written + w.bytes_written, w.precision)

    add("embed", _w("embed", 0, h * s + 8, h * s))
    for layer in range(layers):
        for kind, w in _layer(c, context, s, splits, fuse_norms, layer == 0,
                              rope_attention):
            add(kind, _times(w, 1, kind))
    if rope_attention and splits == 0:   # the last layer's staged key and value
        nkv = c.num_key_value_heads * c.head_dim
        add("kv_store", _w("kv_store", 0, 2 * nkv * s + 4, 2 * nkv * s))
    add("final_add_rms_norm", _w("final_add_rms_norm", 5 * h, 3 * h * s, 2 * h * s))
    blocks = -(-v // head_rows)
    add("lm_head_partial", _w("lm_head_partial", 2 * v * h, (v * h + h) * s + 12,
                              v * 4 + 8 * blocks))
    add("pick_token", _w("pick_token", 2 * blocks, 8 * blocks + 4, 8))   # token, flag
    add("advance", _w("advance", 1, 4, 4))
    return [CostRow(kind, n, w) for kind, (n, w) in rows.items()]


def decode_bytes_per_token(config: Any, context: int, *, dtype: str = "bfloat16") -> int:
    """The bytes a decode step must read at least: every weight except the embedding
    table (which counts only as the lm_head, tied or not) plus the KV cache of
    ``context`` positions — the numerator of "fraction of the HBM roofline".

    Example:
        >>> from types import SimpleNamespace
        >>> cfg = SimpleNamespace(vocab_size=151936, hidden_size=2560,
        ...                       intermediate_size=9728, num_hidden_layers=36,
        ...                       num_attention_heads=32, num_key_value_heads=8,
        ...                       head_dim=128, tie_word_embeddings=True)
        >>> round(decode_bytes_per_token(cfg, 256) / 1e9, 3)
        8.083
    """
    c, s = config, dtype_size(dtype)
    h, inter, d = c.hidden_size, c.intermediate_size, c.head_dim
    nq, nkv = c.num_attention_heads * d, c.num_key_value_heads * d
    per_layer = (h * (nq + 2 * nkv) + nq * h + 3 * inter * h + 2 * h + 2 * d) * s
    kv = c.num_hidden_layers * 2 * nkv * context * s
    return int(c.num_hidden_layers * per_layer + (c.vocab_size * h + h) * s + kv)


def cost_table(rows: list[CostRow]) -> str:
    """A plain-text table of the rows with their share of the step's bytes.

    Example:
        >>> print(cost_table([CostRow("advance", 1, Work("advance", 1, 4, 4, "fp32"))]))
        kernel               launches        bytes        FLOPs  FLOP/B  bytes %
        advance                     1            8            1   0.125    100.0
    """
    total = sum(r.bytes for r in rows) or 1
    lines = [f"{'kernel':<20} {'launches':>8} {'bytes':>12} {'FLOPs':>12} {'FLOP/B':>7} "
             f"{'bytes %':>8}"]
    for r in rows:
        lines.append(f"{r.kernel:<20} {r.launches:>8} {r.bytes:>12} {r.flops:>12} "
                     f"{r.intensity:>7.3g} {100 * r.bytes / total:>8.1f}")
    return "\n".join(lines)
