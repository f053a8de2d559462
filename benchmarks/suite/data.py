"""Arrays for the benchmark suite: one interface over torch-on-GPU and numpy-on-CPU.

Why: every case makes fresh random inputs, hands the *same memory* to torch, to the
tilelab host function and to the raw cuTile kernel, poisons outputs with NaN before each
correctness run, and compares against a float32/float64 reference. On the GPU the arrays
are torch CUDA tensors on tilelab's stream (so events time torch and tilelab alike); on
the CPU backend they are numpy arrays (ml_dtypes for bfloat16), torch is optional and the
interpreter runs the kernels.

Example:
    >>> a = make_arrays("cpu", use_torch=False)
    >>> x = a.randn((2, 3), "float32")
    >>> a.snapshot(a.to_tl(x)).shape
    (2, 3)
"""
from __future__ import annotations

from typing import Any

import numpy as np

import tilelab as tl

__all__ = ["Arrays", "TorchArrays", "NumpyArrays", "make_arrays", "XP"]

TORCH_DTYPES = ("float32", "float16", "bfloat16")


def _np_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


class Arrays:
    """What the suite needs from an array library (see the module docstring)."""

    backend: str = "cpu"
    torch: Any = None

    def randn(self, shape: tuple, dtype: str, scale: float = 1.0) -> Any: ...
    def empty(self, shape: tuple, dtype: str) -> Any: ...
    def poison(self, x: Any) -> None: ...
    def to_tl(self, x: Any) -> "tl.Tensor": ...
    def to_torch(self, x: Any) -> Any: ...
    def native(self, x: Any) -> Any: ...
    def snapshot(self, x: Any) -> Any: ...
    def sync(self) -> None: ...
    def release(self) -> None: ...
    def xp(self) -> "XP": ...
    def seed(self, seed: int) -> None: ...


class TorchArrays(Arrays):
    """torch CUDA tensors on tilelab's stream (torch required on the GPU)."""

    backend = "gpu"

    def __init__(self) -> None:
        import torch

        from tilelab.runtime.device import gpu

        self.torch = torch
        # one stream for torch, tilelab and raw launches: events bracket all of them alike
        torch.cuda.set_stream(torch.cuda.ExternalStream(gpu().stream_handle))
        self._gen = torch.Generator(device="cuda")

    def seed(self, seed: int) -> None:
        self._gen.manual_seed(seed)

    def randn(self, shape: tuple, dtype: str, scale: float = 1.0) -> Any:
        t = self.torch
        x = t.randn(shape, device="cuda", dtype=t.float32, generator=self._gen)
        return (x * scale).to(getattr(t, dtype))

    def empty(self, shape: tuple, dtype: str) -> Any:
        return self.torch.empty(shape, device="cuda", dtype=getattr(self.torch, dtype))

    def poison(self, x: Any) -> None:
        x = self.native(x)
        if x.dtype.is_floating_point:
            x.fill_(float("nan"))

    def to_tl(self, x: Any) -> "tl.Tensor":
        return tl.from_dlpack(x)

    def to_torch(self, x: Any) -> Any:
        return x

    def native(self, x: Any) -> Any:
        if isinstance(x, self.torch.Tensor):
            return x
        return self.torch.from_dlpack(x)

    def snapshot(self, x: Any) -> Any:
        return self.native(x).detach().float()

    def sync(self) -> None:
        tl.synchronize()
        self.torch.cuda.synchronize()

    def release(self) -> None:
        self.sync()
        self.torch.cuda.empty_cache()

    def xp(self) -> "XP":
        return XP(self.torch)


class NumpyArrays(Arrays):
    """numpy arrays on the host for the CPU backend; torch (CPU) only for baselines."""

    backend = "cpu"

    def __init__(self, use_torch: bool = True) -> None:
        self.torch = None
        if use_torch:
            try:
                import torch

                self.torch = torch
            except ImportError:
                pass
        self._rng = np.random.default_rng(0)

    def seed(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    def randn(self, shape: tuple, dtype: str, scale: float = 1.0) -> Any:
        return (self._rng.standard_normal(shape, dtype=np.float32) * scale).astype(
            _np_dtype(dtype))

    def empty(self, shape: tuple, dtype: str) -> Any:
        return np.empty(shape, _np_dtype(dtype))

    def poison(self, x: Any) -> None:
        if type(x).__module__.startswith("torch"):
            if x.dtype.is_floating_point:
                x.fill_(float("nan"))
            return
        x = self.native(x)
        if x.dtype.kind in "fV":
            x[...] = np.nan

    def to_tl(self, x: Any) -> "tl.Tensor":
        return tl.tensor(x, device="cpu")     # borrows the numpy memory: no copy

    def to_torch(self, x: Any) -> Any:
        t = self.torch
        dtype = getattr(t, x.dtype.name) if x.dtype.name in TORCH_DTYPES else None
        return t.from_numpy(np.asarray(x, np.float32)).to(dtype or t.float32)

    def native(self, x: Any) -> Any:
        if isinstance(x, np.ndarray):
            return x
        if type(x).__module__.startswith("torch"):
            return x.detach().float().numpy()
        return x.numpy() if hasattr(x, "numpy") else np.asarray(x)

    def snapshot(self, x: Any) -> Any:
        return np.array(self.native(x), dtype=np.float64)

    def sync(self) -> None:
        # the interpreter has finished every launch already; this observes them, so no
        # future dropped by an asynchronous call keeps its borrows past the case
        tl.synchronize()

    def release(self) -> None:
        self.sync()

    def xp(self) -> "XP":
        return XP(np)


def make_arrays(backend: str, use_torch: bool = True) -> Arrays:
    """The arrays for a backend ('gpu' needs torch; 'cpu' uses it for baselines only)."""
    if backend == "gpu":
        if not use_torch:
            raise RuntimeError("the GPU suite needs torch (references and baselines run in "
                               "torch); install torch or run on the CPU backend")
        return TorchArrays()
    return NumpyArrays(use_torch)


class XP:
    """The few array operations the references need, for numpy or torch alike."""

    def __init__(self, mod: Any) -> None:
        self.mod = mod
        self.is_torch = mod.__name__ == "torch"

    def f(self, x: Any) -> Any:
        """float32 on torch (device math), float64 on numpy."""
        return x.float() if self.is_torch else np.asarray(x, np.float64)

    def amax(self, x: Any) -> Any:
        return x.amax(-1, keepdim=True) if self.is_torch else x.max(-1, keepdims=True)

    def sum(self, x: Any) -> Any:
        return x.sum(-1, keepdim=True) if self.is_torch else x.sum(-1, keepdims=True)

    def mean(self, x: Any) -> Any:
        return x.mean(-1, keepdim=True) if self.is_torch else x.mean(-1, keepdims=True)

    def exp(self, x: Any) -> Any:
        return self.mod.exp(x)

    def sqrt(self, x: Any) -> Any:
        return self.mod.sqrt(x)

    def cat(self, parts: list, axis: int = -1) -> Any:
        return self.mod.cat(parts, axis) if self.is_torch else np.concatenate(parts, axis)

    def t(self, x: Any) -> Any:
        """Swap the last two axes."""
        return x.transpose(-1, -2) if self.is_torch else np.swapaxes(x, -1, -2)

    def softmax(self, x: Any) -> Any:
        e = self.exp(x - self.amax(x))
        return e / self.sum(e)

    def index(self, values: list) -> Any:
        return self.mod.tensor(values) if self.is_torch else np.asarray(values)

