"""The lab measured: the suite's ``lab`` group and the course notebooks on a device.

- :mod:`~benchmarks.lab.render`: a warm ``%%tile`` cell run and drawn through IPython;
- :mod:`~benchmarks.lab.notebooks`: the course notebooks run without IPython
  (``python -m benchmarks.lab.notebooks``).
"""
