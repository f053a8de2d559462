"""Device print of tuples and dataclasses that hold tiles (issue #41, cause 4).

cuTile prints a tile inside a tuple, an f-string tuple or a dataclass as its values
(``(8,)``, ``Foo(x=[0, 1], z='hello')``), a dataclass without a ``repr`` as
``<Name object>``, and a tuple shows the reprs of its items (a custom ``__str__`` is
used only for the object printed itself). Outside a kernel a tile's repr keeps its type.
"""
from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass
from typing import Any

import numpy as np

import cuda.tile as ct
from tilelab.interp import Tile, interpret


@dataclass(frozen=True)
class Pair:
    x: Any
    hidden: Any = dataclasses.field(repr=False)
    z: Any = None


@dataclass(frozen=True, repr=False)
class Opaque:
    x: Any


@dataclass(frozen=True, repr=False)
class Labelled:
    x: Any

    def __str__(self):
        return f"LABEL({self.x})"


def _printed(kernel, *args) -> list[str]:
    out = io.StringIO()
    interpret(kernel, *args, grid=(1,), stdout=out)
    prefix = "[block (0, 0, 0)] "
    lines = out.getvalue().splitlines()
    assert all(line.startswith(prefix) for line in lines)
    return [line[len(prefix):] for line in lines]


def test_tuples_of_run_time_scalars_print_their_values():
    @ct.kernel
    def k(x):
        ct.print(x.shape)
        print(f"shape = {x.shape}")
        ct.print(f"nested: {((x.shape, x.shape), ct.bid(0))}")
        bid = ct.bid(0)
        ct.print((f"bid={bid}", bid))

    assert _printed(k, np.zeros((2, 4), np.int32)) == [
        "(2, 4)", "shape = (2, 4)", "nested: (((2, 4), (2, 4)), 0)", "('bid=0', 0)"]


def test_tiles_in_tuples_and_dataclasses_print_their_values():
    @ct.kernel
    def k(x):
        t = ct.load(x, 0, (4,))
        ct.print(f"tuple: {(t,)}")
        ct.print(Pair(t, t + 1, "hello"))
        print(Pair(t, t + 1, "hello"))

    assert _printed(k, np.arange(4, dtype=np.int32)) == [
        "tuple: ([0, 1, 2, 3],)",
        "Pair(x=[0, 1, 2, 3], z='hello')",
        "Pair(x=[0, 1, 2, 3], z='hello')"]


def test_dataclasses_without_repr_and_custom_str():
    @ct.kernel
    def k(x):
        t = ct.load(x, 0, (2,))
        ct.print(Opaque(t))
        ct.print((Opaque(t),))
        ct.print(Labelled(t))
        ct.print((Labelled(t),))

    assert _printed(k, np.arange(2, dtype=np.int32)) == [
        "<Opaque object>", "(<Opaque object>,)", "LABEL([0, 1])", "(<Labelled object>,)"]


def test_a_tile_keeps_its_typed_repr_outside_a_kernel():
    captured = []

    @ct.kernel
    def k(x):
        captured.append(ct.load(x, 0, (2,)))

    interpret(k, np.arange(2, dtype=np.int32), grid=(1,))
    assert isinstance(captured[0], Tile)
    assert repr(captured[0]) == "Tile[int32, (2,)]([0, 1])"
