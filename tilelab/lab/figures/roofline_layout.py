"""Where the roofline's labels and markers go: free places for labels, markers kept apart.

Why: a roofline is read by its labels, so none may sit on another label, on a ceiling or
on a marker, and each must sit beside its own point; and markers of points closer than a
marker's width must not hide each other. These are plain geometry on rectangles, segments
and centres in pixels, apart from the drawing (:mod:`tilelab.lab.figures.roofline_svg`),
so they are tested on their own.

Example:
    >>> spread_markers([(0, 0), (0, 0)], 10)
    [(0, 0), (0, -10)]
"""
from __future__ import annotations

import math
from typing import Sequence

__all__ = ["Rect", "place_labels", "rect_hits_segment", "spread_markers"]

Rect = tuple[float, float, float, float]           # x0, y0, x1, y1


def _overlap(a: Rect, b: Rect) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def rect_hits_segment(r: Rect, p: tuple[float, float], q: tuple[float, float]) -> bool:
    """Whether the segment p-q crosses or touches the inside of rectangle ``r``.

    Example:
        >>> rect_hits_segment((0, 0, 10, 10), (-5, 5), (15, 5)), \\
        ...     rect_hits_segment((0, 0, 10, 10), (-5, 20), (15, 20))
        (True, False)
    """
    x0, y0, x1, y1 = r
    t0, t1 = 0.0, 1.0
    dx, dy = q[0] - p[0], q[1] - p[1]
    for d, lo, hi, start in ((dx, x0, x1, p[0]), (dy, y0, y1, p[1])):
        if abs(d) < 1e-12:
            if not lo < start < hi:
                return False
            continue
        a, b = (lo - start) / d, (hi - start) / d
        a, b = min(a, b), max(a, b)
        t0, t1 = max(t0, a), min(t1, b)
        if t0 >= t1:
            return False
    return True


def place_labels(anchors: Sequence[tuple[float, float, float, float, float]],
                 obstacles: Sequence[Rect], segments: Sequence[tuple[tuple, tuple]],
                 bounds: Rect) -> list[tuple[Rect, bool]]:
    """Place one label per anchor ``(x, y, width, height, gap)``: the first candidate
    position around the anchor (right, above-right, above, ... at growing distance) whose
    rectangle stays inside ``bounds`` and touches no placed label, no obstacle rectangle
    and no segment. Returns ``(rect, moved)`` per anchor; ``moved`` means it sits away
    from its anchor (draw a leader line). Without any free place the least-crowded
    candidate is used.

    Example:
        >>> (r1, _), (r2, _) = place_labels([(50, 50, 30, 10, 4), (50, 50, 30, 10, 4)], [],
        ...                                 [], (0, 0, 200, 200))
        >>> r1 != r2 and not (r1[0] < r2[2] and r2[0] < r1[2] and r1[1] < r2[3]
        ...                   and r2[1] < r1[3])
        True
    """
    placed: list[Rect] = []
    out = []
    dirs = ((1, 0), (1, -1), (0, -1), (-1, -1), (-1, 0), (-1, 1), (0, 1), (1, 1))
    for x, y, w, h, gap in anchors:
        best, best_cost = None, math.inf
        for ring in range(6):
            d = gap + ring * 12.0
            for ux, uy in dirs:
                cx = x + ux * d + (0 if ux > 0 else -w if ux < 0 else -w / 2)
                cy = y + uy * d + (-h / 2 if uy == 0 else -h if uy < 0 else 0)
                r = (cx, cy, cx + w, cy + h)
                inside = (r[0] >= bounds[0] and r[1] >= bounds[1] and r[2] <= bounds[2]
                          and r[3] <= bounds[3])
                cost = (0 if inside else 100) + sum(_overlap(r, o) for o in placed) * 10 \
                    + sum(_overlap(r, o) for o in obstacles) * 5 \
                    + sum(rect_hits_segment(r, p, q) for p, q in segments) * 3 + ring * 0.1
                if cost < best_cost:
                    best, best_cost = (r, ring > 0), cost
            if best_cost < 1:
                break
        placed.append(best[0])
        out.append(best)
    return out


def spread_markers(centres: Sequence[tuple[float, float]],
                   distance: float) -> list[tuple[float, float]]:
    """Where to draw markers so that no two centres are closer than ``distance`` px.

    Markers are taken in order; one that is clear of the markers already placed stays at
    its centre, one that is not moves ``distance`` (then 2×, 3× ``distance``) away from
    its centre: first straight away from the nearest placed marker, else in the first
    free compass direction (up, right, down, left, then the diagonals). The result
    depends only on the input, so a figure draws the same way every time.

    Example:
        >>> spread_markers([(100, 100), (101, 100), (300, 50)], 14)
        [(100, 100), (115.0, 100.0), (300, 50)]
    """
    compass = ((0, -1), (1, 0), (0, 1), (-1, 0), (0.7071, -0.7071), (0.7071, 0.7071),
               (-0.7071, 0.7071), (-0.7071, -0.7071))
    placed: list[tuple[float, float]] = []

    def clear(p: tuple[float, float]) -> bool:
        return all(math.dist(p, q) >= distance - 1e-9 for q in placed)

    for x, y in centres:
        at = (x, y)
        if not clear(at):
            near = min(placed, key=lambda q: math.dist(at, q))
            gap = math.dist(at, near)
            away = ((x - near[0]) / gap, (y - near[1]) / gap) if gap > 1e-9 else (0, -1)
            tries = [(x + ux * distance * k, y + uy * distance * k)
                     for k in (1, 2, 3) for ux, uy in (away,) + compass]
            at = next((p for p in tries if clear(p)), tries[0])
        placed.append(at)
    return placed
