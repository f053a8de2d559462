"""The Resources tab: what a compiled kernel takes from an SM, and how many blocks fit.

Why: the cubin records registers, threads and shared memory per block, but a reader wants
the consequence: how many blocks of this kernel one SM holds at a time, which resource
stops the next one, and the occupancy (resident warps over the SM's maximum) — the
numbers the notebooks would otherwise compute by hand. The count is
:func:`tilelab.perf.predict_model.blocks_per_sm`, the one the time prediction uses, so
the tab and the roofline agree; the table beside it shows each limit's own count from the
same per-SM limits (:data:`~tilelab.perf.predict_model.SM_LIMITS`). ``min blocks/SM``
(PTX ``.minnctapersm``) is a request made to the compiler, not a count of what fits, and
the tab says so.

Example:
    >>> from tilelab.compiler.binary.resources import Resources
    >>> occ = occupancy(Resources("k", "sm_90a", registers=255, block_dim=(256, 1, 1),
    ...                           shared_bytes=107824))
    >>> occ.blocks, occ.limited_by, f"{occ.occupancy:.1%}"
    (1, ('registers',), '12.5%')
"""
from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass
from typing import Any

from tilelab.perf.predict_model import SM_LIMITS, blocks_per_sm

__all__ = ["Limit", "Occupancy", "base_arch", "occupancy", "resources_html",
           "resources_text", "HINT"]

#: what ``min blocks/SM`` is (the cubin's ``.minnctapersm``), said wherever it is shown
HINT = ("a compiler hint (PTX .minnctapersm, set by ct.kernel(occupancy=N) or %%tile "
        "--occupancy N): ptxas keeps registers low enough that at least this many blocks "
        "could be resident; it is not how many fit")

_ARCH = re.compile(r"^sm_(\d+)[a-z]?$")


def base_arch(arch: str | None) -> str | None:
    """The compute capability of an arch name, without its feature suffix
    (``sm_90a`` → ``sm_90``); None for a name that is not ``sm_NN``.

    Example:
        >>> base_arch("sm_90a"), base_arch("sm_120f"), base_arch("compute_90")
        ('sm_90', 'sm_120', None)
    """
    m = _ARCH.match(arch or "")
    return f"sm_{m.group(1)}" if m else None


@dataclass(frozen=True)
class Limit:
    """One per-SM limit: what a block takes, what the SM has, and how many blocks that
    allows (None: the block takes none of it, so it does not limit).

    Example:
        >>> Limit("threads", 256, 2048, 8, "256 threads", "2048 threads").fits
        8
    """

    name: str
    per_block: int
    per_sm: int
    fits: int | None
    per_block_text: str
    per_sm_text: str


@dataclass(frozen=True)
class Occupancy:
    """How many blocks of a kernel one SM of ``arch`` holds, and why.

    ``blocks`` is :func:`~tilelab.perf.predict_model.blocks_per_sm`; ``limits`` the count
    each limit allows on its own; ``limited_by`` the names of the smallest (ties named
    together); ``occupancy`` resident warps over the SM's maximum warps.

    Example:
        >>> from tilelab.compiler.binary.resources import Resources
        >>> occupancy(Resources("k", "sm_90", registers=24, block_dim=(128, 1, 1))).summary()
        'blocks/SM that fit: 16 (limited by threads), occupancy 64 of 64 warps = 100%'
    """

    arch: str
    blocks: int
    limits: tuple[Limit, ...]
    limited_by: tuple[str, ...]
    warps_per_block: int
    max_warps: int

    @property
    def warps(self) -> int:
        """Resident warps per SM."""
        return self.blocks * self.warps_per_block

    @property
    def occupancy(self) -> float:
        """Resident warps over the SM's maximum (0..1)."""
        return self.warps / self.max_warps

    def summary(self) -> str:
        """One line: blocks that fit, the limit, the occupancy."""
        return (f"blocks/SM that fit: {self.blocks} (limited by "
                f"{' and '.join(self.limited_by)}), occupancy {self.warps} of "
                f"{self.max_warps} warps = {_percent(self.occupancy)}")


def _percent(x: float) -> str:
    p = 100 * x
    return f"{p:.0f}%" if abs(p - round(p)) < 0.05 else f"{p:.1f}%"


