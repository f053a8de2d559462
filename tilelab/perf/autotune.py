"""``@tl.autotune``: pick the fastest config of a host function per problem-size bucket.

Why: the best tile shape of a kernel depends on the problem (a 128x256 tile wins a
8192^3 GEMM and loses an M = 16 projection) and on the GPU. Tuning on the device, once
per shape bucket, and remembering the winner across processes gives each call the right
config without hand tables that rot when a kernel changes.

For a call, the *key* is the bound values of the ``key`` arguments — arrays by their
shape (each dimension rounded up to a power of two by default) and dtype, scalars by
value. On a new key every config is run once and its output checked against the first
config's output (the correctness gate: a config that raises, fails to compile or
disagrees is skipped and the reason recorded), then the passing ones are timed with
:func:`tilelab.bench` (CUDA events, warm-up, median, L2 flushed) and the fastest wins.
A function with a ``sync`` parameter (tilelab's host functions) is timed with
``sync=False``: a call that waits for its kernels before returning puts the host's
wake-up into the event window, several microseconds that swamp a small kernel (it had
the suite pick 128x128 tiles for a 1024^3 GEMM that runs in 10.7 us, over the default's
8.5).
Configs timed within 50% of the fastest are timed ``recheck`` more times, interleaved,
and ranked by the median of all their timings: one noisy timing (a clock dip, a busy
host) does not decide between close configs. Winners are kept in memory and on disk
(:mod:`tilelab.perf.tuning_db`), keyed by the source hash of the host function and its
kernels, the arch, the bucket, the tileiras and cuda-tile versions; a stored record
whose key parts changed is refused and retuned.

On the CPU backend timing the interpreter says nothing about a GPU, so by default
tuning is skipped: the first (surviving ``prune``) config runs and a warning says so once
per function. Pass ``on_cpu="tune"`` to tune with the host clock, or ``timer=`` to inject
a timing function (tests do; it tunes on any backend):
``timer(call, config) -> seconds``, where ``call()`` runs the function with ``config``.

Example:
    >>> import tilelab as tl
    >>> @tl.autotune(configs=[{"tile": 1024}, {"tile": 4096}], key=["x"])  # doctest: +SKIP
    ... def add(x, y, *, out=None, tile=1024):
    ...     out = tl.empty(x.shape, x.dtype) if out is None else out
    ...     vector_add(out.partition(tile), x, y)
    ...     return out
    >>> z = add(x, y)                     # doctest: +SKIP
    >>> add.best_config(x, y)             # doctest: +SKIP
    {'tile': 4096}
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import inspect
import json
import math
import statistics
import threading
import types
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from tilelab.errors import TilelabError
from tilelab.perf.tuning_db import RecordKey, default_db

__all__ = ["autotune", "Autotuned", "AutotuneError", "AutotuneWarning", "pow2_bucket",
           "relative_error", "config_json"]

Timer = Callable[[Callable[[], Any], dict], float]


class AutotuneError(TilelabError):
    """No config of an autotuned function could run correctly (each reason is listed)."""


class AutotuneWarning(UserWarning):
    """Tuning was skipped (CPU backend) or a record could not be written."""


# --------------------------------------------------------------------------- keys

def pow2_bucket(n: int) -> int:
    """The smallest power of two >= n (0 stays 0): the default shape bucket.

    Example:
        >>> [pow2_bucket(n) for n in (0, 1, 3, 64, 65, 12288)]
        [0, 1, 4, 64, 128, 16384]
    """
    n = int(n)
    return 0 if n <= 0 else 1 << (n - 1).bit_length()


_DTYPE_NAMES: dict[Any, str] = {}


def _dtype_name(dtype: Any) -> str:
    """'bfloat16' for numpy/ml_dtypes/torch/tilelab dtypes alike (cached: a hot path)."""
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


def _key_part(value: Any, bucket: Callable[[int], int] | None) -> Any:
    """A hashable, JSON-able stand-in for one key argument (arrays: bucketed shape and
    dtype; tuples serialize as JSON lists)."""
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
        return ("tensor", dims, _dtype_name(dtype))
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        return tuple(_key_part(v, bucket) for v in value)
    if hasattr(value, "name") and "dtype" in type(value).__name__.lower():
        return _dtype_name(value)
    return f"<{type(value).__module__}.{type(value).__qualname__}>"


def _canonical(obj: Any) -> str:
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


def _kernel_fingerprint(obj: Any) -> str | None:
    """``kernel.definition.fingerprint`` (+ its helpers') of a tl.Kernel, else None."""
    definition = getattr(obj, "definition", None)
    fp = getattr(definition, "fingerprint", None)
    if not isinstance(fp, str):
        return None
    try:
        helpers = definition.analysis.program.fingerprint()
    except Exception:
        helpers = ""
    return fp + helpers


def _source_hash(fn: Callable, kernels: Sequence[Any] | None) -> str:
    """sha256 of the host function's source and the fingerprints of its kernels.

    Without ``kernels`` the tl.Kernel objects the function names (globals and closure
    cells) are found by looking at its code, so editing a kernel invalidates the record;
    the source file of the function's module is hashed too (kernels it reaches through
    helpers live there).
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
            fp = _kernel_fingerprint(k)
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
            fp = _kernel_fingerprint(scope.get(name))
            if fp is not None:
                found.append((name, fp))
    for name, fp in found:
        h.update(f"\0{name}\0{fp}".encode())
    return h.hexdigest()


# --------------------------------------------------------------------------- outputs

def _snapshot(x: Any) -> Any:
    """A private copy of an output for comparison: a float32 torch tensor on its device
    when torch is at hand (no host round trip for large GPU outputs), else float64 numpy."""
    import numpy as np

    if isinstance(x, (tuple, list)):
        return [_snapshot(v) for v in x]
    if type(x).__module__.startswith("torch"):
        return x.detach().float().clone()
    if getattr(x, "device", None) not in (None, "cpu") and hasattr(x, "__dlpack__"):
        try:
            import torch

            return torch.from_dlpack(x).float().clone()
        except Exception:
            pass
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        x = x.numpy()
    return np.array(x, dtype=np.float64)


def relative_error(out: Any, ref: Any) -> float:
    """||out - ref|| / ||ref|| (Frobenius) over snapshots; inf on a shape mismatch or a
    NaN/inf where the reference is finite.

    Example:
        >>> import numpy as np
        >>> relative_error(np.array([1.0, 2.0]), np.array([1.0, 2.0]))
        0.0
        >>> relative_error(np.array([1.0, np.nan]), np.array([1.0, 2.0]))
        inf
    """
    import numpy as np

    if isinstance(ref, list):
        if not isinstance(out, list) or len(out) != len(ref):
            return math.inf
        return max((relative_error(o, r) for o, r in zip(out, ref)), default=0.0)
    if type(ref).__module__.startswith("torch") or type(out).__module__.startswith("torch"):
        import torch

        o = out if isinstance(out, torch.Tensor) else torch.as_tensor(np.asarray(out))
        r = ref if isinstance(ref, torch.Tensor) else torch.as_tensor(np.asarray(ref))
        o = o.to(r.device)
        if o.shape != r.shape:
            return math.inf
        if not bool(torch.isfinite(r).all()):   # rare: compare where the reference is finite
            finite = torch.isfinite(r)
            o, r = o[finite], r[finite]
        if not bool(torch.isfinite(o).all()):
            return math.inf
        f64 = torch.float64   # norms accumulate in fp64 without fp64 copies of large outputs
        num = float(torch.linalg.vector_norm(o.float() - r.float(), dtype=f64))
        den = float(torch.linalg.vector_norm(r.float(), dtype=f64))
    else:
        o, r = np.asarray(out, np.float64), np.asarray(ref, np.float64)
        if o.shape != r.shape:
            return math.inf
        finite = np.isfinite(r)
        if not np.isfinite(o[finite]).all():
            return math.inf
        num, den = float(np.linalg.norm(o[finite] - r[finite])), float(np.linalg.norm(r[finite]))
    return num / den if den > 0 else (0.0 if num == 0 else math.inf)


_TOL = {"float64": 1e-9, "float32": 1e-4, "bfloat16": 2e-2, "float16": 1e-2}


def _output_dtype(x: Any) -> str:
    if isinstance(x, (tuple, list)):
        names = [_output_dtype(v) for v in x]
        return max(names, key=lambda n: _TOL.get(n, 0.1)) if names else "float32"
    return _dtype_name(getattr(x, "dtype", "float32"))


def _poison(x: Any) -> None:
    """Fill a floating output with NaN so a config that writes nothing is caught."""
    try:
        if getattr(x, "device", "cpu") != "cpu" and not hasattr(x, "fill_"):
            try:   # a GPU tl.Tensor: fill on the device through torch, when present
                import torch

                x = torch.from_dlpack(x)
            except Exception:
                pass
        if hasattr(x, "fill_"):
            if x.dtype.is_floating_point:
                x.fill_(float("nan"))
        elif getattr(getattr(x, "dtype", None), "kind", "f") in "fV":
            x[...] = float("nan")
    except Exception:
        pass  # not poisonable (integers, read-only): the comparison still runs


def _restore_copy(x: Any) -> Any:
    if hasattr(x, "clone"):
        return x.clone()
    import numpy as np

    return np.array(x, copy=True)


def _restore_into(dst: Any, src: Any) -> None:
    if hasattr(dst, "copy_"):
        dst.copy_(src)
    else:
        dst[...] = src


def _settle(result: Any) -> Any:
    """Wait for the call's device work; a returned ``tl.Future`` counts as no value (the
    outputs are then the written arguments)."""
    if callable(getattr(result, "wait", None)) and callable(getattr(result, "done", None)):
        result.wait()
        result = None
    from tilelab.runtime.device import backend, synchronize

    if backend() == "gpu":
        synchronize()   # async launches inside the function: finish before reading
    return result


def _versions() -> tuple[str, str]:
    """(tileiras version, cuda-tile version); 'none' when absent (CPU-only installs)."""
    try:
        from tilelab.compiler.toolchain import find_toolchain

        toolchain = find_toolchain().version
    except Exception:
        toolchain = "none"
    try:
        cuda_tile = importlib.metadata.version("cuda-tile")
    except importlib.metadata.PackageNotFoundError:
        cuda_tile = "none"
    return toolchain, cuda_tile


def _arch() -> str:
    """'cpu' on the CPU backend, else the GPU's arch ('sm_90')."""
    from tilelab.runtime.device import backend, current_arch

    if backend() == "cpu":
        return "cpu"
    return current_arch() or "gpu"


