"""The raw cuTile twins the suite times the safe kernels against: the same kernels
written in cuTile Python without tilelab, launched with ``ct.launch``, so that safe vs
raw measures what safety costs and nothing else.

- :mod:`~benchmarks.baselines.raw_kernels`: twins of the tour kernels (add, GEMM);
- :mod:`~benchmarks.baselines.raw_matmul_attention`: twins of the library's GEMM, GEMV
  and flash attention (``*_launch`` helpers).

The fused decode attention's twin sits with its benchmark
(:mod:`benchmarks.decode.rope_attention`).
"""
