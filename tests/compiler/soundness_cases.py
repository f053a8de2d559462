"""The soundness corpus: attempts to break tilelab's safety promise, written as a careless
user and as a hostile reviewer would, and safe kernels that must keep working.

The promise (docs/safety.md): a kernel without ``unsafe=True`` never writes outside its
block's tile, never writes an input, never reads out of bounds, whatever Python the user
writes; anything the checker cannot prove is refused with a located message.

* :data:`ATTEMPTS`: each is refused at a stage -- ``definition`` (``@tl.kernel``),
  ``compile`` (``kernel.compile(...)`` or the first launch, after a change), ``launch``
  (the call), ``partition`` (``tensor.partition(...)``) or ``host`` (a host access from
  another thread) -- with a rule id (``err.rule``) or an error type, phrases of the
  message, and a location: the ``# AT: <id>`` marker in this file, in
  soundness_helpers.py or soundness_shadow.py (see tests/compiler/_soundness.py).
  ``expect`` may list alternatives separated by ``|``.
* :data:`NEUTRALIZED`: hostile changes whose only correct outcome is that the checked
  code is what runs: the next compile (a new shape) has no write but the partition
  stores, and a CPU run leaves the inputs unchanged.
* :data:`ACCEPTED`: safe code that must compile for sm_90 and match numpy on the CPU.

Each attempt carries ``cls``, the class of the issue it belongs to: 1 module aliases in
locals; 2 names rebound by nested functions, defaults or parameters; 3 callables that are
not plain functions; 4 changes after the check; 5 user names capturing generated code;
6 checked text vs executed code; 7 outputs whose elements overlap; 8 unchecked reads;
9 forged schedules; 10 threads; "other" (assignments, statements, private names, helpers
at any depth, reductions, static_eval, partitions, tl.Out reads, persistent at=, tl.Raw,
unsafe aliases, module values).
Known bugs are ``xfail`` entries whose reason says what is wrong and gives the repro.
"""
from __future__ import annotations

import builtins
import dataclasses
import functools
import linecache
import operator
import sys
import threading
import time
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
from numpy.lib.stride_tricks import as_strided

import cuda.tile
import cuda.tile as ct
from compiler import soundness_helpers as sh
import tilelab as tl
import tilelab.compiler.tile_index as tl_device
from tilelab.compiler import language as tl_language
from compiler.soundness_helpers import double as sh_double
from compiler.soundness_helpers import writer as sh_writer

# ======================================================================================
# registries


@dataclass
class Attempt:
    id: str
    cls: str
    stage: str
    expect: str                      # rule id(s) or error class name(s), '|'-separated
    phrases: tuple[str, ...]
    run: Callable[["Steps"], Any]
    where: str | None = None         # marker id of the expected location (default: id)
    xfail: str | None = None         # a bug: what is wrong (and the repro)
    xfail_strict: bool = True
    #: why the error has no location yet (the location test alone is xfailed): (reason,
    #: strict)
    unlocated: tuple[str, bool] | None = None


@dataclass
class Neutralized:
    """A hostile change whose only correct outcome is running the checked code."""

    id: str
    cls: str
    run: Callable[["Steps"], Any]    # returns a Result
    xfail: str | None = None


@dataclass
class Result:
    """What a neutralized attempt observed: the compile after the change (or None if
    it was refused with ``refusal``) and the CPU run."""

    kernel: Any
    art: Any = None
    refusal: BaseException | None = None
    inputs_unchanged: bool = True
    output_ok: bool = True
    #: the compiled partition stores index by the block id (row-major kernels)
    gpu_index_ok: bool = True
    detail: str = ""


@dataclass
class Accepted:
    id: str
    kernel: Callable[[], Any]        # builds the tl.Kernel
    make: Callable[[], tuple]        # (launch args, output tensor, expected output)
    xfail: str | None = None
    needs: str | None = None         # an importable module the case needs (e.g. torch)


ATTEMPTS: dict[str, Attempt] = {}
NEUTRALIZED: dict[str, Neutralized] = {}
ACCEPTED: dict[str, Accepted] = {}


class Steps:
    """Records the stage an attempt reached when it raised."""

    def __init__(self):
        self.stage = "setup"
        self.at: tuple[str, int] | None = None   # expected location, when not a marker
        self.kernel = None
        #: after a refused compile of a changed kernel: what a CPU launch then did
        self.cpu_outcome: str | None = None
        self.cpu_input_unchanged: bool | None = None

    def define(self, fn, **options):
        self.stage = "definition"
        k = tl.kernel(**options)(fn)
        self.kernel = k
        self.stage = "setup"
        return k

    def compile(self, k, *args):
        self.stage = "compile"
        return k.compile(*args, arch="sm_90", cache=False)  # AT: compile_line

    def launch(self, k):
        """Mark the launch stage; the caller launches on its own line (the location)."""
        self.stage = "launch"
        return k

    def partition(self):
        self.stage = "partition"

    def host(self):
        self.stage = "host"

    def done(self):
        self.stage = "setup"


def _add(a: Attempt) -> None:
    assert a.id not in ATTEMPTS, a.id
    ATTEMPTS[a.id] = a


def refused(case_id, cls, expect, *phrases, where=None, xfail=None, **options):
    """A kernel refused by @tl.kernel."""
    def deco(fn):
        def run(s):
            s.define(fn, **options)
        _add(Attempt(case_id, str(cls), "definition", expect, phrases, run, where, xfail))
        return fn
    return deco


def refused_at_compile(case_id, cls, expect, *phrases, change=None, examples=None,
                       where=None, xfail=None, **options):
    """A kernel accepted when defined and refused by its next compile (after ``change``,
    a function that makes the change and returns the undo)."""
    def deco(fn):
        def run(s):
            k = s.define(fn, **options)
            undo = change() if change is not None else None
            try:
                s.compile(k, *(examples or _examples)())
            finally:
                if undo is not None:
                    undo()
        _add(Attempt(case_id, str(cls), "compile", expect, phrases, run, where, xfail))
        return fn
    return deco


def refused_at_launch(case_id, cls, expect, *phrases, args, change=None, xfail=None,
                      xfail_strict=True, **options):
    """A kernel launched on the CPU backend and refused by the launch (located at the
    launching line: :func:`launch_cpu`)."""
    def deco(fn):
        def run(s):
            k = s.define(fn, **options)
            undo = change() if change is not None else None
            try:
                launch_cpu(s, k, args())
            finally:
                if undo is not None:
                    undo()
        _add(Attempt(case_id, str(cls), "launch", expect, phrases, run, "launch_line", xfail,
                     xfail_strict))
        return fn
    return deco


def attempt(case_id, cls, stage, expect, *phrases, where=None, xfail=None,
            xfail_strict=True):
    """A custom attempt: ``run(steps)`` does the steps and raises."""
    def deco(run):
        _add(Attempt(case_id, str(cls), stage, expect, phrases, run, where, xfail,
                     xfail_strict))
        return run
    return deco


def neutralized(case_id, cls, xfail=None):
    def deco(run):
        assert case_id not in NEUTRALIZED, case_id
        NEUTRALIZED[case_id] = Neutralized(case_id, str(cls), run, xfail)
        return run
    return deco


def accepted(case_id, make, xfail=None, needs=None, **options):
    def deco(fn):
        assert case_id not in ACCEPTED, case_id
        ACCEPTED[case_id] = Accepted(case_id, lambda: tl.kernel(**options)(fn), make, xfail,
                                     needs)
        return fn
    return deco


def launch_cpu(s, k, args):
    s.launch(k)
    return k(*args)  # AT: launch_line


# ---- arguments ---------------------------------------------------------------------------


def S(shape, dtype="float32"):
    return tl.spec(shape, dtype)


def _examples():
    return (S(256).partition(64), S(256))


def cpu(a):
    return tl.tensor(np.ascontiguousarray(a), device="cpu")


def arange(n, dtype=np.float32):
    return np.arange(n, dtype=dtype)


def zeros(shape, dtype="float32"):
    return tl.zeros(shape, dtype=dtype, device="cpu")


def _patch(obj, name, value):
    """Set ``obj.name`` (or ``obj[name]`` for a dict such as this module's globals) to
    value; returns the undo."""
    missing = object()
    if isinstance(obj, dict):
        old = obj.get(name, missing)
        obj[name] = value
    else:
        old = vars(obj).get(name, missing)
        setattr(obj, name, value)

    def undo():
        if isinstance(obj, dict):
            if old is missing:
                obj.pop(name, None)
            else:
                obj[name] = old
        elif old is missing:
            delattr(obj, name)
        else:
            setattr(obj, name, old)
    return undo


G = globals()


# ======================================================================================
# 1. module aliases in locals


@refused("c1_local_alias_scatter", 1, "method-unknown", "method .scatter() is not allowed")
def c1_local_alias_scatter(z: tl.Out, x: tl.In, idx: tl.In):
    c = ct
    t = tl.load_like(x, z)
    c.scatter(x, tl.load_like(idx, z), t)  # AT: c1_local_alias_scatter
    z.store(t)


@refused("c1_local_alias_store", 1, "write-safe", ".store() writes memory directly",
         "safe kernels write only through partitions")
def c1_local_alias_store(z: tl.Out, x: tl.In):
    c = ct
    t = tl.load_like(x, z)
    c.store(x, index=(0,), tile=t)  # AT: c1_local_alias_store
    z.store(t)


@refused("c1_local_alias_atomic", 1, "method-unknown", "method .atomic_add()")
def c1_local_alias_atomic(z: tl.Out, x: tl.In):
    c = ct
    t = tl.load_like(x, z)
    c.atomic_add(x, ct.arange(16, dtype=ct.int32), t)  # AT: c1_local_alias_atomic
    z.store(t)


