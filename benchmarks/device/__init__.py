"""The device against its datasheet and the library's rules against the device:

- :mod:`~benchmarks.device.ceilings`: the read/write/copy ceilings and the kernels
  against them (the memory group's ``--ceilings``);
- :mod:`~benchmarks.device.gemm_tiles`: big GEMMs with each candidate tile shape, the
  evidence of ``default_config``'s big-problem rule
  (``python -m benchmarks.device.gemm_tiles``);
- :mod:`~benchmarks.device.predict_fit`: the tour and the explorer's grids timed,
  predicted and fitted (``python -m benchmarks.device.predict_fit``).
"""
