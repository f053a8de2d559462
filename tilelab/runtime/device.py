"""Which backend runs kernels, and the GPU it runs them on.

tilelab runs on an NVIDIA GPU (sm_80 or newer, a CUDA 13 driver) when one is usable and
on the CPU interpreter otherwise; ``TILELAB_BACKEND=cpu|gpu`` overrides the choice.
``cuda.core`` is imported only when GPU things are first needed, so ``import tilelab``
stays cheap and never fails on a machine without a driver.
"""
from __future__ import annotations

import functools
import os
import threading
from typing import Any

from tilelab.errors import LaunchError

__all__ = ["MIN_COMPUTE_CAPABILITY", "MIN_DRIVER_VERSION", "gpu_available",
           "gpu_unavailable_reason", "backend", "default_device", "parse_device", "GPU",
           "gpu", "current_arch", "target_arch", "num_sms", "synchronize", "check_cuda"]

#: the oldest GPU tilelab runs on (Ampere, sm_80)
MIN_COMPUTE_CAPABILITY = (8, 0)
#: the oldest driver API version, as cuDriverGetVersion reports it (CUDA 13.0: r580)
MIN_DRIVER_VERSION = 13000

_REQUIREMENT = "an NVIDIA GPU of compute capability 8.0 (sm_80) or newer with a driver " \
               "for CUDA 13 (r580 or newer)"


def check_cuda(result: Any, call: str) -> Any:
    """Unpack a ``cuda.bindings.driver`` return tuple; raise LaunchError on failure.

    Every driver call returns ``(CUresult, *values)``; this names the failed call and the
    error, so no CUresult is ever ignored.

    Example:
        >>> from cuda.bindings import driver                     # doctest: +SKIP
        >>> check_cuda(driver.cuDriverGetVersion(), "cuDriverGetVersion")  # doctest: +SKIP
        13000
    """
    err, *values = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise LaunchError(f"{call} failed with {_error_name(err)}",
                          hint="a previous kernel may have faulted (sticky errors poison the "
                               "CUDA context: restart the Python process), or the GPU is out "
                               "of memory")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def _error_name(err: Any) -> str:
    name = getattr(err, "name", None)
    if name:
        return str(name)
    try:
        from cuda.bindings import driver

        return driver.CUresult(int(err)).name
    except Exception:  # pragma: no cover - unknown code
        return f"CUresult {int(err)}"


def _capability(driver: Any, dev: Any) -> tuple[int, int]:
    """The compute capability (major, minor) of driver device ``dev``; a failing call
    raises :class:`LaunchError` through :func:`check_cuda`."""
    attr = driver.CUdevice_attribute
    return tuple(check_cuda(driver.cuDeviceGetAttribute(a, dev), "cuDeviceGetAttribute")
                 for a in (attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                           attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))


@functools.lru_cache(maxsize=1)
def _probe() -> str | None:
    """Why no usable GPU is present, or None when there is one (probed once)."""
    try:
        from cuda.bindings import driver
    except Exception as e:  # ImportError, or a broken install
        return f"cuda-bindings cannot be imported ({e}); install it with " \
               "'pip install cuda-core cuda-bindings'"
    try:
        err, = driver.cuInit(0)
    except Exception as e:  # libcuda.so missing: cuda.pathfinder raises
        return f"the NVIDIA driver library (libcuda.so) could not be loaded: {e}"
    if int(err) != 0:
        if err == driver.CUresult.CUDA_ERROR_NO_DEVICE:
            vis = os.environ.get("CUDA_VISIBLE_DEVICES")
            extra = f" (CUDA_VISIBLE_DEVICES={vis!r})" if vis is not None else ""
            return f"the NVIDIA driver reports no CUDA device{extra}"
        return f"cuInit failed with {_error_name(err)}"
    try:
        version = check_cuda(driver.cuDriverGetVersion(), "cuDriverGetVersion")
        if version < MIN_DRIVER_VERSION:
            return (f"the NVIDIA driver supports CUDA {version // 1000}.{version % 1000 // 10}, "
                    "but tilelab needs CUDA 13 (driver r580 or newer)")
        count = check_cuda(driver.cuDeviceGetCount(), "cuDeviceGetCount")
        if count < 1:
            return "the NVIDIA driver reports no CUDA device"
        dev = check_cuda(driver.cuDeviceGet(0), "cuDeviceGet")
        major, minor = _capability(driver, dev)
        if (major, minor) < MIN_COMPUTE_CAPABILITY:
            raw = check_cuda(driver.cuDeviceGetName(256, dev), "cuDeviceGetName")
            name = bytes(raw).split(b"\0", 1)[0].decode(errors="replace")
            return (f"GPU 0 ({name}) has compute capability {major}.{minor}; tilelab needs "
                    "8.0 (sm_80) or newer")
    except LaunchError as e:
        return str(e.message)
    try:
        import cuda.core  # noqa: F401
    except Exception as e:
        return f"cuda-core cannot be imported ({e}); install it with 'pip install cuda-core'"
    return None


