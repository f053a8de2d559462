"""What tilelab costs the host, the suite's ``runtime``, ``compile`` and ``torch``
groups:

- :mod:`~benchmarks.host.runtime`: launch overhead against bare launches, scalar values,
  graph replay, vector add and the tour GEMM against their baselines
  (``python -m benchmarks.host.runtime`` runs the scalar-values step alone);
- :mod:`~benchmarks.host.compile_times`: cold and warm compiles, the ``tilelab compile``
  command in a new process;
- :mod:`~benchmarks.host.torch_calls`: library calls on torch tensors and streams.
"""
