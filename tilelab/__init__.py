"""tilelab: fearless tile kernels for Python and Jupyter.

Safe cuTile kernels whose outputs are split into disjoint tiles before launch, compiled
through CUDA Tile IR to cubins on any machine, run on an NVIDIA GPU or on a CPU
interpreter that also finds races, and shown in notebooks with their Tile IR, ownership
maps and rooflines.

Example:
    >>> import tilelab as tl
    >>> @tl.kernel
    ... def add(z: tl.Out, x: tl.In, y: tl.In):
    ...     z.store(tl.load_like(x, z) + tl.load_like(y, z))
"""
from tilelab.errors import (TilelabError, SafetyError, AliasError, BorrowError, CompileError,
                            LaunchError, ToolchainError)
from tilelab.compiler.language import (In, Out, InOut, Raw, load_like, row_major, grouped,
                                       persistent)
from tilelab.compiler.signature import spec
from tilelab.runtime.kernel import Kernel, kernel
from tilelab.runtime.tensor import (Tensor, tensor, as_tensor, from_dlpack, empty, zeros, ones,
                                    full, arange, randn)
from tilelab.runtime.partition import Partition
from tilelab.runtime.device import synchronize, gpu_available, backend
from tilelab.runtime.ledger import unchecked
from tilelab.runtime.future import Future
from tilelab.runtime.graph import Graph, graph
from tilelab.runtime.streams import new_stream as stream
from tilelab.runtime.interpret import interpret

__version__ = "0.1.0"


#: names of tilelab.perf re-exported here, imported at their first use (compiling and
#: running kernels need none of tilelab.perf, whose import costs a tenth of tilelab's)
_LAZY = {"bench": "tilelab.perf.bench", "autotune": "tilelab.perf.autotune"}


def __getattr__(name):
    """``tl.bench`` and ``tl.autotune``, imported on first use.

    Example:
        >>> import tilelab as tl
        >>> tl.bench.__module__
        'tilelab.perf.bench'
    """
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tilelab' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
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
    "ToolchainError", "In", "Out", "InOut", "Raw", "load_like", "row_major", "grouped",
    "persistent", "spec", "Kernel", "kernel", "Tensor", "tensor", "as_tensor", "from_dlpack",
    "empty", "zeros", "ones", "full", "arange", "randn", "Partition", "synchronize",
    "gpu_available", "backend", "unchecked", "Future", "Graph", "graph", "stream",
    "interpret", "bench", "autotune",
]
