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
import io
import json
import os
import re
import tempfile
import time
import types
from pathlib import Path
from typing import Any

from tilelab.compiler.artifacts import Artifacts
from tilelab.compiler.calling_convention import ParamLayout
from tilelab.compiler.cache import DiskCache
from tilelab.compiler.dtypes import to_cutile_dtype
from tilelab.compiler.frozen import user_facing
from tilelab.compiler.locations import location_mapper
from tilelab.compiler.lower import LoweredKernel
from tilelab.compiler.shape_errors import explain_shape_error
from tilelab.compiler.signature import (ArraySpec, ConstantValue, PartitionSpec, ScalarSpec,
                                        array_traits)
from tilelab.compiler.specialize import Specialization
from tilelab.compiler.tileir import (CheckReport, check_bytecode_tiles, check_partition_tiles,
                                     check_tileir)
from tilelab.compiler.toolchain import Toolchain, find_toolchain
from tilelab.errors import CompileError, SourceLocation, ToolchainError, with_foreign_class
from tilelab.limits import ARCHS

__all__ = ["SUPPORTED_ARCHS", "check_arch", "compile_lowered", "cache_key",
           "export_tileir", "DEBUG_TILEIR"]

#: the --gpu-name values tileiras 13.4 accepts (held by the leaf tilelab.limits, which the
#: TILELAB_ARCH setting and the CPU backend read too)
SUPPORTED_ARCHS = ARCHS
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
    from tilelab.compiler.versions import package_version

    return {pkg: package_version(pkg) or "unknown" for pkg in ("tilelab", "cuda-tile")}


@functools.lru_cache(maxsize=None)
def device_helpers_digest() -> str:
    """sha256 of :mod:`tilelab.compiler.tile_index`, whose index helpers every lowered
    kernel with a grouped or persistent schedule calls: a cubin compiled against other
    helpers (an edited checkout keeps the version number) must not be reused. The
    module's file name is hashed with its text: the cached Tile IR's locations name it,
    and the validator recognises the sub-tile store by it.

    Example:
        >>> len(device_helpers_digest())
        64
    """
    from tilelab.compiler import tile_index
    from tilelab.compiler.frozen import device_text

    name = os.path.basename(tile_index.__file__)
    return hashlib.sha256(f"{name}\n{device_text()}".encode("utf-8")).hexdigest()


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


def _map_tile_error(e: Exception, lowered: LoweredKernel, kernel_name: str) -> CompileError:
    frames = []
    loc = getattr(e, "loc", None)
    while loc is not None:
        if not loc.is_unknown():
            frames.append(loc)
        loc = loc.call_site
    message = getattr(e, "message", str(e)).strip()
    # mma's K and acc, a store's tile: said as the CPU interpreter says them
    explained = explain_shape_error(message, None)
    where, hint, chain = None, None, []
    for fr in frames:
        if fr.filename.startswith("<tilelab-device ") or _in_cutile(fr.filename):
            continue  # tilelab's device helpers and cuTile's own Python (Tile.astype and
            # the other Tile methods): reported at the user's line calling them
        if fr.filename == lowered.filename:
            user = lowered.source_map.to_user(fr.line, fr.col)
            part = lowered.store_at(fr.line, fr.col)
            if explained is None and part is not None and \
                    part not in getattr(lowered, "offset_store_params", ()):
                explained = explain_shape_error(message, part)
            if explained is None and part is not None and any(
                    w in message.lower() for w in ("broadcast", "cast", "shape", "dtype")):
                hint = (f"{part}.store(tile) needs a tile of {part}.tile_shape and "
                        f"{part}.dtype; convert with tile.astype({part}.dtype) and check "
                        "the tile shapes")
                if part in getattr(lowered, "offset_store_params", ()):
                    hint = (f"{part}.store(tile, offset=...) needs a tile of {part}.dtype "
                            f"whose shape divides {part}.tile_shape on every axis")
        elif fr.filename in lowered.helper_files:  # a frozen helper: same lines, columns
            user = SourceLocation(lowered.helper_files[fr.filename], fr.line,
                                  (fr.col or 0) + 1)
        elif fr.filename:
            user = SourceLocation(fr.filename, fr.line, (fr.col or 0) + 1)
        else:
            continue
        if where is None:
            where = user
        else:
            chain.append(str(user))
    if explained is not None:
        message, hint = explained
    if chain:
        message += " (called from " + ", ".join(chain) + ")"
    message = user_facing(message, lowered.source_map.filename)
    return CompileError(f"cuTile rejected kernel {kernel_name!r}: {message}", location=where,
                        hint=hint)


