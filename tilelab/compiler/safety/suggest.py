"""Did-you-mean for names a kernel uses that do not exist.

Why: a typo (``ct.lg``, ``tl.load_lik``, ``lenght``) is the first refusal a newcomer
meets; the checker refuses it anyway (every name must resolve), and the refusal is
useful only when it names the op that was meant. Candidates are the names the spelling
could have meant: a module's public names (``dir(ct)``, tilelab's ``__all__``), a cuTile
enum's or class's members, or the names a function can see (its locals, its module's
globals, the builtins).

Example:
    >>> import cuda.tile as ct
    >>> closest("lg", public_names(ct))
    'log'
    >>> missing_attribute_message(ct, "ct", "lg")
    ('no op `ct.lg` in cuda.tile; did you mean `ct.log`?', 'write ct.log')
"""
from __future__ import annotations

import builtins
import difflib
import types
from typing import Any, Iterable

__all__ = ["closest", "public_names", "missing_attribute_message", "missing_name_suffix"]


def closest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate ``word`` most likely misspells, or None when none is close.

    A candidate equal to ``word`` but for letter case wins; otherwise the closest by
    :func:`difflib.get_close_matches` (ratio at least 0.6).

    Example:
        >>> closest("load_lik", ["load_like", "load", "In"]), closest("Sum", ["sum"])
        ('load_like', 'sum')
        >>> closest("frobnicate", ["load", "store"]) is None
        True
    """
    names = sorted({c for c in candidates if c and c != word})
    folded = [c for c in names if c.lower() == word.lower()]
    if folded:
        return folded[0]
    match = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    return match[0] if match else None


def public_names(obj: Any) -> list[str]:
    """The names a kernel could mean on ``obj``: a module's ``__all__`` and public
    attributes, or a class's (an enum's) public members.

    Example:
        >>> "load_like" in public_names(__import__("tilelab"))
        True
    """
    names = set(getattr(obj, "__all__", ()) or ())
    try:
        names.update(n for n in dir(obj) if not n.startswith("_"))
    except Exception:  # an object whose dir() fails: its __all__ is all we know
        pass
    return sorted(names)


def _is_ct(obj: Any) -> bool:
    name = getattr(obj, "__name__", "") if isinstance(obj, types.ModuleType) else \
        getattr(obj, "__module__", "") or ""
    return name == "cuda.tile" or name.startswith("cuda.tile.")


def missing_attribute_message(base: Any, shown: str, attr: str) -> tuple[str, str]:
    """(message, hint) of a dotted name ``shown.attr`` that ``base`` (a module, or a
    cuTile class or enum) does not have.

    Example:
        >>> import tilelab
        >>> missing_attribute_message(tilelab, "tl", "load_lik")[0]
        "no `tl.load_lik` in module 'tilelab'; did you mean `tl.load_like`?"
    """
    best = closest(attr, public_names(base))
    if isinstance(base, types.ModuleType):
        what = (f"no op `{shown}.{attr}` in cuda.tile" if _is_ct(base) else
                f"no `{shown}.{attr}` in module {base.__name__!r}")
        listing = f"dir({shown}) lists the names of {base.__name__}"
    else:
        what = f"no member `{shown}.{attr}` in {shown}"
        listing = f"dir({shown}) lists its members"
    if best is None:
        return what, f"check the spelling: {listing}"
    return f"{what}; did you mean `{shown}.{best}`?", f"write {shown}.{best}"


def missing_name_suffix(name: str, local: Iterable[str], module: Any) -> str:
    """``"; did you mean 'x'?"`` for an undefined ``name``, from the function's own
    names, its module's globals (a dict) and the builtins; ``""`` when none is close.

    Example:
        >>> missing_name_suffix("lenght", ["x"], {"length": 3})
        "; did you mean 'length'?"
    """
    pool = set(local) | {n for n in (module or {}) if not n.startswith("__")}
    pool |= {n for n in dir(builtins) if not n.startswith("_")}
    best = closest(name, pool)
    return "" if best is None else f"; did you mean {best!r}?"
