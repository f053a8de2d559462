"""Compile a lowered kernel: cuTile frontend -> Tile IR bytecode -> tileiras -> cubin.

The frontend runs through cuTile's public export API
(``cuda.tile.compilation.export_kernel`` with ``output_format="tileir_bytecode"``);
tileirdisasm and tileiras are then run here, in the clean environment of
:mod:`tilelab.compiler.toolchain`, which also yields tileiras' remarks. Every error of
either stage is mapped back to the user's source line.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import io
import json
import re
import tempfile
import time
import types
from pathlib import Path
from typing import Any, Callable

from tilelab.compiler import device as device_module
from tilelab.compiler.artifacts import Artifacts, ParamLayout
from tilelab.compiler.cache import DiskCache
from tilelab.compiler.dtypes import to_cutile_dtype
from tilelab.compiler.lower import LoweredKernel
from tilelab.compiler.signature import (ArraySpec, ConstantValue, PartitionSpec, ScalarSpec,
                                        array_traits)
from tilelab.compiler.specialize import Specialization
from tilelab.compiler.toolchain import Toolchain, find_toolchain
from tilelab.errors import CompileError, SourceLocation, ToolchainError

__all__ = ["SUPPORTED_ARCHS", "check_arch", "compile_lowered", "cache_key",
           "location_mapper"]

#: the --gpu-name values tileiras 13.4 accepts
SUPPORTED_ARCHS = ("sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_100", "sm_103",
                   "sm_107", "sm_110", "sm_120", "sm_121")
#: the newest Tile IR bytecode cuda-tile 1.7 writes; older tileiras releases read older
_MAX_BYTECODE = (13, 4)


def check_arch(arch: str) -> str:
    """Normalize and validate a target such as ``"sm_90"`` (also ``"90"``, ``"9.0"``).

    Example:
        >>> check_arch("9.0")
        'sm_90'
    """
    a = str(arch).strip().lower()
    if re.fullmatch(r"\d+\.\d", a):
        a = "sm_" + a.replace(".", "")
    elif re.fullmatch(r"\d+", a):
        a = "sm_" + a
    if a not in SUPPORTED_ARCHS:
        raise CompileError(f"unsupported target {arch!r}; tileiras compiles for "
                           f"{', '.join(SUPPORTED_ARCHS)}",
                           hint="tile kernels need sm_80 (Ampere) or newer")
    return a


@functools.lru_cache(maxsize=None)
def _versions() -> dict[str, str]:
    out = {}
    for pkg in ("tilelab", "cuda-tile"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = "unknown"
    return out


@functools.lru_cache(maxsize=None)
def device_helpers_digest() -> str:
    """sha256 of :mod:`tilelab.compiler.device`, whose index helpers every lowered kernel
    with a grouped or persistent schedule calls: a cubin compiled against other helpers
    (an edited checkout keeps the version number) must not be reused.

    Example:
        >>> len(device_helpers_digest())
        64
    """
    return hashlib.sha256(Path(device_module.__file__).read_bytes()).hexdigest()


def cache_key(lowered: LoweredKernel, spec: Specialization, arch: str, opt_level: int,
              hints: dict, toolchain: Toolchain, helpers: str = "") -> str:
    """Hash of everything the cubin depends on (helper sources, the user's and the
    device index helpers', included)."""
    blob = json.dumps({
        "versions": _versions(), "toolchain": toolchain.version, "arch": arch,
        "opt_level": opt_level, "hints": {k: repr(v) for k, v in sorted(hints.items())},
        "lowered": lowered.text, "spec": spec.key(), "helpers": helpers,
        "device_helpers": device_helpers_digest()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def location_mapper(lowered: LoweredKernel) -> Callable[[str, int, int], tuple[str, int, int]]:
    """(file, line, 0-based col) in compiler output -> (file, line, 1-based col) for users.

    Artifacts loaded from the cache may name the lowered file of an earlier definition
    of the same text (a notebook cell re-run): the name ends with the text's digest, so
    any lowered name with this digest maps through this kernel's source map.
    """
    digest = lowered.filename.rsplit(" ", 1)[-1]

    def mapping(filename: str, line: int, col: int) -> tuple[str, int, int]:
        if filename == lowered.filename or (
                filename.startswith("<tilelab-lowered ") and filename.endswith(" " + digest)):
            loc = lowered.source_map.to_user(line, col)
            return loc.filename, loc.line, loc.col
        return filename, line, (col or 0) + 1
    return mapping


def _constraints(spec: Specialization, lowered: LoweredKernel) -> list:
    import cuda.tile as ct
    from cuda.tile.compilation import (ArrayConstraint, ConstantConstraint,
                                       ScalarConstraint)

    out = []
    for _name, _kind, s in spec.specs:
        if isinstance(s, PartitionSpec):
            s = s.array
        if isinstance(s, ArraySpec):
            t = array_traits(s)
            stride_constant = None
            if t.contiguous_last:
                stride_constant = (None,) * (t.ndim - 1) + (1,)
            out.append(ArrayConstraint(
                to_cutile_dtype(t.dtype), t.ndim,
                index_dtype=ct.int32 if t.index_dtype == "int32" else ct.int64,
                stride_lower_bound_incl=0 if t.nonneg_strides else None,
                # Writable arguments never overlap others (the launch checks it) and
                # read-only ones may share memory harmlessly: no alias groups needed.
                alias_groups=(), may_alias_internally=t.may_alias_internally,
                stride_constant=stride_constant, shape_divisible_by=t.shape_div,
                stride_divisible_by=t.stride_div, base_addr_divisible_by=t.base_div))
        elif isinstance(s, ScalarSpec):
            out.append(ScalarConstraint(to_cutile_dtype(s.dtype)))
        elif isinstance(s, ConstantValue):
            out.append(ConstantConstraint(s.value))
        else:  # pragma: no cover
            raise AssertionError(s)
    out += [ConstantConstraint(int(v)) for v in spec.extra_constants]
    return out


def _cutile_function(fn: types.FunctionType, lowered: LoweredKernel) -> types.FunctionType:
    """Execute the lowered source in the kernel's globals (plus closure values)."""
    import cuda.tile as ct

    g = dict(fn.__globals__)
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                g[name] = cell.cell_contents
            except ValueError:
                pass
    g[lowered.ct_alias] = ct
    g[lowered.dev_alias] = device_module
    code = compile(lowered.text, lowered.filename, "exec")
    exec(code, g)
    return g[lowered.name]


def _map_tile_error(e: Exception, lowered: LoweredKernel, kernel_name: str) -> CompileError:
    frames = []
    loc = getattr(e, "loc", None)
    while loc is not None:
        if not loc.is_unknown():
            frames.append(loc)
        loc = loc.call_site
    message = getattr(e, "message", str(e)).strip()
    where, hint, chain = None, None, []
    for fr in frames:
        if fr.filename == lowered.filename:
            user = lowered.source_map.to_user(fr.line, fr.col)
            part = lowered.store_at(fr.line, fr.col)
            if part is not None and any(w in message.lower() for w in
                                        ("broadcast", "cast", "shape", "dtype")):
                hint = (f"{part}.store(tile) needs a tile of {part}.tile_shape and "
                        f"{part}.dtype; convert with tile.astype({part}.dtype) and check "
                        "the tile shapes")
        elif fr.filename:
            user = SourceLocation(fr.filename, fr.line, (fr.col or 0) + 1)
        else:
            continue
        if where is None:
            where = user
        else:
            chain.append(str(user))
    if chain:
        message += " (called from " + ", ".join(chain) + ")"
    return CompileError(f"cuTile rejected kernel {kernel_name!r}: {message}", location=where,
                        hint=hint)


_LOC_RE = re.compile(r'loc\((?:[^"\[]*\[)?"([^"]+)":(\d+):(\d+)\]?\):\s*error:\s*(.*)')


def _map_tileiras_error(stderr: str, lowered: LoweredKernel, toolchain: Toolchain,
                        kernel_name: str, arch: str) -> Exception:
    mapper = location_mapper(lowered)
    where, lines = None, []
    for line in stderr.splitlines():
        m = _LOC_RE.search(line)
        if m:
            f, ln, col, msg = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
            if where is None:
                uf, ul, uc = mapper(f, ln, col)
                where = SourceLocation(uf, ul, uc)
            lines.append(msg.strip())
        elif line.strip():
            lines.append(line.strip())
    text = "; ".join(lines) or "no message"
    generic = lines == ["error: failed to compile Tile IR program"] or \
        text.strip() == "error: failed to compile Tile IR program"
    if generic:
        return ToolchainError(
            f"tileiras failed on kernel {kernel_name!r} for {arch} without saying why "
            f"({text}); toolchain: {toolchain.describe()}",
            hint="this is what a mix of CUDA releases looks like (tileiras picking up "
                 "another release's ptxas or libnvvm): make sure tileiras, nvcc and nvvm "
                 "come from one release, or set TILELAB_TILEIRAS")
    return CompileError(f"tileiras rejected kernel {kernel_name!r} for {arch}: {text}",
                        location=where, hint=f"toolchain: {toolchain.describe()}")


def _bytecode_version(toolchain: Toolchain) -> str:
    mm = min(toolchain.major_minor, _MAX_BYTECODE)
    return f"{mm[0]}.{mm[1]}"


def compile_lowered(fn: types.FunctionType, lowered: LoweredKernel, spec: Specialization,
                    arch: str, *, options: dict[str, Any], cache: DiskCache | None,
                    force: bool = False, timings: dict[str, float] | None = None,
                    helpers: str = "") -> Artifacts:
    """Compile one specialization of a lowered kernel for ``arch`` (cache first).

    ``options`` holds cuTile's kernel hints (``occupancy``, ``num_ctas``,
    ``num_worker_warps``) and ``opt_level``.
    """
    t_start = time.perf_counter()
    timings = dict(timings or {})
    toolchain = find_toolchain()
    opt_level = int(options.get("opt_level", 3))
    hints = {k: v for k, v in options.items() if k != "opt_level" and v is not None}
    key = cache_key(lowered, spec, arch, opt_level, hints, toolchain, helpers)
    layouts: tuple[ParamLayout, ...] = spec.layouts
    if cache is not None and not force:
        hit = cache.load(key)
        if hit is not None:
            files, meta = hit
            timings["cache_load"] = time.perf_counter() - t_start
            return Artifacts(lowered.name, meta["symbol"], arch, files["cubin"],
                             files["bytecode"], files["tileir.txt"].decode(),
                             files["remarks.yaml"].decode(), lowered.source,
                             timings, meta["toolchain"], True, layouts, key,
                             location_mapper(lowered))

    import cuda.tile as ct
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

    t0 = time.perf_counter()
    pyfn = _cutile_function(fn, lowered)
    ctk = ct.kernel(pyfn, **hints, opt_level=opt_level)
    try:
        sig = KernelSignature(_constraints(spec, lowered), CallingConvention.cutile_python_v1())
        sig = sig.with_mangled_symbol(lowered.name)
        buf = io.BytesIO()
        export_kernel(ctk, [sig], buf, gpu_code=arch, output_format="tileir_bytecode",
                      bytecode_version=_bytecode_version(toolchain))
    except ct.TileError as e:
        raise _map_tile_error(e, lowered, lowered.name) from None
    bytecode = buf.getvalue()
    timings["frontend"] = time.perf_counter() - t0

    with tempfile.TemporaryDirectory(prefix="tilelab-") as tmp:
        bc_path = Path(tmp) / "kernel.tileirbc"
        bc_path.write_bytes(bytecode)
        t0 = time.perf_counter()
        tileir = ""
        if toolchain.tileirdisasm is not None:
            r = toolchain.run(toolchain.tileirdisasm, [str(bc_path)])
            tileir = r.stdout if r.returncode == 0 else \
                f"(tileirdisasm failed: {r.stderr.strip()})"
        else:
            tileir = "(tileirdisasm is not available beside tileiras; Tile IR text needs " \
                     "CUDA 13.4 or newer)"
        timings["disasm"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        cubin_path = Path(tmp) / "kernel.cubin"
        remarks_path = Path(tmp) / "remarks.yaml"
        r = toolchain.run(toolchain.tileiras, [
            str(bc_path), "-o", str(cubin_path), "--gpu-name", arch, f"-O{opt_level}",
            "--lineinfo", "--remark-format=yaml", "--remarks=all",
            f"--remarks-output-file={remarks_path}"])
        timings["tileiras"] = time.perf_counter() - t0
        if r.returncode != 0 or not cubin_path.exists():
            raise _map_tileiras_error(r.stderr or r.stdout, lowered, toolchain,
                                      lowered.name, arch)
        cubin = cubin_path.read_bytes()
        remarks = remarks_path.read_text(errors="replace") if remarks_path.exists() else ""
    timings["total_compile"] = time.perf_counter() - t_start
    art = Artifacts(lowered.name, sig.symbol, arch, cubin, bytecode, tileir, remarks,
                    lowered.source, timings, toolchain.describe(), False, layouts, key,
                    location_mapper(lowered))
    if cache is not None:
        cache.store(key, {"cubin": cubin, "bytecode": bytecode,
                          "tileir.txt": tileir.encode(), "remarks.yaml": remarks.encode()},
                    {"symbol": sig.symbol, "toolchain": toolchain.describe(), "arch": arch,
                     "kernel": lowered.name, "timings": timings})
    return art

