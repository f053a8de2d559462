"""Launching a kernel: arguments -> checks -> compiled code -> GPU or CPU interpreter.

A launch that nothing prepared gets ready in one place, ``Launcher.first_launch``: turn
each argument into a tensor or partition (:mod:`.arguments`: foreign arrays are borrowed
without copies; scalars and constants must be exact Python or numpy values,
:mod:`tilelab.compiler.values`), look the argument signature up in the kernel's
bounded table of plans (array specs, scalar dtypes and constant values, never a
scalar's value; a miss specializes, compiles or hits the disk cache, and loads the
cubin: :mod:`.plan`), check aliasing and borrows (:mod:`.checks`), pack the
``cutile_python_v1`` words and launch (grid = tile blocks, block = (1, 1, 1)). A launch
repeated with the very same argument objects reuses everything prepared the first time,
and one with other scalar values the same with the scalars repacked (:mod:`.prepared`),
calling the driver by the one path :data:`DRIVER` chose for the process
(:mod:`.driver`: tilelab's native C module, cuda-bindings or cuda.core;
``DRIVER.path`` and ``DRIVER.why`` say which and why). The CPU backend runs the same
lowered kernel in :mod:`tilelab.interp`. :class:`Launcher` (:mod:`.launcher`) is the
machinery of one kernel.

Example:
    >>> from tilelab.runtime.launch import DRIVER, Launcher
    >>> DRIVER.path in (None, "native", "driver", "cuda.core")
    True
"""
from .arguments import to_kernel_arg
from .driver import DRIVER, DriverPath
from .launcher import FirstLaunch, Launcher
from .plan import LaunchPlan, make_plan
from .prepared import PreparedLaunch

# names that code outside the package imports from here under their former names
# (tests/kernels/test_host_calls.py, benchmarks/host/runtime.py)
from .prepared import _pack_params, all_tilelab_args as _native  # noqa: F401

__all__ = ["DRIVER", "DriverPath", "FirstLaunch", "LaunchPlan", "Launcher", "PreparedLaunch",
           "make_plan", "to_kernel_arg"]
