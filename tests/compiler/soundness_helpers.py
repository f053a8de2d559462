"""Helpers in a module of their own, for the soundness corpus (soundness_cases.py).

Kernels reach these through ``import soundness_helpers as sh`` (module attributes) and
``from soundness_helpers import ...`` (globals). Lines where the checker must refuse carry
``# AT: <attempt id>`` markers (optionally ``@ <anchor>`` for the column), read by
tests/compiler/_soundness.py.
"""
from __future__ import annotations

import functools
import types

import cuda.tile as ct

# ---- data a kernel may read ----------------------------------------------------------

SCALE = 3.0
OFFSETS = (1.0, 2.0)
FLOAT32 = ct.float32


# ---- readers (accepted) --------------------------------------------------------------


def double(t):
    return t * 2


def scaled(t):
    return t * SCALE + OFFSETS[1]


def add2(a, b):
    return a + b


def max2(a, b):
    return ct.maximum(a, b)


def twice_through(t):
    return double(double(t))        # a helper calling a helper of its own module


@ct.function
def plus_one(t):
    return t + 1


def load_row(x, m, bm, n):
    return ct.load(x, index=(m, 0), shape=(bm, n), padding_mode=ct.PaddingMode.ZERO)


# ---- writers (refused wherever they are reached) ---------------------------------------


def writer(dst, t):
    ct.store(dst, index=(0,), tile=t)  # AT: o_other_module_writer, c4_module_attribute_replaced
    return t


def deep1(dst, t):
    return deep2(dst, t)


def deep2(dst, t):
    return deep3(dst, t)


def deep3(dst, t):
    ct.atomic_add(dst, ct.arange(16, dtype=ct.int32), t)  # AT: o_helper_depth_3
    return t


def alias_writer(dst, t):
    c = ct
    c.store(dst, index=(0,), tile=t)  # AT: c1_helper_local_alias
    return t


def calls_param(f, a, t):
    return f(a, t)  # AT: c2_op_passed_to_helper, c2_writer_passed_to_helper, c2_reader_passed_to_helper


def default_op(a, t, op=ct.store):
    return op(a, index=(0,), tile=t)  # AT: c2_helper_default_op


def kwonly_default_op(t, *, op=ct.exp):
    return op(t)  # AT: c2_helper_kwonly_default


def recursive_writer(dst, t, n):
    if n == 0:
        ct.store(dst, index=(0,), tile=t)  # AT: o_recursive_helper_writes
        return t
    return recursive_writer(dst, t, n - 1)


def sum_writer(a, b):
    ct.store(a, index=(0,), tile=b)  # AT: o_reduce_writing_func, o_scan_writing_func
    return a + b


def view_writer(dst, t):
    dst.tiled_view((16,)).store((0,), t)  # AT: o_helper_view_store
    return t


def partition_writer(dst, t):
    dst.store(t)
    return t


def reader_then_writer(x, t):
    v = double(t)
    return writer(x, v)


def scatter_into(dst, idx, t):
    ct.scatter(dst, idx, t)  # AT: o_helper_scatter_positional
    return t


def unchecked_reader(x, i, n):
    cb = False
    return ct.load(x, index=(i,), shape=(n,), check_bounds=cb)  # AT: c8_helper_check_bounds_variable @ check_bounds


def with_private(t):
    return t._v  # AT: o_helper_private_attribute @ t._v


def with_global_stmt(t):
    global SCALE  # AT: o_helper_global_statement
    return t


def with_lambda(t):
    f = lambda v: v  # noqa: E731  # AT: o_helper_lambda_inside @ lambda
    return t


def dynamic(t):
    return eval("t")  # AT: o_helper_eval @ eval


# ---- not plain helpers ---------------------------------------------------------------


@functools.lru_cache(maxsize=None)  # AT: o_decorated_helper_lru
def cached(t):
    return t


def _passthrough(f):
    return f


@_passthrough  # AT: o_decorated_helper_custom
def decorated(t):
    return t


lambda_writer = lambda dst, t: ct.store(dst, index=(0,), tile=t)  # noqa: E731


class Writers:
    @staticmethod
    def put(dst, t):
        ct.store(dst, index=(0,), tile=t)

    @classmethod
    def put_cls(cls, dst, t):
        ct.store(dst, index=(0,), tile=t)


class CallableWriter:
    def __call__(self, dst, t):
        ct.store(dst, index=(0,), tile=t)


callable_writer = CallableWriter()
partial_store = functools.partial(ct.store, index=(0,))

#: a module that looks like cuTile: its 'exp' writes (reached through a global alias)
fake_ct = types.ModuleType("fake_ct", "a module whose ops write")


def _fake_exp(t):
    ct.store(t, index=(0,), tile=t)  # AT: c4_second_module_alias_rebound
    return t


fake_ct.exp = _fake_exp
