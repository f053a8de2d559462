"""How a report is shown: the tabs of a ``%%tile`` view, and the widgets beside them.

Above :mod:`tilelab.lab.report` (a view shows a report), below the cell that builds one.
A new tab goes here. Modules, one job each: :mod:`~tilelab.lab.views.panels` (the
content of each tab), :mod:`~tilelab.lab.views.tabs` (the tabbed view: widget and static
HTML), :mod:`~tilelab.lab.views.linked` (source beside Tile IR, PTX or SASS),
:mod:`~tilelab.lab.views.highlight` (syntax highlighting),
:mod:`~tilelab.lab.views.race_view` (the Race tab),
:mod:`~tilelab.lab.views.timings_table` (the Timings tab) and
:mod:`~tilelab.lab.views.widgets` (sliders that re-run a kernel).
"""
