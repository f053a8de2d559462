"""The ``tilelab`` command: ``demo``, ``compile``, ``cache``, ``generate``.

Examples::

    tilelab demo
    tilelab compile kernels.py::add --arch sm_90 --emit tileir,ptx,sass,resources \\
        --args "tl.spec(4096, 'f32').partition(256), tl.spec(4096, 'f32'), tl.spec(4096, 'f32')"
    tilelab cache info
    tilelab generate --model checkpoints/Qwen3-0.6B --prompt "Hello" --max-new-tokens 16
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any, Sequence

__all__ = ["main"]

EMITS = ("tileir", "ptx", "sass", "resources", "remarks", "lowered", "timings")


def _load_module(path: str):
    p = Path(path)
    if not p.is_file():
        raise SystemExit(f"tilelab compile: no such file: {path}")
    name = f"_tilelab_cli_{p.stem}"
    spec = importlib.util.spec_from_file_location(name, p)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    sys.path.insert(0, str(p.parent.resolve()))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.pop(0)
    return mod


def _example_args(mod: Any, kernel_name: str, expr: str | None) -> tuple:
    import numpy as np
    import cuda.tile as ct

    import tilelab as tl

    if expr:
        ns = dict(vars(mod))
        ns.update(tl=tl, ct=ct, np=np, spec=tl.spec)
        try:
            value = eval(expr, ns)  # noqa: S307 - the user's own command line
        except Exception as e:
            raise SystemExit(f"tilelab compile: cannot evaluate --args {expr!r}: {e}")
        return value if isinstance(value, tuple) else (value,)
    examples = getattr(mod, "TILELAB_EXAMPLES", {})
    if kernel_name in examples:
        v = examples[kernel_name]
        v = v() if callable(v) else v
        return tuple(v)
    raise SystemExit(
        f"tilelab compile: kernel {kernel_name!r} needs example arguments: pass "
        "--args \"tl.spec((M, N), 'bf16').partition((128, 128)), ...\" or define "
        f"TILELAB_EXAMPLES = {{'{kernel_name}': (...)}} in the file")


def _emit(art: Any, what: Sequence[str], out) -> None:
    for w in what:
        print(f"===== {w} =====", file=out)
        if w == "tileir":
            print(art.tileir, file=out)
        elif w == "ptx":
            print(art.ptx or "(the cubin carries no PTX)", file=out)
        elif w == "sass":
            print(art.sass if art.sass is not None else f"(no SASS: {art.sass_unavailable})",
                  file=out)
        elif w == "resources":
            print(art.resources, file=out)
        elif w == "remarks":
            from tilelab.compiler.remarks import format_remarks

            print(format_remarks(art.remarks) or "(no remarks)", file=out)
        elif w == "lowered":
            print(art.lowered_source, file=out)
        elif w == "timings":
            for k, v in art.timings.items():
                print(f"{k:>14}: {v * 1e3:8.1f} ms", file=out)


def cmd_compile(ns: argparse.Namespace) -> int:
    import tilelab as tl

    target = ns.target
    if "::" not in target:
        raise SystemExit("tilelab compile: name the kernel as FILE.py::KERNEL")
    path, kname = target.rsplit("::", 1)
    mod = _load_module(path)
    k = getattr(mod, kname, None)
    if not isinstance(k, tl.Kernel):
        found = [n for n, v in vars(mod).items() if isinstance(v, tl.Kernel)]
        raise SystemExit(f"tilelab compile: {path} has no @tl.kernel named {kname!r}"
                         f" (kernels there: {', '.join(found) or 'none'})")
    emit = [e.strip() for e in ns.emit.split(",") if e.strip()]
    bad = [e for e in emit if e not in EMITS]
    if bad:
        raise SystemExit(f"tilelab compile: unknown --emit {bad}; choose from {', '.join(EMITS)}")
    args = _example_args(mod, kname, ns.args)
    try:
        art = k.compile(*args, arch=ns.arch, cache=not ns.no_cache, force=ns.force)
    except tl.TilelabError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(art.summary())
    _emit(art, emit, sys.stdout)
    return 0


def cmd_cache(ns: argparse.Namespace) -> int:
    from tilelab.compiler.cache import DiskCache

    cache = DiskCache()
    if ns.action == "info":
        print(cache.stats())
    else:
        n = cache.clear()
        print(f"removed {n} cached kernels from {cache.root}")
    return 0


def cmd_demo(ns: argparse.Namespace) -> int:
    from tilelab.demo import run_demo

    return run_demo(arch=ns.arch, out_dir=ns.out)


def cmd_generate(ns: argparse.Namespace) -> int:
    from tilelab.models.cli import run_generate

    return run_generate(ns)


def _add_generate(sub) -> None:
    """``tilelab generate``; its implementation is tilelab.models.cli (imported on use)."""
    g = sub.add_parser("generate", help="decode tokens with a Qwen3 checkpoint "
                                        "(tilelab.models)")
    g.add_argument("--model", required=True, help="Hugging Face checkpoint directory")
    prompt = g.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--ids", help="prompt token ids, comma-separated: 1,2,3")
    prompt.add_argument("--prompt", help="prompt text (needs the checkpoint's tokenizer.json)")
    g.add_argument("--max-new-tokens", type=int, required=True, help="tokens to generate")
    g.add_argument("--temperature", type=float, default=0.0,
                   help="0 (the default) decodes greedily; above 0 samples")
    g.add_argument("--device", choices=("cpu", "gpu"), default=None,
                   help="backend (default: the GPU when there is one, else the CPU)")
    g.add_argument("--seed", type=int, default=0, help="seed of the sampling (default 0)")
    g.set_defaults(func=cmd_generate)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tilelab", description="Fearless tile kernels: "
                                "compile, run and inspect safe cuTile kernels.")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="compile (and run) the tour's kernels and show what "
                                    "was produced")
    d.add_argument("--arch", default=None, help="target (default: this GPU, else sm_90)")
    d.add_argument("--out", default="tilelab-demo", help="folder for the demo's outputs")
    d.set_defaults(func=cmd_demo)
    c = sub.add_parser("compile", help="compile FILE.py::KERNEL without running it")
    c.add_argument("target", help="FILE.py::KERNEL")
    c.add_argument("--arch", default="sm_90", help="target GPU, e.g. sm_80, sm_90, sm_100, "
                                                   "sm_120 (default sm_90)")
    c.add_argument("--emit", default="tileir,resources",
                   help=f"comma-separated: {', '.join(EMITS)} (default tileir,resources)")
    c.add_argument("--args", default=None, help="Python expression giving example "
                                               "arguments (tl, ct, np and the file's names "
                                               "are in scope)")
    c.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    c.add_argument("--force", action="store_true", help="recompile even on a cache hit")
    c.set_defaults(func=cmd_compile)
    k = sub.add_parser("cache", help="inspect or clear the compiled-kernel cache")
    k.add_argument("action", choices=("info", "clear"))
    k.set_defaults(func=cmd_cache)
    _add_generate(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tilelab`` console script."""
    ns = build_parser().parse_args(argv)
    return int(ns.func(ns) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
