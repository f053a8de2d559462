"""Argument conversion and validation shared by the library's host functions, and the
hashing of configs as cache keys.

Each helper takes ``fn``, the name of the host function being called, and words its
errors as ``fn(): what is wrong; what to do``.

Example:
    >>> import tilelab as tl
    >>> check_block(64, "block_n", "relu"), pow2_ceil(1000), is_pow2(48)
    (64, 1024, False)
    >>> check_block(48, "block_n", "relu")
    Traceback (most recent call last):
    ...
    ValueError: relu(): block_n=48 must be a positive power of two (cuTile tiles are powers of two)
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

import tilelab as tl
from tilelab.kernels._host.wrappers import as_tensor

__all__ = ["FLOAT_DTYPES", "tensor_arg", "check_float", "check_same_device", "is_pow2",
           "check_pow2_fields", "check_hint", "pow2_ceil", "check_block", "float_scalar", "dtype_name", "output", "planning_sms",
           "hash_once", "state_without_hash"]

#: the floating dtypes of the memory-bound kernels
FLOAT_DTYPES = ("float32", "float16", "bfloat16")


def tensor_arg(x: Any, name: str, fn: str) -> tl.Tensor:
    """``x`` as a tensor; foreign arrays (numpy, torch, cupy) are borrowed where they live.

    Example:
        >>> import numpy as np
        >>> tensor_arg(np.zeros(3, np.float32), "x", "relu").shape
        (3,)
        >>> tensor_arg(2.0, "x", "relu")
        Traceback (most recent call last):
        ...
        TypeError: relu(): x must be a tensor or array, got float
    """
    if isinstance(x, tl.Tensor):
        return x
    if x is None or isinstance(x, (bool, int, float, complex, str)):
        raise TypeError(f"{fn}(): {name} must be a tensor or array, got "
                        f"{type(x).__name__}")
    try:
        return as_tensor(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{fn}(): cannot use {name} ({type(x).__name__}) as a tensor: "
                        f"{e}") from None


def check_float(t: tl.Tensor, name: str, fn: str) -> None:
    """TypeError unless ``t`` is float32, float16 or bfloat16.

    Example:
        >>> import tilelab as tl
        >>> check_float(tl.zeros(2, "float16", device="cpu"), "x", "relu")
    """
    if t.dtype.name not in FLOAT_DTYPES:
        raise TypeError(f"{fn}(): {name} has dtype {t.dtype.name}; supported dtypes are "
                        f"{', '.join(FLOAT_DTYPES)}")


def check_same_device(fn: str, **tensors: tl.Tensor | None) -> str:
    """The common device of the given tensors (ValueError naming two that differ).

    Example:
        >>> import tilelab as tl
        >>> check_same_device("add", x=tl.zeros(2, device="cpu"), y=None)
        'cpu'
    """
    seen: dict[str, str] = {}
    for name, t in tensors.items():
        if t is not None:
            seen.setdefault(t.device, name)
    if len(seen) > 1:
        listed = ", ".join(f"{n} on {d}" for d, n in seen.items())
        raise ValueError(f"{fn}(): tensors live on different devices ({listed}); move them "
                         "to one device with .to(...)")
    return next(iter(seen))


def is_pow2(v: Any) -> bool:
    """Whether ``v`` is a Python int (not a bool) that is a positive power of two.

    Example:
        >>> [is_pow2(v) for v in (1, 64, 0, 48, True, 2.0)]
        [True, True, False, False, False, False]
    """
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1 and not v & (v - 1)


def check_pow2_fields(config: Any, *names: str) -> None:
    """ValueError naming the first field of the config dataclass ``config`` among
    ``names`` that is not a power of two (tile sizes are).

    Example:
        >>> from types import SimpleNamespace as NS
        >>> check_pow2_fields(NS(bn=16, bk=48), "bn", "bk")
        Traceback (most recent call last):
        ...
        ValueError: SimpleNamespace.bk=48 must be a power of two
    """
    for name in names:
        v = getattr(config, name)
        if not is_pow2(v):
            raise ValueError(f"{type(config).__name__}.{name}={v!r} must be a power of two")


def check_hint(owner: str, name: str, v: Any, lo: int, hi: int) -> None:
    """ValueError unless ``v`` (a cuTile hint: latency, occupancy, worker warps) is None
    or an int (not a bool) in ``lo..hi``.

    Example:
        >>> check_hint("GemvConfig", "latency", 11, 1, 10)
        Traceback (most recent call last):
        ...
        ValueError: GemvConfig.latency=11 must be an int in 1..10, or None
    """
    if v is not None and not (isinstance(v, int) and not isinstance(v, bool)
                              and lo <= v <= hi):
        raise ValueError(f"{owner}.{name}={v!r} must be an int in {lo}..{hi}, or None")


def pow2_ceil(n: int) -> int:
    """Smallest power of two >= n (and >= 1).

    Example:
        >>> [pow2_ceil(n) for n in (0, 1, 3, 64, 65)]
        [1, 1, 4, 64, 128]
    """
    return 1 << max(0, int(n) - 1).bit_length()


def check_block(v: int | None, name: str, fn: str) -> int | None:
    """Validate a tile-size keyword: None (pick a default) or a positive power of two
    (a Python or numpy int), returned as an int.

    Example:
        >>> check_block(None, "block_m", "softmax") is None
        True
    """
    if v is None:
        return None
    if not is_pow2(int(v) if isinstance(v, np.integer) else v):
        raise ValueError(f"{fn}(): {name}={v!r} must be a positive power of two "
                         "(cuTile tiles are powers of two)")
    return int(v)


def float_scalar(v: Any) -> bool:
    """Whether ``v`` is a Python or numpy number an op takes as a scalar (not a bool).

    Example:
        >>> float_scalar(2), float_scalar(True), float_scalar([2.0])
        (True, False, False)
    """
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def dtype_name(dtype: Any) -> str:
    """The canonical tilelab name of a dtype (``"bf16"`` -> ``"bfloat16"``).

    Example:
        >>> dtype_name("f16")
        'float16'
    """
    from tilelab.compiler.dtypes import dtype_name as canonical

    return canonical(dtype)


def output(out: Any, shape: tuple[int, ...], dtype: Any, device: str, name: str,
           fn: str) -> tl.Tensor:
    """A new output tensor, or ``out`` after checking shape, dtype and device.

    Example:
        >>> import tilelab as tl
        >>> output(None, (2, 3), "float32", "cpu", "out", "add").shape
        (2, 3)
    """
    if out is None:
        return tl.empty(shape, dtype=dtype, device=device)
    t = tensor_arg(out, name, fn)
    want = np.dtype(dtype) if not isinstance(dtype, np.dtype) else dtype
    if t.shape != tuple(shape) or t.dtype != want or t.device != device:
        raise ValueError(f"{fn}(): {name} must be a {tuple(shape)} {want.name} tensor on "
                         f"{device}, got {t.shape} {t.dtype.name} on {t.device}")
    if t.ndim > 2 and not t.is_contiguous:
        raise ValueError(f"{fn}(): {name} must be contiguous (or at most 2-D) to be "
                         "written in tiles")
    return t


def planning_sms(device: str) -> int:
    """The SM count a config is planned for: the GPU's, or an H200's 132 on the CPU (so
    CPU runs take the GPU's code paths).

    Example:
        >>> planning_sms("cpu")
        132
    """
    if device == "cpu":
        return 132
    from tilelab.runtime.device import num_sms

    return num_sms(device)


# ======================================================================================
# configs as cache keys


def hash_once(self: Any) -> int:
    """``__hash__`` for a frozen config dataclass, computed once per object: a cached
    call keys on the config it is passed (``config=`` of every call of a tuned
    kernel), and hashing a dozen fields each time was a microsecond of its host time.
    Assign it in the class body (``__hash__ = hash_once``; a dataclass keeps an
    explicit hash) and pair it with :func:`state_without_hash` as ``__getstate__``, so a
    pickled config (str hashes differ between processes) hashes afresh where it lands.

    Example:
        >>> from tilelab.kernels.matmul import MatmulConfig
        >>> c = MatmulConfig(tm=64)
        >>> hash(c) == hash(MatmulConfig(tm=64)) and c == MatmulConfig(tm=64)
        True
    """
    h = self.__dict__.get("_hash")
    if h is None:
        h = hash(tuple([getattr(self, f.name) for f in dataclasses.fields(self)]))
        object.__setattr__(self, "_hash", h)
    return h


def state_without_hash(self: Any) -> dict:
    """``__getstate__`` of a :func:`hash_once` class: its fields, not the cached hash.

    Example:
        >>> import pickle
        >>> from tilelab.kernels.matmul import MatmulConfig
        >>> c = MatmulConfig(); _ = hash(c)
        >>> "_hash" in pickle.loads(pickle.dumps(c)).__dict__
        False
    """
    return {k: v for k, v in self.__dict__.items() if k != "_hash"}
