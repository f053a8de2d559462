"""Keys of :func:`tilelab.autotune`: shape buckets, canonical JSON of keys and configs,
and the source hash that ties a stored winner to the code it was measured with.

Example:
    >>> import numpy as np
    >>> key_part(np.zeros((3, 100), np.float32), pow2_bucket)
    ('tensor', (4, 128), 'float32')
    >>> canonical({"b": 1, "a": [2, None]})
    '{"a":[2,null],"b":1}'
"""
from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import types
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

__all__ = ["pow2_bucket", "dtype_label", "key_part", "canonical", "config_json",
           "kernel_fingerprint", "source_hash"]


def pow2_bucket(n: int) -> int:
    """The smallest power of two >= n (0 stays 0): the default shape bucket.

    Example:
        >>> [pow2_bucket(n) for n in (0, 1, 3, 64, 65, 12288)]
        [0, 1, 4, 64, 128, 16384]
    """
    n = int(n)
    return 0 if n <= 0 else 1 << (n - 1).bit_length()


_DTYPE_NAMES: dict[Any, str] = {}


def dtype_label(dtype: Any) -> str:
    """'bfloat16' for numpy/ml_dtypes/torch/tilelab dtypes alike (cached: a hot path).

    Unlike :func:`tilelab.compiler.dtypes.dtype_name` it never raises and does not
    canonicalize aliases: it names what the caller passed, as stored keys always have.

    Example:
        >>> import numpy as np
        >>> dtype_label(np.dtype("float16")), dtype_label("bf16")
        ('float16', 'bf16')
    """
    try:
        return _DTYPE_NAMES[dtype]
    except (KeyError, TypeError):
        pass
    name = getattr(dtype, "name", None)
    text = str(name if isinstance(name, str) else dtype).replace("torch.", "")
    try:
        _DTYPE_NAMES[dtype] = text
    except TypeError:
        pass
    return text


#: the one NaN of keys: a NaN is unequal to itself, so each NaN object would file a
#: new bucket (a retune per call); this object is equal to itself in a tuple compare
_NAN = float("nan")


def _exact(value: int | float | str) -> int | float | str:
    """The exact Python value of a subclass of int, float or str (an IntEnum member:
    its int), read through the base type's own conversion (the subclass's __int__,
    __hash__ or __eq__ never run); it serializes as the subclass did."""
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    return str.__str__(value)


def key_part(value: Any, bucket: Callable[[int], int] | None) -> Any:
    """A hashable, JSON-able stand-in for one key argument (arrays: bucketed shape and
    dtype; tuples serialize as JSON lists). Numbers and strings key as exact Python
    values (a subclass's own methods never run); every NaN is one key.

    Example:
        >>> key_part((3, "x", None), pow2_bucket)
        (3, 'x', None)
    """
    t = type(value)
    if t is int or t is str or t is bool or value is None:
        return value
    if t is float:
        return value if value == value else _NAN
    if isinstance(value, (int, float, str)) and not isinstance(value, np.generic):
        return key_part(_exact(value), bucket)
    shape = getattr(value, "shape", None)
    if shape is None:
        tensor = getattr(value, "tensor", None)  # a tl partition: key on its tensor
        if tensor is not None:
            value, shape = tensor, getattr(tensor, "shape", None)
    dtype = getattr(value, "dtype", None) if shape is not None else None
    if dtype is not None and not isinstance(value, (int, float)):
        if bucket is pow2_bucket:   # inlined: this runs on every call
            dims = tuple(0 if d <= 0 else 1 << (int(d) - 1).bit_length() for d in shape)
        else:
            dims = tuple(bucket(int(d)) if bucket else int(d) for d in shape)
        return ("tensor", dims, dtype_label(dtype))
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        return tuple(key_part(v, bucket) for v in value)
    if hasattr(value, "name") and "dtype" in type(value).__name__.lower():
        return dtype_label(value)
    return f"<{type(value).__module__}.{type(value).__qualname__}>"


def canonical(obj: Any) -> str:
    """Canonical JSON (sorted keys, no spaces): what buckets and config hashes are made of.

    Example:
        >>> canonical([["n", 3]])
        '[["n",3]]'
    """
    return json.dumps(obj, sort_keys=True, default=repr, separators=(",", ":"))


def _value_json(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (tuple, list)):
        return [_value_json(x) for x in v]
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {"__type__": type(v).__qualname__,
                **{f.name: _value_json(getattr(v, f.name)) for f in dataclasses.fields(v)}}
    if isinstance(v, Mapping):
        return {str(k): _value_json(x) for k, x in v.items()}
    return repr(v)


def config_json(config: Mapping[str, Any]) -> dict:
    """A config as plain JSON data (dataclass values such as a ``MatmulConfig`` become
    dicts naming their type), for records, reports and comparisons.

    Example:
        >>> config_json({"tile": 64, "config": None})
        {'tile': 64, 'config': None}
    """
    return {str(k): _value_json(v) for k, v in config.items()}


# --------------------------------------------------------------------------- source hash

def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def kernel_fingerprint(obj: Any) -> str | None:
    """``kernel.definition.fingerprint`` (+ its helpers') of a tl.Kernel, else None.

    Example:
        >>> from tilelab.kernels.examples import vector_add
        >>> len(kernel_fingerprint(vector_add)) > 0, kernel_fingerprint(len)
        (True, None)
    """
    definition = getattr(obj, "definition", None)
    fp = getattr(definition, "fingerprint", None)
    if not isinstance(fp, str):
        return None
    try:
        helpers = definition.analysis.program.fingerprint()
    except Exception:
        helpers = ""
    return fp + helpers


def source_hash(fn: Callable, kernels: Sequence[Any] | None) -> str:
    """sha256 of the host function's source and the fingerprints of its kernels.

    Without ``kernels`` the tl.Kernel objects the function names (globals and closure
    cells) are found by looking at its code, so editing a kernel invalidates the record;
    the source file of the function's module is hashed too (kernels it reaches through
    helpers live there).

    Example:
        >>> len(source_hash(pow2_bucket, None))
        64
    """
    h = hashlib.sha256()
    try:
        h.update(inspect.getsource(fn).encode())
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        h.update(repr((code.co_code, code.co_consts)).encode() if code else repr(fn).encode())
    try:   # the module's other code (kernels reached through helpers) counts too
        h.update(Path(inspect.getsourcefile(fn) or "").read_bytes())
    except (OSError, TypeError):
        pass
    found: list[tuple[str, str]] = []
    if kernels is not None:
        for k in kernels:
            fp = kernel_fingerprint(k)
            if fp is None:
                raise TypeError(f"kernels= takes tl.kernel objects, got {type(k).__name__}")
            found.append((getattr(k, "__name__", "kernel"), fp))
    else:
        code = getattr(fn, "__code__", None)
        scope = dict(getattr(fn, "__globals__", {}))
        for name, cell in zip(code.co_freevars if code else (), fn.__closure__ or ()):
            try:
                scope[name] = cell.cell_contents
            except ValueError:
                pass
        for name in sorted(_code_names(code) | set(code.co_freevars)) if code else ():
            fp = kernel_fingerprint(scope.get(name))
            if fp is not None:
                found.append((name, fp))
    for name, fp in found:
        h.update(f"\0{name}\0{fp}".encode())
    return h.hexdigest()
