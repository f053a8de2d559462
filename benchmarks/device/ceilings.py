"""What the device allows: measured memory ceilings per read/write mix, and the decode floor.

Why: two of the kernel-library targets are fractions of the H200's nominal 4.8 TB/s
(memory-bound kernels >= 90%, decode GEMV >= 85%). Whether a kernel falls short or the
target is above what the memory system delivers can only be told from ceilings measured
in the same run. This times, in interleaved rounds with ``tl.bench`` (L2 flushed, device
time only, each result checked first):

* **Ceilings by mix.** Read-only (torch ``sum``/``amax``/``vector_norm``), write-only
  (``fill_``/``zero_``), copy (``copy_``, ``cudaMemcpyAsync`` device to device) and
  two-read-one-write (``torch.add``), at 256 MiB and 1 GiB per tensor; the best of each
  kind is the ceiling. HBM writes cost more than reads, so a kernel's ceiling depends on
  its mix: the model ``time = R / read_bw + W / write_bw`` is checked against the
  measured copy and add, and gives each library kernel its own ceiling.
* **The library's memory-bound kernels** at the suite's shapes and at four times their
  size: add, softmax, RMSNorm, RoPE (minimal bytes, as the suite counts them).
* **Decode.** The floor of a call timed alone (a one-block add, torch and tilelab), and
  the Qwen3-8B GEMVs timed two ways: alone with L2 flushed (the suite's way), and
  streamed back to back over distinct weights (more than 1 GiB of them, so L2 never holds
  the next one), which is how a decode step meets them; torch.mv in the same rounds.

Run with the memory group: ``python -m benchmarks --only memory --ceilings``.
"""
from __future__ import annotations

import statistics
from typing import Any, Callable

import cuda.tile as ct

import tilelab as tl

from ..common import Context, time_rounds

__all__ = ["run", "mix_ceiling", "fill_kernel"]

NOMINAL_BPS = 4.8e12          # H200 datasheet HBM3e bandwidth
MIB = 1 << 20
QWEN3_8B_GEMV = (("q_proj", 4096, 4096), ("k_proj", 1024, 4096),
                 ("gate_proj", 12288, 4096), ("down_proj", 4096, 12288))


def mix_ceiling(read_bytes: float, write_bytes: float, read_bps: float,
                write_bps: float) -> float:
    """Bytes per second of a kernel that reads ``read_bytes`` and writes ``write_bytes``
    when reads and writes share the memory system at their own measured rates.

    Example:
        >>> round(mix_ceiling(1, 1, 4.6e12, 3.9e12) / 1e12, 3)
        4.221
    """
    t = read_bytes / read_bps + write_bytes / write_bps
    return (read_bytes + write_bytes) / t


@tl.kernel
def fill_kernel(y: tl.Out, value: float):
    """Every element of y's tile set to ``value``: a write-only stream.

    Example:
        >>> fill_kernel.launch_async(y.partition(4096), 1.0)      # doctest: +SKIP
    """
    y.store(ct.full(y.tile_shape, value, dtype=y.dtype))


def _rel_err(out, ref) -> float:
    import torch

    o, r = out.float(), ref.float()
    return ((o - r).norm() / r.norm().clamp_min(torch.finfo(torch.float32).tiny)).item()


class Timer:
    """Named calls timed in interleaved rounds (:func:`benchmarks.common.time_rounds`); a
    call's figure is the median of its round medians."""

    def __init__(self, rounds: int, rep: int):
        self.rounds, self.rep = rounds, rep
        self.calls: dict[str, Callable[[], Any]] = {}

    def add(self, name: str, fn: Callable[[], Any]) -> None:
        self.calls[name] = fn

    def run(self) -> dict[str, float]:
        return {n: statistics.median(v)
                for n, v in time_rounds(self.calls, self.rounds, self.rep).items()}


