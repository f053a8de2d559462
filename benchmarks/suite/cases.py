"""The cases of the benchmark suite: what each op computes, its reference, its torch
baseline, its minimal work, and the problem sizes of each preset.

Why one table: the correctness check, the timing and every figure of a case come from the
same definition, so a figure can never be computed on other shapes than were checked.

Conventions a host function must follow to be benchmarked (inputs positional, in this
order; ``out=`` is passed when the function has an ``out`` parameter, otherwise the
return value is the output; the keyword arguments listed are passed when accepted):

=========  ===========================================  ====================================
op         call                                         shapes
=========  ===========================================  ====================================
gemm       ``fn(a, b)``                                 a [M, K], b [K, N] -> [M, N]
gemv       ``fn(w, x)``                                 w [N, K], x [K] -> [N]
attention  ``fn(q, k, v, causal=False, scale=1/√D)``    [B, H, S, D] each -> [B, H, S, D]
add        ``fn(x, y)``                                 [n] -> [n]
softmax    ``fn(x)``                                    [rows, cols], over cols
rmsnorm    ``fn(x, w, eps=1e-6)``                       x [rows, cols], w [cols]
rope       ``fn(x, cos, sin)``                          x [T, H, D], cos/sin [T, D/2]:
                                                        [x1 c - x2 s, x2 c + x1 s] (NeoX/Qwen)
=========  ===========================================  ====================================

Example:
    >>> [c.id for c in build_cases("tiny", ["memory"])][:2]
    ['memory/add/float32/n4096', 'memory/add/bfloat16/n4096']
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from tilelab.perf import counting
from tilelab.perf.counting import Work

__all__ = ["Case", "Op", "OPS", "GROUPS", "QWEN3_8B", "build_cases"]

GROUPS = ("gemm", "attention", "memory", "decode")

#: Qwen3-8B (Qwen/Qwen3-8B config.json): hidden 4096, 32 query heads and 8 key/value
#: heads of dimension 128, MLP intermediate 12288. Projections as (name, N out, K in).
QWEN3_8B = {
    "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
    "head_dim": 128, "intermediate_size": 12288,
    "projections": (("q_proj/o_proj", 4096, 4096), ("k_proj/v_proj", 1024, 4096),
                    ("gate_proj/up_proj", 12288, 4096), ("down_proj", 4096, 12288)),
}


@dataclass(frozen=True)
class Op:
    """One operation: input shapes, reference, torch baseline, minimal work."""

    name: str
    args: tuple[str, ...]                          #: positional inputs of host functions
    shapes: Callable[[dict], dict]                 #: params -> {input/out name: shape}
    reference: Callable[[Any, dict, dict], Any]    #: (xp, float inputs, params) -> ref
    torch: Callable[[Any, dict, dict], tuple[str, Callable[[], Any]]]
    work: Callable[[dict, str], Work]
    kwargs: Callable[[dict], dict] = lambda p: {}  #: keyword arguments passed if accepted
    select: Callable[[Any, Any, dict], Any] | None = None   #: compared part of the output
    scale: dict = field(default_factory=dict)      #: input name -> std of its values
    tol: dict = field(default_factory=lambda: {"float32": 1e-4, "float16": 1e-2,
                                               "bfloat16": 2e-2})
    #: (torch, params) -> (label, pure torch function of the ``args`` inputs, returning
    #: the output): what the torch.compile baseline compiles (memory-bound ops)
    pure: Callable[[Any, dict], tuple[str, Callable[..., Any]]] | None = None


# --------------------------------------------------------------------------- ops

def _gemm_torch(torch, inp, p):
    a, b, out = inp["a"], inp["b"], inp["out"]
    return "torch.matmul (cuBLAS)", lambda: torch.matmul(a, b, out=out)


def _gemv_torch(torch, inp, p):
    w, x, out = inp["w"], inp["x"], inp["out"]
    return "torch.mv (cuBLAS)", lambda: torch.mv(w, x, out=out)


def _attn_rows(p: dict) -> dict:
    """The part of the output checked: first/last batch and head, first/last 64 queries
    (a full fp32 reference of 8x32 heads at 16K would need terabytes of scores)."""
    b, h, s = p["B"], p["H"], p["S"]
    rows = list(range(s)) if s <= 128 else list(range(64)) + list(range(s - 64, s))
    return {"b": sorted({0, b - 1}), "h": sorted({0, h - 1}), "rows": rows}


def _take(xp, x, sel: dict, rows: bool = True):
    x = _take1(xp, x, sel["b"], 0)
    x = _take1(xp, x, sel["h"], 1)
    return _take1(xp, x, sel["rows"], 2) if rows else x


def _take1(xp, x, idx: list, axis: int):
    if xp.is_torch:
        return xp.mod.index_select(x, axis, xp.mod.tensor(idx, device=x.device))
    import numpy as np

    return np.take(x, idx, axis=axis)


def _attn_ref(xp, inp, p):
    sel = _attn_rows(p)
    q = xp.f(_take(xp, inp["q"], sel))
    k, v = xp.f(_take(xp, inp["k"], sel, rows=False)), xp.f(_take(xp, inp["v"], sel, False))
    return xp.softmax(q @ xp.t(k) * (1.0 / math.sqrt(p["D"]))) @ v


def _attn_torch(torch, inp, p):
    q, k, v = inp["q"], inp["k"], inp["v"]
    f = torch.nn.functional.scaled_dot_product_attention
    return "torch SDPA", lambda: f(q, k, v)


def _rmsnorm_ref(xp, inp, p):
    x, w = xp.f(inp["x"]), xp.f(inp["w"])
    return x / xp.sqrt(xp.mean(x * x) + p["eps"]) * w


def _rmsnorm_pure(torch, p):
    eps = p["eps"]
    fused = getattr(torch.nn.functional, "rms_norm", None)
    if fused is not None:
        return "F.rms_norm", lambda x, w: fused(x, (x.shape[-1],), w, eps)

    def eager(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w
    return "eager rmsnorm", eager


def _rmsnorm_torch(torch, inp, p):
    label, fn = _rmsnorm_pure(torch, p)
    x, w = inp["x"], inp["w"]
    return f"torch {label}", lambda: fn(x, w)


def _rope_ref(xp, inp, p):
    x = xp.f(inp["x"])
    c, s = xp.f(inp["cos"])[:, None, :], xp.f(inp["sin"])[:, None, :]
    half = p["D"] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return xp.cat([x1 * c - x2 * s, x2 * c + x1 * s])


def _rope_pure(torch, p):
    """Eager RoPE: six kernels (four products, two sums) and the concatenation."""
    half = p["D"] // 2

    def rope(x, cos, sin):
        c, s = cos[:, None, :], sin[:, None, :]
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)
    return "eager rope", rope


def _rope_torch(torch, inp, p):
    _, rope = _rope_pure(torch, p)
    x, c, s = inp["x"], inp["cos"], inp["sin"]
    return "torch eager rope", lambda: rope(x, c, s)


def _rope_work(p: dict, dt: str) -> Work:
    size = counting.dtype_size(dt)
    n, table = p["T"] * p["H"] * p["D"], p["T"] * p["D"] // 2
    return Work(f"rope {p['T']}x{p['H']}x{p['D']}", 3 * n, math.ceil((n + 2 * table) * size),
                math.ceil(n * size), "fp32")


OPS: dict[str, Op] = {
    "gemm": Op(
        "gemm", ("a", "b"),
        lambda p: {"a": (p["M"], p["K"]), "b": (p["K"], p["N"]), "out": (p["M"], p["N"])},
        lambda xp, i, p: xp.f(i["a"]) @ xp.f(i["b"]), _gemm_torch,
        lambda p, dt: counting.gemm(p["M"], p["N"], p["K"], a_dtype=dt),
        tol={"float32": 5e-3, "float16": 1e-2, "bfloat16": 2e-2}),
    "gemv": Op(
        "gemv", ("w", "x"),
        lambda p: {"w": (p["N"], p["K"]), "x": (p["K"],), "out": (p["N"],)},
        lambda xp, i, p: xp.f(i["w"]) @ xp.f(i["x"]), _gemv_torch,
        lambda p, dt: counting.gemv(p["N"], p["K"], dtype=dt)),
    "attention": Op(
        "attention", ("q", "k", "v"),
        lambda p: {n: (p["B"], p["H"], p["S"], p["D"]) for n in ("q", "k", "v", "out")},
        _attn_ref, _attn_torch,
        lambda p, dt: counting.attention_forward(p["B"], p["H"], p["S"], p["S"], p["D"],
                                                 dtype=dt),
        kwargs=lambda p: {"causal": False, "scale": 1.0 / math.sqrt(p["D"])},
        select=lambda xp, out, p: _take(xp, out, _attn_rows(p)),
        tol={"float16": 2e-2, "bfloat16": 3e-2, "float32": 1e-3}),
    "add": Op(
        "add", ("x", "y"), lambda p: {"x": (p["n"],), "y": (p["n"],), "out": (p["n"],)},
        lambda xp, i, p: xp.f(i["x"]) + xp.f(i["y"]),
        lambda torch, i, p: ("torch.add", lambda: torch.add(i["x"], i["y"], out=i["out"])),
        lambda p, dt: counting.elementwise(p["n"], inputs=2, dtype=dt),
        pure=lambda torch, p: ("torch.add", lambda x, y: torch.add(x, y))),
    "softmax": Op(
        "softmax", ("x",), lambda p: {"x": (p["rows"], p["cols"]),
                                      "out": (p["rows"], p["cols"])},
        lambda xp, i, p: xp.softmax(xp.f(i["x"])),
        lambda torch, i, p: ("torch.softmax", lambda: torch.softmax(i["x"], -1)),
        lambda p, dt: counting.softmax(p["rows"], p["cols"], dtype=dt), scale={"x": 2.0},
        pure=lambda torch, p: ("torch.softmax", lambda x: torch.softmax(x, -1))),
    "rmsnorm": Op(
        "rmsnorm", ("x", "w"), lambda p: {"x": (p["rows"], p["cols"]), "w": (p["cols"],),
                                          "out": (p["rows"], p["cols"])},
        _rmsnorm_ref, _rmsnorm_torch,
        lambda p, dt: counting.rmsnorm(p["rows"], p["cols"], dtype=dt),
        kwargs=lambda p: {"eps": p["eps"]}, pure=_rmsnorm_pure),
    "rope": Op(
        "rope", ("x", "cos", "sin"),
        lambda p: {"x": (p["T"], p["H"], p["D"]), "cos": (p["T"], p["D"] // 2),
                   "sin": (p["T"], p["D"] // 2), "out": (p["T"], p["H"], p["D"])},
        _rope_ref, _rope_torch, _rope_work, scale={"cos": 0.7, "sin": 0.7},
        pure=_rope_pure),
}


# --------------------------------------------------------------------------- cases

@dataclass(frozen=True)
class Case:
    """One problem: an op, a dtype and its sizes, in a group ('gemm', 'attention',
    'memory', 'decode'). ``priority`` 1 marks the largest problems, run last."""

    id: str
    group: str
    op: str
    dtype: str
    params: dict
    tags: dict = field(default_factory=dict)
    priority: int = 0

    @property
    def spec(self) -> Op:
        return OPS[self.op]

    @property
    def work(self) -> Work:
        return self.spec.work(self.params, self.dtype)

    @property
    def metric(self) -> str:
        """'flops' (compute-bound figures) or 'bandwidth' (memory-bound figures)."""
        return "flops" if self.group in ("gemm", "attention") else "bandwidth"

    @property
    def tol(self) -> float:
        return self.spec.tol.get(self.dtype, 0.1)


def _gemm(preset: str) -> list[Case]:
    squares = {"full": [1024, 2048, 4096, 8192, 16384], "quick": [1024, 4096],
               "tiny": [64]}[preset]
    dtypes = ("bfloat16", "float16")
    ms = {"full": [1, 16, 128, 2048, 8192], "quick": [1, 128, 2048], "tiny": [1, 16]}[preset]
    projs = QWEN3_8B["projections"]
    if preset == "tiny":
        projs = (("q_proj/o_proj", 128, 128), ("k_proj/v_proj", 32, 128))
    elif preset == "quick":
        projs = projs[:1] + projs[2:3]
    out = []
    for dt in dtypes:
        for n in squares:
            if preset == "quick" and dt == "float16" and n != 4096:
                continue
            out.append(Case(f"gemm/{dt}/square{n}", "gemm", "gemm", dt,
                            {"M": n, "N": n, "K": n}, {"family": f"square_{dt}"},
                            priority=int(n >= 16384)))
    for name, n, k in projs:
        for m in ms:
            out.append(Case(f"gemm/bfloat16/qwen3_{name.split('/')[0]}_M{m}", "gemm", "gemm",
                            "bfloat16", {"M": m, "N": n, "K": k},
                            {"family": "qwen3", "projection": name, "M": m},
                            priority=int(m >= 8192)))
    return out


def _attention(preset: str) -> list[Case]:
    b, h, d = (1, 2, 32) if preset == "tiny" else (8, 32, 128)
    seqs = {"full": [1024, 2048, 4096, 8192, 16384], "quick": [1024, 4096],
            "tiny": [64]}[preset]
    return [Case(f"attention/bfloat16/b{b}h{h}s{s}d{d}", "attention", "attention", "bfloat16",
                 {"B": b, "H": h, "S": s, "D": d}, {"seq": s}, priority=int(s >= 8192))
            for s in seqs]


def _memory(preset: str) -> list[Case]:
    n = {"full": 1 << 28, "quick": 1 << 26, "tiny": 4096}[preset]
    rows = {"full": 65536, "quick": 16384, "tiny": 8}[preset]
    soft = {"full": (16384, 8192), "quick": (4096, 4096), "tiny": (8, 128)}[preset]
    hid = 128 if preset == "tiny" else QWEN3_8B["hidden_size"]
    heads, hd = (2, 32) if preset == "tiny" else (QWEN3_8B["num_attention_heads"],
                                                  QWEN3_8B["head_dim"])
    out = [Case(f"memory/add/{dt}/n{n}", "memory", "add", dt, {"n": n}) for dt in
           ("float32", "bfloat16")]
    out.append(Case(f"memory/softmax/bfloat16/{soft[0]}x{soft[1]}", "memory", "softmax",
                    "bfloat16", {"rows": soft[0], "cols": soft[1]}))
    out.append(Case(f"memory/rmsnorm/bfloat16/{rows}x{hid}", "memory", "rmsnorm", "bfloat16",
                    {"rows": rows, "cols": hid, "eps": 1e-6}))
    tokens = rows // 2 if preset != "tiny" else rows
    out.append(Case(f"memory/rope/bfloat16/{tokens}x{heads}x{hd}", "memory", "rope",
                    "bfloat16", {"T": tokens, "H": heads, "D": hd}))
    return out


def _decode(preset: str) -> list[Case]:
    projs = QWEN3_8B["projections"] if preset != "tiny" else (("q_proj/o_proj", 128, 128),)
    return [Case(f"decode/bfloat16/qwen3_{name.split('/')[0]}_gemv", "decode", "gemv",
                 "bfloat16", {"N": n, "K": k}, {"projection": name}) for name, n, k in projs]


_BUILDERS = {"gemm": _gemm, "attention": _attention, "memory": _memory, "decode": _decode}


def build_cases(preset: str, groups: list[str]) -> list[Case]:
    """The cases of ``groups`` at a size preset: 'full' (the issue's sizes, for an H200),
    'quick' (a few minutes less), 'tiny' (the CPU interpreter).

    Example:
        >>> len(build_cases("full", ["gemm"]))      # 10 squares + 4 projections x 5 M
        30
    """
    if preset not in ("full", "quick", "tiny"):
        raise ValueError(f"unknown size preset {preset!r}: use full, quick or tiny")
    out = []
    for g in groups:
        if g not in _BUILDERS:
            raise ValueError(f"unknown group {g!r}; groups: {', '.join(GROUPS)}")
        out += _BUILDERS[g](preset)
    return out
