"""Element types: one vocabulary for users, numpy, cuTile and foreign arrays.

Users write dtypes as strings ("bf16", "float32"), numpy dtypes or torch/cupy dtypes;
tensors store numpy dtypes (bfloat16 and the fp8 types come from ml_dtypes); the
compiler needs cuTile's ``DType`` objects. This module converts between them.
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["DTYPE_NAMES", "ML_DTYPE_NAMES", "ml_dtype", "to_numpy_dtype", "dtype_name",
           "to_cutile_dtype", "itemsize"]

#: canonical name -> numpy dtype
_CANONICAL: dict[str, np.dtype] = {
    "bool": np.dtype(np.bool_),
    "int8": np.dtype(np.int8), "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32), "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8), "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32), "uint64": np.dtype(np.uint64),
    "float16": np.dtype(np.float16), "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
}
#: the types numpy lacks, from ml_dtypes (imported at the first use of one of them:
#: its import costs more than the rest of tilelab's)
ML_DTYPE_NAMES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")

_ALIASES = {
    "bool_": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "f16": "float16", "half": "float16", "fp16": "float16",
    "f32": "float32", "float": "float32", "fp32": "float32",
    "f64": "float64", "double": "float64", "fp64": "float64",
    "bf16": "bfloat16", "e4m3": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn",
    "float8_e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "fp8_e5m2": "float8_e5m2",
}

#: the names tilelab accepts, for messages
DTYPE_NAMES = tuple(_CANONICAL) + ML_DTYPE_NAMES


def ml_dtype(name: str) -> np.dtype:
    """The numpy dtype of one of :data:`ML_DTYPE_NAMES`, importing ml_dtypes on first use.

    Example:
        >>> ml_dtype("bfloat16").itemsize
        2
    """
    dt = _CANONICAL.get(name)
    if dt is None:
        if name not in ML_DTYPE_NAMES:
            raise KeyError(name)
        import ml_dtypes

        for n in ML_DTYPE_NAMES:
            _CANONICAL[n] = np.dtype(getattr(ml_dtypes, n))
        dt = _CANONICAL[name]
    return dt


def to_numpy_dtype(dtype: Any) -> np.dtype:
    """Normalize a user's dtype (string, numpy, torch, cupy, cuTile) to a numpy dtype.

    Example:
        >>> to_numpy_dtype("bf16").name
        'bfloat16'
        >>> to_numpy_dtype("float32")
        dtype('float32')
    """
    if isinstance(dtype, np.dtype):
        name = dtype.name
    elif isinstance(dtype, str):
        name = dtype.strip().lower()
        if name.startswith("torch."):
            name = name[len("torch."):]
    elif isinstance(dtype, type) and issubclass(dtype, np.generic):
        name = np.dtype(dtype).name
    else:
        # torch.dtype prints as "torch.bfloat16"; cuTile's DType has .name
        name = getattr(dtype, "name", None) or str(dtype)
        if name.startswith("torch."):
            name = name[len("torch."):]
        if not isinstance(name, str):
            name = str(name)
    name = _ALIASES.get(name, name)
    if name in _CANONICAL:
        return _CANONICAL[name]
    if name in ML_DTYPE_NAMES:
        return ml_dtype(name)
    raise TypeError(f"unsupported dtype {dtype!r}; tilelab supports: "
                    f"{', '.join(DTYPE_NAMES)} (aliases such as 'bf16', 'f32' work too)")


def dtype_name(dtype: Any) -> str:
    """The canonical tilelab name of a dtype.

    Example:
        >>> dtype_name("f16")
        'float16'
    """
    return to_numpy_dtype(dtype).name


def itemsize(dtype: Any) -> int:
    """Bytes per element.

    Example:
        >>> itemsize("bfloat16")
        2
    """
    return to_numpy_dtype(dtype).itemsize


def to_cutile_dtype(dtype: Any):
    """The ``cuda.tile`` DType for a dtype (imports cuda.tile on first use).

    Example:
        >>> to_cutile_dtype("bf16").name
        'bfloat16'
    """
    import cuda.tile as ct

    name = dtype_name(dtype)
    return {"bool": ct.bool_}.get(name) or getattr(ct, name)
