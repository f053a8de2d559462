"""The baselines: the tour's kernels written raw in cuTile Python (no tilelab).

Each mirrors what tilelab lowers the safe kernel to (same tiles, same block-to-tile
mapping), so timing both measures the cost of safety and nothing else.
"""
import cuda.tile as ct

ZERO = ct.PaddingMode.ZERO


@ct.kernel
def raw_add(z, x, y, TILE: ct.Constant[int]):
    b = ct.bid(0)
    ct.store(z, index=(b,), tile=ct.load(x, index=(b,), shape=(TILE,), padding_mode=ZERO)
             + ct.load(y, index=(b,), shape=(TILE,), padding_mode=ZERO))


@ct.kernel
def raw_gemm(c, a, b, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    m = ct.bid(1)   # tilelab's row-major schedule: x walks the tile columns
    n = ct.bid(0)
    acc = ct.full((TM, TN), 0, dtype=ct.float32)
    for k in range(ct.cdiv(a.shape[1], TK)):
        x = ct.load(a, index=(m, k), shape=(TM, TK), padding_mode=ZERO)
        y = ct.load(b, index=(k, n), shape=(TK, TN), padding_mode=ZERO)
        acc = ct.mma(x, y, acc)
    ct.store(c, index=(m, n), tile=acc.astype(c.dtype))
