"""The acceptance corpus (tests/compiler/acceptance/): kernels written as users write
them, after NVIDIA's cuTile Python samples and TileGym ops, ported to safe parameters.

For each entry:

1. the definition is accepted (``@tl.kernel`` raises no ``SafetyError``);
2. ``kernel.compile(..., arch="sm_90")`` builds a cubin (no GPU needed);
3. on the CPU backend, the outputs match a float64 numpy reference at every size of the
   entry, ragged edges included, to the tolerance of the output's dtype.

An entry that fails today carries its exact failure (``Entry.refused``): its tests are
strict xfails that raise only that failure, word for word, so a lifted refusal shows up
as an XPASS and a changed one as a failure. The patterns refused on purpose
(acceptance/by_design.py) must be refused with their rule and a hint that says how to
write them safely.
"""
from __future__ import annotations

import inspect
from functools import cache
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("cuda.tile", reason="cuda-tile (cuTile Python) is not installed")

from compiler.acceptance import ENTRIES, FAMILIES  # noqa: E402
from compiler.acceptance.by_design import BY_DESIGN  # noqa: E402
from compiler.acceptance.registry import ORIGINS, Entry, rng_for, tolerance  # noqa: E402

import tilelab as tl  # noqa: E402

#: the corpus' floor (issue #37 asks for at least 25 ported kernels)
MIN_ENTRIES = 25


def _xfail(entry: Entry, stage: str) -> list:
    """The strict xfail of an entry that fails today at or before ``stage``."""
    r = entry.refused
    if r is None or (stage == "define" and r.when != "define"):
        return []
    return [pytest.mark.xfail(strict=True, raises=r.error,
                              reason=f"refused today ({r.when}, rule {r.rule}): {r.message}")]


def _entries(stage: str) -> list:
    return [pytest.param(name, id=name, marks=_xfail(e, stage)) for name, e in ENTRIES.items()]


def _sizes() -> list:
    return [pytest.param(name, i, id=f"{name}-{'x'.join(map(str, np.atleast_1d(s)))}",
                         marks=_xfail(e, "run"))
            for name, e in ENTRIES.items() for i, s in enumerate(e.shapes)]


def _as_recorded(entry: Entry, step):
    """``step()``; a failure passes through only if it is the entry's recorded one."""
    try:
        return step()
    except Exception as err:
        r = entry.refused
        if r is None or r.matches(err):
            raise
        raise AssertionError(
            f"{entry.name} fails differently from its record\n  recorded: "
            f"{r.error.__name__} [{r.rule}] {r.message}\n  now: {type(err).__name__} "
            f"[{getattr(err, 'rule', None)}] {getattr(err, 'message', err)}") from err


@cache
def _kernel(name: str) -> "tl.Kernel":
    entry = ENTRIES[name]
    return _as_recorded(entry, entry.build)


# ---- the corpus itself ---------------------------------------------------------------


def test_corpus_size_families_and_records():
    assert len(ENTRIES) >= MIN_ENTRIES, len(ENTRIES)
    per_family = {f: [n for n, e in ENTRIES.items() if e.family == f] for f in FAMILIES}
    assert set(e.family for e in ENTRIES.values()) == set(FAMILIES)
    assert all(len(names) >= 2 for names in per_family.values()), per_family
    for e in ENTRIES.values():
        assert e.ports and 2 <= len(e.shapes) <= 3, e.name
        assert e.unchanged == (e.workaround is None), e.name
        if e.refused is not None:
            assert e.refused.when in ("define", "compile"), e.name
    print("\n" + summary())


def summary() -> str:
    """How many kernels the corpus ports, from where, and how many are accepted as their
    original writes them."""
    per_family = {f: sum(e.family == f for e in ENTRIES.values()) for f in FAMILIES}
    lines = [f"acceptance corpus: {len(ENTRIES)} kernels in {len(FAMILIES)} families ("
             + ", ".join(f"{f} {n}" for f, n in per_family.items()) + ")"]
    for origin in ORIGINS:
        group = [e for e in ENTRIES.values() if e.origin == origin]
        ok = [e for e in group if e.unchanged and e.refused is None]
        lines.append(f"  {origin}: {len(group)} kernels, {len(ok)} accepted unchanged, "
                     f"{sum(not e.unchanged for e in group)} with a workaround, "
                     f"{sum(e.refused is not None for e in group)} refused today")
    refused = [e.name for e in ENTRIES.values() if e.refused is not None]
    lines.append(f"  refused today: {', '.join(refused) or 'none'}")
    return "\n".join(lines)


