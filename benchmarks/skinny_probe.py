"""Where a skinny GEMM's time goes: the fixed cost of a launch, and TMA vs plain loads.

Why: the k/v projection (N = 1024, K = 4096) at M <= 128 runs 11-13 us against cuBLAS's
9-10 us although it moves 8 MB (2 us of bandwidth), and no tile shape, split or hint
closed the gap. This times, in interleaved rounds after checking each result:

* the floor: a 1024-element add through torch and through tilelab (one block each),
  timed alone (``single``: the suite's way, event - launch - event) and back to back
  (``inner``: 20 calls per sample, which hides the launch latency);
* the k/v projection at M = 1, 16, 128: cuBLAS, the library's default, and a plain
  tile GEMM over a grid of tiles with TMA loads and with ``allow_tma=False`` loads,
  for a few tile shapes;
* the same tiles computed transposed ("swap AB": B^T A^T, so that 64 weight columns
  fill the MMA's rows and the 16 tokens its columns), over a grid and split over K in
  one launch. At M = 16 this is what closed the gap (results c: 9.5 us against 12.1
  for the library's default then and cuBLAS's 9.9). Runs b and c ran it as probe
  kernels in this file; it is now the library's ``MatmulConfig.swap_ab``, which this
  times through ``matmul``.

    python benchmarks/skinny_probe.py --out skinny.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import cuda.tile as ct

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tilelab as tl  # noqa: E402


@tl.kernel
def tile_mm(c: tl.Out, a: tl.In, b: tl.In, TK: ct.Constant[int], TMA: ct.Constant[bool]):
    """C tile = A rows @ B columns, B row-major (K, N); TMA picks the load path."""
    tm, tn = c.tile_shape
    m, n = c.tile_index
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for k in range(ct.cdiv(a.shape[1], TK)):
        if TMA:
            x = ct.load(a, index=(m, k), shape=(tm, TK), padding_mode=ct.PaddingMode.ZERO)
            y = ct.load(b, index=(k, n), shape=(TK, tn), padding_mode=ct.PaddingMode.ZERO)
        else:
            x = ct.load(a, index=(m, k), shape=(tm, TK), padding_mode=ct.PaddingMode.ZERO,
                        allow_tma=False)
            y = ct.load(b, index=(k, n), shape=(TK, tn), padding_mode=ct.PaddingMode.ZERO,
                        allow_tma=False)
        acc = ct.mma(x, y, acc)
    c.store(acc.astype(c.dtype))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="skinny_probe.json")
    ap.add_argument("--rounds", type=int, default=3)
    ns = ap.parse_args()
    import torch

    from tilelab.kernels.matmul import MatmulConfig, matmul
    from tilelab.runtime.device import gpu

    torch.cuda.set_stream(torch.cuda.ExternalStream(gpu().stream_handle))
    res: dict = {"gpu": gpu().name, "native": None, "cases": {}}
    from tilelab.runtime import native

    x1, y1 = (torch.randn(1024, device="cuda") for _ in range(2))
    z1 = torch.empty_like(x1)
    from tilelab.kernels.examples import vector_add

    tz, tx, ty = (tl.from_dlpack(t) for t in (z1, x1, y1))
    zp = tz.partition(1024)
    vector_add(zp, tx, ty)
    assert torch.equal(z1, x1 + y1)
    res["native"] = native.status()
    cases: dict[str, dict] = {"floor": {
        "torch_add": lambda: torch.add(x1, y1, out=z1),
        "tilelab_add": lambda: vector_add.launch_async(zp, tx, ty)}}
    n, k = 1024, 4096
    for m in (1, 16, 128):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) / 64
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        ref = (a.float() @ b.float())
        ta, tb, tc = (tl.from_dlpack(t) for t in (a, b, c))
        row: dict = {"cublas": lambda a=a, b=b, c=c: torch.matmul(a, b, out=c),
                     "library": lambda ta=ta, tb=tb, tc=tc: matmul(ta, tb, out=tc,
                                                                   sync=False)}
        shapes = [(16, 32, 256), (16, 64, 128), (32, 32, 256), (64, 64, 64)] if m > 1 else \
            [(16, 32, 256), (16, 64, 256)]
        if m == 128:
            shapes = [(64, 64, 64), (64, 64, 128), (128, 32, 128), (64, 32, 256)]
        for tm, tn, tk in shapes:
            for tma in (True, False):
                part = tc.partition((tm, tn), schedule=tl.grouped(8))
                row[f"tile{tm}x{tn}x{tk}_{'tma' if tma else 'notma'}"] = (
                    lambda part=part, ta=ta, tb=tb, tk=tk, tma=tma:
                    tile_mm.launch_async(part, ta, tb, tk, tma))
        # swapped tiles (runs b and c ran them as probe kernels here; they are now the
        # library's MatmulConfig.swap_ab, the latency hint on B's loads only, as then)
        swaps = [(16, 64, 256, None), (16, 64, 256, 4), (16, 64, 256, 8), (16, 64, 512, None),
                 (16, 64, 512, 8), (16, 32, 256, None), (16, 32, 512, None),
                 (16, 64, 128, 8)]
        splits = [(16, 64, 256, 2), (16, 64, 256, 4), (16, 64, 256, 8), (16, 32, 256, 4),
                  (16, 64, 512, 2), (16, 64, 512, 4)]
        cfgs = {}
        for tm, tn, tk, lat in (swaps if m == 16 else [(16, 64, 256, None)] if m == 1
                                else [(64, 64, 256, None)]):
            cfgs[f"swap{tm}x{tn}x{tk}" + (f"_lat{lat}" if lat else "")] = MatmulConfig(
                tm=tm, tn=tn, tk=tk, latency=lat, swap_ab=True)
        for tm, tn, tk, split in (splits if m == 16 else []):
            cfgs[f"swapsplit{tm}x{tn}x{tk}_s{split}"] = MatmulConfig(
                tm=tm, tn=tn, tk=tk, swap_ab=True, schedule="splitk", split_k=split,
                split_mode="atomic")
        for name, cfg in cfgs.items():
            row[name] = (lambda ta=ta, tb=tb, tc=tc, cfg=cfg:
                         matmul(ta, tb, out=tc, config=cfg, sync=False))
        for name, fn in row.items():   # correctness first, on poisoned output
            c.fill_(float("nan"))
            try:
                fn()
                torch.cuda.synchronize()
                err = float((c.float() - ref).norm() / ref.norm())
                assert err < 2e-2, err
            except Exception as e:   # noqa: BLE001 - report and leave the variant out
                res.setdefault("errors", {})[f"kproj_M{m}/{name}"] = repr(e)[:400]
                row[name] = None
        cases[f"kproj_M{m}"] = {k_: v for k_, v in row.items() if v is not None}
    times: dict = {c: {v: {"single": [], "inner": []} for v in vs} for c, vs in cases.items()}
    for _ in range(ns.rounds):
        for cname, variants in cases.items():
            for vname, fn in variants.items():
                r = tl.bench(fn, rep=30, warmup=5)
                times[cname][vname]["single"].append(r.median * 1e6)
                r = tl.bench(fn, rep=15, warmup=3, inner=20, flush_l2=False)
                times[cname][vname]["inner"].append(r.median * 1e6)
    for cname, vs in times.items():
        res["cases"][cname] = {v: {kind: round(statistics.median(xs), 2)
                                   for kind, xs in d.items()} for v, d in vs.items()}
        for v, d in res["cases"][cname].items():
            print(f"{cname:12s} {v:28s} single {d['single']:7.2f} us  inner {d['inner']:7.2f} us",
                  flush=True)
    Path(ns.out).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
