"""The acceptance corpus' registry: one :class:`Entry` per ported kernel.

An entry holds the kernel function as its author wrote it (undecorated, so that a
refusal fails that entry's tests and not the import of its family), the ``tl.kernel``
options it would be decorated with, and what a test needs to run it: problem sizes
(the last ones ragged), a function that builds numpy inputs for a size, one that turns
those inputs into the launch's arguments (tensors, partitions, scalars) and names the
written tensors, and a float64 numpy reference.

``unchanged=True`` says the kernel is written the way the cuTile kernel or TileGym op
it ports writes it (``origin``), idioms and all: only what a port to partitions must
change is changed (the output parameters, ``ct.bid`` arithmetic turned into
``tile_index``, ``ct.store`` into ``p.store``, a grid-stride loop into ``p.tiles()``, a
swizzle helper into a schedule); ``False`` says a workaround was needed, and
``workaround`` says which.
An entry that fails today names the exact failure (``refused``, a :class:`Refusal`): its
tests are strict xfails that also check the message word for word, so the entry turns
into a failure the day the refusal is lifted, or the day it fails differently.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

import tilelab as tl

__all__ = ["Entry", "Refusal", "Run", "ENTRIES", "ORIGINS", "DEVICE", "accept", "rng_for",
           "tensor", "out", "pow2", "tolerance"]


@dataclass(frozen=True)
class Refusal:
    """A failure recorded as it happens today: when (``"define"``: ``@tl.kernel``
    refuses the kernel; ``"compile"``: it is accepted, then its first compile or launch
    fails), the exception's type, its exact message and, for a ``tl.SafetyError``, the
    rule it names."""

    when: str
    error: type
    message: str
    rule: str | None = None

    def matches(self, err: BaseException) -> bool:
        """Whether ``err`` is this failure, word for word."""
        said = getattr(err, "message", None) or str(err)
        return (isinstance(err, self.error) and said == self.message
                and getattr(err, "rule", None) == self.rule)


@dataclass
class Run:
    """One launch: the kernel's arguments and the written tensors, in reference order."""

    args: tuple
    outputs: Sequence[Any]


@dataclass
class Entry:
    """One kernel of the corpus and how to check it (see the module docstring)."""

    name: str
    family: str
    fn: Callable
    shapes: Sequence[Any]
    inputs: Callable[[Any, np.random.Generator], dict]
    run: Callable[[dict], Run]
    reference: Callable[[dict], Sequence[np.ndarray]]
    ports: str
    origin: str
    unchanged: bool = True
    workaround: str | None = None
    refused: Refusal | None = None
    options: dict = field(default_factory=dict)
    #: (rtol, atol) per output; None: by the output's dtype (see :func:`tolerance`)
    tol: tuple[float, float] | None = None

    def build(self) -> "tl.Kernel":
        """The kernel, as ``@tl.kernel(**options)`` above its ``def`` would make it."""
        return tl.kernel(**self.options)(self.fn)


#: name -> entry, in definition order
ENTRIES: dict[str, Entry] = {}

#: where an entry's kernel comes from: a kernel of cuTile Python (its samples, tests and
#: quick start), an op of TileGym, or a kernel written in their idioms with no single
#: original
ORIGINS = ("cuTile", "TileGym", "idiom")


def accept(name: str, *, shapes: Sequence[Any], inputs: Callable, run: Callable,
           reference: Callable, ports: str, origin: str, unchanged: bool = True,
           workaround: str | None = None, refused: Refusal | None = None,
           tol: tuple[float, float] | None = None, **options: Any) -> Callable:
    """Register the decorated kernel function (returned as it is, undecorated)."""
    if origin not in ORIGINS:
        raise ValueError(f"{name}: origin must be one of {ORIGINS}, got {origin!r}")
    if unchanged and workaround:
        raise ValueError(f"{name}: an unchanged entry has no workaround")
    if not unchanged and not workaround:
        raise ValueError(f"{name}: say which workaround the port needed")

    def deco(fn: Callable) -> Callable:
        if name in ENTRIES:
            raise ValueError(f"acceptance entry {name!r} registered twice")
        family = fn.__module__.rsplit(".", 1)[-1]
        ENTRIES[name] = Entry(name, family, fn, tuple(shapes), inputs, run, reference,
                              ports, origin, unchanged, workaround, refused, dict(options),
                              tol)
        return fn
    return deco


# ---- helpers the families build their inputs with ------------------------------------


def rng_for(name: str, shape: Any) -> np.random.Generator:
    """A generator seeded by the entry and the size, so every run sees the same data."""
    seed = sum(ord(c) * (i + 1) for i, c in enumerate(f"{name}{shape}"))
    return np.random.default_rng(seed)


#: the corpus runs on the CPU backend (the interpreter), with or without a GPU
DEVICE = "cpu"


def tensor(a: Any, dtype: str | None = None) -> "tl.Tensor":
    """A CPU tilelab tensor holding a copy of numpy array ``a``."""
    return tl.tensor(np.array(a, copy=True, order="C"), dtype=dtype, device=DEVICE)


def out(shape: Any, dtype: str) -> "tl.Tensor":
    """A CPU output tensor filled with NaN (float) or a sentinel (int), so that an
    element the kernel never writes cannot pass for a right one."""
    t = tl.empty(shape, dtype=dtype, device=DEVICE)
    host = t.numpy()
    host[...] = np.nan if np.issubdtype(host.dtype, np.floating) or host.dtype.kind == "V" \
        else -12345
    return t


def pow2(n: int) -> int:
    """The smallest power of two >= n (cuTile tile sizes are powers of two)."""
    return 1 << max(int(n) - 1, 0).bit_length()


def tolerance(dtype: np.dtype) -> tuple[float, float]:
    """(rtol, atol) for results stored in ``dtype``: one rounding of float32 math."""
    name = np.dtype(dtype).name
    if name == "bfloat16":
        return 2e-2, 2e-2
    if name == "float16":
        return 2e-3, 2e-3
    if name == "float32":
        return 2e-5, 2e-5
    return 0.0, 0.0
