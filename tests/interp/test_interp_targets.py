"""The CPU backend stands for one GPU and refuses what cuTile refuses for it: dtypes per
target and bfloat16 atomic add, with cuTile's message at the place cuTile names.

Each kernel runs on the CPU backend standing for a target (``TILELAB_ARCH``, or
``tl.interpret(..., arch=)``) and is compiled with ``kernel.compile(arch=...)`` (no GPU
needed); the refusals are compared. The compiles also check the table of
:mod:`tilelab.limits` against cuTile itself: a kernel runs on the CPU for a target exactly
when it compiles for it.
"""
from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import cuda.tile as ct
import tilelab as tl
from tilelab import config
from tilelab.errors import CompileError, ConfigError, LaunchError
from tilelab.limits import DTYPE_MIN_SM, sm_number

THIS = Path(__file__).resolve()
CPU = "cpu"
#: targets around each dtype's limit: Ampere, Ada (fp8 hardware tileiras does not
#: target), Hopper, Blackwell datacenter and consumer
ARCHS = ("sm_80", "sm_89", "sm_90", "sm_100", "sm_120")


def line_of(marker: str) -> int:
    lines = THIS.read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {marker}"))


def where(e: CompileError) -> tuple | None:
    loc = e.location
    return None if loc is None else (str(Path(loc.filename).resolve()), loc.line, loc.col)


def cpu_refusal(kernel, *args, arch: str) -> CompileError | None:
    """The CPU backend's refusal of ``kernel(*args)`` standing for ``arch`` (None: it ran)."""
    with config.override(arch=arch):
        try:
            kernel(*args)
        except CompileError as e:
            return e
    return None


def gpu_refusal(kernel, *args, arch: str) -> CompileError | None:
    try:
        kernel.compile(*args, arch=arch, cache=False)
    except CompileError as e:
        return e
    return None


def assert_cutile_says(kernel, cpu: CompileError, gpu: CompileError, mark: str) -> None:
    """The interpreter says what cuTile says, where cuTile says it."""
    assert gpu.message == f"cuTile rejected kernel {kernel.name!r}: {cpu.message}"
    assert where(cpu) == where(gpu)
    assert where(cpu)[:2] == (str(THIS), line_of(mark))


# ---- a value of a dtype the target does not compute with ---------------------------------

@tl.kernel
def via_e4m3(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z).astype(ct.float8_e4m3fn)
    z.store(t.astype(z.dtype))  # MARK: e4m3-use


@tl.kernel
def via_e5m2(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z).astype(ct.float8_e5m2)
    z.store(t.astype(z.dtype))  # MARK: e5m2-use


@tl.kernel
def via_fp4(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z).astype(ct.float4_e2m1fn)
    z.store(t.astype(z.dtype))  # MARK: fp4-use


@tl.kernel
def scales_e8m0(z: tl.Out, x: tl.In):
    s = ct.full(z.tile_shape, 4.0, dtype=ct.float8_e8m0fnu)
    z.store(tl.load_like(x, z) * ct.astype(s, z.dtype))  # MARK: e8m0-use


DTYPE_KERNELS = {"float8_e4m3fn": (via_e4m3, "e4m3-use"), "float8_e5m2": (via_e5m2, "e5m2-use"),
                 "float4_e2m1fn": (via_fp4, "fp4-use"), "float8_e8m0fnu": (scales_e8m0, "e8m0-use")}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", list(DTYPE_KERNELS))
@pytest.mark.toolchain
def test_a_dtype_runs_on_the_cpu_exactly_where_it_compiles(dtype, arch):
    """The table of tilelab.limits against cuTile: below the dtype's target both refuse,
    with cuTile's message at the line that uses the value; from it on both accept, and
    the CPU computes what the conversions give."""
    kernel, mark = DTYPE_KERNELS[dtype]
    x = tl.tensor(np.array([0.5, 1.5, 3.0, 6.0] * 4, np.float32), device=CPU)
    z = tl.zeros(16, device=CPU)
    cpu = cpu_refusal(kernel, z.partition(16), x, arch=arch)
    gpu = gpu_refusal(kernel, z.partition(16), x, arch=arch)
    supported = sm_number(arch) >= DTYPE_MIN_SM[dtype]
    assert (cpu is None, gpu is None) == (supported, supported), (cpu, gpu)
    if supported:
        scale = 4.0 if dtype == "float8_e8m0fnu" else 1.0   # (all exact in every format)
        assert z.numpy().tolist() == [v * scale for v in [0.5, 1.5, 3.0, 6.0] * 4]
        return
    assert cpu.message == f"{dtype} is not supported on {arch}"
    assert f"{dtype} needs sm_{DTYPE_MIN_SM[dtype]} or newer" in cpu.hint
    assert "TILELAB_ARCH" in cpu.hint
    assert_cutile_says(kernel, cpu, gpu, f"MARK: {mark}")
    assert (z.numpy() == 0).all()   # refused before anything was stored