def _in_cutile(filename: str) -> bool:
    """Whether ``filename`` is a source file of the cuda.tile package itself."""
    return filename.startswith(_cutile_dirs())


@functools.lru_cache(maxsize=None)
def _cutile_dirs() -> tuple[str, ...]:
    import cuda.tile as ct

    here = Path(ct.__file__).parent
    return tuple(dict.fromkeys(f"{d}/" for d in (here, here.resolve())))


_LOC_RE = re.compile(r'loc\((?:[^"\[]*\[)?"([^"]+)":(\d+):(\d+)\]?\):\s*error:\s*(.*)')


def _map_tileiras_error(stderr: str, lowered: LoweredKernel, toolchain: Toolchain,
                        kernel_name: str, arch: str, returncode: int = 1) -> Exception:
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
    if returncode < 0 and not lines:
        import signal

        try:
            sig_name = signal.Signals(-returncode).name
        except ValueError:
            sig_name = f"signal {-returncode}"
        return CompileError(
            f"tileiras was killed by {sig_name} while compiling kernel {kernel_name!r} for "
            f"{arch}" + (" (most likely out of memory)" if -returncode == 9 else ""),
            hint="very large tiles (millions of elements) make tileiras run for minutes "
                 "and exhaust memory: use smaller tiles and loop over the rest; "
                 f"toolchain: {toolchain.describe()}")
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


def _export(pyfn: types.FunctionType, lowered: LoweredKernel, spec: Specialization,
            arch: str, toolchain: Toolchain, hints: dict[str, Any],
            opt_level: int) -> tuple[bytes, str]:
    """(Tile IR bytecode, symbol) of a cuTile function under the specialization's
    signature (cuTile's export API; no tileiras)."""
    import cuda.tile as ct
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

    ctk = ct.kernel(pyfn, **hints, opt_level=opt_level)
    try:
        sig = KernelSignature(_constraints(spec, lowered), CallingConvention.cutile_python_v1())
        sig = sig.with_mangled_symbol(lowered.name)
        buf = io.BytesIO()
        export_kernel(ctk, [sig], buf, gpu_code=arch, output_format="tileir_bytecode",
                      bytecode_version=_bytecode_version(toolchain))
    except ct.TileError as e:
        # (also an instance of cuTile's class, e.g. TileTypeError, as code ported from
        # cuTile catches it)
        raise with_foreign_class(_map_tile_error(e, lowered, lowered.name), type(e)) from None
    return buf.getvalue(), sig.symbol