def _device_name() -> str:
    from tilelab.runtime.device import backend

    if backend() == "cpu":
        return "cpu"
    try:
        from tilelab.runtime.device import gpu

        return gpu().name
    except Exception:
        return "gpu"


# --------------------------------------------------------------------------- the wrapper

#: configs whose first timing is within this factor of the fastest are timed again
#: (``recheck`` times) before one of them wins. Wide on purpose: the first timing of a
#: run can come out 1.3-1.7x slow while the clocks ramp up (the suite's first GEMM, bf16
#: 1024^3: its default timed 14.2 us once against 11.0 for a config that then ran
#: 10.8 us; the default runs 8.5), so a 10% window let a slow config win
RECHECK_WITHIN = 1.5


class Autotuned:
    """A host function wrapped by :func:`autotune`; call it like the function.

    Example:
        >>> @autotune(configs=[{"b": 1}, {"b": 2}], key=["n"], timer=lambda c, cfg: cfg["b"])
        ... def f(n, *, b=1):
        ...     return [n * b]
        >>> f(3), f.best_config(3)
        ([3], {'b': 1})
    """

    def __init__(self, fn: Callable, configs: Sequence[Mapping[str, Any]], key: Sequence[str],
                 *, warmup: int, rep: int, prune: Callable | None, outputs: Sequence[str] | None,
                 restore: Sequence[str], tol: float | None, kernels: Sequence[Any] | None,
                 timer: Timer | None, on_cpu: str, bucket: Callable[[int], int] | None,
                 recheck: int = 2):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.configs: list[dict] = _check_configs(configs)
        self.key: tuple[str, ...] = tuple(key)
        self.warmup, self.rep = int(warmup), int(rep)
        if isinstance(recheck, bool) or not isinstance(recheck, int) or recheck < 0:
            raise ValueError(f"recheck must be an int >= 0 (timings of close configs), "
                             f"got {recheck!r}")
        self.recheck = recheck
        self.prune, self.tol, self.timer, self.bucket = prune, tol, timer, bucket
        self.outputs = tuple(outputs) if outputs is not None else None
        self.restore = tuple(restore)
        if on_cpu not in ("first", "tune"):
            raise ValueError(f"on_cpu must be 'first' or 'tune', got {on_cpu!r}")
        self.on_cpu = on_cpu
        self._kernels = kernels
        self._sig = inspect.signature(fn)
        #: timed calls launch without waiting (see the module docstring)
        self._timed_kwargs = {"sync": False} if "sync" in self._sig.parameters else {}
        self._check_names()
        positional = [p.name for p in self._sig.parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self._key_pos = {n: (positional.index(n) if n in positional else None,
                             None if self._sig.parameters[n].default is inspect.Parameter.empty
                             else self._sig.parameters[n].default) for n in self.key}
        self.function = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)}"
        self._param_names = set().union(*(c.keys() for c in self.configs))
        self._best: dict[tuple, dict] = {}    # bucket key -> record (in memory)
        self._events: list[dict] = []         # refusals and corrupt records seen
        self._warned = False
        self._lock = threading.RLock()
        self._static: tuple[str, str, str, str] | None = None

    # -- set-up checks
    def _check_names(self) -> None:
        params = self._sig.parameters
        var_kw = any(p.kind is p.VAR_KEYWORD for p in params.values())
        where = f"@tl.autotune on {getattr(self.fn, '__qualname__', self.fn)}"
        for name in self.key + tuple(self.outputs or ()) + self.restore:
            if name not in params:
                raise TypeError(f"{where}: {name!r} is not a parameter of the function "
                                f"(parameters: {', '.join(params)})")
        for cfg in self.configs:
            for name in cfg:
                if name not in params and not var_kw:
                    raise TypeError(f"{where}: config parameter {name!r} is not a keyword "
                                    f"parameter of the function; add '{name}=...' to its "
                                    "signature")

    # -- key parts
    def _static_parts(self) -> tuple[str, str, str, str]:
        """(source hash, toolchain, cuda-tile, configs hash): fixed for the process."""
        if self._static is None:
            toolchain, cuda_tile = _versions()
            self._static = (_source_hash(self.fn, self._kernels), toolchain, cuda_tile,
                            hashlib.sha256(_canonical(
                                [config_json(c) for c in self.configs]).encode()).hexdigest())
        return self._static

    def _bucket(self, args: tuple, kwargs: dict) -> str:
        """The bucket of a call as canonical JSON (what records store)."""
        return _canonical(self._bucket_key(args, kwargs))

    def _bucket_key(self, args: tuple, kwargs: dict) -> tuple:
        """The bucket of a call as a tuple, without binding the signature (the hot path)."""
        parts = []
        for name in self.key:
            pos, default = self._key_pos[name]
            if name in kwargs:
                value = kwargs[name]
            elif pos is not None and pos < len(args):
                value = args[pos]
            else:
                value = default
            parts.append((name, _key_part(value, self.bucket)))
        return tuple(parts)

    def _record_key(self, bucket: str) -> RecordKey:
        source, toolchain, cuda_tile, configs = self._static_parts()
        return RecordKey(self.function, source, _arch(), bucket, toolchain, cuda_tile,
                         configs)

    def _bind(self, args: tuple, kwargs: dict) -> inspect.BoundArguments:
        bound = self._sig.bind(*args, **kwargs)
        bound.apply_defaults()
        return bound

    # -- calling
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._param_names & kwargs.keys():   # the caller chose a config: no tuning
            return self.fn(*args, **kwargs)
        return self.fn(*args, **kwargs, **self._config_for(args, kwargs))

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)

    def best_config(self, *args: Any, **kwargs: Any) -> dict:
        """The config a call with these arguments uses (tuning first if needed).

        Example:
            >>> matmul.best_config(a, b)          # doctest: +SKIP
            {'tile_m': 128, 'tile_n': 256, 'tile_k': 64}
        """
        return dict(self._config_for(args, kwargs))

    def key_of(self, *args: Any, **kwargs: Any) -> str:
        """The bucket (canonical JSON of the bucketed key values) of a call.

        Example:
            >>> matmul.key_of(a, b)               # doctest: +SKIP
            '[["a",["tensor",[4096,4096],"bfloat16"]],["b",["tensor",[4096,4096],"bfloat16"]]]'
        """
        return self._bucket(args, kwargs)

    def retune(self, *args: Any, **kwargs: Any) -> dict | None:
        """Forget winners and retune. With arguments: retune their bucket now and return
        the new winner; without: drop every record of this function (memory and disk),
        so each bucket retunes on its next call.

        Example:
            >>> matmul.retune()                   # doctest: +SKIP
        """
        with self._lock:
            if not args and not kwargs:
                self._best.clear()
                db = default_db()
                if db is not None:
                    db.clear(self.function)
                return None
            key = self._bucket_key(args, kwargs)
            self._best.pop(key, None)
            rec = self._tune(self._bind(args, kwargs), args, kwargs, _canonical(key))
            self._best[key] = rec
            return dict(rec["best"])

    def tuning_records(self) -> list[dict]:
        """What tuning found: one dict per bucket seen in this process (best config, each
        config's time or why it was skipped, where the winner came from: 'tuned', 'disk'
        or 'untuned'), then the refused or corrupt records met, then stored records of
        other buckets/archs (``"origin": "stored"``).

        Example:
            >>> [r["best"] for r in matmul.tuning_records()]   # doctest: +SKIP
            [{'tile_m': 128, 'tile_n': 128}]
        """
        with self._lock:
            out = [dict(r, best=config_json(r["best"])) for r in self._best.values()]
            out += [dict(e) for e in self._events]
        db = default_db()
        seen = {(r.get("parts") or {}).get("bucket") for r in out}
        if db is not None:
            for r in db.records(self.function):
                parts = r.get("parts") or {}
                if parts.get("bucket") not in seen or parts.get("arch") != _arch():
                    out.append(dict(r, origin="stored"))
        return out

    # -- tuning
    def _config_for(self, args: tuple, kwargs: dict) -> dict:
        key = self._bucket_key(args, kwargs)
        rec = self._best.get(key)
        if rec is not None:
            return rec["best"]
        with self._lock:
            rec = self._best.get(key)
            if rec is None:
                bucket = _canonical(key)
                rec = self._lookup(bucket) or \
                    self._tune(self._bind(args, kwargs), args, kwargs, bucket)
                self._best[key] = rec
            return rec["best"]

    def _lookup(self, bucket: str) -> dict | None:
        db = default_db()
        if db is None or self._skip_tuning():
            return None
        key = self._record_key(bucket)
        found = db.load(key)
        if found.status == "hit":
            idx = found.record.get("best_index")
            if isinstance(idx, int) and 0 <= idx < len(self.configs) and \
                    _canonical(config_json(self.configs[idx])) == _canonical(found.record["best"]):
                return dict(found.record, best=dict(self.configs[idx]), origin="disk")
            reason = "the stored winner is not one of the configs"
        elif found.status in ("refused", "corrupt"):
            reason = found.reason
        else:
            return None
        origin = "corrupt" if found.status == "corrupt" else "refused"
        self._events.append({"origin": origin, "reason": reason, "path": str(found.path),
                             "parts": (found.record or {}).get("parts")})
        return None

    def _skip_tuning(self) -> bool:
        return self.timer is None and self.on_cpu == "first" and _arch() == "cpu"

    def _candidates(self, bound: inspect.BoundArguments) -> list[dict]:
        configs = [dict(c) for c in self.configs]
        if self.prune is not None:
            configs = [dict(c) for c in self.prune(configs, dict(bound.arguments))]
            if not configs:
                raise AutotuneError(f"{self.function}: prune() removed every config for "
                                    f"{dict(bound.arguments)}",
                                    hint="make prune keep at least one config per problem")
        return configs

    def _tune(self, bound: inspect.BoundArguments, args: tuple, kwargs: dict,
              bucket: str) -> dict:
        configs = self._candidates(bound)
        if self._skip_tuning():
            if not self._warned:
                self._warned = True
                warnings.warn(f"tl.autotune: {self.function} runs on the CPU backend; using "
                              f"its first config {configs[0]} without tuning (timing the "
                              "interpreter says nothing about a GPU; pass on_cpu='tune' to "
                              "tune with the host clock)", AutotuneWarning, stacklevel=4)
            rec = {"best": configs[0], "best_index": self._index(configs[0]),
                   "origin": "untuned", "results": [],
                   "reason": "CPU backend: first config used without tuning",
                   "parts": {"function": self.function, "arch": "cpu", "bucket": bucket}}
            return rec
        saved = {n: _restore_copy(bound.arguments[n]) for n in self.restore}
        results = self._search(bound, args, kwargs, configs, saved)
        for name, value in saved.items():
            _restore_into(bound.arguments[name], value)
        ok = [r for r in results if r["status"] == "ok"]
        if not ok:
            lines = "\n".join(f"  {configs[r['candidate']]}: {r['status']}: {r['reason']}"
                              for r in results)
            raise AutotuneError(f"{self.function}: no config ran correctly for {bucket}:\n"
                                f"{lines}", hint="fix the first config (it is the reference) "
                                "or the configs that fail")
        best = min(ok, key=lambda r: r["seconds"])
        key = self._record_key(bucket)
        rec = {"best": configs[best["candidate"]], "best_index": best["index"],
               "results": results, "origin": "tuned",
               "device": _device_name(), "timer": self._timer_name(),
               "parts": dataclasses.asdict(key)}
        self._persist(key, rec)
        return rec

    def _index(self, config: Mapping[str, Any]) -> int | None:
        """Position of ``config`` in the decorator's list (prune may return copies)."""
        want = _canonical(config_json(config))
        for i, c in enumerate(self.configs):
            if _canonical(config_json(c)) == want:
                return i
        return None

    def _timer_name(self) -> str:
        again = f", close configs x{1 + self.recheck}" if self.recheck else ""
        if self.timer is not None:
            return f"injected {getattr(self.timer, '__name__', 'timer')}{again}"
        return f"tl.bench(warmup={self.warmup}, rep={self.rep}, flush_l2=True).median{again}"

    def _persist(self, key: RecordKey, rec: dict) -> None:
        db = default_db()
        if db is None:
            return
        body = {k: v for k, v in rec.items() if k not in ("origin", "parts")}
        body["best"] = config_json(rec["best"])
        try:
            db.store(key, body)
        except OSError as e:
            warnings.warn(f"tl.autotune: cannot write the tuning record of {self.function} "
                          f"({e}); the winner is kept in memory only", AutotuneWarning,
                          stacklevel=5)

    def _search(self, bound: inspect.BoundArguments, args: tuple, kwargs: dict,
                configs: list[dict], saved: dict) -> list[dict]:
        """Gate every config on correctness, then time the ones that pass."""
        results: list[dict] = []
        reference, tol = None, self.tol
        outputs = self.outputs
        if outputs is None and "out" in bound.arguments and bound.arguments["out"] is not None:
            outputs = ("out",)
        for i, cfg in enumerate(configs):
            entry = {"config": config_json(cfg), "index": self._index(cfg), "candidate": i,
                     "status": "ok", "reason": "", "seconds": None}
            results.append(entry)
            for name, value in saved.items():
                _restore_into(bound.arguments[name], value)
            for name in outputs or ():
                _poison(bound.arguments[name])
            try:
                result = _settle(self.fn(*args, **kwargs, **cfg))
                out = result if result is not None else \
                    [bound.arguments[n] for n in outputs or ()]
                if out is None or (isinstance(out, list) and not out):
                    raise TypeError("the function returned None and has no outputs to "
                                    "compare; pass outputs=['name', ...] to @tl.autotune")
                snap = _snapshot(out[0] if isinstance(out, list) and len(out) == 1 else out)
            except Exception as e:
                entry.update(status="error", reason=f"{type(e).__name__}: {_first_line(e)}")
                continue
            if reference is None:
                reference = snap
                entry["reference"] = True
                if tol is None:
                    tol = _TOL.get(_output_dtype(out), 0.1)
                continue
            err = relative_error(snap, reference)
            entry["rel_err"] = err
            if not err <= tol:
                entry.update(status="wrong", reason=f"relative error {err:.3g} vs the "
                             f"reference config exceeds {tol:g}")
        timer = self.timer or self._default_timer()
        for entry in results:
            if entry["status"] != "ok":
                continue
            seconds = self._time(entry, configs, timer, args, kwargs, "timing")
            if seconds is not None:
                entry["seconds"] = seconds
        self._recheck(results, configs, timer, args, kwargs)
        return results

    def _time(self, entry: dict, configs: list[dict], timer: Timer, args: tuple,
              kwargs: dict, what: str) -> float | None:
        """One timing of the entry's config in seconds; None when the timer raised or
        returned no positive finite time (the entry then says so, under ``what``)."""
        cfg = configs[entry["candidate"]]
        kw = {**kwargs, **cfg, **self._timed_kwargs}
        try:
            seconds = float(timer(lambda: self.fn(*args, **kw), cfg))
            if not seconds > 0 or not math.isfinite(seconds):
                raise ValueError(f"timer returned {seconds!r}")
        except Exception as e:
            entry.update(status="error", reason=f"{what}: {type(e).__name__}: "
                         f"{_first_line(e)}")
            return None
        return seconds

    def _recheck(self, results: list[dict], configs: list[dict], timer: Timer,
                 args: tuple, kwargs: dict) -> None:
        """Time the configs within :data:`RECHECK_WITHIN` of the fastest ``recheck`` more
        times, interleaved (so a slow spell hits them alike), and rank each by the
        median of its timings (kept in the entry's ``timings``)."""
        timed = [e for e in results if e["status"] == "ok" and e["seconds"] is not None]
        if self.recheck < 1 or len(timed) < 2:
            return
        fastest = min(e["seconds"] for e in timed)
        close = [e for e in timed if e["seconds"] <= fastest * RECHECK_WITHIN]
        if len(close) < 2:
            return
        for e in close:
            e["timings"] = [e["seconds"]]
        for _ in range(self.recheck):
            for e in close:
                if e["status"] != "ok":
                    continue
                seconds = self._time(e, configs, timer, args, kwargs, "timing (recheck)")
                if seconds is not None:
                    e["timings"].append(seconds)
        for e in close:
            if e["status"] == "ok":
                e["seconds"] = statistics.median(e["timings"])

    def _default_timer(self) -> Timer:
        from tilelab.perf.bench import bench

        def timer(call: Callable[[], Any], config: dict) -> float:
            return bench(call, warmup=self.warmup, rep=self.rep, flush_l2=True,
                         name=f"{self.function} {config}").median
        return timer

    def __repr__(self) -> str:
        return f"<tl.autotune {self.function}: {len(self.configs)} configs, key={list(self.key)}>"


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else ""


