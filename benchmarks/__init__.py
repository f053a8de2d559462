"""tilelab's benchmarks: one suite entry point, ``python -m benchmarks`` (run from the
repository root), with named groups registered in :data:`benchmarks.suite.groups.GROUPS`,
and scripts run as ``python -m benchmarks.<package>.<module>``.

The packages: :mod:`benchmarks.suite` (the suite's engine), :mod:`benchmarks.host`
(launch, compile and torch-call costs), :mod:`benchmarks.lab` (the lab and the course
notebooks), :mod:`benchmarks.device` (ceilings, tile rules, the prediction model's fit),
:mod:`benchmarks.decode` (the Qwen3 decode engine), :mod:`benchmarks.baselines` (the raw
cuTile twins); :mod:`benchmarks.common` is what they all share. Results go to
``benchmarks/results/`` (see its README).

See benchmarks/README.md for the groups, the options and the methodology.
"""
