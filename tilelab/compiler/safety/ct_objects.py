"""What a value the checker resolved is, when it is an object of ``cuda.tile``.

The allowlist recognizes cuTile's ops by the identity of the object a name resolves to,
never by the name: :func:`ct_names` maps each classified object of ``cuda.tile`` to its
public name. :func:`unwrap_ct_function` sees through ``@ct.function`` to the helper the
user wrote, :func:`is_ct_class` and :func:`is_ct_module` tell cuTile's classes and
modules apart from the user's, and :func:`describe_object` names any resolved value in a
message. The call rules (:mod:`tilelab.compiler.safety.calls`), the combiner rule
(:mod:`tilelab.compiler.safety.combiners`), the default-value rule and the freezer
(:mod:`tilelab.compiler.frozen`) all ask these questions; they live here, below each of
them.
"""
from __future__ import annotations

import types
from typing import Any

from tilelab.compiler.safety.optable import CT_OPS

__all__ = ["ct_names", "unwrap_ct_function", "is_ct_class", "is_ct_module",
           "describe_object"]

_CT_NAMES: dict[int, str] | None = None


def ct_names() -> dict[int, str]:
    """id(object) -> public name, for every classified object of cuda.tile.

    Example:
        >>> import cuda.tile as ct
        >>> ct_names()[id(ct.load)]
        'load'
    """
    global _CT_NAMES
    if _CT_NAMES is None:
        import cuda.tile as ct

        out = {}
        for name in CT_OPS:
            obj = getattr(ct, name, None)
            if obj is not None and not isinstance(obj, (int, float, str)):
                out[id(obj)] = name
        out[id(ct.Array.from_foreign)] = "from_foreign"
        _CT_NAMES = out
    return _CT_NAMES


def unwrap_ct_function(obj: Any) -> Any:
    """The user function behind ``@ct.function`` (cuTile's device-function wrapper)."""
    while getattr(obj, "_cutile_function_wrapper", False) and hasattr(obj, "__wrapped__"):
        obj = obj.__wrapped__
    return obj


def is_ct_class(obj: Any) -> bool:
    """A class or enum of cuda.tile (``ct.PaddingMode``): its members are names."""
    return isinstance(obj, type) and (obj.__module__ or "").startswith("cuda.tile")


def is_ct_module(obj: Any) -> bool:
    """``cuda.tile`` itself or one of its submodules."""
    return isinstance(obj, types.ModuleType) and (
        obj.__name__ == "cuda.tile" or obj.__name__.startswith("cuda.tile."))


def describe_object(obj: Any) -> str:
    """A resolved value as a message names it.

    Example:
        >>> describe_object(types), describe_object(describe_object), describe_object(1)
        ("module 'types'", "function 'describe_object'", 'a int object')
    """
    if isinstance(obj, types.ModuleType):
        return f"module {obj.__name__!r}"
    if isinstance(obj, types.FunctionType):
        return f"function {obj.__qualname__!r}"
    if isinstance(obj, type):
        return f"class {obj.__qualname__!r}"
    return f"a {type(obj).__name__} object"
