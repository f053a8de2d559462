"""Which modules' functions the interpreter runs as they are, never rebuilt.

Why: the rebuild (:mod:`tilelab.interp.rebuild`) re-creates the user's kernel and helpers
over the interpreter's ``cuda.tile``, but a function of the standard library, numpy,
cuda or the interpreter itself is called as it is; the front end
(:mod:`tilelab.interp.frontend.call_rules`) asks the same question of a class a kernel
creates. Both ask it here.

Example:
    >>> is_library_module("numpy.linalg"), is_library_module("my_kernels")
    (True, False)
"""
from __future__ import annotations

import sys

__all__ = ["is_library_module"]

_LIBRARY_ROOTS = frozenset({
    "builtins", "numpy", "ml_dtypes", "cuda", "torch", "cupy", "jax", "jaxlib", "scipy",
    "pandas", "matplotlib", "IPython", "ipykernel", "ipywidgets", "hypothesis", "pytest",
    "_pytest", "typing_extensions", "pluggy",
})


def is_library_module(name: str | None) -> bool:
    """Modules whose functions are run as they are (stdlib, numpy, cuda, the interpreter)."""
    if not name:
        return False
    if name == "tilelab.interp" or name.startswith("tilelab.interp."):
        return True
    root = name.split(".", 1)[0]
    return root in _LIBRARY_ROOTS or root in sys.stdlib_module_names
