"""The library's looped row kernels (reductions, long-row softmax and norms) under hints.

Why: compiled for sm_90 without a hint, tileiras turns a kernel whose body is a loop of
tile loads into a pipelined kernel of 256 threads and 255 registers: one block per SM,
too few loads in flight for a memory-bound kernel (row_sum of 16384 x 8192 bf16 ran at
1.15 TB/s in ``ceilings_h200_2026-11-30.json``, torch.sum at 4.1). The one-pass row
kernels had the same problem and take an occupancy hint (``ROW_HINTS``); this times the
looped ones under occupancy hints 2-16 and with other column tiles, against torch, in
interleaved rounds after checking each result.

    python benchmarks/looped_hints.py --out looped_hints.json
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cuda.tile as ct  # noqa: E402

import tilelab as tl  # noqa: E402
from probe_rounds import print_failures, time_rounds  # noqa: E402
from tilelab.kernels._host import _hinted_copy, hinted  # noqa: E402

OCCUPANCY = (None, 2, 4, 8, 16)


# ---- a one-pass norm candidate for rows of 16384-32768 (as softmax's split kernel) ----

def _split_stats(h, n, RMS, eps):
    """(mean, rstd), each (1, 1), of one row held as a (G, W) tile of sub-rows."""
    if RMS:
        mean = ct.zeros((1, 1), dtype=ct.float32)
        var = ct.sum(ct.sum(h * h, axis=1, keepdims=True), axis=0, keepdims=True) / n
    else:
        mean = ct.sum(ct.sum(h, axis=1, keepdims=True), axis=0, keepdims=True) / n
        d = h - mean
        var = ct.sum(ct.sum(d * d, axis=1, keepdims=True), axis=0, keepdims=True) / n
    return mean, ct.rsqrt(var + eps)


@tl.kernel
def norm_split_kernel(y: tl.Out, x: tl.In, w: tl.In, b: tl.In, eps: float,
                      RMS: ct.Constant[int], HAS_BIAS: ct.Constant[int]):
    """Layer norm / RMSNorm of one row per tile, as G sub-rows: x and y are the
    (rows * G, W) views, w and b the (G, W) views of the weight and bias."""
    g, wd = y.tile_shape
    m, _ = y.tile_index
    h = ct.load(x, index=(m, 0), shape=(g, wd),
                padding_mode=ct.PaddingMode.ZERO).astype(ct.float32)
    mean, rstd = _split_stats(h, g * wd, RMS, eps)
    gw = ct.load(w, index=(0, 0), shape=(g, wd), padding_mode=ct.PaddingMode.ZERO)
    out = (h - mean) * rstd * gw.astype(ct.float32)
    if HAS_BIAS:
        out = out + ct.load(b, index=(0, 0), shape=(g, wd),
                            padding_mode=ct.PaddingMode.ZERO).astype(ct.float32)
    y.store(out.astype(y.dtype))


def _variants(make, block_ns) -> dict:
    """name -> (kernel, args) for each column tile and occupancy hint of a _Call maker."""
    out = {}
    for bn in block_ns:
        call = make(bn)
        for occ in OCCUPANCY:
            tag = f"bn{bn or 'def'}_occ{occ or '-'}"
            # the library's kernel may carry a hint already: set this one, even None
            opts = dataclasses.replace(call.kernel.options, occupancy=occ)
            out[tag] = (_hinted_copy(call.kernel.__wrapped__, opts), call.args)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="looped_hints.json")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rep", type=int, default=15)
    ap.add_argument("--only", default="", help="case name prefixes to run (default: all)")
    ns = ap.parse_args()
    import torch

    from suite_env import env_info
    from tilelab.runtime.device import gpu

    red = importlib.import_module("tilelab.kernels.reduce")
    sm = importlib.import_module("tilelab.kernels.softmax")
    nm = importlib.import_module("tilelab.kernels.norms")
    torch.cuda.set_stream(torch.cuda.ExternalStream(gpu().stream_handle))
    res: dict = {"env": env_info("gpu"), "argv": sys.argv[1:], "cases": {}}
    bf = torch.bfloat16
    x = torch.randn(16384, 8192, device="cuda", dtype=bf)
    xs = tl.from_dlpack(x)
    r16 = torch.empty(16384, device="cuda", dtype=bf)
    i16 = torch.empty(16384, device="cuda", dtype=torch.int64)
    rs, is_ = tl.from_dlpack(r16), tl.from_dlpack(i16)
    lx = torch.randn(2048, 65536, device="cuda", dtype=bf)
    lxs = tl.from_dlpack(lx)
    ly = torch.empty_like(lx)
    lys = tl.from_dlpack(ly)
    lw = torch.randn(65536, device="cuda", dtype=bf)
    lws = tl.from_dlpack(lw)
    nbytes = x.numel() * 2
    cases = [
        ("row_sum/16384x8192", lambda: x.sum(-1, dtype=torch.float32), r16,
         x.float().sum(-1), 2e-2,
         _variants(lambda bn: red._reduce_call("sum", xs, block_n=bn, out=rs),
                   (None, 2048, 8192)), nbytes),
        ("row_max/16384x8192", lambda: x.amax(-1), r16, x.float().amax(-1), 1e-6,
         _variants(lambda bn: red._reduce_call("max", xs, block_n=bn, out=rs),
                   (None, 2048, 8192)), nbytes),
        ("row_argmax/16384x8192", lambda: x.argmax(-1), i16, x.float().argmax(-1), 0.0,
         _variants(lambda bn: red._argmax_call(xs, block_n=bn, out=(rs, is_)),
                   (None, 2048)), nbytes),
        ("softmax_online/2048x65536", lambda: torch.softmax(lx, -1), ly,
         torch.softmax(lx.float(), -1), 2e-2,
         _variants(lambda bn: sm._softmax_call(lxs, block_n=bn, out=lys), (None, 2048)),
         2 * lx.numel() * 2),
        ("rms_norm_looped/2048x65536",
         lambda: torch.nn.functional.rms_norm(lx, (65536,), lw, 1e-6), ly,
         torch.nn.functional.rms_norm(lx.float(), (65536,), lw.float(), 1e-6), 2e-2,
         _variants(lambda bn: nm._norm_call("rms_norm", lxs, lws, None, None, 1e-6, True,
                                            None, bn, lys), (None, 2048)),
         2 * lx.numel() * 2),
        ("layer_norm_looped/2048x65536",
         lambda: torch.nn.functional.layer_norm(lx, (65536,), lw, lw, 1e-6), ly,
         torch.nn.functional.layer_norm(lx.float(), (65536,), lw.float(), lw.float(), 1e-6),
         2e-2, _variants(lambda bn: nm._norm_call("layer_norm", lxs, lws, lws, None, 1e-6,
                                                  False, None, bn, lys), (None,)),
         2 * lx.numel() * 2),
    ]
    fx = torch.randn(1024, 65536, device="cuda")
    fy = torch.empty_like(fx)
    fxs, fys = tl.from_dlpack(fx), tl.from_dlpack(fy)
    cases.append(("softmax_online_f32/1024x65536", lambda: torch.softmax(fx, -1), fy,
                  torch.softmax(fx.double(), -1).float(), 1e-4,
                  _variants(lambda bn: sm._softmax_call(fxs, block_n=bn, out=fys), (None,)),
                  2 * fx.numel() * 4))
    # one-pass softmax of 16K-32K rows: the split kernel (each row one (G, 128) tile,
    # read once) against the online kernel (read twice), under occupancy/warp hints that
    # compile without spills on sm_90 (16K: occupancy 2, with or without 8 worker warps;
    # 32K: occupancy 1 with 8 worker warps)
    for rows, n, hints in ((4096, 16384, ({"occupancy": 2}, {"occupancy": 2,
                                                              "num_worker_warps": 8})),
                           (2048, 32768, ({"occupancy": 1, "num_worker_warps": 8},))):
        sx = torch.randn(rows, n, device="cuda", dtype=bf)
        sy = torch.empty_like(sx)
        sxs, sys_ = tl.from_dlpack(sx), tl.from_dlpack(sy)
        variants = {f"online_occ{o}": (
            _hinted_copy(sm.softmax_online_kernel.__wrapped__, dataclasses.replace(
                sm.softmax_online_kernel.options, occupancy=o)),
            sm._softmax_call(sxs, out=sys_).args) for o in (8,)}
        g = n // 128
        xs2, ys2 = sxs.reshape(rows * g, 128), sys_.reshape(rows * g, 128)
        for h in hints:
            tag = "_".join(f"{k[:3]}{v}" for k, v in h.items())
            kern = _hinted_copy(sm.softmax_split_kernel.__wrapped__, dataclasses.replace(
                sm.softmax_split_kernel.options, **h))
            variants[f"split_{tag}"] = (kern, (ys2.partition((g, 128)), xs2, 0, 0))
        cases.append((f"softmax_long/{rows}x{n}", lambda sx=sx: torch.softmax(sx, -1), sy,
                      torch.softmax(sx.float(), -1), 2e-2, variants, 2 * sx.numel() * 2))
    # the norm candidate at 16384 and 32768 (hints that compile without spills on sm_90)
    for rows, n, hint_sets in ((4096, 16384, ({"occupancy": 2},
                                               {"occupancy": 2, "num_worker_warps": 8},
                                               {"occupancy": 1, "num_worker_warps": 8})),
                               (2048, 32768, ({"occupancy": 1, "num_worker_warps": 8},))):
        nx = torch.randn(rows, n, device="cuda", dtype=bf)
        nw = torch.randn(n, device="cuda", dtype=bf)
        ny = torch.empty_like(nx)
        nxs, nws, nys = tl.from_dlpack(nx), tl.from_dlpack(nw), tl.from_dlpack(ny)
        g = n // 128
        for rms in (1, 0):
            fn = "rms_norm" if rms else "layer_norm"
            lib = nm._norm_call(fn, nxs, nws, None if rms else nws, None, 1e-6, bool(rms),
                                None, None, nys)
            variants = {"library_looped": (lib.kernel, lib.args)}
            for h in hint_sets:
                tag = "_".join(f"{k[:3]}{v}" for k, v in h.items())
                variants[f"split_{tag}"] = (
                    hinted(norm_split_kernel, **h),
                    (nys.reshape(rows * g, 128).partition((g, 128)),
                     nxs.reshape(rows * g, 128), nws.reshape(g, 128), nws.reshape(g, 128),
                     1e-6, rms, 1 - rms))
            if rms:
                tfn = (lambda nx=nx, nw=nw, n=n:
                       torch.nn.functional.rms_norm(nx, (n,), nw, 1e-6))
                want = torch.nn.functional.rms_norm(nx.float(), (n,), nw.float(), 1e-6)
            else:
                tfn = (lambda nx=nx, nw=nw, n=n:
                       torch.nn.functional.layer_norm(nx, (n,), nw, nw, 1e-6))
                want = torch.nn.functional.layer_norm(nx.float(), (n,), nw.float(),
                                                      nw.float(), 1e-6)
            cases.append((f"norm_long/{fn}/{rows}x{n}", tfn, ny, want, 2e-2, variants,
                          2 * nx.numel() * 2))
    keep = tuple(filter(None, ns.only.split(",")))
    for cid, torch_fn, out, ref, tol, variants, traffic in cases:
        if keep and not cid.startswith(keep):
            continue
        row: dict = {"bytes_min": traffic, "variants": {}}
        res["cases"][cid] = row
        ok = {"torch": torch_fn}
        for name, (kern, args) in variants.items():
            item = row["variants"].setdefault(name, {})
            try:
                out.fill_(-1)
                kern.launch_async(*args)
                tl.synchronize()
                if out.dtype == torch.int64:
                    err = (out != ref).float().mean().item()
                else:
                    err = ((out.float() - ref).norm() / ref.norm()).item()
                item["rel_err"] = err
                if not err <= tol:
                    item["status"] = "wrong"
                    continue
                item["status"] = "ok"
                ok[name] = lambda kern=kern, args=args: kern.launch_async(*args)
            except Exception as e:      # a variant that does not compile or launch
                item.update(status="error", error=f"{type(e).__name__}: {e}"[:400])
        times = time_rounds(ok, ns.rounds, ns.rep)
        print(cid, flush=True)
        for name in sorted(ok, key=lambda n: statistics.median(times[n])):
            sec = statistics.median(times[name])
            row["variants"].setdefault(name, {}).update(
                median_s=sec, TBps=traffic / sec / 1e12, times=times[name])
            print(f"   {name:20s} {sec * 1e6:9.1f} us  {traffic / sec / 1e12:.2f} TB/s",
                  flush=True)
        print_failures(row["variants"], 20)
    Path(ns.out).write_text(json.dumps(res, indent=1))
    print(f"wrote {ns.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
