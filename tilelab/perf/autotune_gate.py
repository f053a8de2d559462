"""The correctness gate of :func:`tilelab.autotune`: every config runs once and its
output is compared with the first config's (the reference) before any is timed.

Outputs are poisoned with NaN before each run (a config that writes nothing fails),
arguments updated in place are restored before each, and outputs are compared by
relative Frobenius error against a tolerance chosen by their dtype.

Example:
    >>> results = gate(lambda cfg: [1.0 * cfg["s"]], [{"s": 1}, {"s": 2}], {}, (), {},
    ...                tol=None, index=lambda cfg: None)
    >>> [(r["status"], r.get("reference", False)) for r in results]
    [('ok', True), ('wrong', False)]
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from tilelab.perf.autotune_keys import config_json, dtype_label

__all__ = ["gate", "relative_error", "snapshot", "poison", "restore_copy", "restore_into",
           "settle", "output_dtype", "first_line", "TOLERANCES"]


def snapshot(x: Any) -> Any:
    """A private copy of an output for comparison: a float32 torch tensor on its device
    when torch is at hand (no host round trip for large GPU outputs), else float64 numpy.

    Example:
        >>> import numpy as np
        >>> snapshot(np.ones(2, np.float16)).dtype
        dtype('float64')
    """
    import numpy as np

    if isinstance(x, (tuple, list)):
        return [snapshot(v) for v in x]
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


TOLERANCES = {"float64": 1e-9, "float32": 1e-4, "bfloat16": 2e-2, "float16": 1e-2}


def output_dtype(x: Any) -> str:
    """The dtype that sets the gate's tolerance (of several outputs: the loosest).

    Example:
        >>> import numpy as np
        >>> output_dtype([np.zeros(2, np.float32), np.zeros(2, np.float16)])
        'float16'
    """
    if isinstance(x, (tuple, list)):
        names = [output_dtype(v) for v in x]
        return max(names, key=lambda n: TOLERANCES.get(n, 0.1)) if names else "float32"
    return dtype_label(getattr(x, "dtype", "float32"))


def poison(x: Any) -> None:
    """Fill a floating output with NaN so a config that writes nothing is caught.

    Example:
        >>> import numpy as np
        >>> x = np.zeros(2, np.float32); poison(x); x
        array([nan, nan], dtype=float32)
    """
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


def restore_copy(x: Any) -> Any:
    """A copy of an argument updated in place, for :func:`restore_into`.

    Example:
        >>> import numpy as np
        >>> x = np.ones(2); saved = restore_copy(x); x[:] = 5; restore_into(x, saved); x
        array([1., 1.])
    """
    if hasattr(x, "clone"):
        return x.clone()
    import numpy as np

    return np.array(x, copy=True)


def restore_into(dst: Any, src: Any) -> None:
    """Copy ``src`` (from :func:`restore_copy`) back into ``dst`` in place.

    Example:
        >>> import numpy as np
        >>> x = np.zeros(2); restore_into(x, np.ones(2)); x
        array([1., 1.])
    """
    if hasattr(dst, "copy_"):
        dst.copy_(src)
    else:
        dst[...] = src


def settle(result: Any) -> Any:
    """Wait for the call's device work; a returned ``tl.Future`` counts as no value (the
    outputs are then the written arguments).

    Example:
        >>> settle([1.0])
        [1.0]
    """
    if callable(getattr(result, "wait", None)) and callable(getattr(result, "done", None)):
        result.wait()
        result = None
    from tilelab.runtime.device import backend, synchronize

    if backend() == "gpu":
        synchronize()   # async launches inside the function: finish before reading
    return result


def first_line(e: BaseException) -> str:
    """The first line of an exception's message, at most 300 characters.

    Example:
        >>> first_line(ValueError("bad tile\\nmore"))
        'bad tile'
    """
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else ""


def gate(run: Callable[[dict], Any], configs: Sequence[dict], arguments: dict,
         outputs: Sequence[str] | None, saved: dict, *, tol: float | None,
         index: Callable[[dict], int | None]) -> list[dict]:
    """One result entry per config: ``status`` "ok", "error" (it raised) or "wrong" (its
    output differs from the first passing config's by more than ``tol``).

    ``run(cfg)`` calls the function with a config; ``arguments`` are its bound
    arguments, of which ``outputs`` are written (poisoned first) and ``saved`` maps
    arguments updated in place to copies restored before every run. ``index(cfg)`` is
    the config's position in the decorator's list.

    Example:
        >>> def run(cfg):
        ...     if cfg["tile"] > 64:
        ...         raise ValueError("tile too large")
        ...     return [1.0, 2.0]
        >>> [r["status"] for r in gate(run, [{"tile": 32}, {"tile": 128}], {}, (), {},
        ...                             tol=1e-4, index=lambda cfg: None)]
        ['ok', 'error']
    """
    results: list[dict] = []
    reference = None
    for i, cfg in enumerate(configs):
        entry = {"config": config_json(cfg), "index": index(cfg), "candidate": i,
                 "status": "ok", "reason": "", "seconds": None}
        results.append(entry)
        for name, value in saved.items():
            restore_into(arguments[name], value)
        for name in outputs or ():
            poison(arguments[name])
        try:
            snap, out = _output_of(run(cfg), arguments, outputs)
        except Exception as e:
            entry.update(status="error", reason=f"{type(e).__name__}: {first_line(e)}")
            continue
        if reference is None:
            reference = snap
            entry["reference"] = True
            if tol is None:
                tol = TOLERANCES.get(output_dtype(out), 0.1)
            continue
        err = relative_error(snap, reference)
        entry["rel_err"] = err
        if not err <= tol:
            entry.update(status="wrong", reason=f"relative error {err:.3g} vs the "
                         f"reference config exceeds {tol:g}")
    return results


def _output_of(result: Any, arguments: dict, outputs: Sequence[str] | None) -> tuple:
    """(snapshot, output) of one run: its return value, else its written arguments."""
    result = settle(result)
    out = result if result is not None else [arguments[n] for n in outputs or ()]
    if out is None or (isinstance(out, list) and not out):
        raise TypeError("the function returned None and has no outputs to "
                        "compare; pass outputs=['name', ...] to @tl.autotune")
    return snapshot(out[0] if isinstance(out, list) and len(out) == 1 else out), out
