"""The combining function of ``ct.reduce`` / ``ct.scan`` (rule ``func-argument``).

cuTile calls the function it is given on pairs of tiles, inside its own reduction or
scan, so that function is code the kernel runs: it must be code the checker has seen.
Three forms are:

- a Python helper named at module level (``func=running_max``), checked like every
  helper a kernel calls;
- a lambda written in the call itself (``func=lambda a, b: a + b``, as cuTile's tests
  write it), whose body is part of the function it is written in and is checked with
  it: the structure rules leave a lambda in that place alone, and
  :func:`check_combiner` accepts it here (any other lambda stays refused);
- one of cuTile's combiners, recognized by the identity of the object the name resolves
  to when the kernel is checked, never by the name: ``operator.add``, ``mul``, ``and_``,
  ``or_``, ``xor``, the builtins ``max`` and ``min`` (the C functions themselves, taken
  when tilelab is imported and checked by type, module and name) and cuTile's
  ``ct.add``, ``mul``, ``maximum``, ``minimum``, ``bitwise_and``, ``bitwise_or``,
  ``bitwise_xor``. The resolution is snapshotted like
  every name of the kernel, so ``operator.add`` rebound later is checked again and is
  then no combiner.
"""
from __future__ import annotations

import ast
import types
from typing import Any

from tilelab.compiler.safety.ct_objects import (ct_names, describe_object,
                                                unwrap_ct_function)
from tilelab.compiler.safety.optable import (CT_COMBINERS, PY_COMBINERS,
                                             py_combiner_name)
from tilelab.compiler.safety.scope import UNRESOLVED

__all__ = ["check_combiner", "check_lambda_signature", "COMBINER_NAMES"]

#: the combiners recognized by identity, as written in kernels (for messages)
COMBINER_NAMES = tuple(PY_COMBINERS) + tuple(f"ct.{n}" for n in sorted(CT_COMBINERS))


def check_combiner(checker: Any, call: ast.Call, op: str, position: int) -> None:
    """Judge the function ``call`` (a ``ct.<op>``) hands to cuTile: its ``func=`` or
    positional argument number ``position``."""
    arg = next((k.value for k in call.keywords if k.arg == "func"), None)
    if arg is None and len(call.args) > position:
        arg = call.args[position]
    if arg is None:
        return
    if isinstance(arg, ast.Lambda):
        _check_lambda(checker, op, arg)
        return
    names = checker.chain(arg)
    if names is None or names[0] in checker.bound:
        checker.fail("func-argument", arg,
                     f"the function given to ct.{op} must be a helper named at module "
                     f"level or a lambda written in the call, got {checker.text(arg)!r}, "
                     "which the checker cannot resolve when the kernel is checked")
    checker.func_arguments.add(id(arg))
    target = checker.resolve(arg)
    if target is UNRESOLVED:
        checker.unresolved(arg)
        return
    ct_name = ct_names().get(id(target))
    if ct_name is not None and ct_name in CT_COMBINERS:
        return
    if ct_name is None and py_combiner_name(target) is not None:
        return
    fn = unwrap_ct_function(target)
    if ct_name is not None or not isinstance(fn, types.FunctionType) or \
            (fn.__module__ or "").startswith("cuda.tile"):
        checker.fail("func-argument", arg,
                     f"the function given to ct.{op} must be a plain Python helper (a "
                     "module-level def), a lambda written in the call or one of cuTile's "
                     f"combiners ({', '.join(COMBINER_NAMES)}), got {describe_object(target)}")
    checker.check_helper_call(None, fn, node=arg)


def check_lambda_signature(checker: Any, lam: ast.Lambda) -> None:
    """A lambda in a combiner's place takes plain positional parameters that shadow
    none of the function's parameters (judged with the structure rules, before a
    shadowed name could be taken for the parameter)."""
    a = lam.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.defaults:
        checker.fail("func-argument", lam,
                     "a lambda combiner takes plain positional parameters, one per input "
                     "tile on each side (lambda a, b: ...), without defaults, *args or "
                     "keyword-only parameters")
    for arg in a.posonlyargs + a.args:
        if arg.arg in checker.kinds:
            checker.fail("func-argument", arg,
                         f"parameter {arg.arg!r} of the lambda combiner has the name of a "
                         "parameter of the function it is written in",
                         hint="give the lambda's parameters names of their own, e.g. "
                              "lambda a, b: a + b")


def _check_lambda(checker: Any, op: str, lam: ast.Lambda) -> None:
    """A lambda combiner's body touches no partition (the rest of it is judged with the
    function it is written in, by the same rules)."""
    for node in ast.walk(lam.body):
        if isinstance(node, ast.Name) and node.id in checker.partitions:
            checker.fail("func-argument", node,
                         f"the lambda given to ct.{op} uses partition {node.id!r}: a "
                         "combining function only combines the tiles it is given",
                         hint=f"read or write {node.id} in the kernel body, outside the "
                              "combining function")
    checker.accepted_lambdas.add(id(lam))