def _kib(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB".replace(".0 KiB", " KiB")


def _positive(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and value > 0 else None


def occupancy(resources: Any, arch: str | None = None) -> Occupancy | None:
    """The residency of a kernel with these :class:`~tilelab.compiler.binary.resources.Resources`
    on an SM of ``arch`` (default: the resources' own arch), or None where the threads
    per block or the arch's limits are unknown.

    Shared memory counts the static and the reserved bytes of a block, as the time
    prediction does.

    Example:
        >>> from tilelab.compiler.binary.resources import Resources
        >>> occ = occupancy(Resources("k", "sm_90a", registers=64, block_dim=(256, 1, 1),
        ...                           shared_bytes=9296))
        >>> [(l.name, l.fits) for l in occ.limits]
        [('registers', 4), ('shared memory', 25), ('threads', 8), ('block slots', 32)]
    """
    cc = base_arch(arch or getattr(resources, "arch", None))
    lim = SM_LIMITS.get(cc or "")
    threads = _positive(getattr(resources, "threads_per_block", None))
    if lim is None or threads is None:
        return None
    regs = _positive(getattr(resources, "registers", None))
    shared = (_positive(getattr(resources, "shared_bytes", None)) or 0) + (
        _positive(getattr(resources, "reserved_shared_bytes", None)) or 0)
    limits = []
    if regs:
        limits.append(Limit("registers", regs * threads, lim.registers,
                            lim.registers // (regs * threads),
                            f"{regs} × {threads} threads = {regs * threads}",
                            f"{lim.registers}"))
    limits.append(Limit("shared memory", shared, lim.shared_bytes,
                        lim.shared_bytes // shared if shared else None, _kib(shared),
                        _kib(lim.shared_bytes)))
    limits.append(Limit("threads", threads, lim.threads, lim.threads // threads,
                        str(threads), str(lim.threads)))
    limits.append(Limit("block slots", 1, lim.blocks, lim.blocks, "1", str(lim.blocks)))
    blocks, _why = blocks_per_sm(cc, threads, regs, shared or None)
    fewest = min(l.fits for l in limits if l.fits is not None)
    named = tuple(l.name for l in limits if l.fits == fewest)
    return Occupancy(cc, blocks, tuple(limits), named, math.ceil(threads / 32),
                     lim.threads // 32)


def _rows_without_hint(resources: Any) -> tuple[str, int | None]:
    """The compiler's resource summary without its ``min blocks/SM`` row (shown, with
    what it means, under the occupancy), and that row's value."""
    hint = getattr(resources, "min_blocks_per_sm", None)
    text = "\n".join(line for line in str(resources).splitlines()
                     if not line.strip().startswith("min blocks/SM"))
    return text, hint


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _unknown(resources: Any, arch: str | None) -> str:
    cc = base_arch(arch or getattr(resources, "arch", None))
    if cc is not None and cc not in SM_LIMITS:
        return (f"blocks/SM that fit: unknown for {cc} (tilelab.perf.predict_model.SM_LIMITS "
                f"holds the per-SM limits of {', '.join(SM_LIMITS)})")
    return "blocks/SM that fit: unknown (the cubin records no threads per block)"


def resources_text(resources: Any, arch: str | None = None) -> str:
    """The Resources tab as plain text: the compiler's summary, the occupancy and the
    ``min blocks/SM`` hint explained.

    Example:
        >>> from tilelab.compiler.binary.resources import Resources
        >>> print(resources_text(Resources("k", "sm_90a", registers=40,
        ...                                block_dim=(128, 1, 1), min_blocks_per_sm=1)))
        k (sm_90a)
          registers      40 per thread
          threads/block  128 (required 128x1x1)
          shared memory  0 B static
        on an sm_90 SM: blocks/SM that fit: 12 (limited by registers), occupancy 48 of 64 warps = 75%
        min blocks/SM 1: a compiler hint (PTX .minnctapersm, set by ct.kernel(occupancy=N) or %%tile --occupancy N): ptxas keeps registers low enough that at least this many blocks could be resident; it is not how many fit
    """
    text, hint = _rows_without_hint(resources)
    occ = occupancy(resources, arch)
    lines = [text, f"on an {occ.arch} SM: {occ.summary()}" if occ else
             _unknown(resources, arch)]
    if hint is not None:
        lines.append(f"min blocks/SM {hint}: {HINT}")
    return "\n".join(lines)


def _table(occ: Occupancy) -> str:
    rows = []
    for l in occ.limits:
        fits = "no limit" if l.fits is None else str(l.fits)
        mark = ' class="tl-limit"' if l.name in occ.limited_by else ""
        rows.append(f"<tr{mark}><td>{_esc(l.name)}</td><td>{_esc(l.per_block_text)}</td>"
                    f"<td>{_esc(l.per_sm_text)}</td><td>{fits}</td></tr>")
    return ('<table class="tl-table tl-occupancy"><thead><tr><th>limit</th><th>one block '
            f"takes</th><th>an {_esc(occ.arch)} SM has</th><th>blocks that fit</th></tr>"
            "</thead><tbody>" + "".join(rows) + "</tbody></table>")


def resources_html(resources: Any, arch: str | None = None) -> str:
    """The Resources tab of one compiled kernel as HTML: the compiler's summary, the
    blocks that fit per SM with the limit that stops them and the occupancy, a table of
    every limit, and ``min blocks/SM`` explained as the hint it is.

    Example:
        >>> from tilelab.compiler.binary.resources import Resources
        >>> page = resources_html(Resources("k", "sm_90", registers=24, block_dim=(128, 1, 1)))
        >>> "blocks/SM that fit: 16" in page and "limited by threads" in page
        True
    """
    text, hint = _rows_without_hint(resources)
    occ = occupancy(resources, arch)
    parts = [f'<pre class="tl-code">{_esc(text)}</pre>']
    if occ is None:
        parts.append(f'<p class="tl-occ">{_esc(_unknown(resources, arch))}</p>')
    else:
        parts.append(f'<p class="tl-occ"><b>{_esc(occ.summary())}</b> on an '
                     f"{_esc(occ.arch)} SM</p>" + _table(occ))
        parts.append('<p class="tl-note">Occupancy = resident warps over the SM\'s maximum '
                     f"({occ.max_warps}); the count is the one the time prediction uses "
                     "(tilelab.perf.predict_model.blocks_per_sm): each limit divided evenly, "
                     "without the hardware's allocation granularity.</p>")
    if hint is not None:
        parts.append(f'<p class="tl-note">min blocks/SM {int(hint)}: {_esc(HINT)}.</p>')
    return "".join(parts)
