"""Matrix multiplication: GEMM, batched GEMM, split-K and GEMV (the host functions, their
configurations and their kernels).

The family is three modules: :mod:`~tilelab.kernels.matmul.host` (the host functions and
their launches), :mod:`~tilelab.kernels.matmul.config` (:class:`MatmulConfig`, the tuned
defaults and the search space) and :mod:`~tilelab.kernels.matmul.kernels` (the safe
kernels). This package hands on their public names; the planning and tuning ones are also
in :mod:`tilelab.kernels.tuning`.

Example:
    >>> import tilelab as tl
    >>> from tilelab.kernels.matmul import MatmulConfig, matmul
    >>> a = tl.randn(64, 48, dtype="bf16", device="cpu", seed=0)
    >>> matmul(a, a.T.contiguous(), config=MatmulConfig(tm=32, tn=32, tk=16)).shape
    (64, 64)
"""
from tilelab.kernels.matmul.host import (
    ACTIVATIONS, SCHEDULES, SPLIT_MODES, MatmulConfig, Plan, batched_matmul_kernel, bmm,
    compile_matmul, default_config, gemv, gemv_kernel, gemv_rows_kernel, matmul,
    matmul_kernel, persistent_matmul_kernel, plan_bmm, plan_matmul, search_space,
    splitk_atomic_kernel, splitk_partial_kernel, splitk_reduce_kernel)

__all__ = [
    "MatmulConfig", "ACTIVATIONS", "SCHEDULES", "Plan", "default_config", "search_space",
    "matmul", "bmm", "gemv", "plan_matmul", "plan_bmm", "compile_matmul",
    "matmul_kernel", "persistent_matmul_kernel", "batched_matmul_kernel",
    "splitk_partial_kernel", "splitk_reduce_kernel", "splitk_atomic_kernel", "gemv_kernel",
    "gemv_rows_kernel", "SPLIT_MODES",
]