def gpu_unavailable_reason() -> str:
    """Why tilelab cannot use a GPU here ('' when it can).

    Example:
        >>> import tilelab.runtime.device as d
        >>> isinstance(d.gpu_unavailable_reason(), str)
        True
    """
    return _probe() or ""


def gpu_available() -> bool:
    """Whether a usable GPU (sm_80+, CUDA 13 driver) is present. Never raises.

    Example:
        >>> import tilelab.runtime.device as d
        >>> d.gpu_available() in (True, False)
        True
    """
    return _probe() is None


def _require_gpu(what: str) -> None:
    reason = _probe()
    if reason is not None:
        raise LaunchError(f"{what} needs a GPU, but none is usable: {reason}",
                          hint=f"tilelab's GPU backend needs {_REQUIREMENT}; use "
                               "device='cpu' or TILELAB_BACKEND=cpu to run on the CPU "
                               "interpreter")


def backend() -> str:
    """'gpu' or 'cpu': where kernels run and tensors live by default.

    The GPU when one is usable, else the CPU interpreter; the environment variable
    ``TILELAB_BACKEND=cpu|gpu`` overrides (forcing 'gpu' without a usable GPU raises
    :class:`~tilelab.errors.LaunchError` saying why).

    Example:
        >>> import tilelab.runtime.device as d
        >>> d.backend() in ("gpu", "cpu")
        True
    """
    from tilelab import config

    forced = config.backend()   # ConfigError for a value that is not a backend
    if forced == "auto":
        return "gpu" if gpu_available() else "cpu"
    if forced == "cpu":
        return "cpu"
    _require_gpu("TILELAB_BACKEND=gpu")
    return "gpu"


def default_device() -> str:
    """The device new tensors live on when none is given: 'cuda:0' or 'cpu'.

    Example:
        >>> import tilelab.runtime.device as d
        >>> d.default_device() in ("cuda:0", "cpu")
        True
    """
    return "cuda:0" if backend() == "gpu" else "cpu"


def parse_device(device: Any = None) -> str:
    """Normalize a device name to 'cpu' or 'cuda:0' (None: :func:`default_device`).

    Accepts 'cpu', 'gpu', 'cuda', 'cuda:0' and objects that print as those (a
    ``torch.device``). Asking for the GPU without a usable one raises LaunchError.

    Example:
        >>> parse_device("cpu")
        'cpu'
    """
    if device is None:
        return default_device()
    name = str(device).strip().lower()
    if name == "cpu":
        return "cpu"
    if name in ("gpu", "cuda", "cuda:0", "gpu:0"):
        _require_gpu(f"device {device!r}")
        return "cuda:0"
    if name.startswith(("cuda:", "gpu:")) and name.split(":", 1)[1].isdigit():
        raise LaunchError(f"device {device!r}: tilelab uses one GPU, cuda:0",
                          hint="select the GPU with CUDA_VISIBLE_DEVICES before starting "
                               "Python, then use device='cuda:0'")
    raise ValueError(f"unknown device {device!r}; use 'cpu', 'gpu', 'cuda' or 'cuda:0'")


class GPU:
    """The GPU tilelab runs on: cuda.core ``Device(0)``, its facts and a default stream.

    Get it with :func:`gpu` (cached; created on first use). ``stream`` is a stream of our
    own (not the legacy default stream) on which tilelab allocates, copies and launches.

    Example:
        >>> import tilelab.runtime.device as d
        >>> if d.gpu_available():                                # doctest: +SKIP
        ...     print(d.gpu().arch, d.gpu().num_sms)
        sm_90 132
    """

    def __init__(self, device_id: int = 0):
        from cuda.bindings import driver
        from cuda.core import Device

        self.device_id = device_id
        self.device = Device(device_id)
        self.device.set_current()
        self._current = threading.local()
        self._current.ok = True
        cc = self.device.compute_capability
        #: compute capability as an arch name: 'sm_80', 'sm_90', 'sm_100', ...
        self.arch = f"sm_{cc.major}{cc.minor}"
        self.compute_capability = (int(cc.major), int(cc.minor))
        self.name = self.device.name
        props = self.device.properties
        self.num_sms = int(props.multiprocessor_count)
        self.l2_bytes = int(props.l2_cache_size)
        #: driver API version as cuDriverGetVersion reports it, e.g. 13000 for CUDA 13.0
        self.driver_version = int(check_cuda(driver.cuDriverGetVersion(),
                                             "cuDriverGetVersion"))
        cu_dev = check_cuda(driver.cuDeviceGet(device_id), "cuDeviceGet")
        self.total_memory = int(check_cuda(driver.cuDeviceTotalMem(cu_dev),
                                           "cuDeviceTotalMem"))
        #: tilelab's default stream (a real stream: never the legacy NULL stream)
        self.stream = self.device.create_stream()
        self.stream_handle = int(self.stream.handle)

    def make_current(self) -> None:
        """Make this GPU's context current on the calling thread (cheap after the first).

        Example:
            >>> gpu().make_current()                                # doctest: +SKIP
        """
        if not getattr(self._current, "ok", False):
            self.device.set_current()
            self._current.ok = True

    def synchronize(self) -> None:
        """Wait for all work on this GPU (every stream) to finish.

        Example:
            >>> gpu().synchronize()                                 # doctest: +SKIP
        """
        self.make_current()
        self.device.sync()

    def __repr__(self) -> str:
        return (f"<tl.GPU {self.name} {self.arch}, {self.num_sms} SMs, "
                f"{self.total_memory / 2**30:.0f} GiB, driver CUDA "
                f"{self.driver_version // 1000}.{self.driver_version % 1000 // 10}>")


