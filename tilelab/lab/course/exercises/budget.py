"""Budgets: the bytes (or FLOPs) a kernel exercise may spend, stated in its task and
graded against what the interpreter counted.

Why: a kernel that gives the right values while loading every tile twice, or writing an
intermediate through memory, has missed the point of a fused or tiled kernel. The task
states the budget as a formula in the problem's sizes; the grader works it out for each
hidden case and compares it with the bytes all of the answer's launches moved.

Example:
    >>> b = Budget(12_000, "x and y read once, z written once")
    >>> b.over(16_000, 1)
    'the launch moved 16,000 bytes; the budget is 12,000 (x and y read once, z written once)'
    >>> b.over(12_000, 1) is None
    True
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Budget"]


@dataclass(frozen=True)
class Budget:
    """At most ``limit`` ``unit`` (``"bytes"`` or ``"FLOPs"``), for the reason ``why``.

    Example:
        >>> Budget(10, "w", "FLOPs").over(12, 2)
        'the 2 launches did 12 FLOPs; the budget is 10 (w)'
    """

    limit: int
    why: str
    unit: str = "bytes"

    def over(self, spent: int, launches: int) -> str | None:
        """None within the budget, else what was spent against it."""
        if spent <= self.limit:
            return None
        who = "the launch" if launches == 1 else f"the {launches} launches"
        verb = "moved" if self.unit == "bytes" else "did"
        return f"{who} {verb} {spent:,} {self.unit}; the budget is {self.limit:,} ({self.why})"
