"""Host-side helpers of the kernel library, in one namespace: running a call's launches
(synchronously or asynchronously), the two caches that make a repeated call cheap, and
the argument checks, tile picking and schedules the host functions share.

Why this exists: a library call such as ``matmul(a, b, out=c)`` validates its
arguments, wraps foreign arrays (torch, numpy) as tensors, makes views and partitions,
picks a config and only then launches. Done from scratch on every call this costs tens
of microseconds of Python, and it hands the runtime *new* view, partition and scalar
objects every time, so the runtime's prepared-launch path (which recognises a launch
repeated with the very same argument objects) never fires. Two caches fix that:

* **Foreign wrappers** (:func:`as_tensor`): the ``tl.Tensor`` borrowing a torch tensor or
  a numpy array is reused for as long as the array still describes the same memory —
  pointer, shape, strides, dtype, device, read-only flag (numpy) and ``requires_grad``
  (torch) are compared on *every* use — and, for a CUDA torch tensor, torch's current
  stream, which the wrapper was borrowed on and its launches run on
  (:mod:`tilelab.runtime.foreign`): under another current stream it is wrapped again.
  Other producers (cupy, jax, ...) are wrapped per call.
* **Prepared calls** (:class:`CallCache`): when a call's outputs are given (``out=``),
  its launches — kernels and their exact argument objects — are kept, keyed by the
  identity of every tensor passed and the value of every other argument. The same call
  again relaunches them: same objects, so the runtime's prepared launch is reused. A
  call repeated with the very same argument objects is found by their identities
  alone, without building that key, and its torch tensors are checked all at once
  (:class:`~tilelab.kernels._host.wrappers.TorchState`): the same checks, in a few C calls.

What may never happen is a cached call computing with stale data or writing into the
wrong buffer, so an entry is only made when every tensor a launch reads is a view of a
tensor the caller passed (read live at each launch), of a library constant, or of
scratch an earlier launch of the same call writes in full. A plan that copied an input
(a non-contiguous operand made contiguous, say) is never cached. Outputs the library
allocates (``out=None``) are fresh per call, so such calls are never cached either.
Cached entries hold the caller's tensors only weakly: an entry disappears when one of
them is collected, so an ``id`` can never name another object.

Example:
    >>> import tilelab as tl
    >>> from tilelab.kernels import add
    >>> x = tl.ones(8, device="cpu"); z = tl.empty(8, device="cpu")
    >>> out, fut = add(x, x, out=z, sync=False)
    >>> fut.wait(); out.numpy()[:2]
    array([2., 2.], dtype=float32)

Where the code lives: :mod:`tilelab.kernels._host.plan` (plans, launches, hints, launch
arguments by name), :mod:`tilelab.kernels._host.wrappers` (foreign wrappers),
:mod:`tilelab.kernels._host.calls` (prepared calls, constants, workspaces),
:mod:`tilelab.kernels._host.args` (argument conversion and validation, config hashing) and
:mod:`tilelab.kernels._host.tiles` (tiles, row views, schedules, row-kernel hints). Import
them from here. Beside them, :mod:`tilelab.kernels._host.device` holds the device-side
helpers the library's kernels inline (it is not part of this namespace: kernels import
it by name).
"""
from __future__ import annotations

from tilelab.kernels._host.args import (FLOAT_DTYPES, check_block, check_float,
                                        check_same_device, dtype_name, float_scalar, is_pow2,
                                        output, planning_sms, pow2_ceil, tensor_arg)
from tilelab.kernels._host.calls import (CallCache, cache_info, clear_caches, has_workspace,
                                         hash_once, register_constant, state_without_hash,
                                         workspace)
from tilelab.kernels._host.plan import (Call, PairResult, Plan, TensorResult, done_future, hinted,
                                        launch_args, run_launches)
from tilelab.kernels._host.tiles import (LONG_ROW_WIDTH, LOOP_TILE_N, MAX_GRID_Y, MAX_ROW_TILE,
                                         ONE_PASS_MAX_16BIT, ROW_HINTS, ROW_HINTS_BY_ARCH,
                                         TILE_ELEMS, grid_schedule, long_row_split,
                                         partition_2d, row_kernel, row_schedule, row_tiles,
                                         rows_of, tile_2d)
from tilelab.kernels._host.wrappers import WRAPPER_CAPACITY, as_tensor

# internals that tests and tools reach through this module (the same objects: the cache
# registries, the native-key switch, the key builder)
from tilelab.kernels._host.calls import (_CACHES, _CONSTANTS, _NATIVE, _PLAIN,  # noqa: F401
                                         _WORKSPACE_STORAGES, _WORKSPACES, _Entry, _Tensor,
                                         _Uncacheable, _part, _resolved)
from tilelab.kernels._host.plan import _hinted_copy  # noqa: F401
from tilelab.kernels._host.wrappers import _LOCK, _WRAPPERS, _wrap  # noqa: F401

__all__ = [
    # running launches
    "Plan", "Call", "run_launches", "done_future", "hinted", "launch_args", "TensorResult",
    "PairResult",
    # caches
    "as_tensor", "CallCache", "register_constant", "workspace", "has_workspace",
    "clear_caches", "cache_info", "hash_once", "state_without_hash",
    # arguments
    "FLOAT_DTYPES", "tensor_arg", "check_float", "check_same_device", "is_pow2",
    "pow2_ceil", "check_block", "float_scalar", "dtype_name", "output", "planning_sms",
    # tiles and schedules
    "TILE_ELEMS", "MAX_ROW_TILE", "LOOP_TILE_N", "ONE_PASS_MAX_16BIT", "LONG_ROW_WIDTH",
    "ROW_HINTS", "ROW_HINTS_BY_ARCH", "MAX_GRID_Y", "rows_of", "tile_2d", "long_row_split",
    "row_tiles", "row_kernel", "row_schedule", "grid_schedule", "partition_2d",
    "WRAPPER_CAPACITY",
]