_gpu_lock = threading.Lock()
_gpu: GPU | None = None


def gpu() -> GPU:
    """The cached :class:`GPU`, made current on this thread; LaunchError without one.

    Example:
        >>> import tilelab.runtime.device as d
        >>> d.gpu().name if d.gpu_available() else None           # doctest: +SKIP
        'NVIDIA H200'
    """
    global _gpu
    g = _gpu
    if g is None:
        _require_gpu("this operation")
        with _gpu_lock:
            if _gpu is None:
                try:
                    _gpu = GPU(0)
                except LaunchError:
                    raise
                except Exception as e:  # context creation, out of memory, ...
                    raise LaunchError(f"setting up GPU 0 failed: {e}",
                                      hint="check nvidia-smi; another process may hold the "
                                           "GPU in exclusive mode or all of its memory") from e
            g = _gpu
    g.make_current()
    return g


def gpu_initialized() -> bool:
    """Whether the GPU has been set up in this process (without setting it up).

    Example:
        >>> import tilelab.runtime.device as d
        >>> d.gpu_initialized() in (True, False)
        True
    """
    return _gpu is not None


def current_arch() -> str | None:
    """The arch of this machine's usable GPU ('sm_90'), or None without one.

    Example:
        >>> import tilelab.runtime.device as d
        >>> d.current_arch() is None or d.current_arch().startswith("sm_")
        True
    """
    if not gpu_available():
        return None
    try:
        return gpu().arch
    except LaunchError:
        return None


def target_arch() -> str:
    """The GPU that compiles without ``arch=`` target and that the CPU backend stands
    for: ``TILELAB_ARCH``, else this machine's GPU, else sm_90
    (:data:`tilelab.limits.DEFAULT_ARCH`). The CPU backend refuses what cuTile refuses
    for it (a float4 tile before sm_100), so a kernel that runs there compiles for it.

    Example:
        >>> from tilelab import config
        >>> with config.override(arch="sm_100"):
        ...     target_arch()
        'sm_100'
    """
    from tilelab import config
    from tilelab.limits import DEFAULT_ARCH

    named = config.arch()
    if named is not None:
        return named
    if _gpu is not None:
        return _gpu.arch
    return _gpu0_arch() or DEFAULT_ARCH


@functools.lru_cache(maxsize=1)
def _gpu0_arch() -> str | None:
    """GPU 0's arch read from the driver without setting the GPU up (a CPU launch on a
    machine with a GPU makes no CUDA context), or None without a usable GPU."""
    if not gpu_available():
        return None
    from cuda.bindings import driver

    try:
        dev = check_cuda(driver.cuDeviceGet(0), "cuDeviceGet")
        major, minor = _capability(driver, dev)
    except LaunchError:
        return None
    return f"sm_{major}{minor}"


def num_sms(device: str = "cuda:0") -> int:
    """How many blocks a persistent schedule launches on ``device`` by default.

    The GPU's SM count; on the CPU backend ``TILELAB_CPU_PERSISTENT_BLOCKS`` (default 4,
    few enough that traces and ownership maps stay readable), as the launcher uses.

    Example:
        >>> num_sms("cpu") >= 1
        True
    """
    if device == "cpu":
        from tilelab import config

        return config.cpu_persistent_blocks()
    return gpu().num_sms


def synchronize() -> None:
    """Wait for all GPU work, then release every pending launch's borrows.

    Example:
        >>> import tilelab.runtime.device as d
        >>> d.synchronize()
    """
    if _gpu is not None:
        _gpu.synchronize()
    from tilelab.runtime.ledger import LEDGER

    LEDGER.observe_all()