@tl.kernel
def unused_fp4(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z).astype(ct.float4_e2m1fn)   # made, never used: dropped
    z.store(tl.load_like(x, z) + t.shape[0])


@pytest.mark.toolchain
def test_a_value_made_and_never_used_is_not_refused():
    """cuTile drops unused code before it checks dtypes, and refuses a value where an op
    takes it: so the CPU backend refuses on use, not on making."""
    x = tl.ones(16, device=CPU)
    z = tl.zeros(16, device=CPU)
    assert cpu_refusal(unused_fp4, z.partition(16), x, arch="sm_90") is None
    assert (z.numpy() == 17).all()
    assert gpu_refusal(unused_fp4, z.partition(16), x, arch="sm_90") is None


def _fp4_of(t):
    return t.astype(ct.float4_e2m1fn)


def _back(t, dtype):
    return t.astype(dtype)  # MARK: helper-use


@tl.kernel
def fp4_in_helpers(z: tl.Out, x: tl.In):
    t = _fp4_of(tl.load_like(x, z))
    z.store(_back(t, z.dtype))  # MARK: helper-call


def test_a_refusal_in_a_helper_names_the_call_that_led_there():
    x, z = tl.ones(16, device=CPU), tl.zeros(16, device=CPU)
    cpu = cpu_refusal(fp4_in_helpers, z.partition(16), x, arch="sm_90")
    gpu = gpu_refusal(fp4_in_helpers, z.partition(16), x, arch="sm_90")
    call = f"{THIS}:{line_of('MARK: helper-call')}:13"
    assert cpu.message == f"float4_e2m1fn is not supported on sm_90 (called from {call})"
    assert_cutile_says(fp4_in_helpers, cpu, gpu, "MARK: helper-use")


# ---- array arguments ----------------------------------------------------------------------

@tl.kernel
def widen(z: tl.Out, x: tl.In):  # MARK: widen-def
    z.store(tl.load_like(x, z).astype(z.dtype))


@tl.kernel
def count_fp8(z: tl.Out, x: tl.In):
    z.store(ct.full(z.tile_shape, 0.0, dtype=z.dtype) + x.shape[0] + x.ndim)


def test_an_fp8_array_is_refused_before_sm90_at_its_parameter():
    """cuTile refuses an array of the dtype where the kernel takes it in: the place is
    the parameter (x, column 22), whatever op uses it first."""
    x8 = tl.tensor(np.arange(16, dtype=np.float32).astype(ml_dtypes.float8_e4m3fn),
                   device=CPU)
    z = tl.zeros(16, device=CPU)
    cpu = cpu_refusal(widen, z.partition(16), x8, arch="sm_80")
    gpu = gpu_refusal(widen, z.partition(16), x8, arch="sm_80")
    assert cpu.message == "float8_e4m3fn is not supported on sm_80"
    assert_cutile_says(widen, cpu, gpu, "MARK: widen-def")
    assert where(cpu)[2] == 22
    assert cpu_refusal(widen, z.partition(16), x8, arch="sm_90") is None
    assert z.numpy().tolist() == list(range(16))


@pytest.mark.toolchain
def test_an_fp8_arrays_shape_is_read_on_every_target():
    """Its shape, rank and dtype compile for sm_80: only its elements are refused."""
    x8 = tl.zeros(16, dtype="float8_e5m2", device=CPU)
    z = tl.zeros(16, device=CPU)
    assert cpu_refusal(count_fp8, z.partition(16), x8, arch="sm_80") is None
    assert (z.numpy() == 17).all()
    assert gpu_refusal(count_fp8, z.partition(16), x8, arch="sm_80") is None


@ct.kernel
def raw_widen(x, z):  # MARK: raw-def
    ct.store(z, (0,), ct.astype(ct.load(x, (0,), (8,)), ct.float32))