def export_tileir(fn: types.FunctionType, lowered: LoweredKernel, spec: Specialization,
                  arch: str = "sm_90", *, pyfn: types.FunctionType | None = None,
                  debug: bool = True, options: dict[str, Any] | None = None
                  ) -> tuple[bytes, str]:
    """(bytecode, Tile IR text) of a lowered kernel (``fn``: the user's function, as for
    :func:`compile_lowered`) without running tileiras; or, with ``pyfn``, of any cuTile
    function taking the lowered kernel's parameters, under the same signature.

    ``debug`` prints the ops' source locations (``tileirdisasm -g``), which
    :func:`tilelab.compiler.tileir.check_tileir` reads.

    Example:
        >>> from tilelab.kernels.examples import vector_add as k           # doctest: +SKIP
        >>> x = tl.spec(4096, "float32")                                   # doctest: +SKIP
        >>> sp = k.definition.specialize((x.partition(256), x, x))         # doctest: +SKIP
        >>> lk = k.definition.lowered(sp.plan)                             # doctest: +SKIP
        >>> bc, text = export_tileir(k.definition.fn, lk, sp)             # doctest: +SKIP
    """
    toolchain = find_toolchain()
    options = dict(options or {})
    opt_level = int(options.pop("opt_level", 3))
    hints = {k: v for k, v in options.items() if v is not None}
    if pyfn is None:
        pyfn = lowered.function()
    bytecode, _symbol = _export(pyfn, lowered, spec, check_arch(arch), toolchain, hints,
                                opt_level)
    text, why = _disassemble(toolchain, bytecode, debug)
    if text is None:
        raise ToolchainError(f"cannot disassemble the Tile IR of kernel {lowered.name!r}: "
                             f"{why}")
    return bytecode, text


def _disassemble(toolchain: Toolchain, bytecode: bytes, debug: bool) -> tuple[str | None, str]:
    """(text, "") from tileirdisasm (``-g``: with locations), or (None, why not)."""
    if toolchain.tileirdisasm is None:
        return None, ("tileirdisasm is not available beside tileiras (Tile IR text needs "
                      "CUDA 13.4 or newer)")
    with tempfile.TemporaryDirectory(prefix="tilelab-dis-") as tmp:
        path = Path(tmp) / "kernel.tileirbc"
        path.write_bytes(bytecode)
        r = toolchain.run(toolchain.tileirdisasm, (["-g"] if debug else []) + [str(path)])
    if r.returncode != 0:
        return None, f"tileirdisasm failed: {(r.stderr or r.stdout).strip()}"
    return r.stdout, ""


#: (cache key, sha256 of the Tile IR text) -> the report of each check passed in this
#: process: a cache hit of the same entry again (a notebook cell re-run) is not checked
#: twice, and its artifacts keep the verdicts of the check that passed
_VALIDATED: dict[tuple[str, str], CheckReport] = {}


def _validate(debug_text: str | None, why: str, lowered: LoweredKernel,
              spec: Specialization, timings: dict[str, float], key: str,
              digest: str | None = None) -> CheckReport:
    """The Tile IR check of a safe kernel (tilelab.compiler.tileir); returns its
    report (the verdict on each memory op)."""
    t0 = time.perf_counter()
    if debug_text is None:
        raise ToolchainError(
            f"cannot check the Tile IR of kernel {lowered.name!r} before its cubin is "
            f"used: {why}",
            hint="install the nvidia-cuda-tileiras release that carries tileirdisasm "
                 "(13.4 or newer); @tl.kernel(unsafe=True) compiles without the check")
    memo = (key, digest or hashlib.sha256(debug_text.encode()).hexdigest())
    report = _VALIDATED.get(memo)
    if report is None:
        report = check_tileir(debug_text, lowered, spec, kernel_name=lowered.name,
                              mapper=location_mapper(lowered))
        if len(_VALIDATED) > 4096:
            _VALIDATED.clear()
        _VALIDATED[memo] = report
    timings["validate"] = time.perf_counter() - t0
    return report


#: the cached ``tileirdisasm -g`` text the Tile IR check of a cache hit reads
DEBUG_TILEIR = "tileir-debug.txt"


def _accesses(lowered: LoweredKernel) -> tuple:
    """The safety checker's access records of the program ``lowered`` was built from."""
    return tuple(getattr(lowered.program, "accesses", ()))


