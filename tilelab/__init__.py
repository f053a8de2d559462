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

__version__ = "0.1.0"

__all__ = [
    "TilelabError", "SafetyError", "AliasError", "BorrowError", "CompileError", "LaunchError",
    "ToolchainError", "In", "Out", "InOut", "Raw", "load_like", "row_major", "grouped",
    "persistent", "spec", "Kernel", "kernel",
]