@refused("c1_walrus_alias", 1, "write-safe", ".store() writes memory directly")
def c1_walrus_alias(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    (c := ct).store(x, index=(0,), tile=t)  # AT: c1_walrus_alias
    z.store(t)


@refused("c1_walrus_then_call", 1, "method-unknown", "method .scatter()")
def c1_walrus_then_call(z: tl.Out, x: tl.In, idx: tl.In):
    t = tl.load_like(x, z)
    if (c := ct) is not None:
        c.scatter(x, tl.load_like(idx, z), t)  # AT: c1_walrus_then_call
    z.store(t)


@refused("c1_comprehension_alias", 1, "write-safe", ".store() writes memory directly")
def c1_comprehension_alias(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    [c.store(x, index=(0,), tile=t) for c in (ct,)]  # AT: c1_comprehension_alias @ c.store
    z.store(t)


@refused("c1_generator_alias", 1, "write-safe", ".store() writes memory directly")
def c1_generator_alias(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    tuple(c.store(x, index=(0,), tile=t) for c in (ct,))  # AT: c1_generator_alias @ c.store
    z.store(t)


@refused("c1_star_unpack_alias", 1, "write-safe", ".store() writes memory directly")
def c1_star_unpack_alias(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    *c, = (ct,)
    c[0].store(x, index=(0,), tile=t)  # AT: c1_star_unpack_alias
    z.store(t)


@refused("c1_star_unpack_middle", 1, "method-unknown", "method .atomic_xchg()")
def c1_star_unpack_middle(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    first, *rest = (1.0, ct)
    rest[0].atomic_xchg(x, ct.arange(16, dtype=ct.int32), t)  # AT: c1_star_unpack_middle
    z.store(t * first)


@refused("c1_loop_alias", 1, "method-unknown", "method .atomic_add()")
def c1_loop_alias(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    for m in (ct,):
        m.atomic_add(x, ct.arange(16, dtype=ct.int32), t)  # AT: c1_loop_alias
    z.store(t)


@refused("c1_loop_alias_store", 1, "write-safe", ".store() writes memory directly")
def c1_loop_alias_store(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    for m in (cuda.tile, ct):
        m.store(x, index=(0,), tile=t)  # AT: c1_loop_alias_store
    z.store(t)


@refused("c1_helper_local_alias", 1, "write-safe", ".store() writes memory directly",
         "in helper 'alias_writer'")
def c1_helper_local_alias(z: tl.Out, x: tl.In):
    z.store(sh.alias_writer(x, tl.load_like(x, z)))


@refused("c1_tuple_index", 1, "write-safe", ".store() writes memory directly")
def c1_tuple_index(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    (ct,)[0].store(x, index=(0,), tile=t)  # AT: c1_tuple_index
    z.store(t)


@refused("c1_tuple_index_scatter", 1, "method-unknown", "method .scatter()")
def c1_tuple_index_scatter(z: tl.Out, x: tl.In, idx: tl.In):
    t = tl.load_like(x, z)
    (ct, ct)[1].scatter(x, tl.load_like(idx, z), t)  # AT: c1_tuple_index_scatter
    z.store(t)


@refused("c1_dict_value", 1, "write-safe", ".store() writes memory directly")
def c1_dict_value(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    {"ops": ct}["ops"].store(x, index=(0,), tile=t)  # AT: c1_dict_value
    z.store(t)


@refused("c1_list_value", 1, "method-unknown", "method .atomic_max()")
def c1_list_value(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    [ct][0].atomic_max(x, ct.arange(16, dtype=ct.int32), t)  # AT: c1_list_value
    z.store(t)


@refused("c1_dotted_module_alias", 1, "write-safe", ".store() writes memory directly")
def c1_dotted_module_alias(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    c = cuda.tile
    c.store(x, index=(0,), tile=t)  # AT: c1_dotted_module_alias
    z.store(t)


@refused("c1_ifexp_alias", 1, "write-safe", ".store() writes memory directly")
def c1_ifexp_alias(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    (ct if x.ndim == 1 else cuda.tile).store(x, index=(0,), tile=t)  # AT: c1_ifexp_alias
    z.store(t)


@refused("c1_chained_alias", 1, "method-unknown", "method .atomic_or()")
def c1_chained_alias(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    a = ct
    b = a
    b.atomic_or(x, ct.arange(16, dtype=ct.int32), t)  # AT: c1_chained_alias
    z.store(t)


@refused("c1_alias_from_foreign", 1, "raw-op", "raw memory", "unsafe=True")
def c1_alias_from_foreign(z: tl.Out, x: tl.In):
    c = ct
    v = c.Array.from_foreign(x.foreign_pointer, x.shape, x.strides)  # AT: c1_alias_from_foreign
    z.store(tl.load_like(x, z))


@refused("c1_alias_load_unchecked", 1, "view-op", "c.load()", "unsafe=True")
def c1_alias_load_unchecked(z: tl.Out, x: tl.In):
    c = ct
    t = c.load(x, index=(0,), shape=(64,), check_bounds=False)  # AT: c1_alias_load_unchecked
    z.store(t)


_MODULES = (ct, cuda.tile)


@refused("c1_global_tuple_of_modules", 1, "write-safe", ".store() writes memory directly")
def c1_global_tuple_of_modules(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    _MODULES[0].store(x, index=(0,), tile=t)  # AT: c1_global_tuple_of_modules
    z.store(t)


@refused("c1_global_tuple_as_value", 1, "global-value", "_MODULES is a tuple object")
def c1_global_tuple_as_value(z: tl.Out, x: tl.In):
    mods = _MODULES  # AT: c1_global_tuple_as_value @ _MODULES
    z.store(tl.load_like(x, z))


@refused("c1_unsafe_alias_store", 1, "write-untraced", "cannot trace back to a tl.Raw",
         unsafe=True)
def c1_unsafe_alias_store(r: tl.Raw, x: tl.In):
    c = ct
    t = ct.load(x, index=(ct.bid(0),), shape=(16,))
    c.store(r, index=(ct.bid(0),), tile=t)  # AT: c1_unsafe_alias_store


@refused("c1_unsafe_alias_of_in", 1, "write-input", "'x', which is tl.In", unsafe=True)
def c1_unsafe_alias_of_in(r: tl.Raw, x: tl.In):
    t = ct.load(x, index=(ct.bid(0),), shape=(16,))
    views = (r, x)
    ct.store(views[1], index=(ct.bid(0),), tile=t)  # AT: c1_unsafe_alias_of_in


@refused("c1_alias_exp_careless", 1, "method-unknown", "method .exp()",
         "use the cuTile function form")
def c1_alias_exp_careless(z: tl.Out, x: tl.In):
    c = ct
    z.store(c.exp(tl.load_like(x, z)))  # AT: c1_alias_exp_careless @ c.exp


@refused("c1_module_as_value", 1, "global-value", "ct is module 'cuda.tile'")
def c1_module_as_value(z: tl.Out, x: tl.In):
    if ct:  # AT: c1_module_as_value @ ct:
        z.store(tl.load_like(x, z))


# ======================================================================================
# 2. names rebound by nested functions, defaults or parameters


@refused("c2_local_op_scatter", 2, "call-local", "call through 'f', which this function binds")
def c2_local_op_scatter(z: tl.Out, x: tl.In, idx: tl.In):
    f = ct.scatter
    t = tl.load_like(x, z)
    f(x, tl.load_like(idx, z), t)  # AT: c2_local_op_scatter
    z.store(t)


@refused("c2_local_op_store", 2, "call-local", "call through 'st'")
def c2_local_op_store(z: tl.Out, x: tl.In):
    st = ct.store
    t = tl.load_like(x, z)
    st(x, index=(0,), tile=t)  # AT: c2_local_op_store
    z.store(t)


@refused("c2_tuple_rebind", 2, "call-local", "call through 'w'")
def c2_tuple_rebind(z: tl.Out, x: tl.In):
    r, w = ct.load, ct.store
    t = tl.load_like(x, z)
    w(x, index=(0,), tile=t)  # AT: c2_tuple_rebind
    z.store(t)


@refused("c2_ifexp_rebind", 2, "call-local", "call through 'f'")
def c2_ifexp_rebind(z: tl.Out, x: tl.In):
    f = ct.store if x.ndim == 1 else ct.atomic_add
    t = tl.load_like(x, z)
    f(x, index=(0,), tile=t)  # AT: c2_ifexp_rebind
    z.store(t)


@refused("c2_kernel_default_op", 2, "global-value", "ct.scatter is function 'scatter'",
         "functions are called, never passed around")
def c2_kernel_default_op(z: tl.Out, x: tl.In, op=ct.scatter):  # AT: c2_kernel_default_op @ ct.scatter
    z.store(tl.load_like(x, z))


@refused("c2_kernel_default_called", 2, "call-local", "call through 'op'")
def c2_kernel_default_called(z: tl.Out, x: tl.In, op=ct.store):
    t = tl.load_like(x, z)
    op(x, index=(0,), tile=t)  # AT: c2_kernel_default_called
    z.store(t)


@refused("c2_helper_default_op", 2, "call-local", "call through 'op'", "helper 'default_op'")
def c2_helper_default_op(z: tl.Out, x: tl.In):
    z.store(sh.default_op(x, tl.load_like(x, z)))


@refused("c2_helper_kwonly_default", 2, "call-local", "call through 'op'")
def c2_helper_kwonly_default(z: tl.Out, x: tl.In):
    z.store(sh.kwonly_default_op(tl.load_like(x, z)))


@refused("c2_op_passed_to_helper", 2, "call-local", "call through 'f'", "helper 'calls_param'")
def c2_op_passed_to_helper(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    z.store(sh.calls_param(ct.store, x, t))


@refused("c2_writer_passed_to_helper", 2, "call-local", "call through 'f'")
def c2_writer_passed_to_helper(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    z.store(sh.calls_param(sh.writer, x, t))


@refused("c2_reader_passed_to_helper", 2, "call-local", "call through 'f'")
def c2_reader_passed_to_helper(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    z.store(sh.calls_param(sh.add2, t, t))      # careless: even a reader is refused


@refused("c2_param_called", 2, "call-local", "call through 'op'")
def c2_param_called(z: tl.Out, x: tl.In, op: int):
    t = tl.load_like(x, z)
    op(x, t)  # AT: c2_param_called
    z.store(t)


@refused("c2_param_shadows_helper", 2, "call-local", "call through 'double'")
def c2_param_shadows_helper(z: tl.Out, x: tl.In, double: float):
    z.store(double(tl.load_like(x, z)))  # AT: c2_param_shadows_helper @ double(


@refused("c2_loop_var_called", 2, "call-local", "call through 'f'")
def c2_loop_var_called(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    for f in (ct.store,):
        f(x, index=(0,), tile=t)  # AT: c2_loop_var_called
    z.store(t)


@refused("c2_comprehension_var_called", 2, "call-local", "call through 'f'")
def c2_comprehension_var_called(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    [f(x, index=(0,), tile=t) for f in (ct.store,)]  # AT: c2_comprehension_var_called @ f(x
    z.store(t)


@refused("c2_walrus_callee", 2, "call-computed", "computed callee")
def c2_walrus_callee(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    (f := ct.store)(x, index=(0,), tile=t)  # AT: c2_walrus_callee
    z.store(t)


@refused("c2_walrus_then_call", 2, "call-local", "call through 'f'")
def c2_walrus_then_call(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    if (f := ct.atomic_add) is not None:
        f(x, ct.arange(16, dtype=ct.int32), t)  # AT: c2_walrus_then_call
    z.store(t)


@refused("c2_nested_def_rebind", 2, "statement", "nested functions are not allowed")
def c2_nested_def_rebind(z: tl.Out, x: tl.In):
    def load_like(a, p):  # AT: c2_nested_def_rebind
        ct.store(a, index=(0,), tile=ct.zeros((64,), ct.float32))
        return ct.zeros((64,), ct.float32)
    z.store(load_like(x, 0))


@refused("c2_lambda_rebind", 2, "statement", "lambdas are not allowed")
def c2_lambda_rebind(z: tl.Out, x: tl.In):
    f = lambda a, t: ct.store(a, index=(0,), tile=t)  # noqa: E731  # AT: c2_lambda_rebind @ lambda
    t = tl.load_like(x, z)
    f(x, t)
    z.store(t)


@refused("c2_global_statement", 2, "statement", "global statements are not allowed")
def c2_global_statement(z: tl.Out, x: tl.In):
    global _OP_TARGET  # AT: c2_global_statement
    z.store(tl.load_like(x, z))


@refused("c2_attribute_rebind", 2, "assign-target", "assignment to ct.load is not allowed")
def c2_attribute_rebind(z: tl.Out, x: tl.In):
    ct.load = ct.store  # AT: c2_attribute_rebind @ ct.load
    z.store(tl.load_like(x, z))


@refused("c2_star_unpack_callee", 2, "call-computed", "computed callee 'f[0]'")
def c2_star_unpack_callee(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    *f, = (ct.store,)
    f[0](x, index=(0,), tile=t)  # AT: c2_star_unpack_callee
    z.store(t)


@refused("c2_except_name_rebind", 2, "statement", "try statements are not allowed")
def c2_except_name_rebind(z: tl.Out, x: tl.In):
    try:  # AT: c2_except_name_rebind
        pass
    except Exception as ct:  # noqa: F841
        pass
    z.store(tl.load_like(x, z))


# ======================================================================================
# 3. callables that are not plain functions

_PARTIAL_SCATTER = functools.partial(ct.scatter)


class _Sink:
    def write(self, s):
        return len(s)


_SINK = _Sink()
_CT_KERNEL = ct.kernel(sh.double)


@refused("c3_partial_global", 3, "call-unknown", "a partial object, which a kernel cannot call")
def c3_partial_global(z: tl.Out, x: tl.In, idx: tl.In):
    t = tl.load_like(x, z)
    _PARTIAL_SCATTER(x, tl.load_like(idx, z), t)  # AT: c3_partial_global
    z.store(t)


@refused("c3_partial_other_module", 3, "call-unknown", "partial object")
def c3_partial_other_module(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    sh.partial_store(x, tile=t)  # AT: c3_partial_other_module
    z.store(t)


@refused("c3_partial_inline", 3, "call-computed", "computed callee")
def c3_partial_inline(z: tl.Out, x: tl.In, idx: tl.In):
    t = tl.load_like(x, z)
    functools.partial(ct.scatter, x)(tl.load_like(idx, z), t)  # AT: c3_partial_inline
    z.store(t)


@refused("c3_partial_created", 3, "call-unknown", "class 'partial'")
def c3_partial_created(z: tl.Out, x: tl.In):
    p = functools.partial(ct.store, x)  # AT: c3_partial_created @ functools.partial
    z.store(tl.load_like(x, z))


@refused("c3_callable_object", 3, "call-unknown", "a CallableWriter object")
def c3_callable_object(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    sh.callable_writer(x, t)  # AT: c3_callable_object
    z.store(t)


@refused("c3_dunder_call", 3, "private-attribute", "attribute '__call__'")
def c3_dunder_call(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    sh.callable_writer.__call__(x, t)  # AT: c3_dunder_call
    z.store(t)


@refused("c3_map_op", 3, "call-unknown", "map() is not a builtin kernels can call")
def c3_map_op(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    map(ct.store, (x,), ((0,),), (t,))  # AT: c3_map_op
    z.store(t)


@refused("c3_staticmethod", 3, "global-attribute", "sh.Writers.put",
         "dotted names in a kernel go through modules only")
def c3_staticmethod(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    sh.Writers.put(x, t)  # AT: c3_staticmethod
    z.store(t)


@refused("c3_classmethod", 3, "global-attribute", "sh.Writers.put_cls")
def c3_classmethod(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    sh.Writers.put_cls(x, t)  # AT: c3_classmethod
    z.store(t)


@refused("c3_class_instantiation", 3, "call-unknown", "class 'CallableWriter'")
def c3_class_instantiation(z: tl.Out, x: tl.In):
    w = sh.CallableWriter()  # AT: c3_class_instantiation @ sh.CallableWriter
    z.store(tl.load_like(x, z))


# a tiled view of an input may be made (reads through it are bounds-checked); its bound
# store method, taken as a value, can never be called
@refused("c3_view_bound_store", 3, "call-local", "call through 'put'")
def c3_view_bound_store(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    put = x.tiled_view((64,)).store
    put((0,), t)  # AT: c3_view_bound_store
    z.store(t)


@refused("c3_view_store_passed_to_helper", 3, "call-local", "call through 'f'",
         where="c2_op_passed_to_helper")
def c3_view_store_passed_to_helper(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    z.store(sh.calls_param(x.tiled_view((64,)).store, (0,), t))


@refused("c3_methodcaller", 3, "call-computed", "computed callee")
def c3_methodcaller(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    operator.methodcaller("store", (0,), t)(x)  # AT: c3_methodcaller
    z.store(t)


@refused("c3_methodcaller_created", 3, "call-unknown", "operator.methodcaller")
def c3_methodcaller_created(z: tl.Out, x: tl.In):
    m = operator.methodcaller("store")  # AT: c3_methodcaller_created @ operator.methodcaller
    z.store(tl.load_like(x, z))


@refused("c3_getattr_call", 3, "call-computed", "computed callee 'getattr(ct, \"store\")'")
def c3_getattr_call(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    getattr(ct, "store")(x, index=(0,), tile=t)  # AT: c3_getattr_call
    z.store(t)


@refused("c3_getattr_value", 3, "call-dynamic", "getattr() looks names up or runs code")
def c3_getattr_value(z: tl.Out, x: tl.In):
    st = getattr(ct, "scatter")  # AT: c3_getattr_value @ getattr
    z.store(tl.load_like(x, z))


@refused("c3_eval", 3, "call-dynamic", "eval() looks names up or runs code")
def c3_eval(z: tl.Out, x: tl.In):
    n = eval("1")  # AT: c3_eval @ eval
    z.store(tl.load_like(x, z) + n)


@refused("c3_exec", 3, "call-dynamic", "exec()")
def c3_exec(z: tl.Out, x: tl.In):
    exec("ct.store(x, index=(0,), tile=ct.zeros((64,), ct.float32))")  # AT: c3_exec
    z.store(tl.load_like(x, z))


@refused("c3_globals", 3, "call-dynamic", "globals()")
def c3_globals(z: tl.Out, x: tl.In):
    ops = globals()  # AT: c3_globals @ globals
    z.store(tl.load_like(x, z))


@refused("c3_vars", 3, "call-dynamic", "vars()")
def c3_vars(z: tl.Out, x: tl.In):
    ops = vars(ct)  # AT: c3_vars @ vars
    z.store(tl.load_like(x, z))


@refused("c3_import_builtin", 3, "call-dynamic", "__import__()")
def c3_import_builtin(z: tl.Out, x: tl.In):
    m = __import__("cuda.tile")  # AT: c3_import_builtin @ __import__
    z.store(tl.load_like(x, z))


@refused("c3_builtins_getattr", 3, "call-dynamic", "builtins.getattr()")
def c3_builtins_getattr(z: tl.Out, x: tl.In):
    st = builtins.getattr(ct, "store")  # AT: c3_builtins_getattr @ builtins.getattr
    z.store(tl.load_like(x, z))


@refused("c3_compile_builtin", 3, "call-dynamic", "compile()")
def c3_compile_builtin(z: tl.Out, x: tl.In):
    c = compile("0", "<k>", "eval")  # AT: c3_compile_builtin @ compile
    z.store(tl.load_like(x, z))


@refused("c3_type_builtin", 3, "call-dynamic", "type()")
def c3_type_builtin(z: tl.Out, x: tl.In):
    T = type(x)  # AT: c3_type_builtin @ type
    z.store(tl.load_like(x, z))


@refused("c3_setattr_builtin", 3, "call-dynamic", "setattr()")
def c3_setattr_builtin(z: tl.Out, x: tl.In):
    setattr(ct, "load", ct.store)  # AT: c3_setattr_builtin
    z.store(tl.load_like(x, z))


@refused("c3_operator_setitem", 3, "call-unknown", "operator.setitem")
def c3_operator_setitem(z: tl.Out, x: tl.In):
    operator.setitem(x, 0, 1.0)  # AT: c3_operator_setitem
    z.store(tl.load_like(x, z))


@refused("c3_numpy_ufunc", 3, "call-unknown", "np.add")
def c3_numpy_ufunc(z: tl.Out, x: tl.In):
    np.add(x, 1, out=x)  # AT: c3_numpy_ufunc
    z.store(tl.load_like(x, z))


@refused("c3_numpy_copyto", 3, "call-unknown", "np.copyto")
def c3_numpy_copyto(z: tl.Out, x: tl.In):
    np.copyto(x, 0)  # AT: c3_numpy_copyto
    z.store(tl.load_like(x, z))


@refused("c3_sum_builtin", 3, "call-unknown", "sum() is not a builtin kernels can call")
def c3_sum_builtin(z: tl.Out, x: tl.In):
    n = sum((1, 2))  # AT: c3_sum_builtin @ sum
    z.store(tl.load_like(x, z) + n)


@refused("c3_ct_kernel_object", 3, "call-unknown", "is not a classified cuTile op")
def c3_ct_kernel_object(z: tl.Out, x: tl.In):
    _CT_KERNEL(x)  # AT: c3_ct_kernel_object
    z.store(tl.load_like(x, z))


def _tl_kernel_target(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z))


_TL_KERNEL = tl.kernel(_tl_kernel_target)


@refused("c3_tl_kernel_called", 3, "call-unknown", "_TL_KERNEL is a Kernel object")
def c3_tl_kernel_called(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    _TL_KERNEL(x, x)  # AT: c3_tl_kernel_called
    z.store(t)


def _generator_helper(t):
    yield t  # AT: c3_generator_helper


@refused("c3_generator_helper", 3, "statement", "yield are not allowed")
def c3_generator_helper(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) + _generator_helper(1))


@refused("c3_print_file", 3, "global-value", "_SINK is a _Sink object")
def c3_print_file(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    print(t, file=_SINK)  # AT: c3_print_file @ _SINK
    z.store(t)


@refused("c3_super", 3, "call-unknown", "super() is not a builtin kernels can call")
def c3_super(z: tl.Out, x: tl.In):
    s = super()  # AT: c3_super @ super
    z.store(tl.load_like(x, z))


@refused("c3_bound_method_of_global", 3, "global-attribute", "_SINK.write")
def c3_bound_method_of_global(z: tl.Out, x: tl.In):
    _SINK.write("x")  # AT: c3_bound_method_of_global
    z.store(tl.load_like(x, z))


@refused("c3_max_key", 3, "global-value", "ct.exp is function 'exp'")
def c3_max_key(z: tl.Out, x: tl.In):
    m = max(1, 2, key=ct.exp)  # AT: c3_max_key @ ct.exp
    z.store(tl.load_like(x, z) + m)


# ======================================================================================
# 4. changes after the check: the next compile (a new shape) or launch re-checks


def _before(k, n=256):
    """A CPU launch before the change, so that every cache (lowerings, plans) is warm."""
    x = cpu(arange(n))
    z = zeros(n)
    k(z.partition(64), x)
    return k


def _bigger():
    return (S(512).partition(64), S(512))


def compile_changed(s, k):
    """The next compile after a change (a new shape, for sm_90), which must refuse; then,
    with the change still in place, a CPU launch: recorded on the steps as
    ``cpu_outcome`` ('refused', or 'ran' with ``cpu_input_unchanged``)."""
    try:
        s.compile(k, *_bigger())
    except Exception:
        x_np = arange(512)
        before = x_np.copy()
        x = cpu(x_np)
        try:
            k(zeros(512).partition(64), x)
            s.cpu_outcome = "ran"
            s.cpu_input_unchanged = bool(np.array_equal(x.numpy(), before))
        except tl.SafetyError:
            s.cpu_outcome = "refused"
        raise


def _swap_code(fn, other_code):
    old = fn.__code__
    fn.__code__ = other_code

    def undo():
        fn.__code__ = old
    return undo


def _c4_reader(dst, t):
    return t * 2


def _c4_writer(dst, t):
    ct.store(dst, index=(0,), tile=t)  # AT: c4_code_swapped_to_writer, c4_code_swapped_launch
    return t


def c4_swap_kernel(z: tl.Out, x: tl.In):
    z.store(_c4_reader(x, tl.load_like(x, z)))


@attempt("c4_code_swapped_to_writer", 4, "compile", "write-input", "'dst', which is tl.In",
         "helper '_c4_reader'")
def _(s):
    k = _before(s.define(c4_swap_kernel))
    undo = _swap_code(_c4_reader, _c4_writer.__code__)
    try:
        compile_changed(s, k)
    finally:
        undo()


def _c4_reader_b(dst, t):
    return t * 2


def c4_swap_kernel_b(z: tl.Out, x: tl.In):
    z.store(_c4_reader_b(x, tl.load_like(x, z)))


@attempt("c4_code_swapped_launch", 4, "launch", "write-input", "'dst', which is tl.In")
def _(s):
    k = _before(s.define(c4_swap_kernel_b))
    undo = _swap_code(_c4_reader_b, _c4_writer.__code__)
    try:
        launch_cpu(s, k, (zeros(512).partition(64), cpu(arange(512))))
    finally:
        undo()


def c4_module_attr_kernel2(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    z.store(sh.double(t))


def _c4_double_writer(t):
    ct.store(t, index=(0,), tile=t)  # AT: c4_module_attribute_replaced_b
    return t


@attempt("c4_module_attribute_replaced", 4, "compile", "write-input", "which is tl.In",
         where="c4_module_attribute_replaced_b")
def _(s):
    k = _before(s.define(c4_module_attr_kernel2))
    undo = _patch(sh, "double", _c4_double_writer)
    try:
        compile_changed(s, k)
    finally:
        undo()


def c4_from_import_kernel(z: tl.Out, x: tl.In):
    z.store(sh_double(tl.load_like(x, z)))


@attempt("c4_from_import_rebound", 4, "compile", "write-input", "which is tl.In",
         where="c4_module_attribute_replaced_b")
def _(s):
    k = _before(s.define(c4_from_import_kernel))
    undo = _patch(G, "sh_double", _c4_double_writer)
    try:
        compile_changed(s, k)
    finally:
        undo()


def _c4_factory(helper):
    def closed(z: tl.Out, x: tl.In):
        z.store(helper(tl.load_like(x, z)))

    def rebind(new):
        nonlocal helper
        helper = new
    return closed, rebind


@attempt("c4_closure_cell_rebound", 4, "compile", "write-input", "which is tl.In",
         where="c4_module_attribute_replaced_b")
def _(s):
    fn, _rebind = _c4_factory(sh.double)
    k = _before(s.define(fn))
    cell = fn.__closure__[fn.__code__.co_freevars.index("helper")]
    old = cell.cell_contents
    cell.cell_contents = _c4_double_writer
    try:
        compile_changed(s, k)
    finally:
        cell.cell_contents = old


@attempt("c4_closure_nonlocal_rebound", 4, "launch", "write-input", "which is tl.In",
         where="c4_module_attribute_replaced_b")
def _(s):
    fn, rebind = _c4_factory(sh.double)
    k = _before(s.define(fn))
    rebind(_c4_double_writer)
    launch_cpu(s, k, (zeros(512).partition(64), cpu(arange(512))))


_C4_OP = ct.gather


def c4_op_alias_kernel(z: tl.Out, x: tl.In, idx: tl.In):
    z.store(_C4_OP(x, tl.load_like(idx, z)))  # AT: c4_global_op_alias_rebound @ _C4_OP


@attempt("c4_global_op_alias_rebound", 4, "compile", "write-input", "_C4_OP() writes to 'x'",
         "which is tl.In")
def _(s):
    k = s.define(c4_op_alias_kernel)
    undo = _patch(G, "_C4_OP", ct.scatter)
    try:
        s.compile(k, S(512).partition(64), S(512), S(512, "int32"))
    finally:
        undo()


_C4_CT2 = ct


def c4_second_alias_kernel(z: tl.Out, x: tl.In):
    z.store(_C4_CT2.exp(tl.load_like(x, z)))


@attempt("c4_second_module_alias_rebound", 4, "compile", "write-input", "which is tl.In")
def _(s):
    k = _before(s.define(c4_second_alias_kernel))
    undo = _patch(G, "_C4_CT2", sh.fake_ct)
    try:
        compile_changed(s, k)
    finally:
        undo()


def _define_cell(name, text, counter=[0]):
    """Run ``text`` as a notebook cell would: a fresh linecache name per execution."""
    counter[0] += 1
    filename = f"<notebook-cell-{counter[0]}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    exec(compile(text, filename, "exec"), G)
    return filename


def c4_cell_kernel(z: tl.Out, x: tl.In):
    z.store(_cell_helper(tl.load_like(x, z)))  # noqa: F821 - defined by a "cell"


@attempt("c4_notebook_rerun_redefines_helper", 4, "compile", "write-input", "which is tl.In",
         "helper '_cell_helper'")
def _(s):
    _define_cell("_cell_helper", "def _cell_helper(t):\n    return t * 2\n")
    k = _before(s.define(c4_cell_kernel))
    old = G["_cell_helper"]
    cell = _define_cell("_cell_helper", "def _cell_helper(t):\n"
                                        "    ct.store(t, index=(0,), tile=t)\n"
                                        "    return t\n")
    s.at = (cell, 2)
    try:
        compile_changed(s, k)
    finally:
        G["_cell_helper"] = old


_C4_SCALE = 2.0


def c4_constant_kernel(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) * _C4_SCALE)  # AT: c4_constant_becomes_list @ _C4_SCALE


@attempt("c4_constant_becomes_list", 4, "compile", "global-value", "_C4_SCALE is a list object")
def _(s):
    k = _before(s.define(c4_constant_kernel))
    undo = _patch(G, "_C4_SCALE", [2.0])
    try:
        compile_changed(s, k)
    finally:
        undo()


_C4_SCALE_B = 2.0


def c4_constant_kernel_b(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) * _C4_SCALE_B)  # AT: c4_constant_becomes_array @ _C4_SCALE_B


@attempt("c4_constant_becomes_array", 4, "launch", "global-value", "_C4_SCALE_B is a ndarray")
def _(s):
    k = _before(s.define(c4_constant_kernel_b))
    undo = _patch(G, "_C4_SCALE_B", np.full(4, 2.0, np.float32))
    try:
        launch_cpu(s, k, (zeros(512).partition(64), cpu(arange(512))))
    finally:
        undo()


_C4_DELETABLE = 1.0


def c4_deleted_kernel(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) + _C4_DELETABLE)  # AT: c4_global_deleted @ _C4_DELETABLE


@attempt("c4_global_deleted", 4, "compile", "unresolved-name", "name '_C4_DELETABLE' is not defined")
def _(s):
    k = _before(s.define(c4_deleted_kernel))
    old = G.pop("_C4_DELETABLE")
    try:
        compile_changed(s, k)
    finally:
        G["_C4_DELETABLE"] = old


def _c4_exp_writer(t):
    ct.store(t, index=(0,), tile=t)  # AT: c4_user_named_op_patched
    return t


def c4_exp_kernel(z: tl.Out, x: tl.In):
    z.store(ct.exp(tl.load_like(x, z)))


@attempt("c4_user_named_op_patched", 4, "compile", "write-input", "which is tl.In")
def _(s):
    k = _before(s.define(c4_exp_kernel))
    undo = _patch(ct, "exp", _c4_exp_writer)
    try:
        compile_changed(s, k)
    finally:
        undo()


def _c4_load_like_writer(x, p):
    ct.store(x, index=(0,), tile=ct.zeros((64,), ct.float32))
    return ct.zeros((64,), ct.float32)


def c4_load_like_kernel(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z))  # AT: c4_load_like_patched @ tl.load_like


@attempt("c4_load_like_patched", 4, "compile", "partition-escape", "passing partition 'z'")
def _(s):
    k = _before(s.define(c4_load_like_kernel))
    undo = _patch(tl, "load_like", _c4_load_like_writer)
    try:
        compile_changed(s, k)
    finally:
        undo()


_REAL_CT_LOAD = ct.load


def _c4_evil_load(array, index, shape, padding_mode=None, check_bounds=True):
    t = _REAL_CT_LOAD(array, index=index, shape=shape)
    ct.store(array, index=index, tile=t * 0 + 99)  # AT: c4_load_patched_used_by_kernel
    return t


def c4_own_load_kernel(z: tl.Out, x: tl.In):
    z.store(ct.load(x, index=z.tile_index, shape=z.tile_shape) + 1)


@attempt("c4_load_patched_used_by_kernel", 4, "compile", "write-input", "which is tl.In",
         "helper '_c4_evil_load'")
def _(s):
    """cuda.tile.load rebound after the check, in a kernel that calls ct.load itself:
    the kernel's ct is the real module, so the snapshot sees the change and the re-check
    reads the replacement as a helper (the generated code's own loads go through
    tilelab's pristine copy of cuTile: c4_generated_op_patched_cpu)."""
    k = _before(s.define(c4_own_load_kernel))
    undo = _patch(ct, "load", _c4_evil_load)
    try:
        compile_changed(s, k)
    finally:
        undo()


_REAL_DIVMOD = builtins.divmod


def _evil_divmod(a, b):
    ct.store(a, index=(0,), tile=ct.full((64,), 7.0, ct.float32))  # AT: c4_builtin_patched_before_definition
    return 1, 0


_evil_divmod.__name__ = "divmod"
_evil_divmod.__qualname__ = "divmod"

def c4_divmod_kernel(z: tl.Out, x: tl.In):
    q, r = divmod(x, 1)
    z.store(tl.load_like(x, z))


@attempt("c4_builtin_patched_before_definition", 4, "definition", "write-input",
         "which is tl.In", "helper 'divmod'")
def _(s):
    """builtins.divmod replaced before @tl.kernel: the replacement is not Python's
    divmod (builtins are classified against those of tilelab's import), so it is checked
    as a helper -- and refused at its write."""
    builtins.divmod = _evil_divmod
    try:
        s.define(c4_divmod_kernel)
    finally:
        builtins.divmod = _REAL_DIVMOD


# ---- neutralized: the checked code is what runs --------------------------------------


def _run_after_change(k, n=512, *, scale=None, extra=()):
    """Compile k for a new shape for sm_90 and run it on the CPU: Result."""
    x_np = arange(n)
    before = x_np.copy()
    x = cpu(x_np)
    z = zeros(n)
    args = (z.partition(64), x) + tuple(extra)
    res = Result(k)
    try:
        res.art = k.compile(*args, arch="sm_90", cache=False)
        res.gpu_index_ok = "get_tile_block_id" in res.art.tileir
    except (tl.SafetyError, tl.CompileError) as e:
        res.refusal = e          # refused: fine, but the CPU must not run writing code either
    try:
        k(*args)
    except tl.SafetyError as e:
        res.refusal = res.refusal or e
        return res
    res.inputs_unchanged = bool(np.array_equal(x.numpy(), before))
    if scale is not None:
        res.output_ok = bool(np.allclose(z.numpy(), before * scale))
    res.detail = f"x[:4]={x.numpy()[:4]} z[:4]={z.numpy()[:4]}"
    return res


def _c4_writer_elsewhere(dst, t):
    ct.store(dst, index=(0,), tile=t)
    return t


def _c4_doubler(dst, t):
    return t * 2


def _c4_doubler_b(dst, t):
    return t * 2


def n_text_kernel(z: tl.Out, x: tl.In):
    z.store(_c4_doubler(x, tl.load_like(x, z)))


def n_text_kernel_b(z: tl.Out, x: tl.In):
    z.store(_c4_doubler_b(x, tl.load_like(x, z)))


@neutralized("c6_code_from_other_text", 6)
def _(s):
    """A writing code object compiled with a fake filename and line: this file, at the
    reader's own def. The text the line numbers point at is what is checked and run."""
    k = _before(s.define(n_text_kernel))
    src = ("def _c4_doubler(dst, t):\n"
           "    ct.store(dst, index=(0,), tile=t)\n"
           "    return t\n")
    line = _c4_doubler.__code__.co_firstlineno
    mod = compile("\n" * (line - 1) + src, __file__, "exec")
    code = next(c for c in mod.co_consts if isinstance(c, types.CodeType))
    undo = _swap_code(_c4_doubler, code)
    try:
        return _run_after_change(k, scale=2)
    finally:
        undo()


@neutralized("c6_code_replace_firstlineno", 6)
def _(s):
    """types.CodeType.replace(co_firstlineno=...) on a writer's code: the line points at
    a reader's text, which is what is checked and what runs."""
    k = _before(s.define(n_text_kernel_b))
    code = _c4_writer_elsewhere.__code__.replace(
        co_firstlineno=_c4_doubler_b.__code__.co_firstlineno, co_name="_c4_doubler_b",
        co_qualname="_c4_doubler_b")
    undo = _swap_code(_c4_doubler_b, code)
    try:
        return _run_after_change(k, scale=2)
    finally:
        undo()


def _n_kernel_swap_target(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) * 2)


def _n_kernel_swap_writer(z: tl.Out, x: tl.In):
    ct.store(x, index=(0,), tile=tl.load_like(x, z))
    z.store(tl.load_like(x, z) * 2)


@neutralized("c4_kernel_code_swapped", 4)
def _(s):
    """The kernel function's own __code__ swapped after definition: the captured text
    is what compiles and runs."""
    k = _before(s.define(_n_kernel_swap_target))
    undo = _swap_code(_n_kernel_swap_target, _n_kernel_swap_writer.__code__)
    try:
        return _run_after_change(k, scale=2)
    finally:
        undo()


_N_SCALE = 2.0


def n_constant_kernel(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) * _N_SCALE)


@neutralized("c4_constant_edited", 4)
def _(s):
    """A module constant edited after the check: the re-check accepts the new value and
    the next compile and launch use it (never a stale one)."""
    k = _before(s.define(n_constant_kernel))
    undo = _patch(G, "_N_SCALE", 5.0)
    try:
        return _run_after_change(k, scale=5)
    finally:
        undo()


def _c4_restorable(t):
    return t * 2


def n_restore_kernel(z: tl.Out, x: tl.In):
    z.store(_c4_restorable(tl.load_like(x, z)))


@neutralized("c4_helper_swapped_and_restored", 4)
def _(s):
    """Swapped to a writer (refused), then restored: the next compile checks again and
    compiles the reader (no stale refusal, no stale writer)."""
    k = _before(s.define(n_restore_kernel))
    undo = _swap_code(_c4_restorable, _c4_double_writer.__code__)
    try:
        refused = _run_after_change(k, scale=2)
        assert isinstance(refused.refusal, tl.SafetyError), refused
    finally:
        undo()
    return _run_after_change(k, n=1024, scale=2)


def n_generated_kernel(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) * 2)


def _zero_bid(axis):
    return 0


@neutralized("c4_generated_bid_patched", 4)
def _(s):
    """cuda.tile.bid rebound after the check (only generated code calls it here): the next
    compile must index the partition stores by the block id, or refuse."""
    k = _before(s.define(n_generated_kernel))
    undo = _patch(ct, "bid", _zero_bid)
    try:
        return _run_after_change(k, scale=2)
    finally:
        undo()


@neutralized("c4_generated_op_patched_cpu", 4)
def _(s):
    """cuda.tile.load rebound (a name only the generated code uses): the CPU backend runs
    the interpreter's own ops, and the compile is refused or has no extra write."""
    k = _before(s.define(n_generated_kernel))
    undo = _patch(ct, "load", _c4_evil_load)
    try:
        return _run_after_change(k, scale=2)
    finally:
        undo()


def n_divmod_kernel(z: tl.Out, x: tl.In):
    q, r = divmod(x, 1)
    z.store(tl.load_like(x, z) * 2)


@neutralized("c4_builtin_patched_after_check", 4)
def _(s):
    k = s.define(n_divmod_kernel)
    builtins.divmod = _evil_divmod
    try:
        x_np = arange(512)
        before = x_np.copy()
        x, z = cpu(x_np), zeros(512)
        res = Result(k)
        try:
            k(z.partition(64), x)
        except (tl.SafetyError, tl.CompileError, tl.LaunchError) as e:
            res.refusal = e
            return res
        res.inputs_unchanged = bool(np.array_equal(x.numpy(), before))
        res.detail = f"x[:4] after the launch: {x.numpy()[:4]}"
        res.art = "cpu-only"
        return res
    finally:
        builtins.divmod = _REAL_DIVMOD


def n_grouped_kernel(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) + 1)


def _zero_tile_index(pid, num_m, num_n, group_m):
    return 0, 0


@neutralized("c4_device_helper_patched", 4)
def _(s):
    k = s.define(n_grouped_kernel)
    undo = _patch(tl_device, "grouped_tile_index", _zero_tile_index)
    try:
        x_np = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
        x, z = cpu(x_np.copy()), zeros((64, 64))
        res = Result(k, art="cpu-only")
        k(z.partition((16, 16), schedule=tl.grouped(2)), x)
        res.output_ok = bool(np.array_equal(z.numpy(), x_np + 1))
        res.detail = f"{int((z.numpy() == 0).sum())} elements never stored"
        return res
    finally:
        undo()


# ======================================================================================
# 5. user names that could capture generated code (refusals; the accepted kernels of
#    soundness_shadow.py are in ACCEPTED below)


@refused("c5_param_reserved", 5, "reserved-name", "parameter '__tl_x' has a reserved name")
def c5_param_reserved(z: tl.Out, x: tl.In, __tl_x: float):  # AT: c5_param_reserved @ __tl_x
    z.store(tl.load_like(x, z))


@refused("c5_partition_reserved", 5, "reserved-name", "parameter '__tl_z' has a reserved name")
def c5_partition_reserved(__tl_z: tl.Out, x: tl.In):  # AT: c5_partition_reserved @ __tl_z
    __tl_z.store(tl.load_like(x, __tl_z))


@refused("c5_local_reserved_ct", 5, "reserved-name", "'__tl_ct' is a reserved name")
def c5_local_reserved_ct(z: tl.Out, x: tl.In):
    __tl_ct = sh  # AT: c5_local_reserved_ct
    z.store(tl.load_like(x, z))


@refused("c5_read_reserved_range", 5, "reserved-name", "'__tl_range'")
def c5_read_reserved_range(z: tl.Out, x: tl.In):
    for i in __tl_range(2):  # noqa: F821  # AT: c5_read_reserved_range @ __tl_range
        pass
    z.store(tl.load_like(x, z))


@refused("c5_read_reserved_dev", 5, "reserved-name", "'__tl_dev'")
def c5_read_reserved_dev(z: tl.Out, x: tl.In):
    m, n = __tl_dev.unravel_2d(0, 1)  # noqa: F821  # AT: c5_read_reserved_dev @ __tl_dev
    z.store(tl.load_like(x, z))


@refused("c5_read_tile_constant", 5, "reserved-name", "'__tl_z_t0'")
def c5_read_tile_constant(z: tl.Out, x: tl.In):
    n = __tl_z_t0  # noqa: F821  # AT: c5_read_tile_constant @ __tl_z_t0
    z.store(tl.load_like(x, z) + n)


@refused("c5_group_constant", 5, "reserved-name", "'__tl_group_m'")
def c5_group_constant(z: tl.Out, x: tl.In):
    __tl_group_m = 1  # AT: c5_group_constant
    z.store(tl.load_like(x, z))


@refused("c5_loop_var_reserved", 5, "reserved-name", "'__tl_t'")
def c5_loop_var_reserved(z: tl.Out, x: tl.In):
    for __tl_t in z.tiles():  # AT: c5_loop_var_reserved @ __tl_t
        z.store(tl.load_like(x, z, at=__tl_t), at=__tl_t)


@refused("c5_unused_param_reserved_ct", 5, "reserved-name",
         "parameter '__tl_ct' has a reserved name")
def c5_unused_param_reserved_ct(z: tl.Out, x: tl.In, __tl_ct: int):  # AT: c5_unused_param_reserved_ct @ __tl_ct
    z.store(tl.load_like(x, z))


@refused("c5_attribute_reserved", 5, "private-attribute", "attribute '__tl_ct' of x is private")
def c5_attribute_reserved(z: tl.Out, x: tl.In):
    m = x.__tl_ct  # AT: c5_attribute_reserved @ x.__tl_ct
    z.store(tl.load_like(x, z))


def _c5_helper(__tl_t):  # AT: c5_helper_param_reserved @ __tl_t
    return __tl_t


@refused("c5_helper_param_reserved", 5, "reserved-name", "parameter '__tl_t' has a reserved name",
         "helper '_c5_helper'")
def c5_helper_param_reserved(z: tl.Out, x: tl.In):
    z.store(_c5_helper(tl.load_like(x, z)))


@refused("c5_walrus_reserved", 5, "reserved-name", "'__tl_ct'")
def c5_walrus_reserved(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) + (__tl_ct := 1))  # AT: c5_walrus_reserved @ __tl_ct


# ======================================================================================
# 6. checked text vs executed code


def _temp_module(text: str, hint: str):
    """Write text as a module file in a fresh temporary directory and import it."""
    import importlib.util
    import tempfile
    import uuid

    d = Path(tempfile.mkdtemp(prefix="tilelab-soundness-"))
    name = f"snd_{hint}_{uuid.uuid4().hex[:8]}"
    path = d / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod, path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, (old, text)
    path.write_text(text.replace(old, new), encoding="utf-8")
    time.sleep(0.01)


_LATE_MODULE = '''\
import cuda.tile as ct
import tilelab as tl


@tl.kernel
def k(z: tl.Out, x: tl.In):
    z.store(late(tl.load_like(x, z)))


def late(t):
    return t * 2
'''


@attempt("c6_late_helper_edited_before_compile", 6, "compile", "write-input",
         "which is tl.In", "helper 'late'")
def _(s):
    """A helper defined after its kernel is captured at the first compile; the file was
    edited since import, so the text read then (a writer) is what is checked -- and it
    would be what runs."""
    s.stage = "definition"
    mod, path = _temp_module(_LATE_MODULE, "late")
    s.done()
    _edit(path, "    return t * 2\n", "    ct.store(t, index=(0,), tile=t)\n    return t\n")
    lines = path.read_text().splitlines()
    s.at = (str(path), 1 + next(i for i, ln in enumerate(lines) if "ct.store" in ln))
    compile_changed(s, mod.k)


def _c6_target(t):
    return t * 2


def _c6_target_renamed(t):
    return t * 2


def _c6_pointed_writer(t):
    ct.store(t, index=(0,), tile=t)  # AT: c6_code_renamed_to_writer
    return t


def c6_points_kernel(z: tl.Out, x: tl.In):
    z.store(_c6_target(tl.load_like(x, z)))  # AT: c6_code_points_at_writer @ _c6_target


def c6_renamed_kernel(z: tl.Out, x: tl.In):
    z.store(_c6_target_renamed(tl.load_like(x, z)))


@attempt("c6_code_points_at_writer", 6, "compile", "helper-source",
         "cannot check helper '_c6_target'", "its source is not available")
def _(s):
    """A harmless code object whose first line points at a writer's def: the def at that
    line is not the code's (its co_name differs), so no text is known to be what runs --
    the helper is refused at the call."""
    k = _before(s.define(c6_points_kernel))
    code = _c6_target.__code__.replace(
        co_firstlineno=_c6_pointed_writer.__code__.co_firstlineno)
    undo = _swap_code(_c6_target, code)
    try:
        compile_changed(s, k)
    finally:
        undo()


@attempt("c6_code_renamed_to_writer", 6, "compile", "write-input", "which is tl.In",
         "helper '_c6_target_renamed'")
def _(s):
    """... and renamed too (co_name, co_qualname of the writer): the writer's def is then
    the text checked (and what would run), so it is refused at its write."""
    k = _before(s.define(c6_renamed_kernel))
    code = _c6_target_renamed.__code__.replace(
        co_firstlineno=_c6_pointed_writer.__code__.co_firstlineno,
        co_name="_c6_pointed_writer", co_qualname="_c6_pointed_writer")
    undo = _swap_code(_c6_target_renamed, code)
    try:
        compile_changed(s, k)
    finally:
        undo()


def _c6_target_b(t):
    return t * 2


def c6_ghost_kernel(z: tl.Out, x: tl.In):
    z.store(_c6_target_b(tl.load_like(x, z)))  # AT: c6_code_from_missing_file @ _c6_target_b


@attempt("c6_code_from_missing_file", 6, "compile", "helper-source",
         "its source is not available")
def _(s):
    k = _before(s.define(c6_ghost_kernel))
    mod = compile("def _c6_target_b(t):\n    return t\n", "/nonexistent/ghost.py", "exec")
    code = next(c for c in mod.co_consts if isinstance(c, types.CodeType))
    undo = _swap_code(_c6_target_b, code)
    try:
        compile_changed(s, k)
    finally:
        undo()


@attempt("c6_exec_kernel", 6, "definition", "source", "cannot read the source of 'k'",
         "cannot be checked")
def _(s):
    """A kernel built by exec: no file holds its text; the error points at the only
    place there is, the function's first line in '<string>'."""
    ns = {"tl": tl, "ct": ct}
    exec("def k(z: tl.Out, x: tl.In):\n    ct.store(x, index=(0,), tile=0)\n", ns)
    s.at = ("<string>", 1)
    s.stage = "definition"
    tl.kernel(ns["k"])


async def _c6_async(z: tl.Out, x: tl.In):  # AT: c6_async_kernel
    z.store(tl.load_like(x, z))


@attempt("c6_async_kernel", 6, "definition", "source", "must be plain 'def' functions",
         "AsyncFunctionDef")
def _(s):
    s.stage = "definition"
    tl.kernel(_c6_async)


_EDIT_KERNEL_MODULE = '''\
import cuda.tile as ct
import tilelab as tl


@tl.kernel
def k(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) * 2)
'''


@neutralized("c6_kernel_file_edited", 6)
def _(s):
    """The kernel's .py file edited after import: the text captured at @tl.kernel is
    what the next compile builds and the CPU runs."""
    mod, path = _temp_module(_EDIT_KERNEL_MODULE, "kedit")
    k = _before(mod.k)
    _edit(path, "    z.store(tl.load_like(x, z) * 2)\n",
          "    ct.store(x, index=(0,), tile=tl.load_like(x, z))\n"
          "    z.store(tl.load_like(x, z) * 2)\n")
    return _run_after_change(k, scale=2)


_EDIT_HELPER_MODULE = '''\
import cuda.tile as ct
import tilelab as tl


def helper(x, t):
    return t * 2


@tl.kernel
def k(z: tl.Out, x: tl.In):
    z.store(helper(x, tl.load_like(x, z)))
'''


@neutralized("c6_helper_file_edited", 6)
def _(s):
    """A helper's .py file edited after the kernel was checked: its captured text is what
    runs."""
    mod, path = _temp_module(_EDIT_HELPER_MODULE, "hedit")
    k = _before(mod.k)
    _edit(path, "    return t * 2\n", "    ct.store(x, index=(0,), tile=t)\n    return t * 2\n")
    return _run_after_change(k, scale=2)


# ======================================================================================
# 7. outputs whose own elements overlap (refused at launch)

OVERLAP = ("own elements overlap in memory",)


def k7_out(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) + 1)


def k7_inout(p: tl.InOut):
    p.store(p.load() + 1)


def k7_raw(r: tl.Raw, x: tl.In):
    t = ct.load(x, index=(ct.bid(0),), shape=(16,))
    ct.store(r, index=(ct.bid(0),), tile=t)


def _view(base, shape, strides):
    """A CPU tensor over an as_strided numpy view (strides in elements)."""
    item = base.itemsize
    return tl.tensor(as_strided(base, shape=shape, strides=tuple(s * item for s in strides)),
                     device="cpu")


def _c7(case_id, make, *, inout=False, raw=False, unchecked=False, xfail=None):
    @attempt(case_id, 7, "launch", "AliasError", *OVERLAP, where="launch_line", xfail=xfail,
             xfail_strict=False)
    def _(s):
        if raw:
            k = s.define(k7_raw, unsafe=True).with_grid((4,))
            out = make()
            args = (out, cpu(np.zeros(out.shape, np.float32)))
        else:
            k = s.define(k7_inout if inout else k7_out)
            out = make()
            tile = (16,) if out.ndim == 1 else (4, 16)
            part = out.partition(tile)
            args = (part,) if inout else (part, cpu(np.zeros(out.shape, np.float32)))
        if unchecked:
            with tl.unchecked():
                launch_cpu(s, k, args)
        else:
            launch_cpu(s, k, args)


_c7("c7_stride0_out", lambda: _view(np.zeros(64, np.float32), (64,), (0,)))
_c7("c7_stride0_inout", lambda: _view(np.zeros(64, np.float32), (64,), (0,)), inout=True)
_c7("c7_overlapping_rows_out", lambda: _view(np.zeros(64, np.float32), (8, 16), (8, 1)))
_c7("c7_overlapping_rows_inout", lambda: _view(np.zeros(64, np.float32), (8, 16), (8, 1)),
    inout=True)
_c7("c7_overlapping_cols_out", lambda: _view(np.zeros(64, np.float32), (16, 16), (1, 1)))
_c7("c7_stride0_rows_out", lambda: _view(np.zeros(16, np.float32), (8, 16), (0, 1)))
_c7("c7_broadcast_to_out",
    lambda: tl.tensor(np.broadcast_to(np.zeros(16, np.float32), (4, 16)), device="cpu"))
_c7("c7_stride0_inside_unchecked", lambda: _view(np.zeros(64, np.float32), (64,), (0,)),
    unchecked=True)
_c7("c7_overlapping_inout_inside_unchecked",
    lambda: _view(np.zeros(64, np.float32), (8, 16), (8, 1)), inout=True, unchecked=True)
# (a tl.Raw argument of an unsafe kernel may overlap itself: the opt-out's contract)

try:
    import torch as _torch
except ImportError:  # pragma: no cover - torch is optional
    _torch = None
if _torch is not None:
    _c7("c7_torch_expand_out", lambda: tl.from_dlpack(_torch.zeros(16).expand(4, 16)))


# ======================================================================================
# 8. unchecked reads


@refused("c8_load_literal_false", 8, "unchecked-read", "ct.load(..., check_bounds=False)",
         "reads without bounds checks")
def c8_load_literal_false(z: tl.Out, x: tl.In):
    (i,) = z.tile_index
    z.store(ct.load(x, index=(i,), shape=(64,), check_bounds=False))  # AT: c8_load_literal_false @ check_bounds


@refused("c8_gather_literal_false", 8, "unchecked-read", "ct.gather(..., check_bounds=False)")
def c8_gather_literal_false(z: tl.Out, x: tl.In, idx: tl.In):
    z.store(ct.gather(x, tl.load_like(idx, z), check_bounds=False))  # AT: c8_gather_literal_false @ check_bounds


@refused("c8_load_variable", 8, "unchecked-read", "check_bounds=cb")
def c8_load_variable(z: tl.Out, x: tl.In):
    cb = False
    z.store(ct.load(x, index=(0,), shape=(64,), check_bounds=cb))  # AT: c8_load_variable @ check_bounds


@refused("c8_load_global_false", 8, "unchecked-read", "check_bounds=_NO_CHECK")
def c8_load_global_false(z: tl.Out, x: tl.In):
    z.store(ct.load(x, index=(0,), shape=(64,), check_bounds=_NO_CHECK))  # AT: c8_load_global_false @ check_bounds


_NO_CHECK = False


@refused("c8_load_zero", 8, "unchecked-read", "check_bounds=0")
def c8_load_zero(z: tl.Out, x: tl.In):
    z.store(ct.load(x, index=(0,), shape=(64,), check_bounds=0))  # AT: c8_load_zero @ check_bounds


@refused("c8_load_not_true", 8, "unchecked-read", "check_bounds=not True")
def c8_load_not_true(z: tl.Out, x: tl.In):
    z.store(ct.load(x, index=(0,), shape=(64,), check_bounds=not True))  # AT: c8_load_not_true @ check_bounds


@refused("c8_load_ifexp", 8, "unchecked-read", "reads without bounds checks")
def c8_load_ifexp(z: tl.Out, x: tl.In):
    z.store(ct.load(x, index=(0,), shape=(64,),
                    check_bounds=True if x.ndim == 2 else False))  # AT: c8_load_ifexp @ check_bounds


@refused("c8_load_constant_param", 8, "unchecked-read", "check_bounds=CB")
def c8_load_constant_param(z: tl.Out, x: tl.In, CB: ct.Constant[bool]):
    z.store(ct.load(x, index=(0,), shape=(64,), check_bounds=CB))  # AT: c8_load_constant_param @ check_bounds


@refused("c8_load_static_eval", 8, "unchecked-read", "check_bounds=ct.static_eval(False)")
def c8_load_static_eval(z: tl.Out, x: tl.In):
    z.store(ct.load(x, index=(0,), shape=(64,), check_bounds=ct.static_eval(False)))  # AT: c8_load_static_eval @ check_bounds


@refused("c8_load_kwargs", 8, "call-star", "ct.load() with *args or **kwargs")
def c8_load_kwargs(z: tl.Out, x: tl.In):
    opts = {"check_bounds": False}
    z.store(ct.load(x, index=(0,), shape=(64,), **opts))  # AT: c8_load_kwargs @ **opts


@refused("c8_gather_kwargs", 8, "call-star", "ct.gather() with *args or **kwargs")
def c8_gather_kwargs(z: tl.Out, x: tl.In, idx: tl.In):
    opts = {"check_bounds": False}
    z.store(ct.gather(x, tl.load_like(idx, z), **opts))  # AT: c8_gather_kwargs @ **opts


@refused("c8_load_star_args", 8, "call-star", "the checker must see every argument")
def c8_load_star_args(z: tl.Out, x: tl.In):
    args = (x, (0,), (64,))
    z.store(ct.load(*args))  # AT: c8_load_star_args @ *args


@refused("c8_helper_check_bounds_variable", 8, "unchecked-read", "check_bounds=cb",
         "helper 'unchecked_reader'")
def c8_helper_check_bounds_variable(z: tl.Out, x: tl.In):
    (i,) = z.tile_index
    z.store(sh.unchecked_reader(x, i, 64))


@refused("c8_load_advanced_indexing", 8, "raw-op", "ct.load_advanced_indexing()",
         "unsafe=True")
def c8_load_advanced_indexing(z: tl.Out, x: tl.In):
    z.store(ct.load_advanced_indexing(x, (ct.arange(64, dtype=ct.int32),)))  # AT: c8_load_advanced_indexing @ ct.load_advanced_indexing


@refused("c8_assume_divisible_by", 8, "raw-op", "ct.assume_divisible_by()")
def c8_assume_divisible_by(z: tl.Out, x: tl.In):
    n = ct.assume_divisible_by(x.shape[0], 64)  # AT: c8_assume_divisible_by @ ct.assume
    z.store(tl.load_like(x, z))


@refused("c8_tiled_view_load", 8, "unchecked-read",
         "x.tiled_view((64,)).load(..., check_bounds=False)")
def c8_tiled_view_load(z: tl.Out, x: tl.In):
    z.store(x.tiled_view((64,)).load((0,), check_bounds=False))  # AT: c8_tiled_view_load @ check_bounds


@refused("c8_slice_then_load", 8, "view-op", "x.slice()")
def c8_slice_then_load(z: tl.Out, x: tl.In):
    z.store(ct.load(x.slice(0, 0, 64), index=(0,), shape=(64,)))  # AT: c8_slice_then_load @ x.slice


@refused("c8_raw_memory_load", 8, "raw-op", "x.get_raw_memory reaches raw memory or pointers",
         "unsafe=True")
def c8_raw_memory_load(z: tl.Out, x: tl.In):
    m = x.get_raw_memory()  # AT: c8_raw_memory_load @ x.get_raw_memory
    z.store(tl.load_like(x, z))


LOAD_LIKE_PARAM = "tl.load_like reads an array parameter of the kernel directly"


@refused("c8_kernel_unchecked_tuple_alias", 8, "load-like-form", LOAD_LIKE_PARAM, "got 'a'",
         check_bounds=False)
def c8_kernel_unchecked_tuple_alias(z: tl.Out, x: tl.In, y: tl.In):
    (a, b) = (y, x)
    z.store(tl.load_like(a, z))  # AT: c8_kernel_unchecked_tuple_alias @ a, z


@refused("c8_kernel_unchecked_helper_result", 8, "load-like-form", LOAD_LIKE_PARAM,
         check_bounds=False)
def c8_kernel_unchecked_helper_result(z: tl.Out, x: tl.In):
    z.store(tl.load_like(sh.double(x), z))  # AT: c8_kernel_unchecked_helper_result @ sh.double


# a parameter rebound in the kernel is not the parameter the launch measures
@refused("c8_kernel_unchecked_param_rebound", 8, "load-like-form", LOAD_LIKE_PARAM, "got 'x'",
         check_bounds=False)
def c8_kernel_unchecked_param_rebound(z: tl.Out, x: tl.In, y: tl.In):
    x = y
    z.store(tl.load_like(x, z))  # AT: c8_kernel_unchecked_param_rebound @ x, z


@refused("c8_kernel_unchecked_param_augmented", 8, "load-like-form", LOAD_LIKE_PARAM,
         check_bounds=False)
def c8_kernel_unchecked_param_augmented(z: tl.Out, x: tl.In, y: tl.In):
    if z.shape[0] > 0:
        x = y
    z.store(tl.load_like(x, z))  # AT: c8_kernel_unchecked_param_augmented @ x, z


@refused("c8_load_like_param_rebound_checked", 8, "load-like-form", LOAD_LIKE_PARAM)
def c8_load_like_param_rebound_checked(z: tl.Out, x: tl.In, y: tl.In):
    for x in (y,):
        pass
    z.store(tl.load_like(x, z))  # AT: c8_load_like_param_rebound_checked @ x, z


@refused("c8_load_like_of_view_checked", 8, "load-like-form", LOAD_LIKE_PARAM)
def c8_load_like_of_view_checked(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x.slice(0, 0, 64), z))  # AT: c8_load_like_of_view_checked @ x.slice


@refused("c8_load_like_of_constant", 8, "load-like-form", LOAD_LIKE_PARAM)
def c8_load_like_of_constant(z: tl.Out, x: tl.In, N: ct.Constant[int]):
    z.store(tl.load_like(N, z))  # AT: c8_load_like_of_constant @ N, z


def k8_unchecked(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z))


def k8_unchecked_inout(p: tl.InOut):
    p.store(p.load() * 2)


def k8_unchecked_persistent(z: tl.Out, x: tl.In):
    for t in z.tiles():
        z.store(tl.load_like(x, z, at=t), at=t)


def _c8_launch(case_id, fn, args, *phrases):
    @attempt(case_id, 8, "launch", "LaunchError", "check_bounds=False", *phrases,
             where="launch_line")
    def _(s):
        k = s.define(fn, check_bounds=False)
        launch_cpu(s, k, args())


_c8_launch("c8_unchecked_partial_tile", k8_unchecked,
           lambda: (zeros(200).partition(64), cpu(arange(200))), "has a partial tile")
_c8_launch("c8_unchecked_small_input", k8_unchecked,
           lambda: (zeros(256).partition(64), cpu(arange(100))), "would read tiles covering")
_c8_launch("c8_unchecked_inout_partial_tile", k8_unchecked_inout,
           lambda: (zeros((40, 64)).partition((16, 64)),), "has a partial tile")
_c8_launch("c8_unchecked_persistent_partial", k8_unchecked_persistent,
           lambda: (zeros(300).partition(64, schedule=tl.persistent(2)), cpu(arange(300))),
           "has a partial tile")
@attempt("c8_load_like_array_too_small", 8, "launch", "LaunchError",
         "would lie entirely outside it", where="launch_line")
def _(s):
    """With bounds checks on, a tl.load_like tile entirely outside its array is what
    cuTile leaves undefined: the launch proves every block's tile meets the array."""
    k = s.define(k8_unchecked)
    launch_cpu(s, k, (zeros(256).partition(64), cpu(arange(100))))


@attempt("c8_load_like_under_true_constant", 8, "launch", "LaunchError",
         "would lie entirely outside it", where="launch_line")
def _(s):
    """... and the same placeholder with the constant true is refused by the launch."""
    k = s.define(k_optional_input)
    launch_cpu(s, k, _optional_input(True)[0])


def k_constant_rebound(z: tl.Out, x: tl.In, y: tl.In, HAS_Y: ct.Constant[bool]):
    t = tl.load_like(x, z)
    HAS_Y = True
    if HAS_Y:
        t = t + tl.load_like(y, z)
    z.store(t)


def k_constant_rebound_in_loop(z: tl.Out, x: tl.In, y: tl.In, HAS_Y: ct.Constant[bool]):
    t = tl.load_like(x, z)
    for i in range(2):
        if HAS_Y:
            t = t + tl.load_like(y, z)
        HAS_Y = True
    z.store(t)


def _c8_rebound_constant(case_id, kernel):
    @attempt(case_id, 8, "launch", "LaunchError", "would lie entirely outside it",
             where="launch_line")
    def _(s):
        """The constant is false for the launch, but the kernel rebinds its name before
        (or, in a loop, after) the 'if': the guard is not the constant, so the launch
        still proves the read meets its array."""
        k = s.define(kernel)
        launch_cpu(s, k, _optional_input(False)[0])


_c8_rebound_constant("c8_load_like_constant_rebound", k_constant_rebound)
_c8_rebound_constant("c8_load_like_constant_rebound_in_loop", k_constant_rebound_in_loop)


_c8_launch("c8_unchecked_2d_small_input", k8_unchecked,
           lambda: (zeros((64, 64)).partition((16, 16)), cpu(np.zeros((64, 48), np.float32))),
           "would read tiles covering")


@attempt("c8_unchecked_partial_tile_compile", 8, "compile", "LaunchError",
         "check_bounds=False", "has a partial tile", where="compile_line")
def _(s):
    k = s.define(k8_unchecked, check_bounds=False)
    s.compile(k, S(300).partition(64), S(300))




# ======================================================================================
# 9. forged schedules


class _GroupedSub(tl_language.Grouped):
    pass


class _PersistentSub(tl_language.Persistent):
    pass


class _RowMajorSub(tl_language.RowMajor):
    name = "grouped"


class _NameLookalike:
    name = "row_major"
    persistent = False


@dataclasses.dataclass(frozen=True)
class Grouped:                       # a look-alike of tl.Grouped, same name and fields
    group_m: int = 8
    name = "grouped"
    persistent = False


def _c9_partition(case_id, make_schedule, expect="TypeError", phrases=("schedule",)):
    # a TypeError of tensor.partition(): Python's own traceback locates it
    @attempt(case_id, 9, "partition", expect, *phrases, where="-")
    def _(s):
        k = s.define(k7_out)
        z = zeros(256)
        sched = make_schedule()
        s.partition()
        z.partition(64, schedule=sched)


_c9_partition("c9_grouped_subclass", lambda: _GroupedSub(2))
_c9_partition("c9_persistent_subclass", lambda: _PersistentSub(4))
_c9_partition("c9_row_major_subclass", lambda: _RowMajorSub())
_c9_partition("c9_name_lookalike", lambda: _NameLookalike())
_c9_partition("c9_dataclass_lookalike", lambda: Grouped(2))
_c9_partition("c9_schedule_class", lambda: tl_language.Grouped)
_c9_partition("c9_schedule_string", lambda: "row_major")


@attempt("c9_spec_partition_forged", 9, "compile", "LaunchError",
         "is not one of tilelab's schedules", where="compile_line")
def _(s):
    k = s.define(k7_out)
    s.compile(k, S(256).partition(64, schedule=_GroupedSub(2)), S(256))


@attempt("c9_schedule_attribute_swapped", 9, "partition", "AttributeError",
         "a partition's schedule cannot change", where="-")
def _(s):
    """p.schedule = ... after the partition is made (its launch plan is cached): refused
    by the assignment itself (Python's traceback locates it)."""
    k = s.define(k7_out)
    p = zeros(256).partition(64)
    s.partition()
    p.schedule = _GroupedSub(2)
    launch_cpu(s, k, (p, cpu(arange(256))))


@attempt("c9_schedule_class_swapped", 9, "launch", "LaunchError",
         "is not one of tilelab's schedules", where="launch_line")
def _(s):
    k = s.define(k7_out)
    g = tl.grouped(2)
    p = zeros((64, 64)).partition((16, 16), schedule=g)
    object.__setattr__(g, "__class__", _GroupedSub)
    launch_cpu(s, k, (p, cpu(np.zeros((64, 64), np.float32))))


def _c9_forged_field(case_id, field_name, value, make, tile):
    @attempt(case_id, 9, "launch", "LaunchError", field_name, where="launch_line")
    def _(s):
        k = s.define(k7_out if not make().persistent else k8_unchecked_persistent)
        sched = make()
        object.__setattr__(sched, field_name, value)
        z = zeros((64, 64))
        launch_cpu(s, k, (z.partition(tile, schedule=sched),
                          cpu(np.arange(64 * 64, dtype=np.float32).reshape(64, 64))))


_c9_forged_field("c9_group_m_forged_zero", "group_m", 0, lambda: tl.grouped(2), (16, 16))
_c9_forged_field("c9_group_m_forged_negative", "group_m", -1, lambda: tl.grouped(2), (16, 16))
_c9_forged_field("c9_persistent_group_m_forged", "group_m", 0,
                 lambda: tl.persistent(2, group_m=2), (16, 16))


@attempt("c9_persistent_schedule_on_row_major_kernel", 9, "launch", "LaunchError",
         "is persistent, but the kernel does not loop over p.tiles()", where="launch_line")
def _(s):
    k = s.define(k7_out)
    launch_cpu(s, k, (zeros(256).partition(64, schedule=tl.persistent(2)), cpu(arange(256))))


@attempt("c9_row_major_on_persistent_kernel", 9, "launch", "LaunchError",
         "need schedule=tl.persistent()", where="launch_line")
def _(s):
    k = s.define(k8_unchecked_persistent)
    launch_cpu(s, k, (zeros(256).partition(64), cpu(arange(256))))


def k9_two(z: tl.Out, w: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z))
    w.store(tl.load_like(x, z))


@attempt("c9_mixed_schedules", 9, "launch", "LaunchError", "need the same schedule",
         where="launch_line")
def _(s):
    k = s.define(k9_two)
    z, w = zeros((64, 64)), zeros((64, 64))
    launch_cpu(s, k, (z.partition((16, 16)), w.partition((16, 16), schedule=tl.grouped(2)),
                      cpu(np.zeros((64, 64), np.float32))))


@refused("c9_schedule_inside_kernel", 9, "call-host", "tl.grouped() is not available")
def c9_schedule_inside_kernel(z: tl.Out, x: tl.In):
    g = tl.grouped(2)  # AT: c9_schedule_inside_kernel @ tl.grouped
    z.store(tl.load_like(x, z))


# ======================================================================================
# 10. threads


def k10_inout(p: tl.InOut, x: tl.In):
    p.store(p.load() + tl.load_like(x, p))


def _aliased():
    """An InOut partition and an input over the same memory (an AliasError unless the
    launch is unchecked)."""
    t = cpu(arange(256))
    return (t.partition(64), t)


@attempt("c10_unchecked_closed_on_other_thread", 10, "launch", "AliasError", "overlaps",
         where="launch_line")
def _(s):
    """A block opened here and closed on another thread ends this thread's opt-out."""
    k = s.define(k10_inout)
    u = tl.unchecked()
    u.__enter__()
    th = threading.Thread(target=u.__exit__, args=(None, None, None))
    th.start()
    th.join()
    launch_cpu(s, k, _aliased())


@attempt("c10_unchecked_not_inherited_by_threads", 10, "launch", "AliasError", "overlaps",
         where="c10_worker_launch")
def _(s):
    """tl.unchecked() applies to the thread that opened it: a worker's launch is checked."""
    k = s.define(k10_inout)
    box = {}

    def worker():
        try:
            s.launch(k)
            k(*_aliased())  # AT: c10_worker_launch
        except Exception as e:  # noqa: BLE001 - handed to the main thread
            box["err"] = e

    with tl.unchecked():
        th = threading.Thread(target=worker)
        th.start()
        th.join()
    if "err" in box:
        raise box["err"]


@attempt("c10_unchecked_nesting_per_thread", 10, "launch", "AliasError", "overlaps",
         where="launch_line")
def _(s):
    """Nested blocks: leaving the inner one keeps the opt-out, leaving the outer ends it
    (another thread's blocks do not count)."""
    k = s.define(k10_inout)
    other_open = threading.Event()
    release = threading.Event()

    def other():
        with tl.unchecked():
            other_open.set()
            release.wait(10)

    th = threading.Thread(target=other)
    th.start()
    other_open.wait(10)
    try:
        with tl.unchecked():
            with tl.unchecked():
                pass
            k(*_aliased())            # still unchecked: fine
        launch_cpu(s, k, _aliased())
    finally:
        release.set()
        th.join()


def k10_slow(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) * 2)


def _hold_cpu_launch(k):
    """Make k's CPU launches wait, once running, until released: (started, release)."""
    started, release = threading.Event(), threading.Event()
    launcher = k._launcher
    real = launcher.run_cpu

    def run_cpu(*a, **kw):
        started.set()
        release.wait(20)
        return real(*a, **kw)

    launcher.run_cpu = run_cpu
    return started, release


def _c10_host(case_id, access, phrase):
    @attempt(case_id, 10, "host", "BorrowError", phrase, "on another thread",
             where=case_id, xfail=None, xfail_strict=False)
    def _(s):
        k = s.define(k10_slow)
        x, z = cpu(arange(256)), zeros(256)
        started, release = _hold_cpu_launch(k)
        th = threading.Thread(target=lambda: k(z.partition(64), x))
        th.start()
        try:
            assert started.wait(20), "the CPU launch never started"
            s.host()
            access(x, z)
        finally:
            release.set()
            th.join()


def _read_output(x, z):
    z.numpy()  # AT: c10_host_read_output_during_launch


def _write_input(x, z):
    x.copy_(np.ones(256, np.float32))  # AT: c10_host_write_input_during_launch


def _write_output(x, z):
    z.copy_(np.ones(256, np.float32))  # AT: c10_host_write_output_during_launch


_c10_host("c10_host_read_output_during_launch", _read_output, "Tensor.numpy()")
_c10_host("c10_host_write_input_during_launch", _write_input, "touches memory")
_c10_host("c10_host_write_output_during_launch", _write_output, "touches memory")


@attempt("c10_conflicting_launch_on_other_thread", 10, "launch", "BorrowError",
         "on another thread", where="launch_line", xfail_strict=False)
def _(s):
    """Another thread's launch writing the memory a running CPU launch writes."""
    k = s.define(k10_slow)
    x, z = cpu(arange(256)), zeros(256)
    started, release = _hold_cpu_launch(k)
    th = threading.Thread(target=lambda: k(z.partition(64), x))
    th.start()
    try:
        assert started.wait(20)
        k2 = tl.kernel(k10_slow)
        launch_cpu(s, k2, (z.partition(64), cpu(arange(256))))
    finally:
        release.set()
        th.join()


# ======================================================================================
# other: assignments, statements, private names, helpers anywhere, reductions,
# static_eval, partitions, tl.Out reads, persistent at=, tl.Raw, unsafe aliases, values


@refused("o_attribute_assignment", "other", "assign-target", "assignment to x.shape")
def o_attribute_assignment(z: tl.Out, x: tl.In):
    x.shape = (1,)  # AT: o_attribute_assignment
    z.store(tl.load_like(x, z))


@refused("o_item_assignment_tile", "other", "assign-target", "assignment to t[0]")
def o_item_assignment_tile(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    t[0] = 1.0  # AT: o_item_assignment_tile
    z.store(t)


@refused("o_item_assignment_input", "other", "assign-target", "assignment to x[0]")
def o_item_assignment_input(z: tl.Out, x: tl.In):
    x[0] = 1.0  # AT: o_item_assignment_input
    z.store(tl.load_like(x, z))


@refused("o_augmented_item", "other", "assign-target", "assignment to x[0]")
def o_augmented_item(z: tl.Out, x: tl.In):
    x[0] += 1.0  # AT: o_augmented_item
    z.store(tl.load_like(x, z))


@refused("o_tuple_target_item", "other", "assign-target", "assignment to x[1]")
def o_tuple_target_item(z: tl.Out, x: tl.In):
    a, x[1] = 1.0, 2.0  # AT: o_tuple_target_item @ x[1]
    z.store(tl.load_like(x, z))


@refused("o_for_target_attribute", "other", "assign-target", "assignment to x.dtype")
def o_for_target_attribute(z: tl.Out, x: tl.In):
    for x.dtype in (1,):  # AT: o_for_target_attribute @ x.dtype
        pass
    z.store(tl.load_like(x, z))


@refused("o_comprehension_target_item", "other", "assign-target", "assignment to x[0]")
def o_comprehension_target_item(z: tl.Out, x: tl.In):
    n = [0 for x[0] in (1.0,)]  # AT: o_comprehension_target_item @ x[0]
    z.store(tl.load_like(x, z))


@refused("o_annotated_attribute", "other", "assign-target", "assignment to x.ndim")
def o_annotated_attribute(z: tl.Out, x: tl.In):
    x.ndim: int = 3  # AT: o_annotated_attribute
    z.store(tl.load_like(x, z))


@refused("o_del", "other", "statement", "del statements are not allowed")
def o_del(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    del t  # AT: o_del
    z.store(tl.load_like(x, z))


@refused("o_with", "other", "statement", "with blocks are not allowed")
def o_with(z: tl.Out, x: tl.In):
    with tl.unchecked():  # AT: o_with
        z.store(tl.load_like(x, z))


@refused("o_try", "other", "statement", "try statements are not allowed")
def o_try(z: tl.Out, x: tl.In):
    try:  # AT: o_try
        z.store(tl.load_like(x, z))
    finally:
        pass


@refused("o_match", "other", "statement", "match statements are not allowed")
def o_match(z: tl.Out, x: tl.In):
    match x.ndim:  # AT: o_match
        case _:
            z.store(tl.load_like(x, z))


@refused("o_import", "other", "statement", "import statements are not allowed")
def o_import(z: tl.Out, x: tl.In):
    import cuda.tile as c2  # AT: o_import
    z.store(c2.exp(tl.load_like(x, z)))


@refused("o_import_from", "other", "statement", "import statements are not allowed")
def o_import_from(z: tl.Out, x: tl.In):
    from cuda.tile import store  # AT: o_import_from
    store(x, index=(0,), tile=tl.load_like(x, z))
    z.store(tl.load_like(x, z))


@refused("o_class_definition", "other", "statement", "class definitions are not allowed")
def o_class_definition(z: tl.Out, x: tl.In):
    class Box:  # AT: o_class_definition
        pass
    z.store(tl.load_like(x, z))


@refused("o_nonlocal_in_helper", "other", "statement", "global statements are not allowed",
         "helper 'with_global_stmt'", where="o_helper_global_statement")
def o_nonlocal_in_helper(z: tl.Out, x: tl.In):
    z.store(sh.with_global_stmt(tl.load_like(x, z)))


@refused("o_yield", "other", "statement", "yield are not allowed")
def o_yield(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z))
    yield 0  # AT: o_yield


@refused("o_private_class", "other", "private-attribute", "attribute '__class__' of x")
def o_private_class(z: tl.Out, x: tl.In):
    k = x.__class__  # AT: o_private_class @ x.__class__
    z.store(tl.load_like(x, z))


@refused("o_private_ct_stub", "other", "private-attribute", "attribute '_stub' of ct")
def o_private_ct_stub(z: tl.Out, x: tl.In):
    s = ct._stub  # AT: o_private_ct_stub @ ct._stub
    z.store(tl.load_like(x, z))


@refused("o_private_tile_value", "other", "private-attribute", "attribute '_v' of t")
def o_private_tile_value(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    z.store(t._v)  # AT: o_private_tile_value @ t._v


@refused("o_private_array_data", "other", "private-attribute", "attribute '_data' of x")
def o_private_array_data(z: tl.Out, x: tl.In):
    d = x._data  # AT: o_private_array_data @ x._data
    z.store(tl.load_like(x, z))


@refused("o_private_dunder_dict", "other", "private-attribute", "attribute '__dict__' of ct")
def o_private_dunder_dict(z: tl.Out, x: tl.In):
    d = ct.__dict__  # AT: o_private_dunder_dict @ ct.__dict__
    z.store(tl.load_like(x, z))


@refused("o_private_globals_of_helper", "other", "private-attribute", "'__globals__'")
def o_private_globals_of_helper(z: tl.Out, x: tl.In):
    g = sh.double.__globals__  # AT: o_private_globals_of_helper @ sh.double.__globals__
    z.store(tl.load_like(x, z))


@refused("o_helper_private_attribute", "other", "private-attribute", "attribute '_v' of t",
         "helper 'with_private'")
def o_helper_private_attribute(z: tl.Out, x: tl.In):
    z.store(sh.with_private(tl.load_like(x, z)))


@refused("o_helper_lambda_inside", "other", "statement", "lambdas are not allowed",
         "helper 'with_lambda'")
def o_helper_lambda_inside(z: tl.Out, x: tl.In):
    z.store(sh.with_lambda(tl.load_like(x, z)))


@refused("o_helper_eval", "other", "call-dynamic", "eval()", "helper 'dynamic'")
def o_helper_eval(z: tl.Out, x: tl.In):
    z.store(sh.dynamic(tl.load_like(x, z)))


@refused("o_other_module_writer", "other", "write-input", "'dst', which is tl.In",
         "helper 'writer'")
def o_other_module_writer(z: tl.Out, x: tl.In):
    z.store(sh.writer(x, tl.load_like(x, z)))


@refused("o_from_imported_writer", "other", "write-input", "'dst', which is tl.In",
         where="o_other_module_writer")
def o_from_imported_writer(z: tl.Out, x: tl.In):
    z.store(sh_writer(x, tl.load_like(x, z)))


@refused("o_writer_after_reader", "other", "write-input", "helper 'writer'",
         where="o_other_module_writer")
def o_writer_after_reader(z: tl.Out, x: tl.In):
    z.store(sh.reader_then_writer(x, tl.load_like(x, z)))


@refused("o_helper_depth_3", "other", "write-input", "'dst', which is tl.In", "helper 'deep3'")
def o_helper_depth_3(z: tl.Out, x: tl.In):
    z.store(sh.deep1(x, tl.load_like(x, z)))


@refused("o_recursive_helper_writes", "other", "write-input", "helper 'recursive_writer'")
def o_recursive_helper_writes(z: tl.Out, x: tl.In):
    z.store(sh.recursive_writer(x, tl.load_like(x, z), 3))


@refused("o_helper_view_store", "other", "write-input", "'dst', which is tl.In")
def o_helper_view_store(z: tl.Out, x: tl.In):
    z.store(sh.view_writer(x, tl.load_like(x, z)))


@refused("o_helper_scatter_positional", "other", "write-input", "ct.scatter()")
def o_helper_scatter_positional(z: tl.Out, x: tl.In, idx: tl.In):
    t = tl.load_like(x, z)
    z.store(sh.scatter_into(x, tl.load_like(idx, z), t))


@refused("o_lambda_helper", "other", "helper-lambda", "is a lambda", "'def'")
def o_lambda_helper(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    sh.lambda_writer(x, t)  # AT: o_lambda_helper
    z.store(t)


@refused("o_decorated_helper_custom", "other", "helper-decorated",
         "is decorated with @_passthrough")
def o_decorated_helper_custom(z: tl.Out, x: tl.In):
    z.store(sh.decorated(tl.load_like(x, z)))


@refused("o_decorated_helper_lru", "other", "call-unknown", "_lru_cache_wrapper")
def o_decorated_helper_lru(z: tl.Out, x: tl.In):
    z.store(sh.cached(tl.load_like(x, z)))  # AT: o_decorated_helper_lru_call @ sh.cached


ATTEMPTS["o_decorated_helper_lru"].where = "o_decorated_helper_lru_call"


@refused("o_reduce_writing_func", "other", "write-input", "helper 'sum_writer'")
def o_reduce_writing_func(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    z.store(t + ct.reduce(t, axis=0, func=sh.sum_writer, identity=0.0))


@refused("o_scan_writing_func", "other", "write-input", "helper 'sum_writer'",
         where="o_reduce_writing_func")
def o_scan_writing_func(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    z.store(ct.scan(t, axis=0, func=sh.sum_writer, identity=0.0))


@refused("o_reduce_func_is_op", "other", "func-argument",
         "the function given to ct.reduce must be a plain Python helper")
def o_reduce_func_is_op(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    z.store(t + ct.reduce(t, axis=0, func=ct.store, identity=0.0))  # AT: o_reduce_func_is_op @ ct.store


@refused("o_reduce_func_local", "other", "func-argument", "must be a helper named at module level")
def o_reduce_func_local(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    f = 0
    z.store(t + ct.reduce(t, axis=0, func=f, identity=0.0))  # AT: o_reduce_func_local @ f,


# a lambda combiner is checked with the kernel: one that writes is refused as a write
@refused("o_reduce_func_lambda", "other", "write-input", "ct.atomic_add()")
def o_reduce_func_lambda(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    z.store(ct.reduce(t, axis=0, func=lambda a, b: a + ct.atomic_add(x, (0,), b), identity=0.0))  # AT: o_reduce_func_lambda @ ct.atomic_add


@refused("o_reduce_func_partial", "other", "func-argument", "got a partial object")
def o_reduce_func_partial(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    z.store(ct.reduce(t, axis=0, func=_PARTIAL_SCATTER, identity=0.0))  # AT: o_reduce_func_partial @ _PARTIAL


@refused("o_static_eval_store", "other", "write-input", "ct.store()", "which is tl.In")
def o_static_eval_store(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    n = ct.static_eval(ct.store(x, index=(0,), tile=t))  # AT: o_static_eval_store @ ct.store
    z.store(t)


@refused("o_static_eval_callee", "other", "call-computed", "ct.static_eval(ct.scatter)")
def o_static_eval_callee(z: tl.Out, x: tl.In, idx: tl.In):
    t = tl.load_like(x, z)
    ct.static_eval(ct.scatter)(x, tl.load_like(idx, z), t)  # AT: o_static_eval_callee
    z.store(t)


@refused("o_static_eval_getattr", "other", "call-dynamic", "getattr()")
def o_static_eval_getattr(z: tl.Out, x: tl.In):
    f = ct.static_eval(getattr(ct, "store"))  # AT: o_static_eval_getattr @ getattr
    z.store(tl.load_like(x, z))


@refused("o_print_store", "other", "write-input", "ct.store()")
def o_print_store(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    print(ct.store(x, index=(0,), tile=t))  # AT: o_print_store @ ct.store
    z.store(t)


@refused("o_fstring_store", "other", "write-input", "ct.store()")
def o_fstring_store(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    msg = f"{ct.store(x, index=(0,), tile=t)}"  # AT: o_fstring_store @ ct.store
    z.store(t)


@refused("o_assert_message_store", "other", "assert-form", "ct.atomic_add(",
         "not a string literal")
def o_assert_message_store(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    assert True, ct.atomic_add(x, ct.arange(64, dtype=ct.int32), t)  # AT: o_assert_message_store @ ct.atomic_add
    z.store(t)


@refused("o_index_expression_store", "other", "write-input", "ct.store()")
def o_index_expression_store(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    z.store((t, t)[ct.store(x, index=(0,), tile=t) or 0])  # AT: o_index_expression_store @ ct.store


@refused("o_condition_store", "other", "write-input", "ct.scatter()")
def o_condition_store(z: tl.Out, x: tl.In, idx: tl.In):
    t = tl.load_like(x, z)
    while ct.scatter(x, tl.load_like(idx, z), t):  # AT: o_condition_store @ ct.scatter
        pass
    z.store(t)


# ---- partitions go nowhere -----------------------------------------------------------


@refused("o_partition_to_helper", "other", "partition-escape",
         "passing partition 'z' to sh.partition_writer()")
def o_partition_to_helper(z: tl.Out, x: tl.In):
    sh.partition_writer(z, tl.load_like(x, z))  # AT: o_partition_to_helper


@refused("o_partition_to_print", "other", "partition-escape", "passing partition 'z' to print()")
def o_partition_to_print(z: tl.Out, x: tl.In):
    print(z)  # AT: o_partition_to_print
    z.store(tl.load_like(x, z))


@refused("o_partition_in_tuple", "other", "partition-escape", "partition 'z' may only be used")
def o_partition_in_tuple(z: tl.Out, x: tl.In):
    both = (z, x)  # AT: o_partition_in_tuple @ z,
    z.store(tl.load_like(x, z))


@refused("o_partition_returned", "other", "partition-escape", "partition 'z' may only be used")
def o_partition_returned(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z))
    return z  # AT: o_partition_returned @ z


@refused("o_partition_compared", "other", "partition-escape", "partition 'z' may only be used")
def o_partition_compared(z: tl.Out, x: tl.In):
    if z is not None:  # AT: o_partition_compared @ z is
        z.store(tl.load_like(x, z))


@refused("o_partition_fstring", "other", "partition-escape", "partition 'z' may only be used")
def o_partition_fstring(z: tl.Out, x: tl.In):
    s = f"{z}"  # AT: o_partition_fstring @ z}
    z.store(tl.load_like(x, z))


@refused("o_partition_walrus", "other", "partition-escape", "partition 'z' may only be used")
def o_partition_walrus(z: tl.Out, x: tl.In):
    (q := z)  # AT: o_partition_walrus @ z)
    z.store(tl.load_like(x, z))


@refused("o_partition_to_static_eval", "other", "partition-to-op",
         "partition 'z' cannot be passed to ct.static_eval()")
def o_partition_to_static_eval(z: tl.Out, x: tl.In):
    n = ct.static_eval(z)  # AT: o_partition_to_static_eval @ ct.static_eval
    z.store(tl.load_like(x, z))


@refused("o_partition_to_reduce", "other", "partition-to-op", "partition 'p' cannot be passed")
def o_partition_to_reduce(p: tl.InOut):
    s = ct.sum(p, axis=0)  # AT: o_partition_to_reduce @ ct.sum
    p.store(p.load())


@refused("o_partition_to_store_kwarg", "other", "write-partition", "writes partition 'z'")
def o_partition_to_store_kwarg(z: tl.Out, x: tl.In):
    ct.store(array=z, index=(0,), tile=tl.load_like(x, z))  # AT: o_partition_to_store_kwarg


@refused("o_partition_method_value", "other", "partition-method-value",
         "z.store must be called directly")
def o_partition_method_value(z: tl.Out, x: tl.In):
    put = z.store  # AT: o_partition_method_value @ z.store
    put(tl.load_like(x, z))


@refused("o_partition_unknown_attribute", "other", "partition-attribute",
         "partition 'z' has no attribute 'tensor'")
def o_partition_unknown_attribute(z: tl.Out, x: tl.In):
    t = z.tensor  # AT: o_partition_unknown_attribute @ z.tensor
    z.store(tl.load_like(x, z))


@refused("o_partition_store_star", "other", "partition-store", "cannot be chosen")
def o_partition_store_star(z: tl.Out, x: tl.In):
    args = (tl.load_like(x, z),)
    z.store(*args)  # AT: o_partition_store_star @ z.store


@refused("o_partition_store_kwargs", "other", "partition-store", "cannot be chosen")
def o_partition_store_kwargs(z: tl.Out, x: tl.In):
    where = {"index": (1,)}
    z.store(tl.load_like(x, z), **where)  # AT: o_partition_store_kwargs @ **where


@refused("o_partition_store_tile_keyword", "other", "partition-store", "the tile twice")
def o_partition_store_tile_keyword(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z), tile=tl.load_like(x, z))  # AT: o_partition_store_tile_keyword @ tile=


@refused("o_partition_store_hint_call", "other", "hint-value", "latency=",
         "not a constant hint")
def o_partition_store_hint_call(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z), latency=ct.bid(0))  # AT: o_partition_store_hint_call @ ct.bid


@refused("o_load_like_kwargs", "other", "load-like-form", "tl.load_like takes an array")
def o_load_like_kwargs(z: tl.Out, x: tl.In):
    opts = {"at": 3}
    z.store(tl.load_like(x, z, **opts))  # AT: o_load_like_kwargs @ tl.load_like


@refused("o_load_like_value", "other", "call-unknown", "tl.load_like can only be called")
def o_load_like_value(z: tl.Out, x: tl.In):
    f = tl.load_like  # AT: o_load_like_value @ tl.load_like
    z.store(tl.load_like(x, z))


def _load_like_helper(x, p):
    return tl.load_like(x, p)  # AT: o_load_like_in_helper


@refused("o_load_like_in_helper", "other", "load-like-form",
         "needs a partition parameter p of the kernel itself")
def o_load_like_in_helper(z: tl.Out, x: tl.In):
    z.store(_load_like_helper(x, 0))


# ---- tl.Out is write-only; a block reads only its own tile -----------------------------


@refused("o_out_load", "other", "partition-read-out", "is tl.Out (write-only)")
def o_out_load(z: tl.Out, x: tl.In):
    z.store(z.load() + tl.load_like(x, z))  # AT: o_out_load @ z.load


@refused("o_out_ct_load", "other", "partition-read-out", "ct.load() would read it")
def o_out_ct_load(z: tl.Out, x: tl.In):
    z.store(ct.load(z, index=(0,), shape=(64,)))  # AT: o_out_ct_load @ ct.load


@refused("o_out_load_like", "other", "partition-read-out", "would read an output")
def o_out_load_like(z: tl.Out, w: tl.Out, x: tl.In):
    w.store(tl.load_like(x, w))
    z.store(tl.load_like(w, z))  # AT: o_out_load_like @ w, z


@refused("o_out_gather", "other", "partition-read-out", "ct.gather() would read it")
def o_out_gather(z: tl.Out, idx: tl.In):
    z.store(ct.gather(z, tl.load_like(idx, z)))  # AT: o_out_gather @ ct.gather


@refused("o_inout_other_tile", "other", "partition-other-tile", "could read tiles other blocks")
def o_inout_other_tile(p: tl.InOut):
    (i,) = p.tile_index
    p.store(ct.load(p, index=(i + 1,), shape=p.tile_shape))  # AT: o_inout_other_tile @ ct.load


@refused("o_inout_load_index", "other", "partition-load", "takes no index")
def o_inout_load_index(p: tl.InOut):
    p.store(p.load(index=(0,)))  # AT: o_inout_load_index @ p.load


# ---- persistent kernels: at= is a minted tile -----------------------------------------


@refused("o_persistent_at_plus_one", "other", "at-not-minted", "at=t + 1")
def o_persistent_at_plus_one(z: tl.Out, x: tl.In):
    for t in z.tiles():
        z.store(tl.load_like(x, z, at=t), at=t + 1)  # AT: o_persistent_at_plus_one @ t + 1


@refused("o_persistent_at_other_name", "other", "at-not-minted", "at=u")
def o_persistent_at_other_name(z: tl.Out, x: tl.In):
    for t in z.tiles():
        u = t
        z.store(tl.load_like(x, z, at=t), at=u)  # AT: o_persistent_at_other_name @ u)


@refused("o_persistent_at_tuple", "other", "at-not-minted", "at=(t,)")
def o_persistent_at_tuple(z: tl.Out, x: tl.In):
    for t in z.tiles():
        z.store(tl.load_like(x, z, at=t), at=(t,))  # AT: o_persistent_at_tuple @ (t,)


@refused("o_persistent_comprehension_shadow", "other", "tile-reassigned",
         "the tile variable 't' minted by z.tiles() is reassigned")
def o_persistent_comprehension_shadow(z: tl.Out, x: tl.In):
    for t in z.tiles():
        v = tl.load_like(x, z, at=t)
        [z.store(v, at=t) for t in range(2)]  # AT: o_persistent_comprehension_shadow @ t in


@refused("o_persistent_walrus_shadow", "other", "tile-reassigned", "is reassigned")
def o_persistent_walrus_shadow(z: tl.Out, x: tl.In):
    for t in z.tiles():
        z.store(tl.load_like(x, z, at=t), at=(t := t + 1))  # AT: o_persistent_walrus_shadow @ t :=


@refused("o_persistent_at_after_loop", "other", "at-not-minted", "at=t")
def o_persistent_at_after_loop(z: tl.Out, x: tl.In):
    for t in z.tiles():
        pass
    z.store(tl.load_like(x, z, at=t), at=t)  # AT: o_persistent_at_after_loop @last t)


@refused("o_persistent_tile_index", "other", "tile-index-persistent",
         "z.tile_index is not defined in a persistent kernel")
def o_persistent_tile_index(z: tl.Out, x: tl.In):
    for t in z.tiles():
        (i,) = z.tile_index  # AT: o_persistent_tile_index @ z.tile_index
        z.store(tl.load_like(x, z, at=t), at=t)


@refused("o_persistent_tiles_in_tuple", "other", "tiles-loop", "can only be the iterable")
def o_persistent_tiles_in_tuple(z: tl.Out, x: tl.In):
    for t in tuple(z.tiles()):  # AT: o_persistent_tiles_in_tuple @ z.tiles()
        z.store(tl.load_like(x, z, at=t), at=t)


@refused("o_at_in_row_major", "other", "at-not-persistent", "at= is only for persistent kernels")
def o_at_in_row_major(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z), at=1)  # AT: o_at_in_row_major @ 1)


@refused("o_persistent_store_missing_at", "other", "missing-at", "has no tile")
def o_persistent_store_missing_at(z: tl.Out, x: tl.In):
    for t in z.tiles():
        z.store(tl.load_like(x, z, at=t))  # AT: o_persistent_store_missing_at


# ---- p.store(tile, offset=...): a sub-tile of the own tile, never a destination --------


@refused("o_offset_store_not_tuple", "other", "offset-store", "takes a tuple literal", "got 'o'")
def o_offset_store_not_tuple(z: tl.Out, x: tl.In):
    o = (z.tile_index[0] + 1,)
    z.store(tl.load_like(x, z), offset=o)  # AT: o_offset_store_not_tuple @ o)


@refused("o_offset_store_starred", "other", "offset-store", "with a starred element")
def o_offset_store_starred(z: tl.Out, x: tl.In):
    o = (1,)
    z.store(tl.load_like(x, z), offset=(*o,))  # AT: o_offset_store_starred @ *o


@refused_at_compile("o_offset_store_rank", "other", "offset-store",
                    "gives 1 offset for partition 'z' of rank 2",
                    examples=lambda: (S((4, 8)).partition((1, 8)), S((4, 8))))
def o_offset_store_rank(z: tl.Out, x: tl.In):
    z.store(ct.load(x, index=(0, 0), shape=(1, 4)), offset=(1,))  # AT: o_offset_store_rank @ 1,)


@refused("o_offset_store_on_input", "other", "write-input", "writes to 'x', which is tl.In")
def o_offset_store_on_input(z: tl.Out, x: tl.In):
    x.store(tl.load_like(x, z), offset=(0,))  # AT: o_offset_store_on_input @ x.store


@refused("o_offset_store_and_index", "other", "partition-store", "index= cannot be chosen")
def o_offset_store_and_index(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z), offset=(0,), index=(2,))  # AT: o_offset_store_and_index @ index=


@refused("o_offset_store_device_helper", "other", "partition-escape",
         "passing partition 'z' to tl_device.sub_tile_store()")
def o_offset_store_device_helper(z: tl.Out, x: tl.In):
    # the lowering's helper, called by hand with another block's tile index
    tl_device.sub_tile_store(z, (z.tile_index[0] + 1,), (64,), tl.load_like(x, z), (0,))  # AT: o_offset_store_device_helper @ tl_device


@refused("o_offset_store_method_value", "other", "partition-method-value",
         "z.store must be called directly")
def o_offset_store_method_value(z: tl.Out, x: tl.In):
    put = z.store  # AT: o_offset_store_method_value @ z.store
    put(tl.load_like(x, z), offset=(1,))


# ---- tl.Raw, and unsafe kernels writing inputs through aliases -----------------------


@refused("o_raw_in_safe_kernel", "other", "raw-param", "parameter 'r' is tl.Raw")
def o_raw_in_safe_kernel(z: tl.Out, r: tl.Raw):  # AT: o_raw_in_safe_kernel @ r: tl.Raw
    z.store(tl.load_like(r, z))


class _MyOut(tl.Out):
    pass


@refused("o_param_kind_subclass", "other", "param-form", "a subclass of a tilelab parameter kind")
def o_param_kind_subclass(z: _MyOut, x: tl.In):  # AT: o_param_kind_subclass @ z: _MyOut
    ct.store(z, index=(0,), tile=tl.load_like(x, x))


@refused("o_param_varargs", "other", "param-form", "cannot be *args")
def o_param_varargs(z: tl.Out, *xs):  # AT: o_param_varargs @ xs
    z.store(tl.load_like(xs[0], z))


@refused("o_param_kwargs", "other", "param-form", "cannot be **kwargs")
def o_param_kwargs(z: tl.Out, **xs):  # AT: o_param_kwargs @ xs
    z.store(tl.load_like(xs["x"], z))


@refused("o_unsafe_tuple_alias", "other", "write-input", "'x', which is tl.In", unsafe=True)
def o_unsafe_tuple_alias(r: tl.Raw, x: tl.In):
    pair = (r, x)
    t = ct.load(x, index=(ct.bid(0),), shape=(16,))
    ct.store(pair[1], index=(ct.bid(0),), tile=t)  # AT: o_unsafe_tuple_alias


@refused("o_unsafe_ifexp_alias", "other", "write-input", "'x', which is tl.In", unsafe=True)
def o_unsafe_ifexp_alias(r: tl.Raw, x: tl.In, flag: int):
    t = ct.load(x, index=(ct.bid(0),), shape=(16,))
    ct.atomic_add(r if flag else x, ct.arange(16, dtype=ct.int32), t)  # AT: o_unsafe_ifexp_alias


@refused("o_unsafe_helper_result_alias", "other", "write-input", "'x', which is tl.In",
         unsafe=True)
def o_unsafe_helper_result_alias(r: tl.Raw, x: tl.In):
    t = ct.load(x, index=(ct.bid(0),), shape=(16,))
    ct.store(sh.add2(x, r), index=(ct.bid(0),), tile=t)  # AT: o_unsafe_helper_result_alias


@refused("o_unsafe_view_of_in", "other", "write-input", "'x', which is tl.In", unsafe=True)
def o_unsafe_view_of_in(r: tl.Raw, x: tl.In):
    t = ct.load(x, index=(ct.bid(0),), shape=(16,))
    v = x.tiled_view((16,))
    v.store((ct.bid(0),), t)  # AT: o_unsafe_view_of_in


@refused("o_unsafe_loop_alias", "other", "write-input", "'x', which is tl.In", unsafe=True)
def o_unsafe_loop_alias(r: tl.Raw, x: tl.In):
    t = ct.load(x, index=(ct.bid(0),), shape=(16,))
    for d in (r, x):
        ct.atomic_xchg(d, ct.arange(16, dtype=ct.int32), t)  # AT: o_unsafe_loop_alias


@refused("o_unsafe_walrus_alias", "other", "write-input", "'x', which is tl.In", unsafe=True)
def o_unsafe_walrus_alias(r: tl.Raw, x: tl.In):
    t = ct.load(x, index=(ct.bid(0),), shape=(16,))
    ct.store((d := x), index=(ct.bid(0),), tile=t)  # AT: o_unsafe_walrus_alias
    ct.store(r, index=(ct.bid(0),), tile=ct.load(d, index=(0,), shape=(16,)))


@refused("o_unsafe_slice_of_in", "other", "write-input", "'x', which is tl.In", unsafe=True)
def o_unsafe_slice_of_in(r: tl.Raw, x: tl.In):
    t = ct.load(x, index=(ct.bid(0),), shape=(16,))
    ct.store(x.slice(0, 0, 16), index=(0,), tile=t)  # AT: o_unsafe_slice_of_in


@refused("o_unsafe_raw_memory_of_in", "other", "write-input", "'x', which is tl.In",
         unsafe=True)
def o_unsafe_raw_memory_of_in(r: tl.Raw, x: tl.In):
    t = ct.load(x, index=(ct.bid(0),), shape=(16,))
    x.get_raw_memory().store_offset(ct.arange(16, dtype=ct.int32), t)  # AT: o_unsafe_raw_memory_of_in


@refused("o_unsafe_helper_writes_in", "other", "write-input", "helper 'writer'", unsafe=True,
         where="o_other_module_writer")
def o_unsafe_helper_writes_in(r: tl.Raw, x: tl.In):
    t = ct.load(x, index=(ct.bid(0),), shape=(16,))
    sh.writer(r, t)
    sh.writer(x, t)


@refused("o_unsafe_foreign_write", "other", "write-untraced", "cannot trace back to a tl.Raw",
         unsafe=True)
def o_unsafe_foreign_write(r: tl.Raw, x: tl.In):
    v = ct.Array.from_foreign(r.foreign_pointer, x.shape, x.strides)
    ct.store(v, index=(0,), tile=ct.load(x, index=(0,), shape=(16,)))  # AT: o_unsafe_foreign_write


@refused("o_unsafe_partition_raw_store", "other", "write-partition", "writes partition 'z'",
         unsafe=True)
def o_unsafe_partition_raw_store(z: tl.Out, r: tl.Raw, x: tl.In):
    ct.atomic_add(z, ct.arange(16, dtype=ct.int32), tl.load_like(x, z))  # AT: o_unsafe_partition_raw_store


# ---- values a kernel reads from its module ----------------------------------------------

_LIST = [1.0, 2.0]
_DICT = {"a": 1.0}
_ARRAY = np.ones(4, np.float32)
_SET = {1, 2}


@refused("o_global_list_value", "other", "global-value", "_LIST is a list object")
def o_global_list_value(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) + _LIST[0])  # AT: o_global_list_value @ _LIST


@refused("o_global_dict_value", "other", "global-value", "_DICT is a dict object")
def o_global_dict_value(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) + _DICT["a"])  # AT: o_global_dict_value @ _DICT


@refused("o_global_array_value", "other", "global-value", "_ARRAY is a ndarray object")
def o_global_array_value(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) + _ARRAY[0])  # AT: o_global_array_value @ _ARRAY


@refused("o_global_set_value", "other", "global-value", "_SET is a set object")
def o_global_set_value(z: tl.Out, x: tl.In):
    n = len(_SET)  # AT: o_global_set_value @ _SET
    z.store(tl.load_like(x, z) + n)


@refused("o_global_module_value", "other", "global-value", "np is module 'numpy'")
def o_global_module_value(z: tl.Out, x: tl.In):
    m = np  # AT: o_global_module_value @ np
    z.store(tl.load_like(x, z))


@refused("o_global_function_value", "other", "global-value", "sh.double is function 'double'")
def o_global_function_value(z: tl.Out, x: tl.In):
    f = sh.double  # AT: o_global_function_value @ sh.double
    z.store(tl.load_like(x, z))


@refused("o_global_object_attribute", "other", "global-attribute", "_SINK is a _Sink object")
def o_global_object_attribute(z: tl.Out, x: tl.In):
    w = _SINK.write  # AT: o_global_object_attribute @ _SINK.write
    z.store(tl.load_like(x, z))


@refused("o_global_builtin_value", "other", "global-value", "getattr")
def o_global_builtin_value(z: tl.Out, x: tl.In):
    g = getattr  # AT: o_global_builtin_value @ getattr
    z.store(tl.load_like(x, z))


@refused("o_global_dunder_builtins", "other", "global-value", "__builtins__")
def o_global_dunder_builtins(z: tl.Out, x: tl.In):
    b = __builtins__  # AT: o_global_dunder_builtins @ __builtins__
    z.store(tl.load_like(x, z))


class _EvilInt(int):
    """An int whose operators and methods run host code (here: write the array)."""

    def __add__(self, other):
        ct.store(other, index=(0,), tile=ct.full((64,), 7.0, ct.float32))
        return 0

    __radd__ = __add__

    def reshape(self, other, *shape):
        ct.store(other, index=(1,), tile=ct.full((64,), 8.0, ct.float32))
        return 0


class _EvilTuple(tuple):
    def __getitem__(self, i):
        return 0


class _CtLookalike:
    """Not callable, and its type says it comes from cuda.tile."""

    __module__ = "cuda.tile.fake"

    def reshape(self, other, *shape):
        ct.store(other, index=(0,), tile=ct.full((64,), 9.0, ct.float32))
        return 0


class _EvilFloat32(np.float32):
    """A numpy scalar subclass whose type claims to be numpy's own."""

    __module__ = "numpy"

    def __add__(self, other):
        ct.store(other, index=(0,), tile=ct.full((64,), 5.0, ct.float32))
        return 0

    __radd__ = __add__


class _TorchDtypeLookalike:
    """Neither torch nor a dtype: its type's name and module only say so."""

    __module__ = "torch"

    def __add__(self, other):
        ct.store(other, index=(0,), tile=ct.full((64,), 6.0, ct.float32))
        return 0

    __radd__ = __add__


_TorchDtypeLookalike.__name__ = "dtype"


_EVIL = _EvilInt(3)
_EVIL_TUPLE = _EvilTuple((1, 2))
_CT_LOOKALIKE = _CtLookalike()
_NP_LOOKALIKE = _EvilFloat32(1.0)
_TORCH_DTYPE_LOOKALIKE = _TorchDtypeLookalike()

@refused("o_int_subclass_operator", "other", "global-value", "_EVIL")
def o_int_subclass_operator(z: tl.Out, x: tl.In):
    q = _EVIL + x  # AT: o_int_subclass_operator @ _EVIL
    z.store(tl.load_like(x, z))


@refused("o_int_subclass_method", "other", "global-value", "_EVIL")
def o_int_subclass_method(z: tl.Out, x: tl.In):
    e = _EVIL  # AT: o_int_subclass_method @ _EVIL
    q = e.reshape(x)
    z.store(tl.load_like(x, z))


@refused("o_tuple_subclass_value", "other", "global-value", "_EVIL_TUPLE")
def o_tuple_subclass_value(z: tl.Out, x: tl.In):
    n = _EVIL_TUPLE[0]  # AT: o_tuple_subclass_value @ _EVIL_TUPLE
    z.store(tl.load_like(x, z) + n)


@refused("o_ct_lookalike_value", "other", "global-value", "_CT_LOOKALIKE")
def o_ct_lookalike_value(z: tl.Out, x: tl.In):
    f = _CT_LOOKALIKE  # AT: o_ct_lookalike_value @ _CT_LOOKALIKE
    q = f.reshape(x)
    z.store(tl.load_like(x, z))


@refused("o_numpy_scalar_lookalike", "other", "global-value", "_NP_LOOKALIKE")
def o_numpy_scalar_lookalike(z: tl.Out, x: tl.In):
    q = _NP_LOOKALIKE + x  # AT: o_numpy_scalar_lookalike @ _NP_LOOKALIKE
    z.store(tl.load_like(x, z))


@refused("o_torch_dtype_lookalike", "other", "global-value", "_TORCH_DTYPE_LOOKALIKE")
def o_torch_dtype_lookalike(z: tl.Out, x: tl.In):
    q = _TORCH_DTYPE_LOOKALIKE + x  # AT: o_torch_dtype_lookalike @ _TORCH_DTYPE_LOOKALIKE
    z.store(tl.load_like(x, z))


def _lookalike_runs(fn):
    def run(s):
        try:
            k = s.define(fn)
        except tl.SafetyError as e:
            return Result(None, refusal=e)
        x_np = arange(256)
        before = x_np.copy()
        x, z = cpu(x_np), zeros(256)
        k(z.partition(64), x)
        return Result(k, art="cpu-only",
                      inputs_unchanged=bool(np.array_equal(x.numpy(), before)),
                      detail=f"x[:4] = {x.numpy()[:4]}")
    return run


neutralized("o_numpy_scalar_lookalike_runs_on_cpu", "other")(
    _lookalike_runs(o_numpy_scalar_lookalike))
neutralized("o_torch_dtype_lookalike_runs_on_cpu", "other")(
    _lookalike_runs(o_torch_dtype_lookalike))


@neutralized("o_int_subclass_runs_on_cpu", "other")
def _(s):
    """If such a kernel is accepted, running it must still leave its input unchanged."""
    try:
        k = s.define(o_int_subclass_operator)
    except tl.SafetyError as e:
        return Result(None, refusal=e)
    x_np = arange(256)
    before = x_np.copy()
    x, z = cpu(x_np), zeros(256)
    k(z.partition(64), x)
    return Result(k, art="cpu-only", inputs_unchanged=bool(np.array_equal(x.numpy(), before)),
                  detail=f"x[:4] = {x.numpy()[:4]}")


def k_scalar_arg(z: tl.Out, x: tl.In, a: int):
    q = a + x
    z.store(tl.load_like(x, z))


@neutralized("o_scalar_argument_subclass", "other")
def _(s):
    """A scalar argument of a user subclass of int: the interpreter turns scalars into
    tiles, so its operators never run (the launch is refused by the kernel's own types)."""
    k = s.define(k_scalar_arg)
    x_np = arange(256)
    before = x_np.copy()
    x, z = cpu(x_np), zeros(256)
    res = Result(k, art="cpu-only")
    try:
        k(z.partition(64), x, _EvilInt(3))
    except (tl.LaunchError, tl.CompileError) as e:
        res.refusal = e
        return res
    res.inputs_unchanged = bool(np.array_equal(x.numpy(), before))
    res.detail = f"x[:4] = {x.numpy()[:4]}"
    return res


@attempt("o_partition_tensor_swapped", "other", "partition", "AttributeError",
         "a partition's tensor cannot change", where="-")
def _(s):
    """p.tensor = smaller after a launch (the partition's launch plan and, with
    check_bounds=False, its in-bounds proof are cached): refused by the assignment."""
    k = s.define(k8_unchecked, check_bounds=False)
    x = cpu(arange(256))
    p = zeros(256).partition(64)
    k(p, x)
    s.partition()
    p.tensor = zeros(64)
    s.launch(k)
    k(p, x)


@attempt("o_partition_tile_shape_reassigned", "other", "partition", "AttributeError",
         "a partition's tile_shape cannot change", where="-")
def _(s):
    k = s.define(k7_out)
    p = zeros(256).partition(64)
    s.partition()
    p.tile_shape = (128,)
    launch_cpu(s, k, (p, cpu(arange(256))))


@attempt("o_partition_grid_reassigned", "other", "partition", "AttributeError",
         "a partition's grid cannot change", where="-")
def _(s):
    k = s.define(k7_out)
    p = zeros(256).partition(64)
    s.partition()
    p.grid = (8,)
    launch_cpu(s, k, (p, cpu(arange(256))))


@attempt("o_output_overlaps_input", "other", "launch", "AliasError", "overlaps",
         where="launch_line")
def _(s):
    k = s.define(k7_out)
    t = cpu(arange(256))
    launch_cpu(s, k, (t[64:192].partition(64), t[:128]))


def _star_helper(*args):
    return ct.store(*args)  # AT: o_helper_star_args @ *args


@refused("o_helper_star_args", "other", "call-star", "ct.store() with *args or **kwargs")
def o_helper_star_args(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    _star_helper(x, (0,), t)
    z.store(t)


# ---- calls and names the allowlist does not know --------------------------------------


def _late_never_defined_kernel(z: tl.Out, x: tl.In):
    z.store(_never_defined(tl.load_like(x, z)))  # noqa: F821  # AT: o_unresolved_at_compile @ _never_defined


@attempt("o_unresolved_at_compile", "other", "compile", "unresolved-name",
         "name '_never_defined' is not defined")
def _(s):
    k = s.define(_late_never_defined_kernel)
    s.compile(k, *_examples())


@refused("o_tl_host_api", "other", "call-host", "tl.empty() is not available inside a kernel")
def o_tl_host_api(z: tl.Out, x: tl.In):
    y = tl.empty(4)  # AT: o_tl_host_api @ tl.empty
    z.store(tl.load_like(x, z))


@refused("o_ct_host_api", "other", "call-host", "ct.launch is cuTile's host API")
def o_ct_host_api(z: tl.Out, x: tl.In):
    ct.launch(None, (1,), None, ())  # AT: o_ct_host_api
    z.store(tl.load_like(x, z))


@refused("o_ct_value_called", "other", "call-unknown", "ct.float32 is a cuTile type or constant")
def o_ct_value_called(z: tl.Out, x: tl.In):
    v = ct.float32(1.0)  # AT: o_ct_value_called @ ct.float32
    z.store(tl.load_like(x, z) + v)


@refused("o_ct_class_method", "other", "call-unknown", "ct.Array.slice is cuTile's internal code",
         "not a classified op")
def o_ct_class_method(z: tl.Out, x: tl.In):
    v = ct.Array.slice(x, 0, 0, 16)  # AT: o_ct_class_method @ ct.Array.slice
    z.store(tl.load_like(x, z))


@refused("o_ct_submodule_call", "other", "call-host", "ct.compilation")
def o_ct_submodule_call(z: tl.Out, x: tl.In):
    ct.compilation()  # AT: o_ct_submodule_call
    z.store(tl.load_like(x, z))


@refused("o_tile_method_unknown", "other", "method-unknown", "method .tolist()")
def o_tile_method_unknown(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    v = t.tolist()  # AT: o_tile_method_unknown @ t.tolist
    z.store(t)


@refused("o_array_method_unknown", "other", "method-unknown", "method .fill()")
def o_array_method_unknown(z: tl.Out, x: tl.In):
    x.fill(0.0)  # AT: o_array_method_unknown
    z.store(tl.load_like(x, z))


@refused("o_method_on_call_result", "other", "method-unknown", "method .setflags()")
def o_method_on_call_result(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    t.reshape((64,)).setflags(write=True)  # AT: o_method_on_call_result
    z.store(t)


@refused("o_array_store_method", "other", "write-input", ".store()", "'x'")
def o_array_store_method(z: tl.Out, x: tl.In):
    x.store((0,), tl.load_like(x, z))  # AT: o_array_store_method
    z.store(tl.load_like(x, z))


@refused("o_view_chain", "other", "view-op", "x.slice() makes or reads a view")
def o_view_chain(z: tl.Out, x: tl.In):
    v = x.slice(0, 0, 64).tiled_view((64,))  # AT: o_view_chain @ x.slice
    z.store(tl.load_like(x, z))


@refused("o_call_star_store", "other", "call-star", "ct.store() with *args")
def o_call_star_store(z: tl.Out, x: tl.In):
    rest = ((0,), tl.load_like(x, z))
    ct.store(x, *rest)  # AT: o_call_star_store @ *rest
    z.store(tl.load_like(x, z))


@refused("o_call_kwargs_scatter", "other", "call-star", "ct.scatter() with *args or **kwargs")
def o_call_kwargs_scatter(z: tl.Out, x: tl.In, idx: tl.In):
    opts = {"check_bounds": False}
    ct.scatter(x, tl.load_like(idx, z), tl.load_like(x, z), **opts)  # AT: o_call_kwargs_scatter @ **opts
    z.store(tl.load_like(x, z))


# ======================================================================================
# ACCEPTED: safe code that must keep working (compiled for sm_90, run on the CPU)

from compiler import soundness_shadow as shadow  # noqa: E402
from cuda.tile import exp as ct_exp  # noqa: E402

_A_CONST = 0.25
_PAIR = (1.0, 3.0)
_NP_F16 = np.dtype("float16")
_NP_F32_TYPE = np.float32


def _io1(f, n=256, tile=64, schedule=None, extra=(), n_inputs=1):
    """1-D: (launch args, output, expected, inputs) for z = f(*inputs)."""
    xs = [(np.arange(n, dtype=np.float32) % 17) / 8 + i for i in range(n_inputs)]
    ts = [cpu(a) for a in xs]
    z = zeros(n)
    part = z.partition(tile, schedule=schedule) if schedule is not None else z.partition(tile)
    return (part, *ts, *extra), z, f(*xs), list(zip(ts, [a.copy() for a in xs]))


def _io2(f, shape=(64, 64), tile=(16, 16), schedule=None, extra=()):
    x = (np.arange(shape[0] * shape[1], dtype=np.float32).reshape(shape) % 13) / 4
    t = cpu(x)
    z = zeros(shape)
    part = z.partition(tile, schedule=schedule) if schedule is not None else z.partition(tile)
    return (part, t, *extra), z, f(x), [(t, x.copy())]


@accepted("a_helper_other_module", lambda: _io1(lambda x: x * 3 + 2))
def a_helper_other_module(z: tl.Out, x: tl.In):
    z.store(sh.scaled(tl.load_like(x, z)))


@accepted("a_helper_from_import", lambda: _io1(lambda x: x * 2))
def a_helper_from_import(z: tl.Out, x: tl.In):
    z.store(sh_double(tl.load_like(x, z)))


@accepted("a_helper_chain_other_module", lambda: _io1(lambda x: x * 4))
def a_helper_chain_other_module(z: tl.Out, x: tl.In):
    z.store(sh.twice_through(tl.load_like(x, z)))


@accepted("a_ct_function_helper", lambda: _io1(lambda x: x + 1))
def a_ct_function_helper(z: tl.Out, x: tl.In):
    z.store(sh.plus_one(tl.load_like(x, z)))


@ct.function
def _plus_two(t):
    return t + 2


@accepted("a_ct_function_helper_global", lambda: _io1(lambda x: x + 2))
def a_ct_function_helper_global(z: tl.Out, x: tl.In):
    z.store(_plus_two(tl.load_like(x, z)))


@accepted("a_helper_reads_input",
          lambda: _io2(lambda x: np.repeat(x.sum(axis=1, keepdims=True), 64, axis=1),
                       tile=(16, 64)))
def a_helper_reads_input(z: tl.Out, x: tl.In):
    (m, n) = z.tile_index
    bm, bn = z.tile_shape
    t = sh.load_row(x, m, bm, 64)
    z.store(ct.broadcast_to(ct.sum(t, axis=1, keepdims=True), (bm, bn)))


@accepted("a_reduce_keyword_helper",
          lambda: _io2(lambda x: np.repeat(x.sum(axis=1, keepdims=True), 64, axis=1),
                       tile=(16, 64)))
def a_reduce_keyword_helper(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    s = ct.reduce(t, axis=1, func=sh.add2, identity=0.0, keepdims=True)
    z.store(t * 0 + s)


@accepted("a_reduce_positional_helper",
          lambda: _io2(lambda x: np.repeat(x.max(axis=1, keepdims=True), 64, axis=1),
                       tile=(16, 64)))
def a_reduce_positional_helper(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    z.store(t * 0 + ct.reduce(t, 1, sh.max2, -1e30, keepdims=True))


@accepted("a_scan_keyword_helper",
          lambda: _io1(lambda x: np.concatenate([np.cumsum(c) for c in x.reshape(4, 64)])))
def a_scan_keyword_helper(z: tl.Out, x: tl.In):
    z.store(ct.scan(tl.load_like(x, z), axis=0, func=sh.add2, identity=0.0))


@accepted("a_module_constants", lambda: _io1(lambda x: x * 3 + 1 + 0.25))
def a_module_constants(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) * sh.SCALE + sh.OFFSETS[0] + _A_CONST)


@accepted("a_tuples", lambda: _io1(lambda x, y: x + y * 3, n_inputs=2))
def a_tuples(z: tl.Out, x: tl.In, y: tl.In):
    a, b = (tl.load_like(x, z), tl.load_like(y, z))
    pair = (a, b)
    first, second = pair
    z.store(first + second * _PAIR[1] + pair[0] * 0)


@accepted("a_dtypes_cutile", lambda: _io1(lambda x: x.astype(np.float16).astype(np.float32)))
def a_dtypes_cutile(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z).astype(ct.float16).astype(sh.FLOAT32))


@accepted("a_dtypes_numpy", lambda: _io1(lambda x: x.astype(np.float16).astype(np.float32)))
def a_dtypes_numpy(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z).astype(_NP_F16).astype(_NP_F32_TYPE))


@accepted("a_dtypes_numpy_module_attribute",
          lambda: _io1(lambda x: x.astype(np.float16).astype(np.float32)))
def a_dtypes_numpy_module_attribute(z: tl.Out, x: tl.In):
    z.store(ct.astype(tl.load_like(x, z), np.float16).astype(np.float32))


if _torch is not None:
    _TORCH_F16 = _torch.float16

    @accepted("a_dtypes_torch", lambda: _io1(lambda x: x.astype(np.float16).astype(np.float32)),
              needs="torch")
    def a_dtypes_torch(z: tl.Out, x: tl.In):
        z.store(tl.load_like(x, z).astype(_TORCH_F16).astype(_torch.float32))


@accepted("a_static_eval", lambda: _io1(lambda x: x + 0.5))
def a_static_eval(z: tl.Out, x: tl.In):
    n = ct.static_eval(_A_CONST * 2)
    z.store(tl.load_like(x, z) + n)


@accepted("a_static_iter_tuple_of_tiles", lambda: _io1(lambda x: x * 3))
def a_static_iter_tuple_of_tiles(z: tl.Out, x: tl.In):
    ts = tuple(tl.load_like(x, z) * i for i in ct.static_iter((1, 2)))
    z.store(ts[0] + ts[1])


def _make_scaled(scale):
    def scaled_kernel(z: tl.Out, x: tl.In):
        z.store(tl.load_like(x, z) * scale)
    return scaled_kernel


def _make_with_helper(helper):
    def helper_kernel(z: tl.Out, x: tl.In):
        z.store(helper(tl.load_like(x, z)))
    return helper_kernel


accepted("a_closure_factory_constant", lambda: _io1(lambda x: x * 1.5))(_make_scaled(1.5))
accepted("a_closure_factory_helper", lambda: _io1(lambda x: x * 2))(
    _make_with_helper(sh.double))


def _shadow(case_id, kernel, make):
    assert case_id not in ACCEPTED
    ACCEPTED[case_id] = Accepted(case_id, lambda: kernel, make)


_shadow("a_shadow_globals", shadow.scaled_by_globals,
        lambda: _io2(lambda x: x * 2 + 3 + 5 + 7 + 10 + 20))
_shadow("a_shadow_user_range_persistent", shadow.persistent_with_user_range,
        lambda: _io2(lambda x: x + 1, schedule=tl.persistent(3)))
_shadow("a_shadow_user_range_grouped", shadow.grouped_with_user_range,
        lambda: _io2(lambda x: x + 1, shape=(128, 64), schedule=tl.grouped(2)))
_shadow("a_shadow_local_ct", shadow.local_ct, lambda: _io2(lambda x: x * 1.5 + 2))
_shadow("a_shadow_param_named_ct", shadow.param_named_ct,
        lambda: _io2(lambda x: x + 0.5, extra=(0.5,)))
_shadow("a_shadow_shape_names", shadow.shape_names, lambda: _io1(lambda x: x + 4))


def _io_inout():
    a = np.arange(256, dtype=np.float32) / 3
    t = cpu(a)
    return (t.partition(64),), t, a * 2, []


@accepted("a_inout_helper", _io_inout)
def a_inout_helper(p: tl.InOut):
    p.store(sh.double(p.load()))


@accepted("a_module_path_op", lambda: _io1(lambda x: np.exp(x)))
def a_module_path_op(z: tl.Out, x: tl.In):
    z.store(cuda.tile.exp(tl.load_like(x, z)))


@accepted("a_ct_op_global_alias", lambda: _io1(lambda x: np.exp(x)))
def a_ct_op_global_alias(z: tl.Out, x: tl.In):
    z.store(ct_exp(tl.load_like(x, z)))


@accepted("a_conditional_tile", lambda: _io1(lambda x: x * 2))
def a_conditional_tile(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    if z.shape[0] > 0:
        t = t + t
    z.store(t)


def _optional_input(has_y):
    """(z, x, y, HAS_Y) where y is a 1-element placeholder: tl.load_like(y, z) would lie
    outside it for every block but the first."""
    x = (np.arange(256, dtype=np.float32) % 17) / 8
    xt, yt, z = cpu(x), cpu(np.ones(1, np.float32)), zeros(256)
    return (z.partition(64), xt, yt, has_y), z, x, [(xt, x.copy())]


def k_optional_input(z: tl.Out, x: tl.In, y: tl.In, HAS_Y: ct.Constant[bool]):
    t = tl.load_like(x, z)
    if HAS_Y:
        t = t + tl.load_like(y, z)
    z.store(t)


@accepted("a_load_like_under_false_constant", lambda: _optional_input(False))
def a_load_like_under_false_constant(z: tl.Out, x: tl.In, y: tl.In,
                                     HAS_Y: ct.Constant[bool]):
    """A tl.load_like under 'if C:' of a ct.Constant false for the launch is never run, so
    its array (a placeholder) need not cover the partition."""
    t = tl.load_like(x, z)
    if HAS_Y:
        t = t + tl.load_like(y, z)
    z.store(t)


@accepted("a_loop_accumulate", lambda: _io1(lambda x: x * 4, extra=(3,)))
def a_loop_accumulate(z: tl.Out, x: tl.In, N: ct.Constant[int]):
    t = tl.load_like(x, z)
    acc = t
    for i in range(N):
        acc = acc + t
    z.store(acc)


@accepted("a_persistent_grouped_helper",
          lambda: _io2(lambda x: x * 2, schedule=tl.persistent(3, group_m=2)))
def a_persistent_grouped_helper(z: tl.Out, x: tl.In):
    for t in z.tiles():
        z.store(sh.double(tl.load_like(x, z, at=t)), at=t)


@accepted("a_check_bounds_false_proven", lambda: _io1(lambda x, y: x + y, n_inputs=2),
          check_bounds=False)
def a_check_bounds_false_proven(z: tl.Out, x: tl.In, y: tl.In):
    z.store(tl.load_like(x, z) + tl.load_like(y, z))


@accepted("a_unsafe_reads_through_views", lambda: _io1(lambda x: x * 2), unsafe=True)
def a_unsafe_reads_through_views(z: tl.Out, x: tl.In):
    (i,) = z.tile_index
    (bs,) = z.tile_shape
    v = x.tiled_view((bs,)).load((i,))
    z.store(v + ct.load(x.slice(0, 0, x.shape[0]), index=(i,), shape=(bs,)))


#: per-block sub-tile numbers chosen to reach other blocks' tiles, wrap, or stay inside
_HOSTILE_OFFSETS = (-1, 4, 3, -2**31, 2**31 - 1, 0, 5, -4)


def _hostile_offsets():
    """(launch args, output, expected, inputs): z of 8 tiles of 64, sub-tiles of 16;
    only the offsets inside [0, 4) write, and only inside their own block's tile."""
    x = np.arange(512, dtype=np.float32) + 1
    offs = np.array(_HOSTILE_OFFSETS, dtype=np.int32)
    want = np.zeros(512, np.float32)
    for b, o in enumerate(_HOSTILE_OFFSETS):
        if 0 <= o < 4:
            want[64 * b + 16 * o:64 * b + 16 * o + 16] = x[:16] + b
    ts = [cpu(x), cpu(offs)]
    z = zeros(512)
    return (z.partition(64), *ts), z, want, list(zip(ts, [x.copy(), offs.copy()]))


@accepted("a_offset_store_hostile_offsets_write_nothing_outside", _hostile_offsets)
def a_offset_store_hostile(z: tl.Out, x: tl.In, offs: tl.In):
    (b,) = z.tile_index
    o = ct.load(offs, index=(b,), shape=(1,)).item()
    z.store(ct.load(x, index=(0,), shape=(16,)) + b, offset=(o,))


def _kv_cache():
    k_new = (np.arange(32, dtype=np.float32) + 1).reshape(4, 8)
    want = np.zeros((4, 16, 8), np.float32)
    want[:, 9] = k_new
    ts = [cpu(k_new), cpu(np.array([9], np.int32))]
    cache = zeros((4, 16, 8))
    return (cache.partition((1, 16, 8)), *ts, 8), cache, want, \
        list(zip(ts, [k_new.copy(), np.array([9], np.int32)]))


@accepted("a_offset_store_kv_cache", _kv_cache)
def a_offset_store_kv_cache(k_cache: tl.Out, k_new: tl.In, position: tl.In,
                            D: ct.Constant[int]):
    h = k_cache.tile_index[0]
    pos = ct.load(position, index=(0,), shape=(1,)).item()
    row = ct.reshape(ct.load(k_new, index=(h, 0), shape=(1, D)), (1, 1, D))
    k_cache.store(row, offset=(0, pos, 0))


# ======================================================================================
# COMPILE_ERRORS: cuTile's own refusals, for the error-quality test (each compiled for
# sm_90 and launched on the CPU; both errors must point at the marked line)

COMPILE_ERRORS: dict[str, tuple[Callable, Callable[[], tuple], tuple[str, ...]]] = {}


def compile_error(case_id, args, backends=("gpu", "cpu")):
    def deco(fn):
        COMPILE_ERRORS[case_id] = (fn, args, backends)
        return fn
    return deco


@compile_error("e_store_shape_mismatch", lambda: (zeros(256).partition(64), cpu(arange(256))))
def e_store_shape_mismatch(z: tl.Out, x: tl.In):
    t = ct.load(x, index=(0,), shape=(32,))
    z.store(t)  # AT: e_store_shape_mismatch


@compile_error("e_bitwise_on_float", lambda: (zeros(256).partition(64), cpu(arange(256))))
def e_bitwise_on_float(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) & 3)  # AT: e_bitwise_on_float @ tl.load_like


@compile_error("e_reshape_in_helper", lambda: (zeros(256).partition(64), cpu(arange(256))))
def e_reshape_in_helper(z: tl.Out, x: tl.In):
    z.store(_e_bad_reshape(tl.load_like(x, z)))


def _e_bad_reshape(t):
    return ct.reshape(t, (3, 3))  # AT: e_reshape_in_helper @ ct.reshape


@compile_error("e_persistent_shape", lambda: (zeros((64, 64)).partition(
    (16, 16), schedule=tl.persistent(2)), cpu(np.zeros((64, 64), np.float32))))
def e_persistent_shape(z: tl.Out, x: tl.In):
    for t in z.tiles():
        z.store(ct.reshape(tl.load_like(x, z, at=t), (16, 8, 2)), at=t)  # AT: e_persistent_shape @ z.store


# (the CPU interpreter runs star-unpacking, which cuTile refuses: compiled only)
@compile_error("e_star_unpack_syntax", lambda: (zeros(256).partition(64), cpu(arange(256))),
               backends=("gpu",))
def e_star_unpack_syntax(z: tl.Out, x: tl.In):
    first, *rest = (tl.load_like(x, z), 1.0)  # AT: e_star_unpack_syntax
    z.store(first)


@compile_error("e_inout_dtype", lambda: (cpu(np.arange(256, dtype=np.int32)).partition(64),))
def e_inout_dtype(p: tl.InOut):
    p.store(ct.exp(p.load()))  # AT: e_inout_dtype


@compile_error("e_offset_store_not_dividing",
               lambda: (zeros(64).partition(16), cpu(arange(64))))
def e_offset_store_not_dividing(z: tl.Out, x: tl.In):
    z.store(ct.load(x, index=(0,), shape=(32,)), offset=(0,))  # AT: e_offset_store_not_dividing
