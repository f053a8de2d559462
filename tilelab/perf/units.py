"""How perf's numbers are written: rates, bandwidths, byte counts, durations and
intensities with SI (or binary) prefixes and a fixed number of significant digits.

Why: every view of a measurement (the roofline's labels, the prediction's verdict, the
lab's tables, the demo's summary) writes the same quantity the same way. The functions
are re-exported by :mod:`tilelab.perf.roofline`, where the notebooks import them.
"""
from __future__ import annotations

import math
from typing import Sequence

__all__ = ["format_flops", "format_bandwidth", "format_seconds", "format_bytes",
           "format_intensity"]

_PREFIXES = ("", "k", "M", "G", "T", "P", "E")
_SMALL = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"), (1e-12, "ps"))


def _si(value: float | None, unit: str, digits: int, base: int = 1000,
        prefixes: Sequence[str] = _PREFIXES) -> str:
    """``value`` with an SI (or binary) prefix and ``digits`` significant digits."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if math.isinf(value):
        return f"{'-' if value < 0 else ''}inf {unit}"
    if value == 0:
        return f"0 {unit}"
    sign, mag = ("-" if value < 0 else ""), abs(value)
    step = min(max(int(math.floor(math.log(mag, base) + 1e-12)), 0), len(prefixes) - 1)
    mant = float(f"{mag / base ** step:.{digits}g}")
    if mant >= base and step < len(prefixes) - 1:
        step += 1
        mant = float(f"{mag / base ** step:.{digits}g}")
    return f"{sign}{mant:g} {prefixes[step]}{unit}"


def format_flops(value: float | None, unit: str = "FLOP/s", digits: int = 4) -> str:
    """A rate with an SI prefix: FLOP/s (pass ``unit='OP/s'`` for INT8).

    Example:
        >>> format_flops(7.3e14), format_flops(2.25e15), format_flops(None)
        ('730 TFLOP/s', '2.25 PFLOP/s', 'n/a')
    """
    return _si(value, unit, digits)


def format_bandwidth(value: float | None, digits: int = 4) -> str:
    """A bandwidth in decimal B/s units, as vendors quote them.

    Example:
        >>> format_bandwidth(4.8e12), format_bandwidth(864e9)
        ('4.8 TB/s', '864 GB/s')
    """
    return _si(value, "B/s", digits)


def format_bytes(value: float | None, binary: bool = False, digits: int = 4) -> str:
    """A byte count: decimal (kB, MB, ...) by default, binary (KiB, MiB, ...) on request.

    Example:
        >>> format_bytes(100663296), format_bytes(141 * 2**30, binary=True)
        ('100.7 MB', '141 GiB')
    """
    if binary:
        return _si(value, "B", digits, 1024, ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))
    return _si(value, "B", digits)


def format_seconds(value: float | None, digits: int = 4) -> str:
    """A duration in s, ms, µs, ns or ps.

    Example:
        >>> format_seconds(1.5e-6), format_seconds(0.0123), format_seconds(2.5)
        ('1.5 µs', '12.3 ms', '2.5 s')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if value <= 0 or value >= 1:
        return f"{float(f'{value:.{digits}g}'):g} s"
    for scale, unit in _SMALL:
        if value >= scale * (1 - 5e-13):
            mant = float(f"{value / scale:.{digits}g}")
            if mant >= 1000 and scale < 1:
                return f"{float(f'{value / (scale * 1000):.{digits}g}'):g} {_unit_above(unit)}"
            return f"{mant:g} {unit}"
    return f"{float(f'{value / 1e-12:.{digits}g}'):g} ps"


def _unit_above(unit: str) -> str:
    names = [u for _, u in _SMALL]
    return names[names.index(unit) - 1]


def format_intensity(value: float | None, digits: int = 4) -> str:
    """An arithmetic intensity in FLOP/B (no prefix: ridge points are 1 to 1000s).

    Example:
        >>> format_intensity(206.1458), format_intensity(0.0833333)
        ('206.1 FLOP/B', '0.08333 FLOP/B')
    """
    if value is None:
        return "n/a"
    return f"{float(f'{value:.{digits}g}'):g} FLOP/B"
