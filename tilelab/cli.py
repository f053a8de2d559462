"""The ``tilelab`` command: ``demo``, ``compile``, ``cache``, ``generate``, ``chat``.

Examples::

    tilelab demo
    tilelab compile kernels.py::add --arch sm_90 --emit tileir,ptx,sass,resources \\
        --args "tl.spec(4096, 'f32').partition(256), tl.spec(4096, 'f32'), tl.spec(4096, 'f32')"
    tilelab cache info
    tilelab generate --model checkpoints/Qwen3-0.6B --prompt "Hello" --max-new-tokens 16
    tilelab chat --model checkpoints/Qwen3-0.6B --system "Be brief."

A ``tilelab compile`` run again with nothing it read changed since is answered from a
shortcut in the disk cache (:meth:`tilelab.compiler.cache.DiskCache.recall`) without
loading the file, the compiler or cuTile; any change, or ``--force``, ``--no-cache``,
``--emit remarks`` or ``sass``, takes the full path, which makes the shortcut anew.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

__all__ = ["main"]

EMITS = ("tileir", "ptx", "sass", "resources", "remarks", "lowered", "timings")
#: what a warm ``tilelab compile`` answers from a cache shortcut without loading the file
#: (remarks and SASS are located in the user's source by the lowered kernel's source map,
#: so asking for them takes the full path)
SHORTCUT_EMITS = frozenset({"tileir", "ptx", "resources", "lowered", "timings"})
#: environment variables left out of a shortcut's key: the shell's bookkeeping and the
#: interpreter's byte-code and buffering switches, which no compile reads
ENV_IGNORED = frozenset({"_", "OLDPWD", "PWD", "SHLVL", "PYTHONDONTWRITEBYTECODE",
                         "PYTHONPYCACHEPREFIX", "PYTHONUNBUFFERED"})


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
            from tilelab.compiler.binary.remarks import format_remarks

            print(format_remarks(art.remarks) or "(no remarks)", file=out)
        elif w == "lowered":
            print(art.lowered_source, file=out)
        elif w == "timings":
            for k, v in art.timings.items():
                print(f"{k:>14}: {v * 1e3:8.1f} ms", file=out)


class _InputLog:
    """The files this process opens for reading and the programs it starts while a
    compile runs (one audit hook per process, installed on first use: audit hooks
    cannot be removed, so the hook records only between :meth:`start` and :meth:`stop`)."""

    _hooked = False

    def __init__(self) -> None:
        self.opened: set[str] = set()
        self.programs: set[str] = set()
        self.active = False

    def start(self) -> "_InputLog":
        self.opened.clear()
        self.programs.clear()
        self.active = True
        if not _InputLog._hooked:
            sys.addaudithook(_audit)
            _InputLog._hooked = True
        return self

    def stop(self) -> None:
        self.active = False

    def hook(self, event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = args
            reads = ("r" in mode or "+" in mode) if isinstance(mode, str) else \
                (flags or 0) & os.O_ACCMODE != os.O_WRONLY
            if reads and not isinstance(path, int):
                self.opened.add(os.path.abspath(os.fsdecode(path)))
        elif event == "subprocess.Popen":
            exe, argv = args[0], args[1]
            exe = exe or (argv if isinstance(argv, (str, bytes)) else argv[0])
            self.programs.add(os.fsdecode(exe))

    def files(self) -> set[str]:
        """Every file read: the ones opened and the source of every loaded module."""
        mods = {getattr(m, "__file__", None) for m in list(sys.modules.values())}
        return self.opened | {f for f in mods if isinstance(f, str) and os.path.isabs(f)}

    def resolved_programs(self) -> set[str]:
        """The programs started, as absolute paths."""
        import shutil

        found = {p if os.path.dirname(p) else shutil.which(p) for p in self.programs}
        return {os.path.abspath(p) for p in found if p}


_LOG = _InputLog()


def _audit(event: str, args: tuple) -> None:
    if _LOG.active:
        try:
            _LOG.hook(event, args)
        except Exception:   # an audit hook must never fail the audited call
            pass


def _command_key(ns: argparse.Namespace, path: str, kname: str) -> str:
    """What a ``tilelab compile`` depends on before it reads any file: the command line,
    the interpreter, ``sys.path``, the environment and the toolchain packages' versions."""
    import hashlib
    import json
    import shutil

    from tilelab.compiler.versions import package_version

    packages = ("tilelab", "cuda-tile", "nvidia-cuda-tileiras", "nvidia-cuda-nvcc",
                "nvidia-nvvm")
    material = {
        "file": os.path.abspath(path), "kernel": kname, "args": ns.args, "arch": ns.arch,
        "cwd": os.getcwd(), "python": [sys.executable, sys.version, sys.flags.optimize],
        "sys_path": sys.path, "tileiras_on_path": shutil.which("tileiras"),
        "env": {k: v for k, v in os.environ.items() if k not in ENV_IGNORED},
        "versions": {p: package_version(p) for p in packages}}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def _recall(cache: Any, name: str) -> Any:
    """The Artifacts shortcut ``name`` leads to (the entry the same command compiled or
    loaded last time, every input unchanged since), or None."""
    t0 = time.perf_counter()
    hit = cache.recall(name)
    if hit is None:
        return None
    files, meta, extra = hit
    from tilelab.compiler.artifacts import Artifacts
    from tilelab.compiler.calling_convention import ParamLayout

    # the same fields as the hit path of tilelab.compiler.export.compile_lowered
    return Artifacts(
        kernel_name=extra["kernel"], symbol=meta["symbol"], arch=meta["arch"],
        cubin=files["cubin"], bytecode=files["bytecode"],
        tileir=files["tileir.txt"].decode(), remarks_text=files["remarks.yaml"].decode(),
        lowered_source=extra["lowered_source"],
        timings={"cache_load": time.perf_counter() - t0},
        toolchain=f"cached: built by {meta['toolchain']}", cache_hit=True,
        params=tuple(ParamLayout(*p) for p in extra["params"]), key=meta["key"],
        cache_entry=cache.entry_dir(meta["key"]))


