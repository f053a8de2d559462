"""The lab's figures: ownership diagrams, the roofline, and what draws them.

The bottom wing of :mod:`tilelab.lab`: it imports no other wing, and the report, the views
and the course draw with it. A new figure goes here.

Modules, one job each: :mod:`~tilelab.lab.figures.looks` (the light and dark looks and
the page's colour variables), :mod:`~tilelab.lab.figures.theme` (matplotlib in those
looks), :mod:`~tilelab.lab.figures.svg` (a small SVG scene),
:mod:`~tilelab.lab.figures.output` (a figure as a plain cell's output that follows the
page's theme), :mod:`~tilelab.lab.figures.mpl_svg` (a matplotlib chart as such SVG),
:mod:`~tilelab.lab.figures.ownership` (which block owns which tile; its parts
``ownership_data``, ``ownership_launch``, ``ownership_race`` and ``ownership_svg``),
:mod:`~tilelab.lab.figures.roofline_plot` (launches as roofline points; drawn by
``roofline_svg``) and :mod:`~tilelab.lab.figures.images` (a figure as a tab shows it).
"""
