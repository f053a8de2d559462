"""One ``%%tile`` cell, from its text to its report: make kernels, run, collect, save.

The top wing below :mod:`tilelab.lab.magic`, which calls it. Modules, one job each:
:mod:`~tilelab.lab.cell.run` (which functions become kernels, and the steps of a cell),
:mod:`~tilelab.lab.cell.shell` (the body through IPython's own machinery),
:mod:`~tilelab.lab.cell.collect` (recorded launches into a report) and
:mod:`~tilelab.lab.cell.save` (``--save DIR``).
"""
