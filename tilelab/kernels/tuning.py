"""Planning and tuning: choose and inspect what a library call would launch, without
running it.

The ops of :mod:`tilelab.kernels` pick their own tiles; the compute-bound ones take a
config that this namespace names, plans (the launches a call would make, to time or
capture) and compiles (every kernel a call would need, ahead of time), and their search
spaces (what :mod:`tilelab.perf.autotune` sweeps).

===============================  ===========================================================
name                             what it is
===============================  ===========================================================
``MatmulConfig``                 tiles, schedule and split-K of :func:`~tilelab.kernels.matmul`
``plan_matmul``, ``plan_bmm``    the launches of ``matmul``/``bmm``, as a :class:`Plan`
``compile_matmul``               compiles the kernels a ``matmul`` of that shape needs
``matmul_search_space``          the configs autotuning tries for a GEMM shape
``AttentionConfig``              tiles of flash attention (``bm``, ``bn``, persistent)
``DecodeConfig``                 split count and key tile of split-KV decode attention
``plan_attention``,              the launches of ``attention``/``decode_attention``
``plan_decode_attention``
``compile_attention``,           compile the kernels those calls need
``compile_decode_attention``
``attention_search_space``       the configs autotuning tries for an attention shape
``Plan``                         launches to run later, time or record in a graph
===============================  ===========================================================

Example:
    >>> import tilelab as tl
    >>> from tilelab.kernels.tuning import MatmulConfig, plan_matmul
    >>> a = tl.randn(64, 48, dtype="bf16", device="cpu", seed=0)
    >>> b = tl.randn(48, 32, dtype="bf16", device="cpu", seed=1)
    >>> plan = plan_matmul(a, b, config=MatmulConfig(tm=32, tn=32, tk=16))
    >>> plan.run().shape
    (64, 32)
"""
from tilelab.kernels._host import Plan
from tilelab.kernels.attention import (AttentionConfig, DecodeConfig, attention_search_space,
                                       compile_attention, compile_decode_attention,
                                       plan_attention, plan_decode_attention)
from tilelab.kernels.matmul import (MatmulConfig, compile_matmul, plan_bmm, plan_matmul,
                                    search_space as matmul_search_space)

__all__ = ["MatmulConfig", "plan_matmul", "plan_bmm", "compile_matmul", "matmul_search_space",
           "AttentionConfig", "DecodeConfig", "plan_attention", "plan_decode_attention",
           "compile_attention", "compile_decode_attention", "attention_search_space", "Plan"]
