"""tilelab: fearless tile kernels for Python and Jupyter.

Safe cuTile kernels whose outputs are split into disjoint tiles before launch, compiled
through CUDA Tile IR to cubins on any machine, run on an NVIDIA GPU or on a CPU
interpreter that also finds races, and shown in notebooks with their Tile IR, ownership
maps and rooflines.

``import tilelab`` loads only the errors and the kernel language (``tl.In``,
``tl.load_like``, ...: the names kernels are written with, which the safety check looks
up in this module's namespace); every other public name is imported from its module on
first use (``tl.kernel`` loads the compiler and the runtime), so a command that needs
none of them, such as a warm ``tilelab compile``, never pays for them.

Example:
    >>> import tilelab as tl
    >>> @tl.kernel
    ... def add(z: tl.Out, x: tl.In, y: tl.In):
    ...     z.store(tl.load_like(x, z) + tl.load_like(y, z))
"""
from typing import TYPE_CHECKING

from tilelab.errors import (TilelabError, SafetyError, AliasError, BorrowError, CompileError,
                            LaunchError, ToolchainError)
from tilelab.compiler.language import (In, Out, InOut, Raw, load_like, row_major, grouped,
                                       persistent, wait_for_previous_kernel)

if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers and editors
    from tilelab.compiler.signature import spec
    from tilelab.runtime.kernel import Kernel, kernel
    from tilelab.runtime.tensor import (Tensor, tensor, as_tensor, from_dlpack, empty, zeros,
                                        ones, full, arange, randn)
    from tilelab.runtime.partition import Partition
    from tilelab.runtime.device import synchronize, gpu_available, backend
    from tilelab.runtime.ledger import unchecked
    from tilelab.runtime.future import Future
    from tilelab.runtime.graph import Graph, graph
    from tilelab.runtime.streams import new_stream as stream
    from tilelab.runtime.interpret import interpret
    from tilelab.perf.bench import bench
    from tilelab.perf.autotune import autotune

__version__ = "0.1.0"


def _names(module: str, *names: str) -> dict[str, tuple[str, str]]:
    return {n: (module, n) for n in names}


#: public name -> (module, attribute): imported on first use by :func:`__getattr__`
_LAZY: dict[str, tuple[str, str]] = {
    **_names("tilelab.compiler.signature", "spec"),
    **_names("tilelab.runtime.kernel", "Kernel", "kernel"),
    **_names("tilelab.runtime.tensor", "Tensor", "tensor", "as_tensor", "from_dlpack",
             "empty", "zeros", "ones", "full", "arange", "randn"),
    **_names("tilelab.runtime.partition", "Partition"),
    **_names("tilelab.runtime.device", "synchronize", "gpu_available", "backend"),
    **_names("tilelab.runtime.ledger", "unchecked"),
    **_names("tilelab.runtime.future", "Future"),
    **_names("tilelab.runtime.graph", "Graph", "graph"),
    "stream": ("tilelab.runtime.streams", "new_stream"),
    **_names("tilelab.runtime.interpret", "interpret"),
    **_names("tilelab.perf.bench", "bench"),
    **_names("tilelab.perf.autotune", "autotune"),
}

#: submodules that are attributes of the package without an import of their own (as they
#: were when ``import tilelab`` loaded the compiler and the runtime at once)
_SUBMODULES = ("compiler", "runtime", "config", "grid")


def __getattr__(name):
    """Every public name but the errors and the kernel language, imported from its
    module on first use.

    Example:
        >>> import tilelab as tl
        >>> tl.kernel.__module__, tl.stream.__name__
        ('tilelab.runtime.kernel', 'new_stream')
    """
    import importlib

    if name in _SUBMODULES:
        return importlib.import_module(f"tilelab.{name}")
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'tilelab' has no attribute {name!r}")
    value = getattr(importlib.import_module(where[0]), where[1])
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


def load_ipython_extension(ipython):
    """``%load_ext tilelab``: register the ``%%tile`` cell magic (see :mod:`tilelab.lab`).

    Example:
        >>> # in IPython or Jupyter:  %load_ext tilelab
    """
    from tilelab.lab import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython):
    """``%unload_ext tilelab``: remove the ``%%tile`` magic.

    Example:
        >>> # in IPython or Jupyter:  %unload_ext tilelab
    """
    from tilelab.lab import unload_ipython_extension as unload

    unload(ipython)

__all__ = [
    "TilelabError", "SafetyError", "AliasError", "BorrowError", "CompileError", "LaunchError",
    "ToolchainError", "In", "Out", "InOut", "Raw", "load_like", "wait_for_previous_kernel",
    "row_major", "grouped",
    "persistent", "spec", "Kernel", "kernel", "Tensor", "tensor", "as_tensor", "from_dlpack",
    "empty", "zeros", "ones", "full", "arange", "randn", "Partition", "synchronize",
    "gpu_available", "backend", "unchecked", "Future", "Graph", "graph", "stream",
    "interpret", "bench", "autotune",
]
