"""The lab's figures: ownership diagrams, the roofline, and what draws them.

The bottom wing of :mod:`tilelab.lab`: it imports no other wing, and the report, the views
and the course draw with it. A new figure goes here.

Modules, one job each: :mod:`~tilelab.lab.figures.svg` (a small SVG scene),
:mod:`~tilelab.lab.figures.theme` (light and dark looks),
:mod:`~tilelab.lab.figures.ownership` (which block owns which tile; its parts
``ownership_data``, ``ownership_launch``, ``ownership_race`` and ``ownership_svg``),
:mod:`~tilelab.lab.figures.roofline_plot` (launches as roofline points; drawn by
``roofline_svg``) and :mod:`~tilelab.lab.figures.images` (a figure as a tab shows it).
"""