def _remember(cache: Any, name: str, art: Any, log: _InputLog) -> None:
    """Make shortcut ``name`` to the entry of ``art``, on every input this run read."""
    import dataclasses

    from tilelab.compiler.input_fingerprints import fingerprints

    inputs = fingerprints(sorted(log.files()), sorted(log.resolved_programs()),
                          skip=(os.path.abspath(cache.root),))
    cache.remember(name, art.key, inputs, {
        "kernel": art.kernel_name, "lowered_source": art.lowered_source,
        "params": [list(dataclasses.astuple(p)) for p in art.params]})


def _shortcut_cache(ns: argparse.Namespace) -> Any:
    """The disk cache when this compile may use and make shortcuts, else None."""
    from tilelab import config

    if ns.no_cache or not config.cache_enabled():
        return None
    from tilelab.compiler.cache import DiskCache

    return DiskCache()


def _report(art: Any, emit: Sequence[str]) -> int:
    print(art.summary())
    _emit(art, emit, sys.stdout)
    return 0


def cmd_compile(ns: argparse.Namespace) -> int:
    """``tilelab compile``: from a shortcut when the same command ran before and nothing
    it read changed since (no import of the file, the compiler or cuTile), else load the
    file and compile (a cache hit or a build), then make the shortcut. A tilelab error
    (a kernel the checker refuses when the file is loaded, a compile error, a cache key
    that is not private) is printed as ``error: file:line:col: ...`` with its hint, and
    the command exits with 1."""
    from tilelab.errors import TilelabError

    try:
        return _compile_command(ns)
    except TilelabError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def _compile_command(ns: argparse.Namespace) -> int:
    target = ns.target
    if "::" not in target:
        raise SystemExit("tilelab compile: name the kernel as FILE.py::KERNEL")
    path, kname = target.rsplit("::", 1)
    emit = [e.strip() for e in ns.emit.split(",") if e.strip()]
    bad = [e for e in emit if e not in EMITS]
    if bad:
        raise SystemExit(f"tilelab compile: unknown --emit {bad}; choose from {', '.join(EMITS)}")
    cache = _shortcut_cache(ns)
    name = _command_key(ns, path, kname) if cache is not None else ""
    if cache is not None and not ns.force and SHORTCUT_EMITS.issuperset(emit):
        art = _recall(cache, name)
        if art is not None:
            return _report(art, emit)
    log = _LOG.start() if cache is not None else None
    try:
        art = _compile_file(ns, path, kname)
    finally:
        _LOG.stop()
    if log is not None and art.cache_entry is not None:
        _remember(cache, name, art, log)
    return _report(art, emit)


def _compile_file(ns: argparse.Namespace, path: str, kname: str) -> Any:
    """Load the file and compile its kernel: the Artifacts. A tilelab error (the
    checker refusing a kernel as the file defines it, a compile error) propagates."""
    import tilelab as tl

    mod = _load_module(path)
    k = getattr(mod, kname, None)
    if not isinstance(k, tl.Kernel):
        found = [n for n, v in vars(mod).items() if isinstance(v, tl.Kernel)]
        raise SystemExit(f"tilelab compile: {path} has no @tl.kernel named {kname!r}"
                         f" (kernels there: {', '.join(found) or 'none'})")
    args = _example_args(mod, kname, ns.args)
    return k.compile(*args, arch=ns.arch, cache=not ns.no_cache, force=ns.force)


def cmd_cache(ns: argparse.Namespace) -> int:
    """``tilelab cache info``: the cache's size, the key file that signs its entries,
    the entries refused since it was cleared and, if so, why it is not used;
    ``tilelab cache clear``: remove its entries, shortcuts and record of refusals."""
    from tilelab.compiler.cache import DiskCache
    from tilelab.errors import TilelabError

    try:
        cache = DiskCache()
    except TilelabError as e:          # a TILELAB_CACHE_* value it does not take
        print(f"error: {e}", file=sys.stderr)
        return 1
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


def cmd_chat(ns: argparse.Namespace) -> int:
    from tilelab.models.cli_chat import run_chat

    return run_chat(ns)


def _add_models(sub) -> None:
    """``tilelab generate`` and ``tilelab chat``: their arguments are declared by
    tilelab.models.cli, which imports nothing of the engine; the work is imported on
    use."""
    from tilelab.models.cli import add_chat_arguments, add_generate_arguments

    g = sub.add_parser("generate", help="generate text with a Qwen3 checkpoint "
                                        "(tilelab.models)")
    add_generate_arguments(g)
    g.set_defaults(func=cmd_generate)
    c = sub.add_parser("chat", help="talk with a Qwen3 checkpoint: multi-turn, chat "
                                    "template, KV cache reused (tilelab.models)")
    add_chat_arguments(c)
    c.set_defaults(func=cmd_chat)


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
    _add_models(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tilelab`` console script."""
    ns = build_parser().parse_args(argv)
    return int(ns.func(ns) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