def memory_ceilings(torch, rounds: int, rep: int) -> dict:
    """Read, write, copy and add bandwidth at 256 MiB and 1 GiB per tensor (bf16)."""
    from cuda.bindings import runtime as cudart

    from tilelab.kernels import add, relu, row_max, row_sum

    out: dict = {}
    for size in (256 * MIB, 1024 * MIB):
        n = size // 2
        x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        y = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        z = torch.empty_like(x)
        sum_ref = x.float().sum()
        assert abs(x.sum(dtype=torch.float32).item() - sum_ref.item()) <= 1e-3 * n ** 0.5 * 4
        assert torch.equal(x.amax(), x.float().amax().bfloat16())
        z.copy_(x)
        assert torch.equal(z, x)
        err, = cudart.cudaMemcpyAsync(z.data_ptr(), y.data_ptr(), size,
                                      cudart.cudaMemcpyKind.cudaMemcpyDeviceToDevice,
                                      torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        assert int(err) == 0 and torch.equal(z, y), f"cudaMemcpyAsync: {err}"
        stream = torch.cuda.current_stream().cuda_stream
        tx, ty, tz = (tl.from_dlpack(v) for v in (x, y, z))
        rows8k = x.view(n // 8192, 8192)
        sums = torch.empty(n // 8192, device="cuda", dtype=torch.bfloat16)
        tr, ts = tl.from_dlpack(rows8k), tl.from_dlpack(sums)
        row_sum(tr, out=ts)
        assert torch.allclose(sums.float(), rows8k.float().sum(-1), rtol=2e-2, atol=1.0)
        tiles = {t_: tz.partition(t_) for t_ in (2048, 8192)}
        for part in tiles.values():
            z.zero_()
            fill_kernel.launch_async(part, 1.0)
            tl.synchronize()
            assert bool((z == 1).all()), "fill_kernel missed elements"
        relu(tx, out=tz)
        assert torch.equal(z, torch.relu(x))
        add(tx, ty, out=tz)
        assert torch.equal(z, x + y)
        t = Timer(rounds, rep)
        t.add("read/tilelab.row_sum", lambda: row_sum(tr, out=ts, sync=False))
        t.add("read/tilelab.row_max", lambda: row_max(tr, out=ts, sync=False))
        for t_, part in tiles.items():
            t.add(f"write/tilelab.fill{t_}", lambda p=part: fill_kernel.launch_async(p, 1.0))
        t.add("copy/tilelab.relu", lambda: relu(tx, out=tz, sync=False))
        t.add("add/tilelab.add", lambda: add(tx, ty, out=tz, sync=False))
        kinds = {"read": {}, "write": {}, "copy": {}, "add": {}}
        t.add("read/sum", lambda: x.sum(dtype=torch.float32))
        t.add("read/amax", lambda: x.amax())
        t.add("read/vector_norm", lambda: torch.linalg.vector_norm(x, dtype=torch.float32))
        t.add("write/fill", lambda: z.fill_(1.0))
        t.add("write/zero", lambda: z.zero_())
        t.add("copy/copy_", lambda: z.copy_(x))
        t.add("copy/memcpy", lambda: cudart.cudaMemcpyAsync(
            z.data_ptr(), x.data_ptr(), size, cudart.cudaMemcpyKind.cudaMemcpyDeviceToDevice,
            stream))
        t.add("add/torch.add", lambda: torch.add(x, y, out=z))
        med = t.run()
        traffic = {"read": size, "write": size, "copy": 2 * size, "add": 3 * size}
        for name, sec in med.items():
            kind = name.split("/")[0]
            kinds[kind][name.split("/")[1]] = {"median_s": sec, "Bps": traffic[kind] / sec}
        best = {k: max(v.values(), key=lambda e: e["Bps"])["Bps"] for k, v in kinds.items()}
        model = {"copy": mix_ceiling(size, size, best["read"], best["write"]),
                 "add": mix_ceiling(2 * size, size, best["read"], best["write"])}
        out[f"{size // MIB}MiB"] = {"bytes_per_tensor": size, "kinds": kinds, "best_Bps": best,
                                     "model_Bps": model}
        print(f"{size // MIB} MiB: " + ", ".join(
            f"{k} {v / 1e12:.3f} TB/s" for k, v in best.items())
            + f"; model copy {model['copy'] / 1e12:.3f}, add {model['add'] / 1e12:.3f}",
            flush=True)
    return out


def _kernel_cases(torch, scale: int) -> list[tuple]:
    """(name, library call, out, reference, read bytes, write bytes) at the suite's shapes
    times ``scale`` rows."""
    from tilelab.kernels import add, apply_rope, rms_norm, softmax

    cases = []
    n = (1 << 28) * scale
    a = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty_like(a)
    ta, tb, tc = (tl.from_dlpack(v) for v in (a, b, c))
    cases.append((f"add/bfloat16/n{n}", lambda: add(ta, tb, out=tc, sync=False), c,
                  lambda: a.float() + b.float(), 4 * n, 2 * n))
    rows = 16384 * scale
    x = torch.randn(rows, 8192, device="cuda", dtype=torch.bfloat16) * 2
    y = torch.empty_like(x)
    tx, ty = tl.from_dlpack(x), tl.from_dlpack(y)
    cases.append((f"softmax/bfloat16/{rows}x8192", lambda: softmax(tx, out=ty, sync=False), y,
                  lambda: torch.softmax(x.float(), -1), 2 * x.numel(), 2 * x.numel()))
    rows = 65536 * scale
    h = torch.randn(rows, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    hy = torch.empty_like(h)
    th, tw, thy = (tl.from_dlpack(v) for v in (h, w, hy))
    cases.append((f"rmsnorm/bfloat16/{rows}x4096",
                  lambda: rms_norm(th, tw, eps=1e-6, out=thy, sync=False), hy,
                  lambda: torch.nn.functional.rms_norm(h.float(), (4096,), w.float(), 1e-6),
                  2 * h.numel() + 2 * w.numel(), 2 * h.numel()))
    tok = 32768 * scale
    q = torch.randn(tok, 32, 128, device="cuda", dtype=torch.bfloat16)
    ang = torch.rand(tok, 64, device="cuda") * 6.28
    cos, sin = ang.cos().bfloat16(), ang.sin().bfloat16()
    qo = torch.empty_like(q)
    tq, tcos, tsin, tqo = (tl.from_dlpack(v) for v in (q, cos, sin, qo))

    def rope_ref():
        x1, x2 = q.float()[..., :64], q.float()[..., 64:]
        c3, s3 = cos.float()[:, None, :], sin.float()[:, None, :]
        return torch.cat((x1 * c3 - x2 * s3, x2 * c3 + x1 * s3), -1)

    cases.append((f"rope/bfloat16/{tok}x32x128",
                  lambda: apply_rope(tq, tcos, tsin, out=tqo, sync=False), qo, rope_ref,
                  2 * q.numel() + 2 * 2 * cos.numel(), 2 * q.numel()))
    return cases


def library_kernels(torch, ceilings: dict, rounds: int, rep: int) -> dict:
    """The library's memory-bound kernels against the ceiling of their own mix."""
    out: dict = {}
    for scale in (1, 4):
        cases = _kernel_cases(torch, scale)
        t = Timer(rounds, rep)
        info = {}
        for name, fn, res, ref, rd, wr in cases:
            info[name] = {"read_bytes": rd, "write_bytes": wr}
            try:
                res.fill_(float("nan"))
                fn()
                tl.synchronize()
                err = info[name]["rel_err"] = _rel_err(res, ref())
            except Exception as e:        # a shape the kernel refuses: say so, go on
                info[name].update(status="error", error=f"{type(e).__name__}: {e}"[:600])
                print(f"{name}: {info[name]['error']}", flush=True)
                continue
            if not err <= 2e-2:
                info[name]["status"] = "wrong"
                continue
            info[name]["status"] = "ok"
            t.add(name, fn)
        med = t.run()
        for name, sec in med.items():
            e = info[name]
            rd, wr = e["read_bytes"], e["write_bytes"]
            size = max(rd, wr) // 2 if name.startswith("add") else rd
            near = ceilings["1024MiB" if size >= 512 * MIB else "256MiB"]["best_Bps"]
            ceil = mix_ceiling(rd, wr, near["read"], near["write"])
            bps = (rd + wr) / sec
            e.update(median_s=sec, Bps=bps, fraction_of_nominal=bps / NOMINAL_BPS,
                     mix_ceiling_Bps=ceil, ceiling_fraction_of_nominal=ceil / NOMINAL_BPS,
                     fraction_of_mix_ceiling=bps / ceil,
                     fraction_of_copy=bps / near["copy"])
            print(f"{name:34s} {sec * 1e6:9.1f} us {bps / 1e12:.3f} TB/s = "
                  f"{100 * bps / NOMINAL_BPS:.1f}% of nominal; its mix ceiling "
                  f"{ceil / 1e12:.3f} TB/s ({100 * ceil / NOMINAL_BPS:.1f}%), reached "
                  f"{100 * bps / ceil:.1f}%", flush=True)
        out.update(info)
    return out


def _torch_graph(torch, calls: list[Callable[[], Any]]):
    """A torch CUDA graph of ``calls`` (warmed up once on a side stream first)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for fn in calls:
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for fn in calls:
            fn()
    torch.cuda.synchronize()
    return g


def rope_sizes(torch, rounds: int, rep: int) -> dict:
    """apply_rope by token count, across the 65535 tile rows where the launch leaves
    CUDA's grid y for a 1-D grid (``_grid_schedule``): RoPE of 131072 tokens ran at 74%
    of nominal against 81% at 32768 (run 4)."""
    from tilelab.kernels import apply_rope

    out: dict = {}
    t = Timer(rounds, rep)
    for tok in (32768, 65535, 65537, 131072):
        q = torch.randn(tok, 32, 128, device="cuda", dtype=torch.bfloat16)
        ang = torch.rand(tok, 64, device="cuda") * 6.28
        cos, sin = ang.cos().bfloat16(), ang.sin().bfloat16()
        qo = torch.empty_like(q)
        args = tuple(tl.from_dlpack(v) for v in (q, cos, sin, qo))
        apply_rope(*args[:3], out=args[3])
        x1, x2 = q.float()[..., :64], q.float()[..., 64:]
        c3, s3 = cos.float()[:, None, :], sin.float()[:, None, :]
        ref = torch.cat((x1 * c3 - x2 * s3, x2 * c3 + x1 * s3), -1)
        assert _rel_err(qo, ref) < 2e-2
        out[tok] = {"bytes": 4 * q.numel() + 8 * cos.numel()}
        t.add(str(tok), lambda a=args: apply_rope(*a[:3], out=a[3], sync=False))
    for name, sec in t.run().items():
        e = out[int(name)]
        e.update(median_s=sec, Bps=e["bytes"] / sec)
        print(f"rope {name:>6s} tokens {sec * 1e6:8.1f} us {e['Bps'] / 1e12:.3f} TB/s",
              flush=True)
    return out


def decode(torch, ceilings: dict, rounds: int, rep: int) -> dict:
    """The floor of a call timed alone, and the GEMVs alone and streamed: ``count``
    distinct weights (over 1 GiB, so L2 never holds the next) into one output, recorded
    as a CUDA graph (``tl.graph`` / ``torch.cuda.graph``) and replayed, as a decode step
    runs them; the figure is the replay's time over ``count``."""
    from tilelab.kernels import add, gemv

    out: dict = {}
    a = torch.randn(1024, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(1024, device="cuda", dtype=torch.bfloat16)
    c = torch.empty_like(a)
    ta, tb, tc = (tl.from_dlpack(v) for v in (a, b, c))
    add(ta, tb, out=tc)
    assert torch.equal(c, a + b)
    t = Timer(rounds, rep)
    t.add("torch.add_1024", lambda: torch.add(a, b, out=c))
    t.add("tilelab.add_1024", lambda: add(ta, tb, out=tc, sync=False))
    out["floor_s"] = t.run()
    floor = min(out["floor_s"].values())
    print("floor (one-block add timed alone): " + ", ".join(
        f"{k} {v * 1e6:.2f} us" for k, v in out["floor_s"].items()), flush=True)
    read_bps = ceilings["256MiB"]["best_Bps"]["read"]
    for proj, n, k in QWEN3_8B_GEMV:
        wbytes = n * k * 2
        count = max(2, -(-(1280 * MIB) // wbytes))      # > 1 GiB of distinct weights
        ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
              for _ in range(count)]
        x = torch.randn(k, device="cuda", dtype=torch.bfloat16)
        y = torch.empty(n, device="cuda", dtype=torch.bfloat16)
        tws = [tl.from_dlpack(v) for v in ws]
        tx, ty = tl.from_dlpack(x), tl.from_dlpack(y)
        for i in (0, count - 1):
            gemv(tws[i], tx, out=ty)
            err = _rel_err(y, ws[i].float() @ x.float())
            assert err < 2e-2, f"{proj}: gemv off by {err}"
        for tw in tws:                    # prepare every call before recording
            gemv(tw, tx, out=ty)
        with tl.graph() as g:
            for tw in tws:
                gemv(tw, tx, out=ty, sync=False)
        y.fill_(float("nan"))
        g.replay().wait()
        err = _rel_err(y, ws[-1].float() @ x.float())
        assert err < 2e-2, f"{proj}: graph replay off by {err}"
        tg = _torch_graph(torch, [lambda w=w: torch.mv(w, x, out=y) for w in ws])
        t = Timer(rounds, rep)
        t.add("tilelab/alone", lambda: gemv(tws[0], tx, out=ty, sync=False))
        t.add("torch/alone", lambda: torch.mv(ws[0], x, out=y))
        t.add("tilelab/streamed", lambda: g.replay())
        t.add("torch/streamed", lambda: tg.replay())
        med = t.run()
        med["tilelab/streamed"] /= count
        med["torch/streamed"] /= count
        row = {"N": n, "K": k, "weight_bytes": wbytes, "weights_streamed": count,
               "ceiling_alone_s": floor + wbytes / read_bps,
               "ceiling_streamed_s": wbytes / read_bps}
        for name, sec in med.items():
            row[name] = {"median_s": sec, "Bps": wbytes / sec,
                         "fraction_of_nominal": wbytes / sec / NOMINAL_BPS}
        row["ceiling_alone_fraction"] = wbytes / row["ceiling_alone_s"] / NOMINAL_BPS
        out[proj] = row
        print(f"{proj:10s} " + "  ".join(
            f"{name} {row[name]['median_s'] * 1e6:6.1f} us "
            f"({100 * row[name]['fraction_of_nominal']:.0f}%)" for name in med)
            + f"  ceiling alone {100 * row['ceiling_alone_fraction']:.0f}%", flush=True)
    for mode in ("alone", "streamed"):
        for who in ("tilelab", "torch"):
            out[f"mean_{who}_{mode}"] = statistics.mean(
                out[p][f"{who}/{mode}"]["fraction_of_nominal"] for p, _, _ in QWEN3_8B_GEMV)
    out["mean_ceiling_alone"] = statistics.mean(
        out[p]["ceiling_alone_fraction"] for p, _, _ in QWEN3_8B_GEMV)
    print("decode means: " + ", ".join(f"{k} {100 * v:.0f}%" for k, v in out.items()
                                       if k.startswith("mean_")), flush=True)
    return out


def run(ctx: Context) -> dict[str, Any]:
    """The memory ceilings, the library's memory-bound kernels against them, RoPE by
    token count and the decode GEMVs alone and streamed (the memory group's
    ``--ceilings``). GPU only: on the CPU backend it reports itself skipped."""
    if ctx.backend != "gpu":
        return {"status": "skipped", "reason": "needs the GPU backend (torch CUDA timing)"}
    import torch

    from tilelab.runtime.device import gpu

    torch.cuda.set_stream(torch.cuda.ExternalStream(gpu().stream_handle))
    res: dict[str, Any] = {"status": "ok", "nominal_Bps": NOMINAL_BPS}
    res["memory"] = memory_ceilings(torch, ctx.rounds, ctx.rep)
    res["kernels"] = library_kernels(torch, res["memory"], ctx.rounds, ctx.rep)
    res["rope_sizes"] = rope_sizes(torch, ctx.rounds, ctx.rep)
    res["decode"] = decode(torch, res["memory"], ctx.rounds, ctx.rep)
    return res