def _check_configs(configs: Iterable[Mapping[str, Any]]) -> list[dict]:
    out = []
    for c in configs:
        if not isinstance(c, Mapping) or not all(isinstance(k, str) for k in c):
            raise TypeError(f"each config is a mapping of keyword arguments, got {c!r}")
        out.append(dict(c))
    if not out:
        raise ValueError("@tl.autotune needs at least one config")
    return out


def autotune(configs: Sequence[Mapping[str, Any]], key: Sequence[str] = (), *,
             warmup: int = 5, rep: int = 20, prune: Callable | None = None,
             outputs: Sequence[str] | None = None, restore: Sequence[str] = (),
             tol: float | None = None, kernels: Sequence[Any] | None = None,
             timer: Timer | None = None, on_cpu: str = "first",
             bucket: Callable[[int], int] | None = pow2_bucket,
             recheck: int = 2) -> Callable[[Callable], Autotuned]:
    """Decorate a host function whose config parameters are keyword arguments.

    ``configs``: dicts of keyword arguments; the first is the reference the others are
    checked against. ``key``: names of the arguments whose values pick the bucket (arrays
    by shape — each dimension through ``bucket``, a power of two by default, ``None`` for
    exact — and dtype). ``warmup``/``rep``: for :func:`tilelab.bench`. ``prune(configs,
    arguments) -> configs`` drops configs that cannot fit a problem. ``outputs``: names of
    arguments the function writes (poisoned with NaN before each check; default: the
    return value, else ``out``). ``restore``: arguments updated in place, restored before
    every tuning run and before the real call. ``tol``: the gate's relative error bound
    (default by output dtype: fp32 1e-4, fp16 1e-2, bf16 2e-2, else 0.1). ``kernels``: the
    tl.kernel objects whose fingerprints key the record (default: those the function
    names). ``timer(call, config) -> seconds`` replaces the device timing (tests).
    ``on_cpu``: 'first' (no tuning on the CPU backend) or 'tune' (host clock).
    ``recheck``: how many more times the configs timed within 50% of the fastest are
    timed, interleaved, before the median of their timings picks the winner (0: the
    first timing decides).

    Example:
        >>> @autotune(configs=[{"tile": 64}, {"tile": 128}], key=["x"],
        ...           timer=lambda call, cfg: 1.0 / cfg["tile"])
        ... def double(x, *, tile=64):
        ...     return [2 * v for v in x]
        >>> double([1, 2]), double.best_config([1, 2])
        ([2, 4], {'tile': 128})
    """
    configs = _check_configs(configs)   # fail at the decorator line, not at the first call

    def wrap(fn: Callable) -> Autotuned:
        return Autotuned(fn, configs, key, warmup=warmup, rep=rep, prune=prune,
                         outputs=outputs, restore=restore, tol=tol, kernels=kernels,
                         timer=timer, on_cpu=on_cpu, bucket=bucket, recheck=recheck)
    return wrap
