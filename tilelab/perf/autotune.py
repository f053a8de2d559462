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

The machinery is split by job: :mod:`tilelab.perf.autotune_keys` (buckets, canonical
keys, source hashes), :mod:`tilelab.perf.autotune_gate` (the correctness gate),
:mod:`tilelab.perf.autotune_search` (timing and rechecks) and
:mod:`tilelab.perf.autotune_records` (the environment a record is keyed on, reading and
writing winners); this module holds the decorator and the wrapper that drives them.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import threading
import warnings
from typing import Any, Callable, Iterable, Mapping, Sequence

from tilelab.errors import TilelabError
from tilelab.perf.autotune_gate import gate, relative_error, restore_copy, restore_into
from tilelab.perf.autotune_keys import canonical, config_json, key_part, pow2_bucket, source_hash
from tilelab.perf.autotune_records import arch as _arch
from tilelab.perf.autotune_records import device_name as _device_name
from tilelab.perf.autotune_records import lookup, record_body, stored_records
from tilelab.perf.autotune_records import versions as _versions
from tilelab.perf.autotune_search import (RECHECK_WITHIN, Timer, bench_timer, time_passing,
                                          timer_name)
from tilelab.perf.tuning_db import RecordKey, default_db

__all__ = ["autotune", "Autotuned", "AutotuneError", "AutotuneWarning", "pow2_bucket",
           "relative_error", "config_json", "RECHECK_WITHIN", "Timer"]


class AutotuneError(TilelabError):
    """No config of an autotuned function could run correctly (each reason is listed)."""


class AutotuneWarning(UserWarning):
    """Tuning was skipped (CPU backend) or a record could not be written."""


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
            self._static = (source_hash(self.fn, self._kernels), toolchain, cuda_tile,
                            hashlib.sha256(canonical(
                                [config_json(c) for c in self.configs]).encode()).hexdigest())
        return self._static

    def _bucket(self, args: tuple, kwargs: dict) -> str:
        """The bucket of a call as canonical JSON (what records store)."""
        return canonical(self._bucket_key(args, kwargs))

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
            parts.append((name, key_part(value, self.bucket)))
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
            rec = self._tune(self._bind(args, kwargs), args, kwargs, canonical(key))
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
        return out + stored_records(default_db(), self.function, out, _arch())

    # -- tuning
    def _config_for(self, args: tuple, kwargs: dict) -> dict:
        key = self._bucket_key(args, kwargs)
        rec = self._best.get(key)
        if rec is not None:
            return rec["best"]
        with self._lock:
            rec = self._best.get(key)
            if rec is None:
                bucket = canonical(key)
                rec = self._lookup(bucket) or \
                    self._tune(self._bind(args, kwargs), args, kwargs, bucket)
                self._best[key] = rec
            return rec["best"]

    def _lookup(self, bucket: str) -> dict | None:
        """The stored winner of ``bucket`` (None: tune), noting a refused record."""
        db = default_db()
        if db is None or self._skip_tuning():
            return None
        rec, event = lookup(db, self._record_key(bucket), self.configs)
        if event is not None:
            self._events.append(event)
        return rec

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
        saved = {n: restore_copy(bound.arguments[n]) for n in self.restore}
        results = self._search(bound, args, kwargs, configs, saved)
        for name, value in saved.items():
            restore_into(bound.arguments[name], value)
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
               "device": _device_name(),
               "timer": timer_name(self.timer, self.warmup, self.rep, self.recheck),
               "parts": dataclasses.asdict(key)}
        self._persist(key, rec)
        return rec

    def _index(self, config: Mapping[str, Any]) -> int | None:
        """Position of ``config`` in the decorator's list (prune may return copies)."""
        want = canonical(config_json(config))
        for i, c in enumerate(self.configs):
            if canonical(config_json(c)) == want:
                return i
        return None

    def _persist(self, key: RecordKey, rec: dict) -> None:
        db = default_db()
        if db is None:
            return
        try:
            db.store(key, record_body(rec))
        except OSError as e:
            warnings.warn(f"tl.autotune: cannot write the tuning record of {self.function} "
                          f"({e}); the winner is kept in memory only", AutotuneWarning,
                          stacklevel=5)

    def _search(self, bound: inspect.BoundArguments, args: tuple, kwargs: dict,
                configs: list[dict], saved: dict) -> list[dict]:
        """Gate every config on correctness, then time the ones that pass."""
        outputs = self.outputs
        if outputs is None and "out" in bound.arguments and bound.arguments["out"] is not None:
            outputs = ("out",)
        results = gate(lambda cfg: self.fn(*args, **kwargs, **cfg), configs, bound.arguments,
                       outputs, saved, tol=self.tol, index=self._index)
        timer = self.timer or bench_timer(self.warmup, self.rep, self.function)
        timed = self._timed_kwargs

        def call_for(cfg: dict) -> Callable[[], Any]:
            kw = {**kwargs, **cfg, **timed}
            return lambda: self.fn(*args, **kw)
        time_passing(results, configs, timer, call_for, self.recheck)
        return results

    def __repr__(self) -> str:
        return f"<tl.autotune {self.function}: {len(self.configs)} configs, key={list(self.key)}>"


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
