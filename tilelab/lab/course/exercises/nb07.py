"""Notebook 07 (a decode step on the roofline): its exercises' graders and reference
answers, and the capstone.

- ``gemv``: ``y = W @ x`` at the bandwidth limit: the weight read once, ``x`` once per
  block, any tile of rows, any step along K (K need not be a multiple of it);
- ``rms_norm``: the rows of a matrix RMS-normed and scaled by ``g``, whole-row tiles
  wider than the row included;
- ``rope``: the rotate-half rotary embedding of one token's heads at a position;
- ``capstone_norm_gemv`` (the capstone): the decode step's first kernel of a layer,
  ``y = W @ (rmsnorm(h + down) · g)`` in one pass over ``W``; graded on hidden shapes
  and its byte budget, then plugged into a tiny Qwen3
  (``Qwen3(..., kernels={"norm_qkv_gemv": kernel})``), whose tokens must be the
  built-in kernel's.

Example:
    >>> from tilelab.lab.course.exercises import grade, solution
    >>> grade("gemv", solution("gemv")).passed
    True
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable

import numpy as np

import cuda.tile as ct
import tilelab as tl
from tilelab.lab.course.exercises.budget import Budget
from tilelab.lab.course.exercises.compare import tile_grid
from tilelab.lab.course.exercises.hidden import Case
from tilelab.lab.course.exercises.kernels import KernelExercise, Setup, nan_tensor
from tilelab.lab.course.grading import Lesson, Result, as_kernel, miss, passed, reference, \
    register

__all__ = ["SECTIONS", "tiny_qwen3", "ENGINE_PROMPT"]

NOTEBOOK = "07_decode_on_the_roofline"

GEMV = "Exercise: a GEMV at the bandwidth limit"
RMS = "Exercise: RMSNorm"
ROPE = "Exercise: RoPE"
CAPSTONE = "7. Capstone: your kernel in the engine"
KERNELS = "2. The kernels of one step"
#: the headings of notebook 07 the lessons point to (tests check they exist)
SECTIONS = (GEMV, RMS, ROPE, CAPSTONE, KERNELS)

_Z = ct.PaddingMode.ZERO


def _randn(shape: tuple[int, ...], seed: int, scale: float = 1.0) -> Any:
    data = scale * np.random.default_rng(seed).standard_normal(shape)
    return tl.tensor(data.astype(np.float32), device="cpu")


# ---- gemv --------------------------------------------------------------------------------

_GEMV_LESSONS = {
    "formula": Lesson(
        "y[n] is the dot product of row n of W with x: each block owns a tile of rows "
        "and walks all of K", "07", GEMV,
        ("a block's rows are its tile of y: the row tile's index is y's tile index",
         "the products of each step along K add up in an accumulator that the block "
         "reduces over K once, at the end")),
    "k_edge": Lesson(
        "K need not be a multiple of BK: the last step along K is partial", "07", GEMV,
        ("how many steps of BK cover K, and what do the padded lanes of the last one "
         "add?",)),
    "tile": Lesson(
        "the tiles belong to the launch: rows per block come from y's partition, the "
        "step along K from BK", "07", GEMV,
        ("the checker launches your kernel with several tiles and steps: where does it "
         "assume one?",)),
    "edge": Lesson(
        "N need not be a multiple of the row tile: the last block's rows are partly past "
        "the end of W", "07", GEMV,
        ("a zero-padded load of W past its last row gives rows of zeros, and the store "
         "stops at the end of y",)),
    "budget": Lesson(
        "at the bandwidth limit: every weight byte is read once, x once per block, y "
        "written once", "07", GEMV,
        ("a decode GEMV has no reuse to find: its time is its bytes over the bandwidth, "
         "so each extra load of W or x is time",
         "load each weight tile once, and each slice of x once per block")),
}


def _gemv_setup(case: Case) -> Setup:
    (N,), (bn,), K, BK = case.shape, case.tile, case.params["K"], case.params["BK"]
    w, x = _randn((N, K), case.seed, 0.1), _randn((K,), case.seed + 1)
    want = w.numpy().astype(np.float64) @ x.numpy()
    blocks = tile_grid((N,), (bn,))[0]
    return Setup(nan_tensor((N,)), (w, x, BK), want,
                 Budget(4 * (N * K + blocks * K + N),
                        "4(NK + blocks·K + N): W read once, x once per block, y once"))


GEMV_EXERCISE = KernelExercise(
    "gemv",
    [Case("the notebook's size", (64,), (16,), {"K": 256, "BK": 64}),
     Case("K not a multiple of BK", (64,), (16,), {"K": 200, "BK": 64}, lesson="k_edge",
          seed=1),
     Case("other tiles", (96,), (32,), {"K": 384, "BK": 128}, lesson="tile", seed=2),
     Case("BK wider than K", (48,), (8,), {"K": 96, "BK": 128}, lesson="k_edge", seed=3),
     Case("N not a multiple of the row tile", (70,), (16,), {"K": 128, "BK": 32},
          lesson="edge", seed=4)],
    _gemv_setup, _GEMV_LESSONS, tol=1e-4, output="y")


@register("gemv", NOTEBOOK,
          "gemv(y: tl.Out, w: tl.In, x: tl.In, BK: ct.Constant[int]): y = W @ x for a "
          "row-major W (N, K); budget 4(NK + blocks·K + N) bytes in float32")
def _gemv(answer: Any) -> Result:
    return GEMV_EXERCISE.grade(answer)


def _gemv_kernel(y: tl.Out, w: tl.In, x: tl.In, BK: ct.Constant[int]):
    bn = y.tile_shape[0]
    n = y.tile_index[0]
    acc = ct.full((bn, BK), 0.0, dtype=ct.float32)
    for k in range(ct.cdiv(w.shape[1], BK)):
        xk = ct.load(x, index=(k,), shape=(BK,), padding_mode=_Z).astype(ct.float32)
        wk = ct.load(w, index=(n, k), shape=(bn, BK), padding_mode=_Z).astype(ct.float32)
        acc = acc + wk * ct.reshape(xk, (1, BK))
    y.store(ct.sum(acc, axis=1).astype(y.dtype))


@reference("gemv")
def gemv() -> Callable:
    """A block owns ``bn`` rows; it walks K in steps of ``BK``, multiplying each
    ``(bn, BK)`` weight tile by the ``BK`` slice of ``x`` (both zero padded), and reduces
    the accumulator over K once at the end. The same kernel can take the engine's
    ``down_gemv`` role.

    Example:
        >>> gemv().__name__
        '_gemv_kernel'
    """
    return _gemv_kernel


# ---- rms_norm ----------------------------------------------------------------------------

_RMS_LESSONS = {
    "formula": Lesson(
        "RMSNorm: each row divided by the root of the mean of its squares (plus eps), "
        "then scaled element-wise by g", "07", RMS,
        ("a block owns whole rows: its tile spans the row, so the row's reduction is a "
         "reduction of the tile along axis 1",
         "g is one weight per column: a (1, BN) row broadcast over the tile's rows")),
    "mean": Lesson(
        "the mean is over the row's N elements, not over the tile's width: the padded "
        "lanes past the row's end are not elements of it", "07", RMS,
        ("the tile is a power of two wide; the row may be shorter: which count divides "
         "the sum of squares?",)),
    "scalar": Lesson(
        "eps is a launch value: the kernel must use the eps it is given", "07", RMS,
        ("the checker launches your kernel with several values of eps",)),
    "tile": Lesson(
        "the tile belongs to the partition: rows per block and the tile's width come "
        "from y", "07", RMS, ("the checker launches your kernel with several tiles",)),
    "edge": Lesson(
        "M need not be a multiple of the rows per block: the last block's tile is "
        "partly past the last row", "07", RMS,
        ("rows of zeros have a mean square of zero: what does eps do there?",)),
    "budget": Lesson(
        "bytes moved: x read once, y written once, and each block reads g once", "07",
        RMS, ("the row's sum of squares and its scaling use the same loaded tile",)),
}


def _rms_setup(case: Case) -> Setup:
    (M, N), (bm, bn), eps = case.shape, case.tile, case.params["eps"]
    x, g = _randn((M, N), case.seed), _randn((N,), case.seed + 1)
    xf = x.numpy().astype(np.float64)
    want = xf / np.sqrt((xf ** 2).mean(axis=1, keepdims=True) + eps) * g.numpy()
    blocks = math.prod(tile_grid((M, N), (bm, bn)))
    return Setup(nan_tensor((M, N)), (x, g, eps), want,
                 Budget(4 * (2 * M * N + blocks * N),
                        "4(2MN + blocks·N): x read and y written once, g once per block"))


RMS_EXERCISE = KernelExercise(
    "rms_norm",
    [Case("the notebook's size", (8, 64), (2, 64), {"eps": 1e-5}),
     Case("a row shorter than its tile", (8, 96), (2, 128), {"eps": 1e-5}, lesson="mean",
          seed=1),
     Case("another eps", (8, 64), (2, 64), {"eps": 0.5}, lesson="scalar", seed=2),
     Case("other tiles", (12, 200), (4, 256), {"eps": 1e-6}, lesson="tile", seed=3),
     Case("M not a multiple of the rows per block", (10, 64), (4, 64), {"eps": 1e-5},
          lesson="edge", seed=4)],
    _rms_setup, _RMS_LESSONS, tol=1e-4, output="y")


@register("rms_norm", NOTEBOOK,
          "rms_norm(y: tl.Out, x: tl.In, g: tl.In, eps: float): y = x / sqrt(mean(x²) + "
          "eps) · g per row, tiles spanning whole rows; budget 4(2MN + blocks·N) bytes")
def _rms_norm(answer: Any) -> Result:
    return RMS_EXERCISE.grade(answer)


def _rms_norm_rows(y: tl.Out, x: tl.In, g: tl.In, eps: float):
    bn = y.tile_shape[1]
    t = tl.load_like(x, y).astype(ct.float32)
    ms = ct.sum(t * t, axis=1, keepdims=True) / x.shape[1]
    w = ct.load(g, index=(0,), shape=(bn,), padding_mode=_Z).astype(ct.float32)
    y.store((t * ct.rsqrt(ms + eps) * ct.reshape(w, (1, bn))).astype(y.dtype))


@reference("rms_norm")
def rms_norm() -> Callable:
    """The tile spans whole rows: the sum of squares is a reduction along axis 1,
    divided by the row's length ``x.shape[1]`` (not the tile's width: its padding is
    zeros), and ``g`` is one ``(1, bn)`` row broadcast over the tile.

    Example:
        >>> rms_norm().__name__
        '_rms_norm_rows'
    """
    return _rms_norm_rows


# ---- rope --------------------------------------------------------------------------------

_ROPE_LESSONS = {
    "formula": Lesson(
        "rotate half: element i of a head's first half and element i of its second "
        "half turn together, by the angle of pair i at the position (the cell of the "
        "exercise writes the rotation out)", "07", ROPE,
        ("each half of a head is one tile: the index along the last dimension counts "
         "tiles of half a head",
         "pairs are (i, i + D/2), not neighbours (2i, 2i + 1): that is the GPT-J layout, "
         "which Qwen does not use")),
    "scalar": Lesson(
        "pos is a launch value: the table rows are those at the position the kernel is "
        "given", "07", ROPE, ("the checker launches your kernel at several positions",)),
    "tile": Lesson(
        "the tile belongs to the partition: heads per block and the head size come from "
        "y", "07", ROPE, ("the checker launches your kernel with several head sizes",)),
    "edge": Lesson(
        "the heads need not fill the last block: its tile is partly past the last head",
        "07", ROPE, ("zero-padded loads past the last head give zeros, and the store stops "
                     "at the end of y",)),
    "budget": Lesson(
        "bytes moved: x read once, y written once, and each block reads one row of cos "
        "and of sin", "07", ROPE,
        ("the two halves of x are loaded once each and both used twice",)),
}


def _rope_tables(positions: int, d: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    inv = 1.0 / theta ** (np.arange(d // 2) * 2 / d)
    angles = np.outer(np.arange(positions), inv)
    return np.cos(angles), np.sin(angles)


def _rope_setup(case: Case) -> Setup:
    (H, D), (bh, _), pos = case.shape, case.tile, case.params["pos"]
    cos, sin = _rope_tables(64, D, case.params.get("theta", 10000.0))
    x = _randn((H, D), case.seed)
    x1, x2 = x.numpy()[:, :D // 2].astype(np.float64), x.numpy()[:, D // 2:]
    want = np.concatenate([x1 * cos[pos] - x2 * sin[pos], x2 * cos[pos] + x1 * sin[pos]], 1)
    blocks = tile_grid((H,), (bh,))[0]
    tables = tuple(tl.tensor(t.astype(np.float32), device="cpu") for t in (cos, sin))
    return Setup(nan_tensor((H, D)), (x, *tables, pos), want,
                 Budget(4 * (2 * H * D + blocks * D),
                        "4(2HD + blocks·D): x read and y written once, a half row of "
                        "cos and of sin per block"))


ROPE_EXERCISE = KernelExercise(
    "rope",
    [Case("the notebook's size", (8, 16), (4, 16), {"pos": 3}),
     Case("another position", (8, 16), (4, 16), {"pos": 37}, lesson="scalar", seed=1),
     Case("another head size", (4, 32), (2, 32), {"pos": 11, "theta": 1e6}, lesson="tile",
          seed=2),
     Case("heads that do not fill the last block", (6, 16), (4, 16), {"pos": 5},
          lesson="edge", seed=3)],
    _rope_setup, _ROPE_LESSONS, tol=1e-5, output="y")


@register("rope", NOTEBOOK,
          "rope(y: tl.Out, x: tl.In, cos: tl.In, sin: tl.In, pos: int): rotate-half RoPE "
          "of one token's heads x (H, D) at position pos; budget 4(2HD + blocks·D) bytes")
def _rope(answer: Any) -> Result:
    return ROPE_EXERCISE.grade(answer)


def _rope_heads(y: tl.Out, x: tl.In, cos: tl.In, sin: tl.In, pos: int):
    bh, d = y.tile_shape
    half = d // 2
    h = y.tile_index[0]
    x1 = ct.load(x, index=(h, 0), shape=(bh, half), padding_mode=_Z).astype(ct.float32)
    x2 = ct.load(x, index=(h, 1), shape=(bh, half), padding_mode=_Z).astype(ct.float32)
    c = ct.load(cos, index=(pos, 0), shape=(1, half)).astype(ct.float32)
    s = ct.load(sin, index=(pos, 0), shape=(1, half)).astype(ct.float32)
    y.store(ct.cat((x1 * c - x2 * s, x2 * c + x1 * s), axis=1).astype(y.dtype))


@reference("rope")
def rope() -> Callable:
    """Each half of a head is one tile: load ``x1`` and ``x2`` (index 0 and 1 along the
    last dimension, in tiles of ``D/2``), the table rows at ``pos``, and store the two
    rotated halves side by side (``ct.cat``).

    Example:
        >>> rope().__name__
        '_rope_heads'
    """
    return _rope_heads


# ---- the capstone: the fused RMSNorm + GEMV, plugged into the engine ---------------------

_CAP_LESSONS = {
    "formula": Lesson(
        "y = W @ (rmsnorm(h + down) · g): the stream's two parts added, RMS-normed over "
        "all of K, scaled by g, then the GEMV", "07", CAPSTONE,
        ("rmsnorm multiplies its input by one number, rstd = 1/sqrt(mean(x²) + eps): so "
         "W @ (x · g · rstd) = rstd · (W @ (x · g))",
         "a block needs the sum of squares of the whole input, and it reads all of the "
         "input anyway in its walk along K")),
    "k_edge": Lesson(
        "K need not be a multiple of BK, and the mean is over K elements, not over the "
        "padded steps", "07", CAPSTONE,
        ("the padded lanes of the last step are zeros: they add nothing to the sum of "
         "squares, but they are not elements of the mean",)),
    "scalar": Lesson(
        "eps is a launch value: the kernel must use the eps it is given", "07", CAPSTONE,
        ("the checker launches your kernel with several values of eps",)),
    "tile": Lesson(
        "the tiles belong to the launch: rows per block from y's partition, the step "
        "along K from BK", "07", CAPSTONE,
        ("the engine picks its own tiles for its shapes: your kernel must take any",)),
    "edge": Lesson(
        "N need not be a multiple of the row tile", "07", CAPSTONE,
        ("a zero-padded load of W past its last row gives rows of zeros, and the store "
         "stops at the end of y",)),
    "budget": Lesson(
        "one pass: W read once, and h, down and g once per block, y written once", "07",
        CAPSTONE,
        ("a first pass over the input for the norm and a second for the GEMV reads the "
         "input twice: the norm's scale is one number, applied after the dot products",)),
    "safe": Lesson(
        "the engine runs only checked kernels: a plugged kernel must be safe, so that "
        "whatever it computes it writes only its own tiles of the engine's buffer", "07",
        CAPSTONE, ("drop unsafe=True: the kernel needs nothing a safe kernel cannot do",)),
    "engine": Lesson(
        "in the engine, your kernel runs on bfloat16 weights and activations, in every "
        "layer, with the engine's tiles", "07", CAPSTONE,
        ("load each tensor, convert it to float32 and accumulate in float32; store y in "
         "y's own dtype",
         "layer 0 passes zeros as down: the stream's second part must be added, not "
         "assumed")),
}


def _cap_setup(case: Case) -> Setup:
    (N,), (bn,), K, BK = case.shape, case.tile, case.params["K"], case.params["BK"]
    eps = case.params["eps"]
    w = _randn((N, K), case.seed, 0.1)
    h, down, g = (_randn((K,), case.seed + i, s) for i, s in ((1, 1.0), (2, 0.5), (3, 1.0)))
    x = h.numpy().astype(np.float64) + down.numpy()
    want = w.numpy().astype(np.float64) @ (x / np.sqrt((x ** 2).mean() + eps) * g.numpy())
    blocks = tile_grid((N,), (bn,))[0]
    return Setup(nan_tensor((N,)), (w, h, down, g, eps, BK), want,
                 Budget(4 * (N * K + 3 * blocks * K + N),
                        "4(NK + 3·blocks·K + N): W read once; h, down and g once per "
                        "block; y once"))


CAPSTONE_EXERCISE = KernelExercise(
    "capstone_norm_gemv",
    [Case("the notebook's size", (64,), (16,), {"K": 256, "BK": 64, "eps": 1e-6}),
     Case("K not a multiple of BK", (64,), (16,), {"K": 200, "BK": 64, "eps": 1e-6},
          lesson="k_edge", seed=1),
     Case("another eps", (64,), (16,), {"K": 128, "BK": 64, "eps": 0.25}, lesson="scalar",
          seed=2),
     Case("other tiles", (96,), (32,), {"K": 384, "BK": 128, "eps": 1e-6}, lesson="tile",
          seed=3),
     Case("N not a multiple of the row tile", (70,), (16,), {"K": 96, "BK": 128,
                                                               "eps": 1e-6},
          lesson="edge", seed=4)],
    _cap_setup, _CAP_LESSONS, tol=1e-4, output="y")

#: the prompt the capstone's engine check decodes from
ENGINE_PROMPT = (5, 60, 7, 211, 9)


@functools.lru_cache(maxsize=1)
def tiny_qwen3() -> Any:
    """The random 2-layer Qwen3 weights notebook 07 builds (hidden 96, 4 query heads over
    2 KV heads of 16, a vocabulary of 300; bfloat16 on the CPU), made once.

    Example:
        >>> tiny_qwen3().config.hidden_size
        96
    """
    from tilelab.models.config import Qwen3Config
    from tilelab.models.device_weights import DeviceWeights

    cfg = Qwen3Config(vocab_size=300, hidden_size=96, intermediate_size=160,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      head_dim=16, rms_norm_eps=1e-6, rope_theta=10000.0,
                      max_position_embeddings=512, tie_word_embeddings=False,
                      dtype="bfloat16")
    rng = np.random.default_rng(0)

    def randn(*shape: int) -> np.ndarray:
        return (0.1 * rng.standard_normal(shape)).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)
    h, i, d = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    nq, nkv = cfg.num_attention_heads * d, cfg.num_key_value_heads * d
    layers = [dict(q_proj=randn(nq, h), k_proj=randn(nkv, h), v_proj=randn(nkv, h),
                   o_proj=randn(h, nq), q_norm=ones(d), k_norm=ones(d),
                   input_layernorm=ones(h), post_attention_layernorm=ones(h),
                   gate_proj=randn(i, h), up_proj=randn(i, h), down_proj=randn(h, i))
              for _ in range(cfg.num_hidden_layers)]
    return DeviceWeights.from_arrays(cfg, lambda l: layers[l], randn(cfg.vocab_size, h),
                                     ones(h), randn(cfg.vocab_size, h), device="cpu")


@functools.lru_cache(maxsize=1)
def _builtin_tokens() -> tuple[int, ...]:
    from tilelab.models import Qwen3

    model = Qwen3(tiny_qwen3(), max_tokens=32)
    return tuple(model.generate(list(ENGINE_PROMPT), max_new_tokens=8))


@register("capstone_norm_gemv", NOTEBOOK,
          "norm_gemv(y: tl.Out, w: tl.In, h: tl.In, down: tl.In, g: tl.In, eps: float, "
          "BK: ct.Constant[int]): y = W @ (rmsnorm(h + down) · g) in one pass; budget "
          "4(NK + 3·blocks·K + N) bytes; then the engine's tokens with it plugged in")
def _capstone(answer: Any) -> Result:
    from tilelab.models import Qwen3

    name = "capstone_norm_gemv"
    graded = CAPSTONE_EXERCISE.grade(answer)
    if not graded.passed:
        return graded
    kernel = as_kernel(answer)
    if kernel.options.unsafe:
        return miss(name, "the kernel is unsafe=True: the engine runs only checked "
                    "kernels", _CAP_LESSONS["safe"])
    try:
        model = Qwen3(tiny_qwen3(), max_tokens=32, kernels={"norm_qkv_gemv": kernel})
        got = tuple(model.generate(list(ENGINE_PROMPT), max_new_tokens=8))
    except tl.SafetyError:
        raise
    except tl.TilelabError as e:     # e.g. a store that does not fit the engine's bfloat16
        head = str(e.message).split("\n")[0]
        return miss(name, f"right on every hidden case, but plugged into the tiny Qwen3: "
                    f"{type(e).__name__}: {head}", _CAP_LESSONS["engine"])
    if got != _builtin_tokens():
        same = next((i for i, (a, b) in enumerate(zip(got, _builtin_tokens())) if a != b),
                    len(got))
        return miss(name, f"right on every hidden case, but with it plugged into the tiny "
                    f"Qwen3 the engine's tokens differ from the built-in kernel's from new "
                    f"token {same} on", _CAP_LESSONS["engine"])
    return passed(name, graded.message + "; plugged into the tiny Qwen3 as norm_qkv_gemv, "
                  "generate() gives the built-in kernel's 8 tokens")


def _norm_gemv(y: tl.Out, w: tl.In, h: tl.In, down: tl.In, g: tl.In, eps: float,
               BK: ct.Constant[int]):
    bn = y.tile_shape[0]
    n = y.tile_index[0]
    acc = ct.full((bn, BK), 0.0, dtype=ct.float32)
    ss = ct.full((1, BK), 0.0, dtype=ct.float32)
    for k in range(ct.cdiv(w.shape[1], BK)):
        x = (ct.load(h, index=(k,), shape=(BK,), padding_mode=_Z).astype(ct.float32)
             + ct.load(down, index=(k,), shape=(BK,), padding_mode=_Z).astype(ct.float32))
        x = ct.reshape(x, (1, BK))
        ss = ss + x * x
        gk = ct.load(g, index=(k,), shape=(BK,), padding_mode=_Z).astype(ct.float32)
        wk = ct.load(w, index=(n, k), shape=(bn, BK), padding_mode=_Z).astype(ct.float32)
        acc = acc + wk * (x * ct.reshape(gk, (1, BK)))
    rstd = ct.rsqrt(ct.sum(ss, axis=1) / w.shape[1] + eps)
    y.store((ct.sum(acc, axis=1) * rstd).astype(y.dtype))


@reference("capstone_norm_gemv")
def capstone_norm_gemv() -> Callable:
    """One pass along K: each step adds ``h + down`` in float32, sums its squares, scales
    it by ``g`` and accumulates ``W``'s tile times it; after the loop the row sums are
    scaled by ``rstd = 1/sqrt(sum of squares / K + eps)`` (one number: the norm costs no
    second pass).

    Example:
        >>> capstone_norm_gemv().__name__
        '_norm_gemv'
    """
    return _norm_gemv
