"""Running a library call's launches: :class:`Plan`, :class:`Call`, :func:`run_launches`,
kernels with cuTile hints (:func:`hinted`) and launch arguments by name
(:func:`launch_args`).

Example:
    >>> from tilelab.kernels.examples import vector_add
    >>> import tilelab as tl
    >>> z, x = tl.empty(8, device="cpu"), tl.ones(8, device="cpu")
    >>> args = launch_args(vector_add, z=z.partition(4), x=x, y=x)
    >>> Plan(z, [(vector_add, args)]).run().numpy()[:2]
    array([2., 2.], dtype=float32)
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

import tilelab as tl
from tilelab.runtime.foreign import BORROWED as _BORROWED
from tilelab.runtime.partition import Partition as _Partition
from tilelab.runtime.tensor import Tensor as _Tensor

__all__ = ["Plan", "Call", "Ready", "run_launches", "call_stream", "done_future", "hinted",
           "launch_args", "TensorResult", "PairResult"]

#: What a host function with one output returns: the tensor, or with ``sync=False``
#: ``(tensor, future)`` (the future is None inside a ``tl.graph()`` capture).
TensorResult = Union[tl.Tensor, tuple[tl.Tensor, Optional[tl.Future]]]
#: The same for two outputs: ``(y, h)``, or ``((y, h), future)``.
PairResult = Union[tuple[tl.Tensor, tl.Tensor],
                   tuple[tuple[tl.Tensor, tl.Tensor], Optional[tl.Future]]]


# ======================================================================================
# running launches


def run_launches(launches: list[tuple[Any, tuple]], result: Any, *, sync: bool = True,
                 stream: Any = None) -> Any:
    """Launch ``(kernel, args)`` pairs in order; ``result`` when ``sync``, else
    ``(result, future)``.

    Synchronous launches each wait (the library's behaviour since its first version).
    Asynchronous ones go to one stream (``stream``; by default the current stream of
    the framework whose GPU tensors were passed, else tilelab's: see
    :func:`call_stream`), so the returned
    future — the last launch's — covers the earlier launches too: observing it observes
    every earlier launch of its stream. A call with nothing to launch returns a future
    that is already done; inside ``with tl.graph():`` the launches are recorded and the
    future is None (replay the graph to run them).

    Example:
        >>> import tilelab as tl
        >>> run_launches([], "out", sync=False)[1].done()
        True
    """
    if stream is None and len(launches) > 1:
        stream = call_stream(launches)
    if sync:
        for kern, args in launches:
            kern(*args, stream=stream)
        return result
    fut = done_future() if not launches else None
    for kern, args in launches:
        fut = kern.launch_async(*args, stream=stream)
    return result, fut


def _home(args: tuple) -> Any:
    """The foreign stream a launch of ``args`` defaults to (``Storage.stream``), or None."""
    for a in args:
        t = type(a)
        if t is _Partition:
            a, t = a.tensor, _Tensor
        if t is _Tensor or isinstance(a, _Tensor):
            home = a._storage.stream
            if home is not None:
                return home
    return None


def call_stream(launches: list[tuple[Any, tuple]]) -> Any:
    """The stream to pass to every launch of one call that names none, so that they all
    run on one: None when each launch defaults to the same stream anyway (none of
    them has a foreign argument, or all have one borrowed on one stream), else the
    first foreign argument's stream (a launch reading only library scratch would
    otherwise run on tilelab's stream, out of order with the others).

    Example:
        >>> import tilelab as tl
        >>> from tilelab.kernels.examples import vector_add
        >>> x = tl.ones(4, device="cpu")
        >>> call_stream([(vector_add, (x.partition(4), x, x))] * 2) is None
        True
    """
    if not _BORROWED[0]:   # nothing was ever borrowed on a foreign stream
        return None
    homes = [_home(args) for _, args in launches]
    first = next(filter(None, homes), None)
    if first is None:
        return None
    handle = first.__cuda_stream__()[1]
    if all(h is not None and h.__cuda_stream__()[1] == handle for h in homes):
        return None
    return first


def hinted(kernel: tl.Kernel, **hints: Any) -> tl.Kernel:
    """``kernel`` itself, or a copy compiled with these cuTile hints (``occupancy``,
    ``num_ctas``, ``num_worker_warps``; hints that are None are left out). Each set of
    hints makes one copy per kernel, once, so repeated launches find it prepared.

    Example:
        >>> from tilelab.kernels.examples import vector_add
        >>> hinted(vector_add, occupancy=None) is vector_add
        True
        >>> hinted(vector_add, occupancy=2) is hinted(vector_add, occupancy=2)
        True
    """
    given = {k: v for k, v in hints.items() if v is not None}
    if not given:
        return kernel
    return _hinted_copy(kernel.__wrapped__, dataclasses.replace(kernel.options, **given))


@functools.cache
def _hinted_copy(fn: Callable, options: Any) -> tl.Kernel:
    """The copy keeps every other option of the kernel (unsafe, check_bounds, ...)."""
    from tilelab.runtime.kernel import Kernel

    return Kernel(fn, options)


def done_future(what: str = "(nothing to launch)") -> tl.Future:
    """A future that is already observed: what an asynchronous call with no launch
    (an empty tensor) returns, so callers can always ``wait()``.

    Example:
        >>> f = done_future(); f.done(), f.wait()
        (True, None)
    """
    from tilelab.runtime.ledger import LaunchRecord

    rec = LaunchRecord(what, "<no launch>", None)
    rec.observed = True
    return tl.Future(rec)


@dataclass
class Plan:
    """The launches of one library call, in order, and what the call returns.

    ``run()`` launches them; tests and tools can instead pass each ``(kernel, args)`` to
    ``tl.interpret`` (race detection, traces) or to ``kernel.compile``.

    Example:
        >>> import tilelab as tl
        >>> from tilelab.kernels.matmul import MatmulConfig, plan_matmul
        >>> a = tl.randn(1, 64, device="cpu", seed=0); b = tl.randn(64, 32, device="cpu")
        >>> p = plan_matmul(a, b, config=MatmulConfig(tm=1, tn=16, tk=16, schedule="gemv",
        ...                                           split_k=2))
        >>> [k.name for k, _ in p.launches]
        ['splitk_partial_kernel', 'splitk_reduce_kernel']
        >>> p.run().shape
        (1, 32)
    """

    out: Any
    launches: list[tuple[Any, tuple]]

    def run(self, sync: bool = True, stream: Any = None) -> Any:
        """Launch every kernel in order; returns ``out``, or ``(out, future)`` with
        ``sync=False`` (see :func:`run_launches`).

        Example:
            >>> Plan(out=None, launches=[]).run() is None
            True
            >>> Plan(out=None, launches=[]).run(sync=False)[1].done()
            True
        """
        return run_launches(self.launches, self.out, sync=sync, stream=stream)


class Ready(tuple):
    """``(out, launches)`` of a prepared call, as the library's call cache hands it back
    on a hit: it reads like a :class:`Plan` (``out``, ``launches``, ``run``) and is made
    in one C call (a tuple), where a Plan's ``__init__`` runs Python.

    Example:
        >>> r = Ready(("out", []))
        >>> r.out, r.launches, r.run(sync=False)[1].done()
        ('out', [], True)
    """

    __slots__ = ()

    @property
    def out(self) -> Any:
        """What the call returns."""
        return self[0]

    @property
    def launches(self) -> Sequence[tuple[Any, tuple]]:
        """The ``(kernel, args)`` pairs, in order (a list or a tuple)."""
        return self[1]

    def run(self, sync: bool = True, stream: Any = None) -> Any:
        """Launch as :func:`run_launches` does (one asynchronous launch directly)."""
        launches = self[1]
        if sync or stream is not None or len(launches) != 1:
            return run_launches(launches, self[0], sync=sync, stream=stream)
        kern, args = launches[0]
        return self[0], kern.launch_async(*args)


@dataclass
class Call:
    """One kernel with its launch arguments and what the host function returns.

    ``args is None`` means there is nothing to compute (an empty tensor). Tests and
    tools use it to compile (``kernel.compile(*args)``) or interpret the exact launch.
    It reads like a :class:`Plan` (``launches``, ``out``), which is what the library's
    call cache keeps.

    Example:
        >>> Call(kernel=None, args=None, result="out").launches
        []
    """

    kernel: Any
    args: tuple | None
    result: Any

    @property
    def launches(self) -> list[tuple[Any, tuple]]:
        """``[(kernel, args)]``, or ``[]`` when there is nothing to launch."""
        return [] if self.args is None else [(self.kernel, self.args)]

    @property
    def out(self) -> Any:
        """What the call returns (``result``)."""
        return self.result

    def run(self, sync: bool = True, stream: Any = None) -> Any:
        """Launch; the result, or ``(result, future)`` with ``sync=False``."""
        return run_launches(self.launches, self.result, sync=sync, stream=stream)


def launch_args(kernel: tl.Kernel, **named: Any) -> tuple:
    """The positional launch arguments of ``kernel``, given by parameter name.

    Kernels launch with positional arguments (the runtime's prepared path keys on
    the argument tuple); this puts keyword arguments in the kernel's parameter order
    so that a call site reads ``TK=cfg.tk, TRANS_B=trans_b`` instead of a row of bare
    values. Every parameter must be named exactly once (``TypeError`` otherwise).

    Example:
        >>> from tilelab.kernels.examples import gemm
        >>> launch_args(gemm, K_TILE=64, b="B", a="A", c="C")
        ('C', 'A', 'B', 64)
    """
    names = _param_names(kernel.definition)
    if len(named) != len(names) or not named.keys() <= set(names):
        missing = [n for n in names if n not in named]
        extra = [n for n in named if n not in names]
        raise TypeError(f"launch_args({kernel.name}): missing {missing}, unknown {extra}; "
                        f"the parameters are {', '.join(names)}")
    return tuple([named[n] for n in names])


@functools.lru_cache(maxsize=None)
def _param_names(definition: Any) -> tuple[str, ...]:
    return tuple(p.name for p in definition.analysis.params)