def test_tl_interpret_of_a_cutile_kernel_stands_for_its_arch():
    x = np.ones(8, ml_dtypes.float8_e4m3fn)
    z = np.zeros(8, np.float32)
    with pytest.raises(CompileError) as ei:
        tl.interpret(raw_widen, x, z, grid=(1,), arch="sm_80")
    assert ei.value.message == "float8_e4m3fn is not supported on sm_80"
    assert where(ei.value) == (str(THIS), line_of("MARK: raw-def"), 15)
    assert (z == 0).all()
    tl.interpret(raw_widen, x, z, grid=(1,), arch="9.0")
    assert (z == 1).all()
    with pytest.raises(LaunchError, match=r"arch='sm_70' is no target tileiras compiles "
                                          r"for; it takes sm_80, sm_86"):
        tl.interpret(raw_widen, x, z, grid=(1,), arch="sm_70")


# ---- bfloat16 atomic add ------------------------------------------------------------------

@tl.kernel(unsafe=True)
def bump(x: tl.Raw):
    ct.atomic_add(x, (ct.arange(4, dtype=ct.int32),), ct.full((4,), 1, dtype=x.dtype))  # MARK: bump


@pytest.mark.parametrize("dtype,arch,refused", [
    ("bfloat16", "sm_80", True), ("bfloat16", "sm_89", True), ("bfloat16", "sm_90", False),
    ("float16", "sm_80", False), ("float32", "sm_80", False)])
@pytest.mark.toolchain
def test_a_bfloat16_atomic_add_needs_sm90(dtype, arch, refused):
    x = tl.zeros(4, dtype=dtype, device=CPU)
    bumped = bump.with_grid((1,))
    cpu = cpu_refusal(bumped, x, arch=arch)
    gpu = gpu_refusal(bumped, x, arch=arch)
    assert (cpu is not None, gpu is not None) == (refused, refused)
    if refused:
        assert cpu.message == f"bfloat16 is not supported by atomic add on {arch}"
        assert "accumulate in float32" in cpu.hint
        assert_cutile_says(bump, cpu, gpu, "MARK: bump")
        assert (x.numpy() == 0).all()
    else:
        assert (x.numpy() == 1).all()


# ---- which GPU the CPU backend stands for --------------------------------------------------

@pytest.mark.toolchain
def test_tilelab_arch_lets_the_cpu_run_what_its_target_compiles(monkeypatch):
    """Unset, the CPU backend (on a machine without a GPU) stands for sm_90, the target
    kernel.compile() picks: float4 is refused; TILELAB_ARCH=sm_100 runs it, and compile()
    without arch= targets sm_100 too."""
    from tilelab.runtime.device import current_arch, target_arch

    if current_arch() is not None:
        pytest.skip("the default target is this machine's GPU")
    x = tl.tensor(np.array([0.5, 1.5, 3.0, 6.0] * 4, np.float32), device=CPU)
    z = tl.zeros(16, device=CPU)
    with config.override(arch=config.DEFAULT):
        assert target_arch() == "sm_90"
        with pytest.raises(CompileError, match="float4_e2m1fn is not supported on sm_90"):
            via_fp4(z.partition(16), x)
    with config.override(arch="10.0"):
        assert target_arch() == "sm_100"
        via_fp4(z.partition(16), x)
        assert z.numpy().tolist() == [0.5, 1.5, 3.0, 6.0] * 4
        assert tl.interpret(via_fp4, z.partition(16), x).bytes_written == 64
        assert via_fp4.compile(z.partition(16), x, cache=False).arch == "sm_100"
    # (the variable itself: a value it does not take is refused where it is read)
    monkeypatch.setenv("TILELAB_ARCH", "sm_70")
    with pytest.raises(ConfigError, match="TILELAB_ARCH='sm_70' is not allowed; it takes "
                                          "sm_80, sm_86"):
        via_fp4(z.partition(16), x)


def test_the_cpu_backend_stands_for_the_gpu_in_use(monkeypatch):
    """With a GPU set up, the CPU backend (and compile() without arch=) stands for it,
    unless TILELAB_ARCH names another target."""
    from types import SimpleNamespace

    import tilelab.runtime.device as device

    monkeypatch.setattr(device, "_gpu", SimpleNamespace(arch="sm_120"))
    with config.override(arch=config.DEFAULT):
        assert device.target_arch() == "sm_120"
    with config.override(arch="sm_80"):
        assert device.target_arch() == "sm_80"