def compile_lowered(fn: types.FunctionType, lowered: LoweredKernel, spec: Specialization,
                    arch: str, *, options: dict[str, Any], cache: DiskCache | None,
                    force: bool = False, timings: dict[str, float] | None = None,
                    helpers: str = "", unsafe: bool = False) -> Artifacts:
    """Compile one specialization of a lowered kernel for ``arch`` (cache first).

    ``options`` holds cuTile's kernel hints (``occupancy``, ``num_ctas``,
    ``num_worker_warps``) and ``opt_level``. Unless ``unsafe``, the kernel's Tile IR is
    checked (:func:`tilelab.compiler.tileir.check_tileir`) before the cubin is
    stored in the cache or returned, also on a cache hit (an entry without its Tile IR
    text is rebuilt). A tile past Tile IR's element limit is refused before tileiras
    runs.
    """
    t_start = time.perf_counter()
    timings = dict(timings or {})
    check_partition_tiles(lowered, spec)
    toolchain = find_toolchain()
    opt_level = int(options.get("opt_level", 3))
    hints = {k: v for k, v in options.items() if k != "opt_level" and v is not None}
    key = cache_key(lowered, spec, arch, opt_level, hints, toolchain, helpers)
    layouts: tuple[ParamLayout, ...] = spec.layouts
    if cache is not None and not force:
        hit = cache.load(key)
        if hit is not None:
            files, meta = hit
            debug = files.get(DEBUG_TILEIR)
            if debug is None and not unsafe:
                cache.discard(key)   # no Tile IR to check: never load it; rebuild
            else:
                report = None if unsafe else _validate(
                    debug.decode(errors="replace"), "", lowered, spec, timings, key,
                    meta["files"].get(DEBUG_TILEIR))
                timings["cache_load"] = time.perf_counter() - t_start
                return Artifacts(lowered.name, meta["symbol"], arch, files["cubin"],
                                 files["bytecode"], files["tileir.txt"].decode(),
                                 files["remarks.yaml"].decode(), lowered.source,
                                 timings, f"cached: built by {meta['toolchain']}", True,
                                 layouts, key, location_mapper(lowered),
                                 cache_entry=cache.entry_dir(key),
                                 accesses=_accesses(lowered), validation=report)

    t0 = time.perf_counter()
    bytecode, symbol = _export(lowered.function(), lowered, spec, arch, toolchain, hints,
                               opt_level)
    timings["frontend"] = time.perf_counter() - t0

    # a tile past Tile IR's limit: a located error now (tileiras would fail unlocated)
    check_bytecode_tiles(bytecode, lowered.name, mapper=location_mapper(lowered),
                         disassemble=lambda b: _disassemble(toolchain, b, True)[0])
    t0 = time.perf_counter()
    tileir, why = _disassemble(toolchain, bytecode, False)
    if tileir is None:
        tileir = f"({why})"
    debug_text, why_debug = _disassemble(toolchain, bytecode, True)
    timings["disasm"] = time.perf_counter() - t0
    report = None if unsafe else _validate(debug_text, why_debug, lowered, spec, timings,
                                           key)

    with tempfile.TemporaryDirectory(prefix="tilelab-") as tmp:
        bc_path = Path(tmp) / "kernel.tileirbc"
        bc_path.write_bytes(bytecode)
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
                                      lowered.name, arch, returncode=r.returncode)
        cubin = cubin_path.read_bytes()
        remarks = remarks_path.read_text(errors="replace") if remarks_path.exists() else ""
    timings["total_compile"] = time.perf_counter() - t_start
    art = Artifacts(lowered.name, symbol, arch, cubin, bytecode, tileir, remarks,
                    lowered.source, timings, toolchain.describe(), False, layouts, key,
                    location_mapper(lowered), accesses=_accesses(lowered),
                    validation=report)
    if cache is not None:
        files = {"cubin": cubin, "bytecode": bytecode, "tileir.txt": tileir.encode(),
                 "remarks.yaml": remarks.encode()}
        if debug_text is not None:
            files[DEBUG_TILEIR] = debug_text.encode()
        # a cache that cannot be written warns (once) and the artifacts are kept
        if cache.store(key, files, {"symbol": symbol, "toolchain": toolchain.describe(),
                                    "arch": arch, "kernel": lowered.name,
                                    "timings": timings}):
            art.cache_entry = cache.entry_dir(key)
    return art
