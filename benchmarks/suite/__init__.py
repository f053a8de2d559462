"""The suite behind ``python -m benchmarks``: named groups, each a set of cases (checked
against a reference, then timed beside their baselines in the same run) and/or a
function that measures something else.

The modules, in the order a run goes through them:

- :mod:`~benchmarks.suite.cli`: the options, the run, the JSON (``python -m benchmarks``);
- :mod:`~benchmarks.suite.groups`: the table of groups, in run order;
- :mod:`~benchmarks.suite.engine`: running a group in this process or in a child;
- :mod:`~benchmarks.suite.cases`: the cases of the case groups (ops, shapes, work);
- :mod:`~benchmarks.suite.data`: their inputs, on the device;
- :mod:`~benchmarks.suite.kernels`: the implementations of each op (its table of
  sources: the library function, the tour stand-in, the raw twins);
- :mod:`~benchmarks.suite.tuning`: the tuning spaces, and the raw twins' tiles;
- :mod:`~benchmarks.suite.run`: one case: correctness first, then timings and figures;
- :mod:`~benchmarks.suite.report`: summary, targets, tables, the roofline PNG;
- :mod:`~benchmarks.suite.compare`: each case against the previous results of the GPU.

A group function lives with what it measures (:mod:`benchmarks.host`,
:mod:`benchmarks.lab`, :mod:`benchmarks.device`, :mod:`benchmarks.decode`); the raw
cuTile twins are in :mod:`benchmarks.baselines`.
"""
