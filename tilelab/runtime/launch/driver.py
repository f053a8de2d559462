"""How prepared GPU launches reach the driver: one object, :data:`DRIVER`, that picks
the path once, at the first GPU launch of the process, and records why.

The paths (``TILELAB_LAUNCH``, see :mod:`tilelab.config`):

- ``native`` (the default): tilelab's C module (:mod:`tilelab.runtime.native`) calls
  ``cuLaunchKernel`` with arguments packed once per prepared launch, and runs a
  repeated ``launch_async`` on the default stream entirely in C (``hot``) unless
  ``TILELAB_HOT=0``; when the module cannot be built or loaded, ``driver``.
- ``driver``: cuda-bindings' ``cuLaunchKernel``.
- ``cuda.core``: ``cuda.core.launch`` (graphs are always built with cuda.core). Also
  taken for good, with the reason recorded, when this cuda-bindings' ``cuLaunchKernel``
  does not take the packed arguments.

This module sits below the prepared launch (:mod:`.prepared`): the native module's C
async path binds to the prepared launch's classes, so :mod:`.prepared` hands
:data:`DRIVER` the function that binds it (``DriverPath.bind_hot``) when it is
imported, and the driver path never imports it.
"""
from __future__ import annotations

from typing import Any, Callable

from tilelab.errors import LaunchError
from tilelab.runtime.ledger import locate

__all__ = ["DriverPath", "DRIVER"]

PATHS = ("native", "driver", "cuda.core")


class DriverPath:
    """The launch path of this process: ``path`` (``"native"``, ``"driver"``,
    ``"cuda.core"``, or None until the first GPU launch), ``why`` it was taken, and the
    entry points a prepared launch calls on it (``cu_launch_kernel`` and ``success``
    of cuda-bindings; the native module's ``native_launch``, ``native_launch_on``,
    ``native_sync``, ``native_prepare`` and ``hot``, None off the native path).

    Example:
        >>> from tilelab.runtime.launch import DRIVER
        >>> DRIVER.path in (None, "native", "driver", "cuda.core")
        True
        >>> DRIVER.why            # doctest: +SKIP
        'native: /home/me/.cache/tilelab/native/3f0c.../_tilelab_native....so'
    """

    def __init__(self, bind_hot: Callable[[Any], Callable | None] | None = None) -> None:
        self.path: str | None = None
        self.why = "not chosen yet: no GPU launch in this process"
        self.cu_launch_kernel: Callable | None = None
        self.success: Any = None
        self.native_launch: Callable | None = None
        self.native_launch_on: Callable | None = None
        self.native_sync: Callable | None = None
        self.native_prepare: Callable | None = None
        #: the native module's hot(prepared, args): Kernel.launch_async's C path
        self.hot: Callable | None = None
        #: binds a native module's ``hot`` to the prepared launch's classes, returning
        #: it, or None where it cannot bind (:func:`.prepared.bind_hot`, which
        #: :mod:`.prepared` sets on :data:`DRIVER`); None: no C async path
        self.bind_hot = bind_hot

    def gpu(self) -> Any:
        """The GPU, the path chosen on the first call (see the module docstring)."""
        from tilelab.runtime.device import gpu

        g = gpu()   # (loads libcuda before the native module binds to it)
        if self.path is None:
            self.choose()
        return g

    def choose(self) -> None:
        """Pick the path from ``TILELAB_LAUNCH`` and what loads; records ``why``."""
        from cuda.bindings import driver

        from tilelab import config

        self.success = driver.CUresult.CUDA_SUCCESS
        self.cu_launch_kernel = driver.cuLaunchKernel
        mode = config.launch()
        if mode != "native":
            self._take(mode, f"TILELAB_LAUNCH={mode}")
            return
        from tilelab.runtime import native

        mod = native.load()
        if mod is None:
            self._take("driver", f"the native module is {native.status()}")
            return
        self.use_native(mod)

    def use_native(self, mod: Any) -> None:
        """Launch through the native module ``mod``, its C async path included unless
        ``TILELAB_HOT=0`` or it cannot bind to the prepared launch's slots (no
        ``bind_hot``, or it returns None)."""
        from tilelab import config
        from tilelab.runtime import native

        self.native_launch, self.native_launch_on = mod.launch, mod.launch_on
        self.native_sync, self.native_prepare = mod.sync, mod.prepare
        self.hot = None
        why = native.status()
        if not config.hot():
            why += "; async launches on the Python path (TILELAB_HOT=0)"
        else:
            self.hot = None if self.bind_hot is None else self.bind_hot(mod)
            if self.hot is None:
                why += "; async launches on the Python path (the C path cannot bind)"
        self._take("native", why)

    def fall_back(self, path: str, why: str) -> None:
        """Leave the current path for ``path`` for good, saying ``why``.

        Example:
            >>> d = DriverPath()
            >>> d.fall_back("cuda.core", "cuLaunchKernel refused the packed arguments")
            >>> d.path, d.why
            ('cuda.core', 'cuLaunchKernel refused the packed arguments')
        """
        if path != "native":
            self.native_launch = self.native_launch_on = self.native_sync = None
            self.native_prepare = self.hot = None
        self._take(path, why)

    def _take(self, path: str, why: str) -> None:
        if path not in PATHS:
            raise ValueError(f"no launch path {path!r}; paths: {', '.join(PATHS)}")
        self.path, self.why = path, why

    def __repr__(self) -> str:
        return f"DriverPath(path={self.path!r}, why={self.why!r})"


#: the process's launch path
DRIVER = DriverPath()


def launch_failed(fast: Any, err: int) -> None:
    """Raise the LaunchError of a prepared launch whose cuLaunchKernel returned ``err``
    (any path: cuda-bindings, the native call, the native async path), located at the
    user's launching line."""
    raise locate(LaunchError(f"launch of {fast.name!r} (grid {fast.grid}) failed: "
                             f"{driver_error(err)}"))


def driver_error(err: int) -> str:
    """A CUresult as its name and the driver's description.

    Example:
        >>> driver_error(1)                   # doctest: +SKIP
        'CUDA_ERROR_INVALID_VALUE: invalid argument'
    """
    from cuda.bindings import driver

    try:
        res = driver.CUresult(err)
    except ValueError:   # a code this cuda-bindings does not know
        return f"CUresult {err}"
    try:
        desc = driver.cuGetErrorString(res)[1]
    except Exception:  # noqa: BLE001 - the name alone says enough
        return res.name
    return f"{res.name}: {desc.decode() if isinstance(desc, bytes) else desc}"
