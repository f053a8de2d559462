"""What a ``%%tile`` cell asked for and what it produced: options, launches, measurements.

Above :mod:`tilelab.lab.figures` (a report holds its figures), below the views that show
it. Modules, one job each: :mod:`~tilelab.lab.report.options` (the magic's options and
the views they name), :mod:`~tilelab.lab.report.record` (the launches a cell makes),
:mod:`~tilelab.lab.report.measure` (count, time and place a launch on the roofline),
:mod:`~tilelab.lab.report.debuginfo` (which source line each Tile IR op came from) and
:mod:`~tilelab.lab.report.cell_report` (everything a cell produced, gathered once).
"""