def test_kernels_are_module_level_functions_of_their_family_file():
    """Each kernel is a plain module-level ``def`` in its family's own file, so that its
    source is captured as a user's would be."""
    for e in ENTRIES.values():
        assert inspect.isfunction(e.fn) and e.fn.__qualname__ == e.fn.__name__, e.name
        assert Path(inspect.getsourcefile(e.fn)).name == f"{e.family}.py", e.name


def test_every_entry_has_a_ragged_size():
    """At least one size per entry has a partial tile: an output partition whose tiles
    overhang the tensor, or an input extent that no power-of-two tile divides."""
    def ragged(entry, shape):
        d = entry.inputs(shape, rng_for(entry.name, shape))
        parts = [a for a in entry.run(d).args if isinstance(a, tl.Partition)]
        overhang = any(s % t for p in parts for s, t in zip(p.tensor.shape, p.tile_shape))
        odd = any(n & (n - 1) for a in d.values() if isinstance(a, np.ndarray)
                  for n in a.shape if n > 1)
        return overhang or odd
    missing = [e.name for e in ENTRIES.values() if not any(ragged(e, s) for s in e.shapes)]
    assert not missing, missing


# ---- 1. accepted -----------------------------------------------------------------------


@pytest.mark.parametrize("name", _entries("define"))
def test_accepted(name):
    kernel = _kernel(name)
    assert isinstance(kernel, tl.Kernel)
    assert not kernel.definition.options.unsafe


# ---- 2. compiled for sm_90 --------------------------------------------------------------


@pytest.mark.parametrize("name", _entries("compile"))
@pytest.mark.toolchain
def test_compiles_for_sm90(name):
    entry = ENTRIES[name]
    kernel = _kernel(name)
    shape = entry.shapes[0]
    run = entry.run(entry.inputs(shape, rng_for(name, shape)))
    art = _as_recorded(entry, lambda: kernel.compile(*run.args, arch="sm_90"))
    assert art.arch.startswith("sm_90")
    assert isinstance(art.cubin, (bytes, bytearray)) and len(art.cubin) > 0
    assert art.tileir.strip()


# ---- 3. the CPU backend against numpy ----------------------------------------------------


@pytest.mark.parametrize("name,size", _sizes())
def test_cpu_matches_numpy(name, size):
    entry = ENTRIES[name]
    kernel = _kernel(name)
    shape = entry.shapes[size]
    d = entry.inputs(shape, rng_for(name, shape))
    run = entry.run(d)
    _as_recorded(entry, lambda: kernel(*run.args))
    refs = entry.reference(d)
    assert len(refs) == len(run.outputs)
    for k, (o, ref) in enumerate(zip(run.outputs, refs)):
        got = o.numpy()
        assert got.shape == np.shape(ref), (k, got.shape, np.shape(ref))
        rtol, atol = entry.tol or tolerance(got.dtype)
        if np.issubdtype(got.dtype, np.integer):
            rtol = atol = 0
        np.testing.assert_allclose(got.astype(np.float64), ref, rtol=rtol, atol=atol,
                                   err_msg=f"{name} output {k} at size {shape}")


# ---- refused on purpose, with advice ----------------------------------------------------


def _design(name):
    case = BY_DESIGN[name]
    marks = [pytest.mark.xfail(strict=True, reason=case.gap)] if case.gap else []
    return pytest.param(name, id=name, marks=marks)


@pytest.mark.parametrize("name", [_design(n) for n in BY_DESIGN])
def test_refused_on_purpose_says_how_to_write_it(name):
    case = BY_DESIGN[name]
    with pytest.raises(tl.SafetyError) as ei:
        tl.kernel(case.fn)
    err = ei.value
    assert err.rule == case.rule, (err.rule, str(err))
    assert err.location is not None and Path(err.location.filename).name == "by_design.py"
    assert f"(in kernel '{case.fn.__name__}')" in err.message
    assert err.hint and case.hint_says in err.hint, f"hint: {err.hint!r}"
