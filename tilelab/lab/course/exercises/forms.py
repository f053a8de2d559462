"""Run an answer in whatever correct form it comes, and collect what its launches did.

Why: an exercise asks for a result, not for one way of writing it. A kernel answer may be
one kernel (a function whose parameters are annotated ``tl.Out``/``tl.In``/..., or a
``tl.Kernel``), which the grader launches on the partition of each hidden case; or a host
function that makes its own launches — one or several, with tile shapes and schedules of
its choosing (the safe two-launch reduction, a split into a partial and a final kernel).
Either way the grader sees the same :class:`Ran`: every launch's interpreter trace, so
bytes, FLOPs, races and the size of each load are graded the same for every form.

Example:
    >>> import tilelab as tl
    >>> from tilelab.kernels.examples import vector_add
    >>> x = tl.ones(64, device="cpu"); z = tl.zeros(64, device="cpu")
    >>> ran = run_host(lambda z, x: vector_add(z.partition(16), x, x), (z, x))
    >>> ran.launches, ran.bytes
    (1, 768)
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

__all__ = ["Ran", "is_kernel_answer", "run_kernel", "run_host", "run_answer"]

#: the annotations that make a function a kernel (as objects or as their source text)
_KINDS = ("In", "Out", "InOut", "Raw")


@dataclass
class Ran:
    """What an answer's launches did: one interpreter ``traces`` entry per launch, in
    launch order (``kernels`` their names).

    Example:
        >>> Ran().launches, Ran().bytes
        (0, 0)
    """

    traces: list[Any] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)

    @property
    def launches(self) -> int:
        """How many launches the answer made."""
        return len(self.traces)

    @property
    def bytes_read(self) -> int:
        """Bytes all launches' loads moved (in-bounds elements, repeats counted)."""
        return sum(t.bytes_read for t in self.traces)

    @property
    def bytes_written(self) -> int:
        """Bytes all launches' stores moved."""
        return sum(t.bytes_written for t in self.traces)

    @property
    def bytes(self) -> int:
        """Bytes read plus written, over every launch."""
        return self.bytes_read + self.bytes_written

    @property
    def flops(self) -> int:
        """Useful FLOPs (in-bounds lanes), over every launch."""
        return sum(t.flops for t in self.traces)

    @property
    def races(self) -> list[Any]:
        """The inter-block races every launch's trace found."""
        return [r for t in self.traces for r in t.races]

    def largest_read(self) -> int:
        """The most elements one load of one block read: what a block holds at once of
        an input (a streaming kernel keeps this bounded, whatever the row length)."""
        return max((a.count for t in self.traces for b in t.blocks for a in b.accesses
                    if a.kind == "read"), default=0)


def is_kernel_answer(answer: Any) -> bool:
    """True for a ``tl.Kernel`` or a function with a parameter annotated ``tl.In``,
    ``tl.Out``, ``tl.InOut`` or ``tl.Raw`` (as objects or as text); a host function that
    launches kernels itself has none.

    Example:
        >>> import tilelab as tl
        >>> def k(z: tl.Out, x: tl.In): ...
        >>> def host(z, x): ...
        >>> is_kernel_answer(k), is_kernel_answer(host)
        (True, False)
    """
    import tilelab as tl
    from tilelab.compiler import language

    if isinstance(answer, tl.Kernel):
        return True
    try:
        params = inspect.signature(answer).parameters.values()
    except (TypeError, ValueError):
        return False
    for p in params:
        ann = p.annotation
        if isinstance(ann, type) and issubclass(ann, language.ParamKind):
            return True
        if isinstance(ann, str) and ann.replace(" ", "").rpartition(".")[2] in _KINDS:
            return True
    return False


def run_kernel(kernel: Any, args: Sequence[Any], *, unsafe: bool = False,
               grid: Any = None) -> Ran:
    """Launch one kernel answer on the CPU interpreter (decorating a plain function
    first, so a refusal is raised here) and return its :class:`Ran`.

    Example:
        >>> import tilelab as tl
        >>> def double(z: tl.Out, x: tl.In):
        ...     z.store(tl.load_like(x, z) * 2.0)
        >>> x = tl.ones(8, device="cpu"); z = tl.zeros(8, device="cpu")
        >>> run_kernel(double, (z.partition(4), x)).bytes
        64
    """
    import tilelab as tl
    from tilelab.lab.course.grading import as_kernel

    kern = as_kernel(kernel, unsafe=unsafe)
    trace = tl.interpret(kern, *args, grid=grid)
    return Ran([trace], [kern.name])


def run_host(fn: Callable[..., Any], args: Sequence[Any]) -> Ran:
    """Call a host-function answer ``fn(*args)`` and trace every launch it makes (each
    re-run on the CPU interpreter on copies of its arguments, as the lab's views do).

    Example:
        >>> run_host(lambda: None, ()).launches
        0
    """
    from tilelab.lab.course.traffic import record_launches
    from tilelab.lab.figures.ownership import trace_launch

    events = record_launches(lambda: fn(*args))
    return Ran([e.trace if e.trace is not None else trace_launch(e) for e in events],
               [e.kernel.name for e in events])


def run_answer(answer: Any, kernel_args: Sequence[Any], host_args: Sequence[Any], *,
               unsafe: bool = False, grid: Any = None) -> Ran:
    """Run ``answer`` in its form: a kernel gets ``kernel_args`` (the case's partition
    of the output first), a host function gets ``host_args`` (plain tensors and scalars)
    and launches what it likes.

    Example:
        >>> import tilelab as tl
        >>> from tilelab.kernels.examples import vector_add
        >>> x = tl.ones(8, device="cpu"); z = tl.zeros(8, device="cpu")
        >>> run_answer(vector_add, (z.partition(4), x, x), (z, x, x)).launches
        1
    """
    if not callable(answer):
        raise TypeError(f"expected a kernel or a function that launches kernels, got "
                        f"{type(answer).__name__}")
    if is_kernel_answer(answer):
        return run_kernel(answer, kernel_args, unsafe=unsafe, grid=grid)
    return run_host(answer, host_args)
