"""Ownership diagrams: which block owns which tile, what a block reads, where blocks race.

Why: tilelab's safety story is a picture. An output is split into disjoint tiles and every
tile has exactly one owning block, chosen by the schedule (row-major, ``tl.grouped`` swizzle,
persistent blocks looping over several tiles); inputs are shared, and a GEMM block (m, n)
reads a row panel of A and a column panel of B. When a raw kernel gets the store index
wrong (the head-permutation bug), several blocks write the same elements. These figures
draw exactly that, from the very functions the device uses
(:meth:`tilelab.Partition.owners`, :meth:`tilelab.Partition.order`) and from the CPU
interpreter's trace (:meth:`tilelab.interp.Trace.footprint`), so the picture cannot drift
from the truth.

The work is split in three modules, re-exported here:

- :mod:`tilelab.lab.figures.ownership_data` — who owns what (:func:`ownership_data`,
  :func:`race_data`), plain data;
- :mod:`tilelab.lab.figures.ownership_svg` and :mod:`tilelab.lab.figures.ownership_race` —
  the SVG pictures (:func:`ownership_figure`, :func:`reads_figure`, :func:`race_figure`);
- :mod:`tilelab.lab.figures.ownership_launch` — re-running a recorded launch on CPU copies
  of its arguments (:func:`trace_launch`, :func:`trace_args`, :func:`cpu_copy`) and every
  picture of one launch (:func:`ownership_figures`).

Every figure is a :class:`tilelab.lab.figures.svg.SvgFigure`: SVG text whose colours follow
the page's theme, with what it drew in ``fig.tilelab`` (a dict) and ``fig.find(gid)``.

Example:
    >>> import tilelab as tl
    >>> p = tl.zeros((256, 128), device="cpu").partition((64, 64), schedule=tl.grouped(2))
    >>> fig = ownership_figure(p, theme="light")
    >>> fig.tilelab["sections"][0]["owners"].tolist()
    [[0, 2], [1, 3], [4, 6], [5, 7]]
"""
from __future__ import annotations

from tilelab.lab.figures.ownership_data import (OwnershipData, RaceData, ownership_data,
                                                race_data, schedule_label)
from tilelab.lab.figures.ownership_launch import (cpu_copy, ownership_figures, trace_args,
                                                  trace_launch)
from tilelab.lab.figures.ownership_race import race_figure
from tilelab.lab.figures.ownership_svg import ownership_figure, reads_figure

__all__ = ["OwnershipData", "ownership_data", "ownership_figure", "reads_figure",
           "RaceData", "race_data", "race_figure", "ownership_figures", "trace_launch",
           "trace_args", "cpu_copy", "schedule_label"]
