"""A bounded table: what a launcher keeps per kernel (plans, loaded code) never grows
without limit, however many specializations a program walks through.

Example:
    >>> t = Lru(2)
    >>> t["a"] = 1; t["b"] = 2; _ = t.get("a"); t["c"] = 3
    >>> sorted(t.keys()), t.evicted
    (['a', 'c'], 1)
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Hashable, Iterator

__all__ = ["Lru"]


class Lru:
    """At most ``capacity`` entries; storing one more drops the least recently used
    (a :meth:`get` that finds its key counts as a use). ``evicted`` counts the drops,
    for tests and benchmarks. Safe to share between threads under the GIL: a lookup
    racing an eviction is a miss, never an error.
    """

    __slots__ = ("capacity", "evicted", "_d")

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.evicted = 0
        self._d: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable) -> Any:
        """The entry under ``key`` (now the most recently used), or None."""
        d = self._d
        value = d.get(key)
        if value is not None:
            try:
                d.move_to_end(key)
            except KeyError:   # evicted by another thread meanwhile: still a hit
                pass
        return value

    def __setitem__(self, key: Hashable, value: Any) -> None:
        d = self._d
        d[key] = value
        d.move_to_end(key)
        while len(d) > self.capacity:
            try:
                d.popitem(last=False)
            except KeyError:   # emptied by another thread
                break
            self.evicted += 1

    def __getitem__(self, key: Hashable) -> Any:
        return self._d[key]

    def __contains__(self, key: object) -> bool:
        return key in self._d

    def __len__(self) -> int:
        return len(self._d)

    def __iter__(self) -> Iterator[Hashable]:
        return iter(list(self._d))

    def keys(self) -> list:
        return list(self._d)

    def values(self) -> list:
        return list(self._d.values())

    def clear(self) -> None:
        self._d.clear()
