"""The options of ``%%tile``, checked once and kept in one object.

Why: the magic's arguments come from a command line the user typed; every mistake
(an unknown view, an arch tileiras does not know, a GPU the roofline table lacks) should be
reported before the cell runs, naming the option and the valid choices.

Example:
    >>> v = parse_show("+sass,-roofline")
    >>> "sass" in v, "roofline" in v
    (True, False)
    >>> resolve_views(parse_show("all")) == VIEWS
    True
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["VIEWS", "DEFAULT_VIEWS", "VIEW_MODES", "TileOptions", "parse_show",
           "resolve_views", "OptionError", "parse_predict_at"]

#: every view ``--show`` accepts, in tab order
VIEWS = ("tileir", "safety", "lowered", "ptx", "sass", "resources", "remarks", "ownership",
         "roofline", "timings")
#: the views shown without ``--show``: what explains a kernel; PTX and SASS are long
#: listings and are added with ``--show +ptx,+sass`` (or ``--show all``)
DEFAULT_VIEWS = ("tileir", "safety", "lowered", "resources", "remarks", "ownership",
                 "roofline", "timings")
#: how a view is published: ``auto`` (widget when a widget frontend is there), ``widget``
#: or ``html`` (static tabs only); ``$TILELAB_LAB_VIEW`` sets the default
VIEW_MODES = ("auto", "widget", "html")


class OptionError(ValueError):
    """A ``%%tile`` option has a value it cannot take (the message names both).

    Example:
        >>> try:
        ...     parse_show("tile_ir")
        ... except OptionError as e:
        ...     print(str(e).split(";")[0])
        --show: unknown view 'tile_ir'
    """


def parse_show(text: str | None) -> tuple[str, ...]:
    """The views of a ``--show`` value: a comma list, ``all``, or ``+view``/``-view``
    changes to the default set. Returned in tab order.

    Example:
        >>> parse_show("ptx, timings")
        ('ptx', 'timings')
        >>> parse_show(None) == DEFAULT_VIEWS
        True
    """
    if text is None or not text.strip():
        return DEFAULT_VIEWS
    items = [t.strip().lower() for t in text.split(",") if t.strip()]
    relative = all(t[0] in "+-" for t in items)
    chosen = set(DEFAULT_VIEWS) if relative else set()
    for item in items:
        sign, name = (item[0], item[1:].strip()) if item[0] in "+-" else ("", item)
        if name == "all":
            names = set(VIEWS)
        elif name in VIEWS:
            names = {name}
        else:
            raise OptionError(f"--show: unknown view {name!r}; choose from "
                              f"{', '.join(VIEWS)} or 'all' (prefix + or - to change the "
                              f"default: {', '.join(DEFAULT_VIEWS)})")
        if sign == "-":
            chosen -= names
        else:
            chosen |= names
    return resolve_views(chosen)


def resolve_views(views: Any) -> tuple[str, ...]:
    """Views in tab order (see :data:`VIEWS`).

    Example:
        >>> resolve_views({"timings", "ptx"})
        ('ptx', 'timings')
    """
    return tuple(v for v in VIEWS if v in set(views))


def _gpus(text: str | None) -> tuple[str, ...]:
    """The GPUs ``--roofline`` names (``all``: B200, RTX 5090, H200), or () for the
    default: the GPU of ``--arch`` (and the one the cell ran on)."""
    from tilelab.perf.specs import ROOFLINE_GPUS, lookup_gpu

    if text is None:
        return ()
    if text.strip().lower() == "all":
        return tuple(ROOFLINE_GPUS)
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise OptionError("--roofline needs at least one GPU, e.g. --roofline h200,b200")
    out = []
    for n in names:
        try:
            out.append(lookup_gpu(n).key)
        except KeyError as e:
            raise OptionError(f"--roofline: {getattr(e, 'message', e)}") from None
    return tuple(dict.fromkeys(out))


_SIZE = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*(\d[\d_]*)\s*(?:(\*\*|<<)\s*(\d+))?\s*$")


def parse_predict_at(text: str | None) -> tuple[tuple[str, int], ...]:
    """The sizes of ``--predict-at``: ``NAME=VALUE`` items, comma separated; a value is
    a whole number, ``2**26`` or ``1<<26``.

    Example:
        >>> parse_predict_at("n=2**26, S=4096")
        (('n', 67108864), ('S', 4096))
        >>> parse_predict_at(None)
        ()
    """
    if text is None or not text.strip():
        return ()
    out = []
    for item in text.split(","):
        m = _SIZE.match(item)
        if m is None:
            raise OptionError(f"--predict-at: {item.strip()!r} is not NAME=VALUE (a whole "
                              "number, 2**k or 1<<k), e.g. --predict-at n=2**26")
        base = int(m.group(2).replace("_", ""))
        value = (base if m.group(3) is None else base ** int(m.group(4))
                 if m.group(3) == "**" else base << int(m.group(4)))
        if value < 1:
            raise OptionError(f"--predict-at: {m.group(1)} must be at least 1, got {value}")
        out.append((m.group(1), value))
    return tuple(out)


@dataclass(frozen=True)
class TileOptions:
    """Everything ``%%tile``'s command line decided.

    ``kernel_options`` are the ``tl.kernel`` options given to the functions the magic turns
    into kernels (only the non-default ones); ``run`` is False for ``--no-run``;
    ``roofline_gpus`` the GPUs ``--roofline`` named (empty: the GPU of ``--arch``);
    ``predict_at`` the sizes ``--predict-at`` named.

    Example:
        >>> o = TileOptions.from_args(backend="cpu", arch="sm_80", unsafe=True)
        >>> o.arch, o.kernel_options, o.views == DEFAULT_VIEWS
        ('sm_80', {'unsafe': True}, True)
    """

    arch: str = "sm_90"
    backend: str | None = None
    views: tuple[str, ...] = DEFAULT_VIEWS
    bench: bool = False
    run: bool = True
    roofline_gpus: tuple[str, ...] = ()
    save: str | None = None
    force: bool = False
    view_mode: str = "auto"
    kernel_options: dict[str, Any] = field(default_factory=dict)
    predict_at: tuple[tuple[str, int], ...] = ()

    @classmethod
    def from_args(cls, *, arch: str | None = None, backend: str | None = None,
                  show: str | None = None, bench: bool = False, no_run: bool = False,
                  roofline: str | None = None, save: str | None = None, force: bool = False,
                  view: str | None = None, unsafe: bool = False, no_check_bounds: bool = False,
                  occupancy: int | None = None, num_ctas: int | None = None,
                  opt_level: int | None = None, predict_at: str | None = None
                  ) -> "TileOptions":
        """Check the raw option values; raises :class:`OptionError` naming the bad one.

        Example:
            >>> TileOptions.from_args(show="ptx", no_run=True).run
            False
        """
        from tilelab.compiler.definition import KernelOptions
        from tilelab.compiler.export import check_arch
        from tilelab.errors import TilelabError

        if backend is not None and backend not in ("cpu", "gpu"):
            raise OptionError(f"--backend must be cpu or gpu, got {backend!r}")
        if backend == "gpu":
            from tilelab.runtime.device import gpu

            try:
                gpu()
            except TilelabError as e:
                raise OptionError(f"--backend gpu: {e.message}; use --backend cpu to run on "
                                  "the CPU interpreter") from None
        if arch is None:
            from tilelab.runtime.device import current_arch

            arch = current_arch() or "sm_90"
        try:
            arch = check_arch(arch)
        except (TilelabError, ValueError) as e:
            raise OptionError(f"--arch: {getattr(e, 'message', e)}") from None
        from tilelab import config

        try:
            mode = view or config.lab_view()
        except TilelabError as e:  # a bad $TILELAB_LAB_VIEW: say so before the cell runs
            raise OptionError(f"--view: {e.message}") from None
        if mode not in VIEW_MODES:
            raise OptionError(f"--view (or $TILELAB_LAB_VIEW) must be one of "
                              f"{', '.join(VIEW_MODES)}, got {mode!r}")
        kopts: dict[str, Any] = {}
        if unsafe:
            kopts["unsafe"] = True
        if no_check_bounds:
            kopts["check_bounds"] = False
        for name, value in (("occupancy", occupancy), ("num_ctas", num_ctas),
                            ("opt_level", opt_level)):
            if value is not None:
                kopts[name] = value
        try:
            KernelOptions(**kopts)
        except ValueError as e:
            flag = "--" + str(e).split(" ")[0].replace("_", "-")
            raise OptionError(f"{flag}: {e}") from None
        return cls(arch=arch, backend=backend, views=parse_show(show), bench=bench,
                   run=not no_run, roofline_gpus=_gpus(roofline), save=save, force=force,
                   view_mode=mode, kernel_options=kopts,
                   predict_at=parse_predict_at(predict_at))
