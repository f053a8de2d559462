"""The Qwen3 decode engine on the device: tokens/s against transformers, and where a
decode step's time goes.

``python -m benchmarks.decode`` runs :mod:`~benchmarks.decode.throughput` (the suite's
``decode`` group calls its ``run``); each other module with a command line runs as
``python -m benchmarks.decode.<module>``. The modules, from the top down:

- :mod:`~benchmarks.decode.throughput`: the 4B/8B engine against transformers on shared
  random weights (correctness, tokens/s, fraction of the HBM roof, per-kernel breakdown);
- :mod:`~benchmarks.decode.large`: Qwen3-32B on one GPU (weights held once);
- :mod:`~benchmarks.decode.graph`: each kernel kind's cost inside the replayed step;
- :mod:`~benchmarks.decode.tune`: the projection GEMVs' tiles, measured;
- :mod:`~benchmarks.decode.step_attention`: the step's attention forms against SDPA;
- :mod:`~benchmarks.decode.attention`: split-KV decode attention over ``DecodeConfig``
  variants (the decode group's ``--decode-attention``);
- :mod:`~benchmarks.decode.rope_attention`: the fused rope attention against its raw
  twin and the plain pair it replaces;
- :mod:`~benchmarks.decode.readback`: what reading tokens back costs a replayed decode;
- :mod:`~benchmarks.decode.reference`: the transformers side (check, its tokens/s);
- :mod:`~benchmarks.decode.models`: the shapes, the shared-weight models and the run's
  environment, which the others import (so none imports another's command line).
"""
