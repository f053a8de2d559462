"""``@tl.kernel``: a checked, compilable and launchable tile kernel."""
from __future__ import annotations

import functools
import types
from typing import Any, Callable

from tilelab.compiler.artifacts import Artifacts
from tilelab.compiler.definition import KernelDefinition, KernelOptions
from tilelab.errors import AliasError, BorrowError, CompileError, LaunchError
from tilelab.grid import normalize_grid
from tilelab.runtime.events import LISTENERS as _LISTENERS
from tilelab.runtime.launch import DRIVER as _DRIVER, Launcher
from tilelab.runtime.launch.prepared import _STALE
from tilelab.runtime.ledger import locate

#: the launch-time errors that are given the user's launching line (ledger.locate)
_LOCATED = (AliasError, BorrowError, LaunchError)

__all__ = ["Kernel", "kernel"]


class Kernel:
    """A tile kernel defined with ``@tl.kernel``.

    Defining it captures and checks the source (unsafe code raises ``tl.SafetyError``
    right there). ``kernel(*args)`` launches and waits; ``kernel.launch_async(*args)``
    returns a ``tl.Future``; ``kernel.compile(*example_args, arch=...)`` compiles
    without running and returns the :class:`~tilelab.compiler.artifacts.Artifacts`.

    Example:
        >>> import tilelab as tl
        >>> @tl.kernel
        ... def add(z: tl.Out, x: tl.In, y: tl.In):
        ...     z.store(tl.load_like(x, z) + tl.load_like(y, z))
        >>> x = tl.spec(4096, "float32")
        >>> art = add.compile(x.partition(256), x, x, arch="sm_90")   # doctest: +SKIP
    """

    def __init__(self, fn: types.FunctionType, options: KernelOptions):
        self.definition = KernelDefinition(fn, options)
        functools.update_wrapper(self, fn)

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def options(self) -> KernelOptions:
        return self.definition.options

    def compile(self, *example_args: Any, arch: str | None = None, cache: bool = True,
                force: bool = False) -> Artifacts:
        """Compile for these example arguments (tensors, partitions, ``tl.spec``,
        scalars, constants) for ``arch`` (default: ``TILELAB_ARCH``, else this machine's
        GPU, else sm_90)."""
        if arch is None:
            arch = _default_arch()
        self._refuse_negative_strides(example_args)
        try:
            return self.definition.compile(*example_args, arch=arch, cache=cache,
                                           force=force)
        except LaunchError as e:   # an argument that does not fit: point at this call
            raise locate(e)

    def _refuse_negative_strides(self, example_args: tuple) -> None:
        """CompileError for an example array with negative strides (cuTile compiles
        non-negative strides only, and would say so naming an option of its own)."""
        import numpy as np

        params = self.definition.analysis.params
        for p, a in zip(params, example_args):
            if isinstance(a, (bool, int, float, str, np.generic)):
                continue   # (a number's attributes are not read: a subclass's could run code)
            if isinstance(a, np.ndarray):
                strides = tuple(s // max(a.itemsize, 1) for s in a.strides)
            else:
                spec = getattr(a, "__tilelab_spec__", None)
                s = spec() if spec is not None else a
                s = getattr(s, "array", s)   # a partition's tensor
                strides = getattr(s, "strides", None)
            if strides is not None and any(int(st) < 0 for st in strides):
                raise CompileError(
                    f"{self.name}.compile(): argument {p.name!r} has negative strides "
                    f"{tuple(strides)}; cuTile compiles arrays with non-negative strides "
                    "only", hint="compile (and launch) with a copy in increasing order, "
                                 "e.g. t.contiguous()")

    def lowered_source(self, *example_args: Any) -> str:
        """The cuTile Python source this kernel lowers to for these arguments."""
        return self.definition.lowered_source(*example_args)

    @functools.cached_property
    def _launcher(self) -> Launcher:
        return Launcher(self.definition, self)

    def __call__(self, *args: Any, grid: Any = None, stream: Any = None) -> None:
        """Launch and wait (on the GPU, or on the CPU interpreter without one).

        The grid is one block per tile of the partitions (kernels without partitions
        take ``grid=``). Raises ``tl.AliasError`` if a written argument overlaps another
        and ``tl.BorrowError`` if a pending async launch conflicts.
        """
        launcher = self._launcher
        # a repeated launch: prepared already? (with nothing prepared, as always on the
        # CPU, the arguments are not hashed: their own __hash__ never runs there)
        if grid is None and not _LISTENERS and launcher._fast:
            try:
                fast = launcher._fast.get(hash(args))
            except Exception:  # noqa: BLE001 - unhashable (a numpy array): never prepared
                fast = None
            try:
                if fast is not None and fast.run(args, stream, True) is not _STALE:
                    return
            except _LOCATED as e:   # (zero cost unless raised)
                locate(e)
                raise
        launcher.launch(args, grid=grid, stream=stream, sync=True)

    def launch_async(self, *args: Any, grid: Any = None, stream: Any = None):
        """Launch without waiting; returns a ``tl.Future`` holding the launch's borrows."""
        # (Launcher.prepared, inlined: this is the path of every repeated async launch)
        launcher = self._launcher
        if grid is None and not _LISTENERS and launcher._fast:
            try:
                fast = launcher._fast.get(hash(args))
            except Exception:  # noqa: BLE001 - unhashable: never prepared
                fast = None
            if fast is not None:
                hot = _DRIVER.hot
                if hot is not None and stream is None:   # C, or None: Python's turn
                    fut = hot(fast, args)
                    if fut is not None:
                        return fut
                try:
                    fut = fast.run(args, stream, False)
                except _LOCATED as e:   # (zero cost unless raised)
                    locate(e)
                    raise
                if fut is not _STALE:
                    return fut
        return launcher.launch(args, grid=grid, stream=stream, sync=False)

    #: the grid bound by :meth:`with_grid` (None: pass ``grid=`` or use partitions)
    fixed_grid: tuple[int, int, int] | None = None

    def with_grid(self, grid: Any) -> "Kernel":
        """This kernel bound to ``grid``, for kernels that have no partition to infer
        it from (``unsafe=True`` kernels indexing blocks with ``ct.bid``).

        Launches, ``tl.interpret`` and ``compile`` of the bound kernel use ``grid`` when
        none is passed, and a launch repeated with the same argument objects takes the
        prepared fast path (an explicit ``grid=`` never does). Binding the same grid
        twice returns the same object.

        Example:
            >>> import tilelab as tl, cuda.tile as ct
            >>> @tl.kernel(unsafe=True)
            ... def fill(x: tl.Raw):
            ...     ct.store(x, index=(ct.bid(0),), tile=ct.full((4,), 1.0, ct.float32))
            >>> x = tl.zeros(8, device="cpu")
            >>> fill.with_grid((2,))(x); x.numpy().sum()
            np.float32(8.0)
        """
        g = normalize_grid(grid, f"{self.name}.with_grid")
        return _bound(self if self.fixed_grid is None else self._unbound, g)

    @property
    def last_trace(self):
        """The interpreter trace of the last CPU launch that traced (or None)."""
        return self._launcher.last_trace

    def __repr__(self) -> str:
        kinds = ", ".join(f"{p.name}: {p.kind}" for p in self.definition.analysis.params)
        flags = " unsafe" if self.options.unsafe else ""
        grid = f" grid={self.fixed_grid}" if self.fixed_grid is not None else ""
        return f"<tl.kernel{flags} {self.name}({kinds}){grid}>"


@functools.lru_cache(maxsize=1024)
def _bound(unbound: Kernel, grid: tuple[int, int, int]) -> Kernel:
    """One grid-bound copy of ``unbound`` per grid; it shares the definition (and so the
    compiled kernels), with a launcher of its own."""
    k = Kernel.__new__(Kernel)
    k.__dict__.update({n: v for n, v in unbound.__dict__.items() if n != "_launcher"})
    k.fixed_grid = grid
    k._unbound = unbound
    return k


def _default_arch() -> str:
    """The target of ``compile()`` without ``arch=`` (see ``runtime.device.target_arch``)."""
    from tilelab.runtime.device import target_arch

    return target_arch()


def kernel(fn: Callable | None = None, /, *, unsafe: bool = False, check_bounds: bool = True,
           occupancy: Any = None, num_ctas: Any = None, num_worker_warps: Any = None,
           opt_level: int = 3) -> Any:
    """Define a safe tile kernel (the rules: docs/safety.md); usable with or without arguments.

    ``unsafe=True`` allows ``tl.Raw`` parameters; ``check_bounds=False`` drops cuTile's
    bounds checks on partition tiles (the launch then proves no tile crosses an edge);
    ``occupancy``, ``num_ctas``, ``num_worker_warps`` and ``opt_level`` are cuTile's
    compiler hints.

    Example:
        >>> import tilelab as tl
        >>> @tl.kernel(occupancy=2)
        ... def double(z: tl.Out, x: tl.In):
        ...     z.store(tl.load_like(x, z) * 2)
        >>> double
        <tl.kernel double(z: Out, x: In)>
    """
    options = KernelOptions(unsafe=unsafe, check_bounds=check_bounds, occupancy=occupancy,
                            num_ctas=num_ctas, num_worker_warps=num_worker_warps,
                            opt_level=opt_level)

    def wrap(f: Callable) -> Kernel:
        if isinstance(f, Kernel):
            raise TypeError("@tl.kernel applied twice")
        if not isinstance(f, types.FunctionType):
            raise TypeError(f"@tl.kernel needs a Python function, got {type(f).__name__}")
        return Kernel(f, options)

    return wrap if fn is None else wrap(fn)
