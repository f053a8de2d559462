"""The safety-checker corpus: kernels tilelab must accept and kernels it must reject.

Kernels live in a real file because tilelab reads kernel source with ``inspect``. Most
are registered *undecorated* with ``@accepted(...)`` / ``@rejected(...)`` and turned into
``tl.kernel`` objects by the tests (so one wrong verdict fails one test, not the import);
a few accepted ones are decorated with ``@tl.kernel`` right here, as users write them.

Rejected kernels mark the offending line with ``# REJECT: <id>``, optionally followed by
``@ <anchor>`` (or ``@last <anchor>``): the error's column is that of the first (last)
occurrence of ``<anchor>`` in the code of that line (default: its first non-blank
character). One line may carry several ids, separated by commas. Each rejected case names
the rule it breaks (``rule=``, an id of ``tilelab.compiler.safety.RULES``), which the
error's ``.rule`` must equal. Rejected kernels only need to be rejected, but they are
written as the real kernels someone would try.

The adversarial counterpart of this corpus is tests/compiler/soundness_cases.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import cuda.tile
import cuda.tile as ct
import cuda.tile as cutile
import tilelab as tl
from cuda.tile import store as tile_store
from tilelab import load_like

# --------------------------------------------------------------------------------------
# registries


@dataclass
class AcceptCase:
    id: str
    target: Any                     # a plain function or an already built tl.Kernel
    examples: Callable[[], tuple]   # example arguments for kernel.compile
    options: dict = field(default_factory=dict)
    xfail: str | None = None        # a tilelab bug: why this kernel fails today

    def build(self):
        if isinstance(self.target, tl.Kernel):
            return self.target
        return tl.kernel(**self.options)(self.target)


@dataclass
class RejectCase:
    id: str
    target: Callable
    phrases: tuple[str, ...]        # substrings str(error) must contain
    options: dict = field(default_factory=dict)
    #: "define": rejected by @tl.kernel; "compile": by the first compile (late helpers)
    when: str = "define"
    examples: Callable[[], tuple] | None = None
    xfail: str | None = None        # a checker bug: why this verdict is wrong today
    #: the id of the rule (tilelab.compiler.safety.RULES) the error must carry
    rule: str | None = None

    def build(self):
        if isinstance(self.target, BaseException):
            raise self.target
        if isinstance(self.target, tl.Kernel):
            return self.target
        return tl.kernel(**self.options)(self.target)


ACCEPT: dict[str, AcceptCase] = {}
REJECT: dict[str, RejectCase] = {}


def accepted(case_id: str, examples: Callable[[], tuple], xfail: str | None = None,
             **options):
    def deco(fn):
        assert case_id not in ACCEPT, case_id
        ACCEPT[case_id] = AcceptCase(case_id, fn, examples, options, xfail)
        return fn
    return deco


def rejected(case_id: str, *phrases: str, rule: str, xfail: str | None = None,
             **options):
    def deco(fn):
        assert case_id not in REJECT, case_id
        REJECT[case_id] = RejectCase(case_id, fn, phrases, options, xfail=xfail, rule=rule)
        return fn
    return deco


def register_kernel(case_id: str, kernel, examples: Callable[[], tuple]) -> None:
    assert case_id not in ACCEPT, case_id
    ACCEPT[case_id] = AcceptCase(case_id, kernel, examples)


def S(shape, dtype="float32"):
    return tl.spec(shape, dtype)


# ======================================================================================
# ACCEPTED
# ======================================================================================

# ---- elementwise ----------------------------------------------------------------------


@tl.kernel
def vector_add(z: tl.Out, x: tl.In, y: tl.In):
    z.store(tl.load_like(x, z) + tl.load_like(y, z))


register_kernel("vector_add", vector_add,
                lambda: (S(4096).partition(256), S(4096), S(4096)))


@accepted("saxpy_scalar", lambda: (S(3000).partition(512), 2.5, S(3000), S(3000)))
def saxpy(z: tl.Out, a: float, x: tl.In, y: tl.In):
    z.store(a * tl.load_like(x, z) + tl.load_like(y, z))


@accepted("fused_add_relu",
          lambda: (S((300, 200), "float16").partition((64, 64)), S((300, 200), "float16"),
                   S((300, 200), "float16")))
def add_relu(z: tl.Out, x, y):          # unannotated arrays are tl.In: read-only
    s = tl.load_like(x, z) + tl.load_like(y, z)
    z.store(ct.maximum(s, 0))


@accepted("inout_scale", lambda: (S(1000).partition(128),))
def scale_in_place(p: tl.InOut):
    p.store(p.load() * 2)


@accepted("inout_axpy", lambda: (S((128, 128)).partition((32, 64)), S((128, 128)), 0.5))
def axpy_in_place(y: tl.InOut, x: tl.In, alpha: float):
    acc = y.load()
    acc = acc + alpha * load_like(x, y)   # tl.load_like imported by name
    y.store(acc)


@accepted("two_outputs_same_grid",
          lambda: (S(2048).partition(256), S(2048).partition(256), S(2048), S(2048)))
def sum_and_diff(s: tl.Out, d: tl.Out, x: tl.In, y: tl.In):
    a = tl.load_like(x, s)
    b = tl.load_like(y, s)
    s.store(a + b)
    d.store(a - b)


@accepted("check_bounds_false_load_like", lambda: (S(4096).partition(512), S(4096), S(4096)),
          check_bounds=False)
def add_unchecked(z: tl.Out, x: tl.In, y: tl.In):
    z.store(tl.load_like(x, z) + tl.load_like(y, z))


# A check_bounds=False the user writes on ct.load is not one the launch can prove (the
# index is the kernel's own choice): a safe kernel is refused (see the REJECTED cases,
# check_bounds_false_explicit_load); with unsafe=True the author answers for it.
@accepted("check_bounds_false_explicit_unsafe",
          lambda: (S(4096).partition(512), S(4096), S(4096)), check_bounds=False, unsafe=True)
def add_unchecked_explicit_unsafe(z: tl.Out, x: tl.In, y: tl.In):
    (i,) = z.tile_index
    (bs,) = z.tile_shape
    a = ct.load(x, index=(i,), shape=(bs,), check_bounds=False)
    z.store(a + ct.load(y, index=(i,), shape=(bs,), check_bounds=False))


@tl.kernel(occupancy=2, opt_level=2)
def double_with_hints(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) * 2)


register_kernel("decorator_options", double_with_hints,
                lambda: (S(1024).partition(128), S(1024)))


@tl.kernel(num_ctas=1)
def negate_one_cta(z: tl.Out, x: tl.In):
    """A docstring is fine, and so is the cuTile alias ``cutile``."""
    z.store(cutile.negative(tl.load_like(x, z)))


register_kernel("decorator_num_ctas_and_alias", negate_one_cta,
                lambda: (S(1024).partition(128), S(1024)))


class Kernels:
    """Kernels defined in a class body: indented source."""

    @tl.kernel
    def clamp(z: tl.Out, x: tl.In, lo: float, hi: float):
        z.store(ct.minimum(ct.maximum(tl.load_like(x, z), lo), hi))


register_kernel("kernel_in_class", Kernels.clamp,
                lambda: (S(512).partition(128), S(512), -1.0, 1.0))


def make_square_kernel():
    """A kernel defined inside a function (indented, and closes over nothing)."""

    @tl.kernel(opt_level=3)
    def square(z: tl.Out, x: tl.In):
        v = tl.load_like(x, z)
        z.store(v * v)

    return square


register_kernel("kernel_in_function", make_square_kernel(),
                lambda: (S((64, 64)).partition((32, 32)), S((64, 64))))


# ---- reductions and normalisations ----------------------------------------------------


@accepted("row_softmax", lambda: (S((64, 256)).partition((1, 256)), S((64, 256))))
def row_softmax(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z).astype(ct.float32)
    m = ct.max(t, axis=1, keepdims=True)
    e = ct.exp(t - m)
    z.store((e / ct.sum(e, axis=1, keepdims=True)).astype(z.dtype))


@accepted("softmax_with_row_max",
          lambda: (S((128, 128)).partition((16, 128)), S(128).partition(16), S((128, 128))))
def softmax_and_max(z: tl.Out, row_max: tl.Out, x: tl.In):
    # two outputs of different rank with matching tile grids: (8, 1) and (8,)
    t = tl.load_like(x, z)
    m = ct.max(t, axis=1, keepdims=True)
    e = ct.exp(t - m)
    z.store(e / ct.sum(e, axis=1, keepdims=True))
    row_max.store(ct.reshape(m, row_max.tile_shape))


@accepted("row_sum_constant", lambda: (S(256).partition(32), S((256, 64)), 64))
def row_sum(z: tl.Out, x: tl.In, N: ct.Constant[int]):
    (m,) = z.tile_index
    (bm,) = z.tile_shape
    t = ct.load(x, index=(m, 0), shape=(bm, N), padding_mode=ct.PaddingMode.ZERO)
    z.store(ct.sum(t, axis=1))


@accepted("block_partial_sums", lambda: (S(16).partition(1), S(4096), 256))
def partial_sums(z: tl.Out, x: tl.In, BS: ct.Constant[int]):
    (i,) = z.tile_index
    t = ct.load(x, index=(i,), shape=(BS,), padding_mode=ct.PaddingMode.ZERO)
    z.store(ct.reshape(ct.sum(t), (1,)))


@accepted("rmsnorm", lambda: (S((96, 512), "bfloat16").partition((8, 512)),
                              S((96, 512), "bfloat16"), S(512, "bfloat16"), 1e-6))
def rmsnorm(z: tl.Out, x: tl.In, w: tl.In, eps: float):
    bm, n = z.tile_shape
    t = tl.load_like(x, z).astype(ct.float32)
    ms = ct.sum(t * t, axis=1, keepdims=True) / z.shape[1]
    g = ct.load(w, index=(0,), shape=(n,)).astype(ct.float32)
    z.store((t * ct.rsqrt(ms + eps) * ct.reshape(g, (1, n))).astype(z.dtype))


# ---- GEMMs ----------------------------------------------------------------------------


@accepted("gemm_bf16_128x128x64",
          lambda: (S((256, 256), "bfloat16").partition((128, 128)), S((256, 192), "bfloat16"),
                   S((192, 256), "bfloat16"), 64))
def gemm(c: tl.Out, a: tl.In, b: tl.In, BK: ct.Constant[int]):
    bm, bn = c.tile_shape
    m, n = c.tile_index
    acc = ct.full((bm, bn), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(bm, BK))):
        ta = ct.load(a, index=(m, k), shape=(bm, BK), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(k, n), shape=(BK, bn), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, tb, acc)
    c.store(acc.astype(c.dtype))


@accepted("gemm_grouped_bias_relu",
          lambda: (S((512, 256), "bfloat16").partition((128, 128), schedule=tl.grouped(2)),
                   S((512, 128), "bfloat16"), S((128, 256), "bfloat16"),
                   S(256, "float32"), 64))
def gemm_bias_relu(c: tl.Out, a: tl.In, b: tl.In, bias: tl.In, BK: ct.Constant[int]):
    bm, bn = c.tile_shape
    m, n = c.tile_index          # with tl.grouped this is the swizzled (m, n)
    acc = ct.full((bm, bn), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(bm, BK))):
        ta = ct.load(a, index=(m, k), shape=(bm, BK), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(k, n), shape=(BK, bn), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, tb, acc)
    bias_t = ct.load(bias, index=(n,), shape=(bn,), padding_mode=ct.PaddingMode.ZERO)
    acc = ct.maximum(acc + ct.reshape(bias_t, (1, bn)), 0)
    c.store(acc.astype(c.dtype))


@accepted("gemm_persistent",
          lambda: (S((512, 256), "bfloat16").partition((128, 128),
                                                       schedule=tl.persistent(num_blocks=3)),
                   S((512, 128), "bfloat16"), S((128, 256), "bfloat16"), 64))
def persistent_gemm(c: tl.Out, a: tl.In, b: tl.In, BK: ct.Constant[int]):
    bm, bn = c.tile_shape
    for t in c.tiles():
        m, n = c.tile_index_of(t)   # the (m, n) of the tile the loop minted
        acc = ct.full((bm, bn), 0, dtype=ct.float32)
        for k in range(ct.num_tiles(a, axis=1, shape=(bm, BK))):
            ta = ct.load(a, index=(m, k), shape=(bm, BK), padding_mode=ct.PaddingMode.ZERO)
            tb = ct.load(b, index=(k, n), shape=(BK, bn), padding_mode=ct.PaddingMode.ZERO)
            acc = ct.mma(ta, tb, acc)
        c.store(acc.astype(c.dtype), at=t)


@accepted("gemm_persistent_grouped",
          lambda: (S((512, 512), "float16").partition(
              (128, 128), schedule=tl.persistent(num_blocks=5, group_m=2)),
              S((512, 64), "float16"), S((64, 512), "float16"), 32))
def persistent_grouped_gemm(c: tl.Out, a: tl.In, b: tl.In, BK: ct.Constant[int]):
    bm, bn = c.tile_shape
    for t in c.tiles():
        m, n = c.tile_index_of(t)
        acc = ct.full((bm, bn), 0, dtype=ct.float32)
        for k in range(ct.cdiv(a.shape[1], BK)):
            ta = ct.load(a, index=(m, k), shape=(bm, BK), padding_mode=ct.PaddingMode.ZERO)
            tb = ct.load(b, index=(k, n), shape=(BK, bn), padding_mode=ct.PaddingMode.ZERO)
            acc = ct.mma(ta, tb, acc)
        c.store(acc.astype(c.dtype), at=t)


@accepted("batched_gemm_3d_grouped",
          lambda: (S((2, 128, 128), "float16").partition((1, 64, 64), schedule=tl.grouped(2)),
                   S((2, 128, 64), "float16"), S((2, 64, 128), "float16"), 32))
def batched_gemm(c: tl.Out, a: tl.In, b: tl.In, BK: ct.Constant[int]):
    _, bm, bn = c.tile_shape
    g, m, n = c.tile_index
    acc = ct.full((bm, bn), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=2, shape=(1, bm, BK))):
        ta = ct.load(a, index=(g, m, k), shape=(1, bm, BK), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(g, k, n), shape=(1, BK, bn), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ct.reshape(ta, (bm, BK)), ct.reshape(tb, (BK, bn)), acc)
    c.store(ct.reshape(acc.astype(c.dtype), (1, bm, bn)))


# ---- persistent elementwise -----------------------------------------------------------


@accepted("persistent_scale",
          lambda: (S((256, 256)).partition((64, 64), schedule=tl.persistent(num_blocks=4)),
                   S((256, 256))))
def persistent_scale(z: tl.Out, x: tl.In):
    for t in z.tiles():
        z.store(tl.load_like(x, z, at=t) * 3, at=t)


@accepted("persistent_inout_grouped",
          lambda: (S((256, 256)).partition((64, 64),
                                            schedule=tl.persistent(num_blocks=4, group_m=2)),
                   S((256, 256))))
def persistent_accumulate(p: tl.InOut, x: tl.In):
    for t in p.tiles():
        v = p.load(at=t)
        if p.shape[0] > 0:
            v = v + tl.load_like(x, p, at=t)
        p.store(v, at=t)


# ---- 3-D partitions, permutations, gathers -------------------------------------------


@accepted("partition_3d",
          lambda: (S((4, 64, 128)).partition((1, 32, 64)), S((4, 64, 128)), S((4, 64, 128))))
def batched_add(z: tl.Out, x: tl.In, y: tl.In):
    z.store(tl.load_like(x, z) + 2 * tl.load_like(y, z))


# The head permutation: x is (B, H, S, D), the output (B, S, H, D). The host passes the
# output viewed as (B, S, H*D) and partitioned into (1, BS, D) tiles, so the tile grid is
# (B, S/BS, H) and block (b, s, h) owns exactly out[b, s*BS:(s+1)*BS, h, :].
@accepted("head_permutation_partition",
          lambda: (S((2, 128, 4 * 64), "float16").partition((1, 64, 64)),
                   S((2, 4, 128, 64), "float16")))
def head_permute(out: tl.Out, x: tl.In):
    b, s, h = out.tile_index
    _, bs, d = out.tile_shape
    t = ct.load(x, index=(b, h, s, 0), shape=(1, 1, bs, d))
    out.store(ct.reshape(t, (1, bs, d)))


def _load_transposed(x, m, n, bm, bn):
    """A read-only helper: loads a tile and transposes it."""
    return ct.transpose(_load_tile(x, m, n, bm, bn))


def _load_tile(x, m, n, bm, bn):
    return ct.load(x, index=(m, n), shape=(bm, bn), padding_mode=ct.PaddingMode.ZERO)


@accepted("transpose_read_only_helpers",
          lambda: (S((128, 256)).partition((32, 64)), S((256, 128))))
def transpose(z: tl.Out, x: tl.In):
    n, m = z.tile_index           # z is x transposed: z tile (n, m) is x tile (m, n)
    bn, bm = z.tile_shape
    z.store(_load_transposed(x, m, n, bm, bn))


@accepted("embedding_gather",
          lambda: (S((64, 128), "float16").partition((16, 128)), S(64, "int32"),
                   S((1000, 128), "float16")))
def embedding(z: tl.Out, ids: tl.In, table: tl.In):
    (m, _) = z.tile_index
    bt, d = z.tile_shape
    rows = ct.load(ids, index=(m,), shape=(bt,))
    cols = ct.arange(d, dtype=ct.int32)
    z.store(ct.gather(table, (ct.reshape(rows, (bt, 1)), ct.reshape(cols, (1, d)))))


# x.slice has bounds the checker cannot prove: only unsafe kernels read through it (the
# safe version is rejected: read_through_views_safe); a tiled view of an input is
# read bounds-checked in safe kernels too.
@accepted("read_through_views_unsafe", lambda: (S(256).partition(64), S((4, 256))),
          unsafe=True)
def views(z: tl.Out, x: tl.In):
    (i,) = z.tile_index
    (bs,) = z.tile_shape
    row1 = x.slice(axis=0, start=1, stop=2)
    a = ct.load(row1, index=(0, i), shape=(1, bs))
    b = x.tiled_view((1, bs)).load((2, i))
    z.store(ct.reshape(a + b, (bs,)))


@tl.kernel
def late_helper_reader(z: tl.Out, x: tl.In):
    z.store(_late_read_helper(tl.load_like(x, z)))   # helper defined below the kernel


def _late_read_helper(t):
    return t * 0.5


register_kernel("helper_defined_after_kernel", late_helper_reader,
                lambda: (S(512).partition(128), S(512)))


# ---- unsafe kernels ------------------------------------------------------------------


@accepted("unsafe_histogram", lambda: (S(64, "int32"), S(4096, "int32"), 256), unsafe=True)
def histogram(h: tl.Raw, x: tl.In, BS: ct.Constant[int]):
    v = ct.load(x, index=(ct.bid(0),), shape=(BS,), padding_mode=ct.PaddingMode.ZERO)
    ct.atomic_add(h, v, 1)


@accepted("unsafe_scatter", lambda: (S(4096), S(4096, "int32"), S(4096), 128), unsafe=True)
def scatter_rows(out: tl.Raw, idx: tl.In, x: tl.In, BS: ct.Constant[int]):
    i = ct.load(idx, index=(ct.bid(0),), shape=(BS,))
    v = ct.load(x, index=(ct.bid(0),), shape=(BS,))
    ct.scatter(out, i, v)


@accepted("unsafe_every_atomic", lambda: (S(256, "int32"), S(256, "int32")), unsafe=True)
def every_atomic(r: tl.Raw, x: tl.In):
    idx = ct.arange(16, dtype=ct.int32)
    v = ct.load(x, index=(ct.bid(0),), shape=(16,))
    ct.atomic_add(r, idx, v)
    ct.atomic_and(r, idx, v)
    ct.atomic_or(r, idx, v)
    ct.atomic_xor(r, idx, v)
    ct.atomic_max(r, idx, v)
    ct.atomic_min(r, idx, v)
    ct.atomic_xchg(r, idx, v)
    ct.atomic_cas(r, idx, v, v + 1)


@accepted("unsafe_every_store", lambda: (S((64, 64)), S((64, 64))), unsafe=True)
def every_store(r: tl.Raw, x: tl.In):
    t = ct.load(x, index=(ct.bid(0), 0), shape=(16, 16))
    ct.store(r, index=(ct.bid(0), 0), tile=t)
    tv = r.tiled_view((16, 16))
    tv.store((ct.bid(0), 1), t)
    tv.atomic_store_add((ct.bid(0), 2), t)
    top = r.slice(axis=0, start=0, stop=32)
    ct.store(top, index=(0, 3), tile=t)
    mem = r.get_raw_memory()
    mem.store_offset(ct.arange(16, dtype=ct.int32), ct.zeros((16,), ct.float32))
    rows = ct.arange(16, dtype=ct.int32)
    ct.store_advanced_indexing(r, (rows, ct.Slice(0, 16)), t)


def _raw_add_one(buf, i):
    ct.atomic_add(buf, i, 1)


@accepted("unsafe_helper_writes_raw", lambda: (S(64, "int32"), S(1024, "int32")), unsafe=True)
def count_with_helper(counts: tl.Raw, x: tl.In):
    v = ct.load(x, index=(ct.bid(0),), shape=(64,))
    _raw_add_one(counts, v)


@accepted("unsafe_partition_and_counter",
          lambda: (S(1024).partition(128), S(1, "int32"), S(1024)), unsafe=True)
def copy_and_count(z: tl.Out, counter: tl.Raw, x: tl.In):
    z.store(tl.load_like(x, z))
    ct.atomic_add(counter, 0, 1)


@accepted("unsafe_head_permutation_raw",
          lambda: (S((2, 128, 4, 64), "float16"), S((2, 4, 128, 64), "float16"), 64),
          unsafe=True)
def head_permute_raw(out: tl.Raw, x: tl.In, BS: ct.Constant[int]):
    # opting out: the author, not tilelab, answers for which block writes where
    b, h, s = ct.bid(0), ct.bid(1), ct.bid(2)
    t = ct.load(x, index=(b, h, s, 0), shape=(1, 1, BS, 64))
    ct.store(out, index=(b, s, h, 0), tile=ct.permute(t, (0, 2, 1, 3)))


@accepted("unsafe_chained_tiled_view_store", lambda: (S((64, 64)), S((64, 64))), unsafe=True)
def chained_view_store(r: tl.Raw, x: tl.In):
    t = ct.load(x, index=(ct.bid(0), 0), shape=(16, 16))
    r.tiled_view((16, 16)).store((ct.bid(0), 0), t)


# ======================================================================================
# REJECTED
# ======================================================================================

# The phrases every family of messages must contain.
IN_WRITE = ("which is tl.In", "kernels may not write their inputs", "z: tl.Out",
            "@tl.kernel(unsafe=True)")
PART_WRITE = ("directly; a safe kernel writes a partition only with",)
WRITE_ONLY = ("is tl.Out (write-only)", "tl.InOut")
FIXED = ("the destination of every safe store is fixed by the partition", "cannot be chosen")
MINTED = ("is not a tile minted by an enclosing 'for t in p.tiles()' loop",
          "p.store(tile, at=t)")
ESCAPE = ("renaming it, putting it in a tuple or returning it would escape the ownership check",)
UNSAFE_ONLY = ("unsafe=True",)

# ---- writes to tl.In ---------------------------------------------------------------


@rejected("in_ct_store", "ct.store()", "'x'", *IN_WRITE, rule="write-input")
def in_store(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    ct.store(x, index=(ct.bid(0),), tile=t + 1)  # REJECT: in_ct_store
    z.store(t)


@rejected("in_scatter", "ct.scatter()", "'x'", *IN_WRITE, rule="write-input")
def in_scatter(z: tl.Out, x: tl.In, idx: tl.In):
    t = tl.load_like(x, z)
    ct.scatter(x, tl.load_like(idx, z), t)  # REJECT: in_scatter
    z.store(t)


@rejected("in_atomic_add", "ct.atomic_add()", *IN_WRITE, rule="write-input")
def in_atomic_add(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    ct.atomic_add(x, ct.arange(16, dtype=ct.int32), v)  # REJECT: in_atomic_add
    z.store(v)


@rejected("in_atomic_and", "ct.atomic_and()", *IN_WRITE, rule="write-input")
def in_atomic_and(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    z.store(ct.atomic_and(x, ct.arange(16, dtype=ct.int32), v))  # REJECT: in_atomic_and @ ct.atomic_and


@rejected("in_atomic_cas", "ct.atomic_cas()", *IN_WRITE, rule="write-input")
def in_atomic_cas(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    old = ct.atomic_cas(x, ct.arange(16, dtype=ct.int32), v, v + 1)  # REJECT: in_atomic_cas @ ct.atomic_cas
    z.store(old)


@rejected("in_atomic_max", "ct.atomic_max()", *IN_WRITE, rule="write-input")
def in_atomic_max(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    ct.atomic_max(x, ct.arange(16, dtype=ct.int32), v)  # REJECT: in_atomic_max
    z.store(v)


@rejected("in_atomic_min", "ct.atomic_min()", *IN_WRITE, rule="write-input")
def in_atomic_min(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    ct.atomic_min(x, ct.arange(16, dtype=ct.int32), v)  # REJECT: in_atomic_min
    z.store(v)


@rejected("in_atomic_or", "ct.atomic_or()", *IN_WRITE, rule="write-input")
def in_atomic_or(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    ct.atomic_or(x, ct.arange(16, dtype=ct.int32), v)  # REJECT: in_atomic_or
    z.store(v)


@rejected("in_atomic_xchg", "ct.atomic_xchg()", *IN_WRITE, rule="write-input")
def in_atomic_xchg(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    ct.atomic_xchg(x, ct.arange(16, dtype=ct.int32), v)  # REJECT: in_atomic_xchg
    z.store(v)


@rejected("in_atomic_xor", "ct.atomic_xor()", *IN_WRITE, rule="write-input")
def in_atomic_xor(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    ct.atomic_xor(x, ct.arange(16, dtype=ct.int32), v)  # REJECT: in_atomic_xor
    z.store(v)


@rejected("in_store_advanced_indexing", "ct.store_advanced_indexing()", *IN_WRITE,
          rule="write-input")
def in_store_adv(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    ct.store_advanced_indexing(x, (ct.arange(16, dtype=ct.int32),), v)  # REJECT: in_store_advanced_indexing
    z.store(v)


# a tiled view of an input is read-only: the store through it is traced back to x
@rejected("in_tiled_view_store", ".store()", "'x'", *IN_WRITE, rule="write-input")
def in_tiled_view_store(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    view = x.tiled_view((16,))
    view.store((ct.bid(0),), v)  # REJECT: in_tiled_view_store
    z.store(v)


@rejected("in_tiled_view_store_chained", "'x'", *IN_WRITE, rule="write-input")
def in_tiled_view_store_chained(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    x.tiled_view((16,)).store((ct.bid(0),), v)  # REJECT: in_tiled_view_store_chained
    z.store(v)


@rejected("in_tiled_view_atomic_store_add", ".atomic_store_add()", *IN_WRITE, rule="write-input")
def in_tiled_view_atomic(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    x.tiled_view((16,)).atomic_store_add((ct.bid(0),), v)  # REJECT: in_tiled_view_atomic_store_add
    z.store(v)


# get_raw_memory is refused at the attribute (raw-op), before its write method is reached
@rejected("in_raw_memory_store_offset", "x.get_raw_memory reaches raw memory or pointers",
          *UNSAFE_ONLY, rule="raw-op")
def in_raw_memory(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    x.get_raw_memory().store_offset(ct.arange(16, dtype=ct.int32), v)  # REJECT: in_raw_memory_store_offset
    z.store(v)


@rejected("in_raw_memory_atomic_add_offset", "x.get_raw_memory reaches raw memory",
          *UNSAFE_ONLY, rule="raw-op")
def in_raw_memory_atomic(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    mem = x.get_raw_memory()  # REJECT: in_raw_memory_atomic_add_offset @ x.get_raw_memory
    mem.atomic_add_offset(ct.arange(16, dtype=ct.int32), v)
    z.store(v)


@rejected("in_slice_store", "ct.store()", *IN_WRITE, rule="write-input")
def in_slice_store(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    ct.store(x.slice(axis=0, start=0, stop=16), index=(0,), tile=v)  # REJECT: in_slice_store
    z.store(v)


@rejected("unannotated_param_written", "'x'", "an input (unannotated arrays are tl.In)",
          "kernels may not write their inputs", rule="write-input")
def unannotated_written(z: tl.Out, x):
    v = tl.load_like(x, z)
    ct.store(x, index=(ct.bid(0),), tile=v * 2)  # REJECT: unannotated_param_written
    z.store(v)


@rejected("local_alias_of_in", "ct.store()", "'x'", *IN_WRITE, rule="write-input")
def local_alias_store(z: tl.Out, x: tl.In):
    a = x
    v = tl.load_like(x, z)
    ct.store(a, index=(ct.bid(0),), tile=v)  # REJECT: local_alias_of_in
    z.store(v)


@rejected("tuple_alias_of_in", "'x'", *IN_WRITE, rule="write-input")
def tuple_alias_store(z: tl.Out, x: tl.In, y: tl.In):
    first, second = y, x
    v = tl.load_like(y, z)
    ct.store(second, index=(ct.bid(0),), tile=v)  # REJECT: tuple_alias_of_in
    z.store(v)


@rejected("loop_alias_of_in", "'x'", *IN_WRITE, rule="write-input")
def loop_alias_store(z: tl.Out, x: tl.In, y: tl.In):
    v = tl.load_like(x, z)
    for dst in (x, y):
        ct.atomic_add(dst, ct.arange(16, dtype=ct.int32), v)  # REJECT: loop_alias_of_in
    z.store(v)


@rejected("walrus_alias_of_in", "'x'", *IN_WRITE, rule="write-input")
def walrus_alias_store(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    ct.store((a := x), index=(ct.bid(0),), tile=v)  # REJECT: walrus_alias_of_in
    z.store(ct.load(a, index=(ct.bid(0),), shape=(16,)))


@rejected("starred_args_of_in", "ct.store() with *args or **kwargs", "the checker must see every argument of a memory op",
          "write the arguments out", rule="call-star")
def starred_store(z: tl.Out, x: tl.In):
    args = (x, (ct.bid(0),), ct.zeros((16,), ct.float32))
    ct.store(*args)  # REJECT: starred_args_of_in @ *args
    z.store(tl.load_like(x, z))


@rejected("starred_args_with_loaded_tile", "ct.store() with *args or **kwargs", "the checker must see every argument of a memory op",
          "write the arguments out", rule="call-star")
def starred_store_loaded(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    args = (x, (ct.bid(0),), v)
    ct.store(*args)  # REJECT: starred_args_with_loaded_tile @ *args
    z.store(v)


def _identity(a):
    return a


@rejected("in_through_helper_result", "'x'", *IN_WRITE, rule="write-input")
def helper_result_store(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    ct.store(_identity(x), index=(ct.bid(0),), tile=v)  # REJECT: in_through_helper_result
    z.store(v)


def _store_tile(dst, tile):
    ct.store(dst, index=(ct.bid(0),), tile=tile)  # REJECT: helper_writes_in, unsafe_helper_writes_in


def _atomic_into(dst, tile):
    ct.atomic_add(dst, ct.arange(16, dtype=ct.int32), tile)  # REJECT: nested_helper_writes_in


def _accumulate_into(dst, tile):
    _atomic_into(dst, tile * 2)


@rejected("helper_writes_in", "'dst', which is tl.In",
          "in helper '_store_tile', called from kernel 'helper_writes'", rule="write-input")
def helper_writes(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    _store_tile(x, v)
    z.store(v)


@rejected("nested_helper_writes_in", "'dst', which is tl.In", "helper '_atomic_into'",
          rule="write-input")
def nested_helper_writes(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    _accumulate_into(x, v)
    z.store(v)


@rejected("unsafe_helper_writes_in", "'dst', which is tl.In", "helper '_store_tile'",
          unsafe=True, rule="write-input")
def unsafe_helper_writes(r: tl.Raw, x: tl.In):
    v = ct.load(x, index=(ct.bid(0),), shape=(16,))
    _store_tile(r, v)           # fine: r is tl.Raw
    _store_tile(x, v)           # not fine: x is tl.In, even in an unsafe kernel


@rejected("in_store_via_imported_name", "tile_store()", *IN_WRITE, rule="write-input")
def imported_store(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    tile_store(x, index=(ct.bid(0),), tile=v)  # REJECT: in_store_via_imported_name
    z.store(v)


@rejected("in_atomic_via_module_path", "cuda.tile.atomic_add()", *IN_WRITE, rule="write-input")
def module_path_atomic(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    cuda.tile.atomic_add(x, ct.arange(16, dtype=ct.int32), v)  # REJECT: in_atomic_via_module_path
    z.store(v)


class _Writers:
    @staticmethod
    def put(dst, tile):
        ct.store(dst, index=(ct.bid(0),), tile=tile)


# a static method is reached through a class, and dotted names go through modules only
@rejected("staticmethod_helper_writes_in", "_Writers.put", "dotted names in a kernel go "
          "through modules only", rule="global-attribute")
def staticmethod_helper(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    _Writers.put(x, v)  # REJECT: staticmethod_helper_writes_in
    z.store(v)


@rejected("nested_def_writes_in", "nested functions are not allowed inside a kernel",
          "define helpers with 'def' at module level", rule="statement")
def nested_def_writer(z: tl.Out, x: tl.In):
    def spill(tile):  # REJECT: nested_def_writes_in
        ct.store(x, index=(ct.bid(0),), tile=tile)
        return tile
    z.store(spill(tl.load_like(x, z)))


@ct.function
def _ct_function_writer(dst, tile):
    ct.store(dst, index=(ct.bid(0),), tile=tile)  # REJECT: ct_function_helper_writes_in


@rejected("ct_function_helper_writes_in", "'dst', which is tl.In",
          "helper '_ct_function_writer'", rule="write-input")
def ct_function_helper(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    _ct_function_writer(x, v)
    z.store(v)


_WRITE_LAMBDA = lambda dst, tile: ct.store(dst, index=(0,), tile=tile)  # noqa: E731


@rejected("helper_is_lambda", "_WRITE_LAMBDA", "lambda", "'def'", rule="helper-lambda")
def lambda_helper(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    _WRITE_LAMBDA(x, v)  # REJECT: helper_is_lambda
    z.store(v)


exec("def _exec_helper(dst, tile):\n    ct.store(dst, index=(0,), tile=tile)\n", globals())


@rejected("helper_without_source", "cannot check helper '_exec_helper'",
          "its source is not available", "define helpers in a .py file", rule="helper-source")
def exec_helper(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    _exec_helper(x, v)  # REJECT: helper_without_source
    z.store(v)


@rejected("getattr_lookup", "getattr(ct", "computed callee", rule="call-computed")
def getattr_store(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    getattr(ct, "store")(x, index=(ct.bid(0),), tile=v)  # REJECT: getattr_lookup
    z.store(v)


@rejected("globals_lookup", "globals()", "looks names up or runs code at run time",
          rule="call-dynamic")
def globals_store(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    ops = globals()["ct"]  # REJECT: globals_lookup @ globals()
    ops.store(x, index=(ct.bid(0),), tile=v)
    z.store(v)


@rejected("in_write_through_dynamic_module", "writes memory directly", rule="write-safe")
def globals_store_inline(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    globals()["ct"].store(x, index=(ct.bid(0),), tile=v)  # REJECT: in_write_through_dynamic_module
    z.store(v)


@rejected("call_through_local", "call through 'st', which this function binds",
          "call them by their global name", rule="call-local")
def local_callable(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    st = ct.store
    st(x, index=(ct.bid(0),), tile=v)  # REJECT: call_through_local
    z.store(v)


@rejected("from_foreign_in_safe_kernel", "ct.Array.from_foreign", "raw memory or pointers",
          *UNSAFE_ONLY, rule="raw-op")
def foreign_view(z: tl.Out, x: tl.In):
    view = ct.Array.from_foreign(x.foreign_pointer, x.shape, x.strides)  # REJECT: from_foreign_in_safe_kernel @ ct.Array
    z.store(tl.load_like(x, z) + ct.load(view, index=(0,), shape=(16,)))


@rejected("foreign_pointer_in_safe_kernel", "x.foreign_pointer reaches raw memory or pointers",
          *UNSAFE_ONLY, rule="raw-op")
def foreign_pointer(z: tl.Out, x: tl.In):
    ptr = x.foreign_pointer  # REJECT: foreign_pointer_in_safe_kernel @ x.foreign_pointer
    z.store(tl.load_like(x, z))


@rejected("static_eval_callee", "ct.static_eval(ct.store)", rule="call-computed")
def static_eval_store(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    ct.static_eval(ct.store)(x, index=(ct.bid(0),), tile=v)  # REJECT: static_eval_callee
    z.store(v)


_OPS = (ct.store, ct.load)


@rejected("subscript_callee", "_OPS[0]", rule="call-computed")
def subscript_store(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    _OPS[0](x, index=(ct.bid(0),), tile=v)  # REJECT: subscript_callee
    z.store(v)


_STORE_FIRST = True


@rejected("conditional_callee", "ct.store if _STORE_FIRST else ct.load", rule="call-computed")
def conditional_store(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    (ct.store if _STORE_FIRST else ct.load)(x, index=(ct.bid(0),), tile=v)  # REJECT: conditional_callee
    z.store(v)


@rejected("import_in_kernel", "import", rule="statement")
def import_inside(z: tl.Out, x: tl.In):
    import cuda.tile as c2  # REJECT: import_in_kernel
    v = tl.load_like(x, z)
    c2.atomic_add(x, ct.arange(16, dtype=ct.int32), v)
    z.store(v)


# ---- unsafe kernels: still no writes to tl.In, nothing untraceable ----------------


@rejected("unsafe_atomic_on_in", "ct.atomic_add()", "'x', which is tl.In", unsafe=True,
          rule="write-input")
def unsafe_histogram_wrong_target(h: tl.Raw, x: tl.In):
    v = ct.load(x, index=(ct.bid(0),), shape=(256,))
    ct.atomic_add(x, v, 1)  # REJECT: unsafe_atomic_on_in


@rejected("unsafe_scatter_on_unannotated", "'idx'", "unannotated arrays are tl.In",
          unsafe=True, rule="write-input")
def unsafe_scatter_unannotated(out: tl.Raw, idx, x: tl.In):
    i = ct.load(idx, index=(ct.bid(0),), shape=(128,))
    ct.scatter(idx, i, ct.load(x, index=(ct.bid(0),), shape=(128,)))  # REJECT: unsafe_scatter_on_unannotated


@rejected("unsafe_alias_raw_or_in", "'x', which is tl.In", unsafe=True, rule="write-input")
def unsafe_maybe_in(r: tl.Raw, x: tl.In, flag: int):
    dst = r if flag > 0 else x
    ct.store(dst, index=(ct.bid(0),), tile=ct.zeros((16,), ct.float32))  # REJECT: unsafe_alias_raw_or_in


@rejected("unsafe_untraceable_write", "cannot trace back to a tl.Raw parameter",
          "write through the tl.Raw parameter itself", unsafe=True, rule="write-untraced")
def unsafe_foreign_write(r: tl.Raw, x: tl.In):
    view = ct.Array.from_foreign(x.foreign_pointer, x.shape, x.strides)
    ct.store(view, index=(ct.bid(0),), tile=ct.zeros((16,), ct.float32))  # REJECT: unsafe_untraceable_write


@rejected("unsafe_partition_ct_store", "ct.store()", "'z'", *PART_WRITE, unsafe=True,
          rule="write-partition")
def unsafe_out_raw_store(z: tl.Out, r: tl.Raw, x: tl.In):
    ct.store(z, index=(ct.bid(0),), tile=tl.load_like(x, z))  # REJECT: unsafe_partition_ct_store


def _pick_index(i, buf):
    return i


@rejected("unsafe_chained_store_on_in", "'x', which is tl.In", unsafe=True, rule="write-input")
def unsafe_chained_in(r: tl.Raw, x: tl.In):
    t = ct.load(x, index=(ct.bid(0),), shape=(16,))
    x.tiled_view((16,)).store((_pick_index(ct.bid(0), r),), t + 1)  # REJECT: unsafe_chained_store_on_in


@rejected("unsafe_static_eval_on_in", "ct.static_eval(ct.atomic_add)", unsafe=True,
          rule="call-computed")
def unsafe_static_eval(h: tl.Raw, x: tl.In):
    v = ct.load(x, index=(ct.bid(0),), shape=(16,))
    ct.static_eval(ct.atomic_add)(x, ct.arange(16, dtype=ct.int32), v)  # REJECT: unsafe_static_eval_on_in


# ---- raw writes to partitions ------------------------------------------------------


@rejected("out_ct_store", "ct.store()", "'z'", *PART_WRITE, "z.store(tile)", rule="write-partition")
def out_raw_store(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    ct.store(z, index=(ct.bid(0),), tile=t)  # REJECT: out_ct_store


@rejected("out_scatter", "ct.scatter()", "'z'", *PART_WRITE, rule="write-partition")
def out_scatter(z: tl.Out, x: tl.In, idx: tl.In):
    ct.scatter(z, tl.load_like(idx, z), tl.load_like(x, z))  # REJECT: out_scatter


@rejected("inout_atomic_add", "ct.atomic_add()", "'p'", *PART_WRITE, "p.store(tile)",
          rule="write-partition")
def inout_atomic(p: tl.InOut, x: tl.In):
    ct.atomic_add(p, ct.arange(16, dtype=ct.int32), tl.load_like(x, p))  # REJECT: inout_atomic_add


@rejected("inout_store_advanced_indexing", "'p'", *PART_WRITE, rule="write-partition")
def inout_adv(p: tl.InOut):
    v = p.load()
    ct.store_advanced_indexing(p, (ct.arange(16, dtype=ct.int32),), v)  # REJECT: inout_store_advanced_indexing


# ---- reading a tl.Out ----------------------------------------------------------------


@rejected("out_load_method", "z.load", "a kernel may not read its outputs", *WRITE_ONLY,
          rule="partition-read-out")
def out_load(z: tl.Out, x: tl.In):
    z.store(z.load() + tl.load_like(x, z))  # REJECT: out_load_method @ z.load


@rejected("out_ct_load", "ct.load()", "would read it", *WRITE_ONLY, rule="partition-read-out")
def out_ct_load(z: tl.Out, x: tl.In):
    prev = ct.load(z, index=(ct.bid(0),), shape=(16,))  # REJECT: out_ct_load @ ct.load
    z.store(prev + tl.load_like(x, z))


@rejected("out_load_like", "tl.load_like(z, ...) would read an output", *WRITE_ONLY,
          rule="partition-read-out")
def out_load_like(z: tl.Out, q: tl.Out, x: tl.In):
    q.store(tl.load_like(x, q))
    z.store(tl.load_like(z, q))  # REJECT: out_load_like @ z, q


@rejected("out_gather", "ct.gather()", *WRITE_ONLY, rule="partition-read-out")
def out_gather(z: tl.Out, idx: tl.In):
    z.store(ct.gather(z, tl.load_like(idx, z)))  # REJECT: out_gather @ ct.gather


@rejected("inout_ct_load_other_tile", "ct.load() on partition 'p' could read tiles other "
          "blocks write", "p.load()", rule="partition-other-tile")
def inout_neighbour(p: tl.InOut):
    (i,) = p.tile_index
    right = ct.load(p, index=(i + 1,), shape=p.tile_shape)  # REJECT: inout_ct_load_other_tile @ ct.load
    p.store(p.load() + right)


@rejected("inout_load_like_first", "tl.load_like(p, ...) would read a tile of the "
          "partition p other than this block's own", "p.load()", rule="partition-other-tile")
def inout_load_like(p: tl.InOut, q: tl.Out):
    q.store(tl.load_like(p, q))  # REJECT: inout_load_like_first @ p, q


@rejected("inout_load_with_index", "p.load() reads this block's own tile and takes no index",
          rule="partition-load")
def inout_load_index(p: tl.InOut):
    p.store(p.load((0,)) * 2)  # REJECT: inout_load_with_index @ p.load


# ---- choosing the destination ----------------------------------------------------------


@rejected("store_index_keyword", *FIXED, "index=", "tl.Raw", rule="partition-store")
def store_with_index(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z), index=(0,))  # REJECT: store_index_keyword @ index=


@rejected("store_index_positional", *FIXED, "an index", rule="partition-store")
def store_with_positional(z: tl.Out, x: tl.In):
    (i,) = z.tile_index
    z.store(tl.load_like(x, z), (i + 1,))  # REJECT: store_index_positional @ (i + 1,)


@rejected("store_two_tiles", *FIXED, rule="partition-store")
def store_twice_in_one(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z), tl.load_like(x, z))  # REJECT: store_two_tiles @ tl.load_like(x, z))


# The head permutation, written the raw cuTile way: x is (B, H, S, D), out (B, S, H, D);
# block (b, h, s) stores at (b, s, 0, 0), so the H blocks of one (b, s) write one tile.


@rejected("head_permutation_raw_store_out", "ct.store()", "'out'", *PART_WRITE,
          "out.store(tile)", rule="write-partition")
def head_permute_raw_out(out: tl.Out, x: tl.In, BS: ct.Constant[int]):
    b, h, s = ct.bid(0), ct.bid(1), ct.bid(2)
    t = ct.load(x, index=(b, h, s, 0), shape=(1, 1, BS, 64))
    ct.store(out, index=(b, s, 0, 0), tile=ct.permute(t, (0, 2, 1, 3)))  # REJECT: head_permutation_raw_store_out


@rejected("head_permutation_raw_unannotated", "'out'", "unannotated arrays are tl.In",
          "z: tl.Out", rule="write-input")
def head_permute_port(out, x, BS: ct.Constant[int]):
    # a straight port of the @ct.kernel: both arrays unannotated, so both are tl.In
    b, h, s = ct.bid(0), ct.bid(1), ct.bid(2)
    t = ct.load(x, index=(b, h, s, 0), shape=(1, 1, BS, 64))
    ct.store(out, index=(b, h, s, 0), tile=ct.permute(t, (0, 2, 1, 3)))  # REJECT: head_permutation_raw_unannotated


@rejected("head_permutation_store_swapped_index", *FIXED, "index=", rule="partition-store")
def head_permute_swapped(out: tl.Out, x: tl.In):
    b, s, h = out.tile_index
    _, bs, d = out.tile_shape
    t = ct.load(x, index=(b, h, s, 0), shape=(1, 1, bs, d))
    out.store(ct.reshape(t, (1, bs, d)), index=(b, h, s))  # REJECT: head_permutation_store_swapped_index @ index=


@rejected("head_permutation_raw_param_safe", "'out' is tl.Raw", *UNSAFE_ONLY, rule="raw-param")
def head_permute_raw_safe(out: tl.Raw, x: tl.In, BS: ct.Constant[int]):  # REJECT: head_permutation_raw_param_safe @ out: tl.Raw
    b, h, s = ct.bid(0), ct.bid(1), ct.bid(2)
    t = ct.load(x, index=(b, h, s, 0), shape=(1, 1, BS, 64))
    ct.store(out, index=(b, s, 0, 0), tile=ct.permute(t, (0, 2, 1, 3)))


# ---- persistent kernels: stores only at minted tiles --------------------------------


@rejected("persistent_at_t_plus_one", "at=t + 1", *MINTED, rule="at-not-minted")
def persistent_shifted(c: tl.Out, x: tl.In):
    for t in c.tiles():
        c.store(tl.load_like(x, c, at=t), at=t + 1)  # REJECT: persistent_at_t_plus_one @ t + 1


@rejected("persistent_at_outside_loop", "at=t", *MINTED, rule="at-not-minted")
def persistent_after_loop(c: tl.Out, x: tl.In):
    for t in c.tiles():
        c.store(tl.load_like(x, c, at=t), at=t)
    c.store(tl.load_like(x, c, at=t), at=t)  # REJECT: persistent_at_outside_loop @last t)


@rejected("persistent_loop_var_reassigned", "the tile variable 't' minted by c.tiles() is "
          "reassigned inside the loop", "keep 't' as the loop gave it", rule="tile-reassigned")
def persistent_reassigned(c: tl.Out, x: tl.In):
    for t in c.tiles():
        v = tl.load_like(x, c, at=t)
        t = t + 1  # REJECT: persistent_loop_var_reassigned
        c.store(v, at=t)


@rejected("persistent_loop_var_augmented", "is reassigned inside the loop", rule="tile-reassigned")
def persistent_augmented(c: tl.Out, x: tl.In):
    for t in c.tiles():
        v = tl.load_like(x, c, at=t)
        t += ct.num_blocks(0)  # REJECT: persistent_loop_var_augmented
        c.store(v, at=t)


@rejected("persistent_loop_var_shadowed", "is reassigned inside the loop", rule="tile-reassigned")
def persistent_shadowed(c: tl.Out, x: tl.In):
    for t in c.tiles():
        for t in range(2):  # REJECT: persistent_loop_var_shadowed @ t in range
            c.store(tl.load_like(x, c, at=t), at=t)


@rejected("persistent_missing_at", "c.store(v) has no tile",
          "each access names the tile the loop minted", "at=t", rule="missing-at")
def persistent_no_at(c: tl.Out, x: tl.In):
    for t in c.tiles():
        v = tl.load_like(x, c, at=t)
        c.store(v)  # REJECT: persistent_missing_at


@rejected("persistent_inout_load_missing_at", "p.load() has no tile", "at=t", rule="missing-at")
def persistent_inout_no_at(p: tl.InOut):
    for t in p.tiles():
        p.store(p.load() + 1, at=t)  # REJECT: persistent_inout_load_missing_at @ p.load


@rejected("persistent_load_like_missing_at", "tl.load_like(x, c) has no tile", "at=t",
          rule="missing-at")
def persistent_load_no_at(c: tl.Out, x: tl.In):
    for t in c.tiles():
        c.store(tl.load_like(x, c) * 2, at=t)  # REJECT: persistent_load_like_missing_at @ tl.load_like


@rejected("persistent_nested_loops", "persistent tile loops cannot be nested", rule="tiles-loop")
def persistent_nested(c: tl.Out, x: tl.In):
    for t in c.tiles():
        for u in c.tiles():  # REJECT: persistent_nested_loops
            c.store(tl.load_like(x, c, at=u), at=u)


@rejected("persistent_tiles_not_in_for", "c.tiles() can only be the iterable of a for loop",
          rule="tiles-loop")
def persistent_tiles_value(c: tl.Out, x: tl.In):
    tiles = c.tiles()  # REJECT: persistent_tiles_not_in_for @ c.tiles()
    for t in tiles:
        c.store(tl.load_like(x, c, at=t), at=t)


@rejected("persistent_tiles_wrapped", "c.tiles() can only be the iterable of a for loop",
          rule="tiles-loop")
def persistent_tiles_list(c: tl.Out, x: tl.In):
    for t in list(c.tiles()):  # REJECT: persistent_tiles_wrapped @ c.tiles()
        c.store(tl.load_like(x, c, at=t), at=t)


@rejected("persistent_tiles_with_args", "c.tiles() takes no arguments",
          "the schedule decides which tiles each block gets", rule="tiles-loop")
def persistent_tiles_args(c: tl.Out, x: tl.In):
    for t in c.tiles(2):  # REJECT: persistent_tiles_with_args @ c.tiles(2)
        c.store(tl.load_like(x, c, at=t), at=t)


@rejected("persistent_tiles_tuple_target", "the loop over c.tiles() must bind one name",
          rule="tiles-loop")
def persistent_unpack(c: tl.Out, x: tl.In):
    for m, n in c.tiles():  # REJECT: persistent_tiles_tuple_target @ m, n
        c.store(tl.load_like(x, c, at=m), at=m)


@rejected("persistent_other_loop_var", "at=i", *MINTED, rule="at-not-minted")
def persistent_inner_index(c: tl.Out, x: tl.In):
    for t in c.tiles():
        v = tl.load_like(x, c, at=t)
        for i in range(2):
            c.store(v, at=i)  # REJECT: persistent_other_loop_var @ i)


@rejected("persistent_tile_index", "c.tile_index is not defined in a persistent kernel",
          "use c.tile_index_of(t)", rule="tile-index-persistent")
def persistent_tile_index(c: tl.Out, a: tl.In):
    for t in c.tiles():
        m, n = c.tile_index  # REJECT: persistent_tile_index @ c.tile_index
        c.store(ct.load(a, index=(m, n), shape=c.tile_shape), at=t)


@rejected("persistent_load_like_at_not_minted", "at=t + 1", *MINTED, rule="at-not-minted")
def persistent_load_shifted(c: tl.Out, x: tl.In):
    for t in c.tiles():
        c.store(tl.load_like(x, c, at=t + 1), at=t)  # REJECT: persistent_load_like_at_not_minted @ t + 1


@rejected("tile_index_of_not_minted", "c.tile_index_of(t + 1)", "needs a tile minted",
          rule="at-not-minted")
def tile_index_of_shifted(c: tl.Out, a: tl.In):
    for t in c.tiles():
        m, n = c.tile_index_of(t + 1)  # REJECT: tile_index_of_not_minted @ t + 1
        c.store(ct.load(a, index=(m, n), shape=c.tile_shape), at=t)


@rejected("tile_index_of_outside_loop", "needs a tile minted by an enclosing", rule="at-not-minted")
def tile_index_of_after(c: tl.Out, a: tl.In):
    for t in c.tiles():
        c.store(tl.load_like(a, c, at=t), at=t)
    m, n = c.tile_index_of(t)  # REJECT: tile_index_of_outside_loop @ t)


@rejected("tile_index_of_without_tile", "c.tile_index_of(t) takes the tile t minted by "
          "'for t in c.tiles()'", rule="partition-attribute")
def tile_index_of_empty(c: tl.Out, a: tl.In):
    for t in c.tiles():
        m, n = c.tile_index_of()  # REJECT: tile_index_of_without_tile @ c.tile_index_of
        c.store(ct.load(a, index=(m, n), shape=c.tile_shape), at=t)


@rejected("tile_index_of_in_row_major_kernel", "only for persistent kernels",
          "use c.tile_index", rule="at-not-persistent")
def tile_index_of_row_major(c: tl.Out, a: tl.In):
    m, n = c.tile_index_of(0)  # REJECT: tile_index_of_in_row_major_kernel @ 0)
    c.store(ct.load(a, index=(m, n), shape=c.tile_shape))


@rejected("at_in_non_persistent_kernel", "at= is only for persistent kernels",
          "remove at=", rule="at-not-persistent")
def row_major_with_at(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z), at=0)  # REJECT: at_in_non_persistent_kernel @ 0)


@rejected("persistent_store_out_of_loop_no_at", "has no tile", rule="missing-at")
def persistent_epilogue(c: tl.Out, x: tl.In):
    for t in c.tiles():
        c.store(tl.load_like(x, c, at=t), at=t)
    c.store(ct.zeros(c.tile_shape, ct.float32))  # REJECT: persistent_store_out_of_loop_no_at


# ---- partitions never escape ---------------------------------------------------------


def _scale_into(dst, tile):
    dst.store(tile * 2)


@rejected("partition_to_helper", "passing partition 'z' to _scale_into() is not allowed",
          "the callee could write any tile of it", "return a tile and write z.store(tile)",
          rule="partition-escape")
def partition_to_helper(z: tl.Out, x: tl.In):
    _scale_into(z, tl.load_like(x, z))  # REJECT: partition_to_helper


@rejected("partition_to_builtin", "passing partition 'z' to len()", rule="partition-escape")
def partition_to_builtin(z: tl.Out, x: tl.In):
    n = len(z)  # REJECT: partition_to_builtin @ len(z)
    z.store(tl.load_like(x, z) * n)


@rejected("partition_to_ct_op", "partition 'z' cannot be passed to ct.num_tiles()",
          "z.tile_shape", rule="partition-to-op")
def partition_to_ct_op(z: tl.Out, x: tl.In):
    n = ct.num_tiles(z, axis=0, shape=(16,))  # REJECT: partition_to_ct_op @ ct.num_tiles
    z.store(tl.load_like(x, z) + n)


@rejected("partition_keyword_to_helper", "passing partition 'z' to _scale_into()",
          rule="partition-escape")
def partition_kw_helper(z: tl.Out, x: tl.In):
    _scale_into(dst=z, tile=tl.load_like(x, z))  # REJECT: partition_keyword_to_helper


@rejected("partition_alias_assign", "partition 'z' may only be used as z.store(tile)",
          *ESCAPE, rule="partition-escape")
def partition_alias(z: tl.Out, x: tl.In):
    q = z  # REJECT: partition_alias_assign @ z
    q.store(tl.load_like(x, z))


@rejected("partition_in_tuple", "partition 'w' may only be used", *ESCAPE, rule="partition-escape")
def partition_tuple(z: tl.Out, w: tl.Out, x: tl.In):
    outs = (w, z)  # REJECT: partition_in_tuple @ w, z
    for o in outs:
        o.store(tl.load_like(x, z))


@rejected("partition_returned", "partition 'z' may only be used", *ESCAPE, rule="partition-escape")
def partition_return(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z))
    return z  # REJECT: partition_returned @ z


@rejected("partition_in_dict", "partition 'z' may only be used", *ESCAPE, rule="partition-escape")
def partition_dict(z: tl.Out, x: tl.In):
    outs = {"z": z}  # REJECT: partition_in_dict @ z}
    outs["z"].store(tl.load_like(x, z))


@rejected("partition_closure_def", "nested functions are not allowed", rule="statement")
def partition_closure(z: tl.Out, x: tl.In):
    def emit(tile):  # REJECT: partition_closure_def
        z.store(tile)
    emit(tl.load_like(x, z))


@rejected("partition_closure_lambda", "lambdas are not allowed", rule="statement")
def partition_lambda(z: tl.Out, x: tl.In):
    emit = lambda tile: z.store(tile)  # noqa: E731  # REJECT: partition_closure_lambda @ lambda
    emit(tl.load_like(x, z))


@rejected("partition_reassigned", "partition parameter 'z' is reassigned",
          "must keep meaning the partition", rule="partition-reassigned")
def partition_rebound(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    z = t * 2  # REJECT: partition_reassigned
    ct.store(x, index=(0,), tile=z)


@rejected("partition_store_as_value", "z.store must be called directly",
          "taking the method as a value", rule="partition-method-value")
def store_as_value(z: tl.Out, x: tl.In):
    emit = z.store  # REJECT: partition_store_as_value @ z.store
    emit(tl.load_like(x, z))


@rejected("partition_unknown_attribute", "partition 'z' has no attribute 'tiled_view'",
          "tile_index", rule="partition-attribute")
def partition_tiled_view(z: tl.Out, x: tl.In):
    view = z.tiled_view((16,))  # REJECT: partition_unknown_attribute @ z.tiled_view
    view.store((ct.bid(0),), tl.load_like(x, z))


# refused at the attribute as raw (before the partition's attribute table is consulted)
@rejected("partition_raw_memory_attribute", "p.get_raw_memory reaches raw memory or pointers",
          *UNSAFE_ONLY, rule="raw-op")
def partition_raw_memory(p: tl.InOut):
    p.get_raw_memory().store_offset(0, p.load())  # REJECT: partition_raw_memory_attribute @ p.get_raw_memory


@rejected("partition_tile_index_called", "z.tile_index is a tuple, not a method",
          rule="partition-attribute")
def tile_index_called(z: tl.Out, x: tl.In):
    (i,) = z.tile_index()  # REJECT: partition_tile_index_called @ z.tile_index()
    z.store(tl.load_like(x, z) + i)


@rejected("partition_via_locals", "locals()", "looks names up or runs code at run time",
          rule="call-dynamic")
def partition_locals(z: tl.Out, x: tl.In):
    scope = locals()  # REJECT: partition_via_locals @ locals()
    scope["z"].store(tl.load_like(x, z))


# ---- tl.Raw, tl objects, tl.load_like misuse, signatures ------------------------------


@rejected("raw_in_safe_kernel", "parameter 'h' is tl.Raw, which only unsafe kernels may "
          "have", "@tl.kernel(unsafe=True)", rule="raw-param")
def histogram_safe(h: tl.Raw, x: tl.In):  # REJECT: raw_in_safe_kernel @ h: tl.Raw
    v = ct.load(x, index=(ct.bid(0),), shape=(256,))
    ct.atomic_add(h, v, 1)


@rejected("tl_schedule_inside_kernel", "tl.persistent() is not available inside a kernel",
          "tl.load_like", rule="call-host")
def tl_object_inside(z: tl.Out, x: tl.In):
    sched = tl.persistent(4)  # REJECT: tl_schedule_inside_kernel @ tl.persistent
    z.store(tl.load_like(x, z))


@rejected("tl_kind_inside_kernel", "tl.In is class 'In'", "a kernel reads only numbers, "
          "strings, tuples, dtypes", rule="global-value")
def tl_kind_inside(z: tl.Out, x: tl.In):
    if tl.In is not None:  # REJECT: tl_kind_inside_kernel @ tl.In
        z.store(tl.load_like(x, z))


@rejected("load_like_extra_argument", "tl.load_like takes an array and a partition",
          rule="load-like-form")
def load_like_shape(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z, shape=(16,)))  # REJECT: load_like_extra_argument @ tl.load_like


@rejected("load_like_not_a_partition", "the second argument of tl.load_like must be a "
          "partition parameter", "got 'y'", rule="load-like-form")
def load_like_array(z: tl.Out, x: tl.In, y: tl.In):
    z.store(tl.load_like(x, y))  # REJECT: load_like_not_a_partition @ y)


# ---- tl.wait_for_previous_kernel --------------------------------------------------------


@accepted("weights_before_wait",
          lambda: (S(4096).partition(256), S(4096), S(4096), S((256,), "float32")))
def scale_early(y: tl.Out, w: tl.In, x: tl.In, g: tl.In):
    wt = tl.load_like(w, y)                # may run while the previous kernel finishes
    gt = ct.load(g, index=(0,), shape=(256,))
    n = y.tile_index[0]
    tl.wait_for_previous_kernel()
    y.store(wt * gt * tl.load_like(x, y) + n)


@rejected("store_before_wait", "comes before tl.wait_for_previous_kernel()",
          "may still be reading or writing 'y'", rule="before-wait")
def store_early(y: tl.Out, w: tl.In):
    y.store(tl.load_like(w, y))  # REJECT: store_before_wait @ y.store
    tl.wait_for_previous_kernel()


@rejected("inout_load_before_wait", "(acc.load()) comes before", rule="before-wait")
def accumulate_early(acc: tl.InOut, w: tl.In):
    a = acc.load()  # REJECT: inout_load_before_wait @ acc.load
    tl.wait_for_previous_kernel()
    acc.store(a + tl.load_like(w, acc))


@rejected("wait_in_branch", "must be a statement of its own in the kernel body itself",
          rule="wait-form")
def wait_in_branch(y: tl.Out, w: tl.In, c: int):
    wt = tl.load_like(w, y)
    if c > 0:
        tl.wait_for_previous_kernel()  # REJECT: wait_in_branch @ tl.wait
    y.store(wt)


@rejected("wait_twice", "may appear once", rule="wait-form")
def wait_twice(y: tl.Out, w: tl.In):
    tl.wait_for_previous_kernel()
    wt = tl.load_like(w, y)
    tl.wait_for_previous_kernel()  # REJECT: wait_twice @ tl.wait
    y.store(wt)


@rejected("wait_with_argument", "takes no arguments", rule="wait-form")
def wait_with_argument(y: tl.Out, w: tl.In):
    tl.wait_for_previous_kernel(w)  # REJECT: wait_with_argument @ tl.wait
    y.store(tl.load_like(w, y))


def _early_helper(t):
    tl.wait_for_previous_kernel()  # REJECT: wait_in_helper @ tl.wait
    return t


@rejected("wait_in_helper", "is called in a helper", rule="wait-form")
def wait_in_helper(y: tl.Out, w: tl.In):
    y.store(_early_helper(tl.load_like(w, y)))


@rejected("wait_as_value", "tl.wait_for_previous_kernel can only be called",
          rule="call-unknown")
def wait_as_value(y: tl.Out, w: tl.In):
    f = tl.wait_for_previous_kernel  # REJECT: wait_as_value @ tl.wait
    y.store(tl.load_like(w, y))


@rejected("varargs_parameter", "kernel parameters cannot be *args", rule="param-form")
def varargs_kernel(z: tl.Out, *xs):  # REJECT: varargs_parameter @ xs
    z.store(tl.load_like(xs[0], z))


@rejected("keyword_only_parameter", "kernel parameters cannot be keyword-only", rule="param-form")
def kwonly_kernel(z: tl.Out, *, x: tl.In):  # REJECT: keyword_only_parameter @ x: tl.In
    z.store(tl.load_like(x, z))


# tl.load_like reads a parameter directly (so that the launch can prove its tiles meet
# the array): a view, or a local alias (check_bounds_false_load_like_alias), is refused
@rejected("check_bounds_false_view_load_like", "tl.load_like reads an array parameter of "
          "the kernel directly", "got 'x.slice(axis=0, start=16, stop=32)'",
          rule="load-like-form", check_bounds=False)
def unchecked_view(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x.slice(axis=0, start=16, stop=32), z))  # REJECT: check_bounds_false_view_load_like @ x.slice


@rejected("check_bounds_false_explicit_load", "ct.load(..., check_bounds=False) reads "
          "without bounds checks", "this one it cannot prove", "unsafe=True",
          rule="unchecked-read", check_bounds=False)
def add_unchecked_explicit(z: tl.Out, x: tl.In, y: tl.In):
    (i,) = z.tile_index
    (bs,) = z.tile_shape
    a = ct.load(x, index=(i,), shape=(bs,), check_bounds=False)  # REJECT: check_bounds_false_explicit_load @ check_bounds=False
    z.store(a + ct.load(y, index=(i,), shape=(bs,), check_bounds=False))


@rejected("read_through_views_safe", "x.slice()", "view whose bounds the checker cannot "
          "prove", "unsafe=True", rule="view-op")
def views_safe(z: tl.Out, x: tl.In):
    (i,) = z.tile_index
    (bs,) = z.tile_shape
    row1 = x.slice(axis=0, start=1, stop=2)  # REJECT: read_through_views_safe @ x.slice
    a = ct.load(row1, index=(0, i), shape=(1, bs))
    b = x.tiled_view((1, bs)).load((2, i))
    z.store(ct.reshape(a + b, (bs,)))


@rejected("check_bounds_false_load_like_alias",
          "tl.load_like reads an array parameter of the kernel directly", "got 'a'",
          rule="load-like-form", check_bounds=False)
def unchecked_alias(z: tl.Out, x: tl.In):
    a = x
    z.store(tl.load_like(a, z))  # REJECT: check_bounds_false_load_like_alias @ a, z


@rejected("unicode_column", "ct.store()", *IN_WRITE, rule="write-input")
def unicode_names(z: tl.Out, x: tl.In):
    ŧ = tl.load_like(x, z); ct.store(x, index=(ct.bid(0),), tile=ŧ)  # noqa: E702  # REJECT: unicode_column @ ct.store
    z.store(ŧ)


# ---- rejected at the first compile: a helper defined after the kernel ----------------

try:
    @tl.kernel
    def late_writer(z: tl.Out, x: tl.In):
        v = tl.load_like(x, z)
        _late_write_helper(x, v)    # unresolved when the kernel is defined
        z.store(v)
except tl.SafetyError as _e:  # pragma: no cover - would be a checker regression
    late_writer = _e


def _late_write_helper(dst, tile):
    ct.store(dst, index=(ct.bid(0),), tile=tile)  # REJECT: late_helper_writes_in


REJECT["late_helper_writes_in"] = RejectCase(
    "late_helper_writes_in", late_writer, ("'dst', which is tl.In", "helper '_late_write_helper'"),
    when="compile", examples=lambda: (S(256).partition(16), S(256)), rule="write-input")


# ---- helpers rebound after the kernel was checked (used by the tests directly) --------


def _rebindable_helper(dst, tile):
    return tile * 2                 # reads only, when the kernel is checked


def _rebound_writer(dst, tile):
    ct.store(dst, index=(ct.bid(0),), tile=tile)
    return tile


def _rebound_reader(dst, tile):
    return tile * 3


def rebind_victim(z: tl.Out, x: tl.In):
    v = tl.load_like(x, z)
    z.store(_rebindable_helper(x, v))
