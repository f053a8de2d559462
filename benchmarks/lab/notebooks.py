"""Run the course notebooks (``notebooks/0N_*.ipynb``) in this process, without IPython,
and record per cell: ok or error, wall time, and the roofline points the lab produced.

Why: the GPU machine has python, numpy, torch and cuda-tile but no IPython or Jupyter, and
the figures worth having are the notebooks' *measured* points there. Each notebook is read
with :mod:`json`; its code cells run top to bottom in one namespace of their own (a module
registered as ``__main__`` while it runs, as a kernel's user namespace is):

- ``%%tile [options]`` cells run through :func:`tilelab.lab.cell.run.run_cell` (the magic's
  steps without a shell); each launch's measurement becomes a point (measured on a GPU,
  predicted on the CPU backend), and the cell's tabs are built as the magic builds them;
- other cell magics are skipped; line magics (``%load_ext tilelab``, ``%matplotlib``) and
  shell lines (``!cmd``) become ``pass`` with a note;
- plain cells run with ``exec``; a final expression is evaluated as a cell's would be,
  ``display`` is a recorder, and every :class:`~tilelab.perf.roofline.RooflinePoint` a
  cell leaves in the namespace (``points = [...]``) is recorded too.

Every cell is registered in ``linecache`` under ``<NN_name In[i]>`` (``i`` is its index
in the notebook), so kernels defined in it can be read and checked. The JSON
(``tilelab-notebooks/1``) is written after each notebook.

    python -m benchmarks.lab.notebooks --out X.json [--only 01,07] [--backend cpu|gpu]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import sys
import time
import traceback
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ..common import REPO, RESULTS, env_info, gpu_slug, nominal_for, write_json

__all__ = ["SCHEMA", "CellTimeout", "PreparedCell", "prepare_cell", "point_record",
           "run_cell_record", "run_notebook", "notebook_paths", "summarize", "print_table",
           "main"]

SCHEMA = "tilelab-notebooks/1"
NOTEBOOKS = REPO / "notebooks"
TAIL = 2000            # characters of a cell's output (and of a traceback) kept


class CellTimeout(Exception):
    """A cell ran past ``--cell-timeout-s``.

    Example:
        >>> str(CellTimeout("cell ran past 5 s"))
        'cell ran past 5 s'
    """


@dataclass
class PreparedCell:
    """A code cell ready to run: ``kind`` is ``python``, ``tile`` (``line`` holds the
    ``%%tile`` options) or ``magic`` (another cell magic: skipped); ``notes`` say what was
    left out.

    Example:
        >>> prepare_cell("%%tile --bench\\nadd(z, x)").line
        '--bench'
    """

    kind: str
    code: str
    line: str = ""
    notes: list[str] = field(default_factory=list)


def _is_magic_line(stripped: str) -> bool:
    """``%name ...`` or ``!cmd``: what IPython transforms (``% b`` continuing an
    expression, ``!=`` and the like are Python)."""
    if stripped.startswith("%"):
        return stripped[1:2].isalpha()
    return stripped.startswith("!") and not stripped.startswith("!=") and len(stripped) > 1


def prepare_cell(source: str) -> PreparedCell:
    """Split a code cell's source into what runs and notes on what does not.

    Example:
        >>> c = prepare_cell("%load_ext tilelab\\nimport numpy as np")
        >>> c.kind, c.code, c.notes
        ('python', 'pass  # %load_ext tilelab\\nimport numpy as np', ['skipped %load_ext tilelab (IPython line magic)'])
        >>> prepare_cell("%%time\\nx = 1").kind
        'magic'
    """
    kind, line, body = "python", "", source
    if source.startswith("%%"):
        head, _, body = source.partition("\n")
        magic, _, line = head[2:].partition(" ")
        if magic != "tile":
            return PreparedCell("magic", source, notes=[
                f"skipped: cell magic %%{magic} needs IPython"])
        kind, line = "tile", line.strip()
    lines, notes = [], []
    for text in body.split("\n"):
        stripped = text.lstrip()
        if _is_magic_line(stripped):
            what = "shell command" if stripped[0] == "!" else "IPython line magic"
            notes.append(f"skipped {stripped} ({what})")
            text = text[:len(text) - len(stripped)] + "pass  # " + stripped
        lines.append(text)
    return PreparedCell(kind, "\n".join(lines), line, notes)


# --------------------------------------------------------------------------- points

def point_record(point: Any, roof_gpu: str, source: str) -> dict[str, Any]:
    """One roofline point as JSON: work, time (measured, predicted or none), achieved
    rates and the fraction of ``roof_gpu``'s roof at the point's intensity.

    Example:
        >>> from tilelab.perf.roofline import RooflinePoint
        >>> p = RooflinePoint("add", 1e6, 12e6, "fp32", 5e-6, True, "NVIDIA H200")
        >>> r = point_record(p, "h200", "%%tile")
        >>> r["time_kind"], r["GBps"], r["roof_bound"]
        ('measured', 2400.0, 'memory')
    """
    kind = "measured" if point.measured else ("predicted" if point.seconds else "counted")
    try:
        fraction = point.fraction_of_ceiling(roof_gpu)
        bound = point.bound_on(roof_gpu)
    except (KeyError, ValueError, TypeError):  # a precision the roof GPU lacks
        fraction = bound = None
    bw, rate = point.achieved_bandwidth, point.achieved_flops
    return {"name": point.name, "source": source, "time_kind": kind, "device": point.device,
            "seconds": point.seconds, "flops": point.flops, "bytes": point.bytes,
            "precision": point.precision, "intensity": point.intensity,
            "GBps": None if bw is None else bw / 1e9,
            "TFLOPs": None if rate is None else rate / 1e12,
            "roof_fraction": fraction, "roof_bound": bound}


def _launch_records(report: Any, roof_gpu: str, points: list) -> list[dict[str, Any]]:
    """The distinct launches of a ``%%tile`` cell; the points of those that have one are
    appended to ``points`` (``point`` is the index there, None without a point: the
    report's notes say why)."""
    out = []
    for launch in report.launches:
        m = launch.measurement
        index = None
        if m.point is not None:
            index = len(points)
            points.append(point_record(m.point, roof_gpu, "%%tile"))
        out.append({"kernel": launch.name, "launch": launch.description,
                    "grid": list(launch.grid), "ran_on": launch.device,
                    "launches": launch.count, "interpreter_s": m.host_seconds,
                    "point": index})
    return out


def _new_points(namespace: dict, seen: dict[int, Any]) -> list[tuple[str, Any]]:
    """(variable, point) of the RooflinePoints in ``namespace`` not recorded before (held
    in ``seen`` by id, which keeps them alive so an id is never reused)."""
    from tilelab.perf.roofline import RooflinePoint

    found = []
    for var, value in list(namespace.items()):
        if var.startswith("_"):
            continue
        items = value if isinstance(value, (list, tuple)) else (
            value.values() if isinstance(value, dict) else (value,))
        for item in items:
            if isinstance(item, RooflinePoint) and id(item) not in seen:
                seen[id(item)] = item
                found.append((var, item))
    return found


# --------------------------------------------------------------------------- running

@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`CellTimeout` in the block after ``seconds`` (0: no limit)."""
    if not seconds or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise CellTimeout(f"the cell ran past {seconds:g} s (--cell-timeout-s)")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _exec_python(code: str, namespace: dict, filename: str) -> str | None:
    """Run a plain cell: the statements, then a final expression evaluated (its type is
    returned, as the value a notebook would show)."""
    import ast
    import linecache

    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    tree = ast.parse(code, filename)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, filename, "exec"), namespace)
    if last is None:
        return None
    value = eval(compile(ast.Expression(last.value), filename, "eval"), namespace)
    return None if value is None else type(value).__name__


def _view_text(report: Any) -> str:
    """The tabs ``%%tile`` would show for ``report`` (built as the magic builds them), as
    their plain-text summary."""
    from tilelab.lab.views.panels import build_panels
    from tilelab.lab.views.tabs import TileView

    view = TileView(build_panels(report), report.summary_line(), report.notes, mode="html")
    view.to_html()
    return view.to_text()


def _run_tile(cell: PreparedCell, namespace: dict, filename: str, rec: dict,
              roof_gpu: str) -> None:
    from tilelab.lab.cell.run import run_cell

    report = run_cell(cell.line, cell.code, namespace, name=filename)
    rec["tile"] = {"line": cell.line, "summary": report.summary_line(),
                   "bench": "--bench" in cell.line.split(),
                   "backend": report.backend, "notes": list(report.notes),
                   "launches": _launch_records(report, roof_gpu, rec["points"])}
    try:
        rec["tile"]["view"] = _view_text(report)[:TAIL]
    except Exception as e:  # the cell fails as the magic's would; its points are kept
        raise RuntimeError(f"the %%tile tabs could not be built: {type(e).__name__}: "
                           f"{e}") from e


def run_cell_record(cell: PreparedCell, index: int, tags: list[str], namespace: dict,
                    filename: str, roof_gpu: str, timeout_s: float) -> dict[str, Any]:
    """Run one prepared cell and describe it: status, seconds, error, output, points.

    Example:
        >>> r = run_cell_record(prepare_cell("x = 6 * 7\\nx"), 0, [], {}, "<demo>", "h200", 0)
        >>> r["status"], r["value"], r["points"]
        ('ok', 'int', [])
    """
    rec: dict[str, Any] = {"index": index, "kind": cell.kind, "status": "ok",
                           "notes": list(cell.notes), "points": []}
    if cell.kind == "magic":
        rec.update(status="skipped", seconds=0.0)
        return rec
    out = io.StringIO()
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), \
                _time_limit(timeout_s):
            if cell.kind == "tile":
                _run_tile(cell, namespace, filename, rec, roof_gpu)
            else:
                rec["value"] = _exec_python(cell.code, namespace, filename)
    except Exception as e:
        rec["status"] = "expected-error" if "raises-exception" in tags else "error"
        rec["error"] = f"{type(e).__name__}: {e}"[:TAIL]
        rec["traceback"] = "".join(traceback.format_exception(e))[-TAIL:]
    rec["seconds"] = time.perf_counter() - t0
    rec["output_tail"] = out.getvalue()[-TAIL:]
    return rec


def _code_cells(path: Path) -> list[tuple[int, str, list[str]]]:
    """(index in the notebook, source, tags) of each code cell, read with json."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else src
        out.append((i, src, list(cell.get("metadata", {}).get("tags") or [])))
    return out


@contextlib.contextmanager
def _notebook_main(path: Path) -> Iterator[dict]:
    """A fresh module as ``__main__`` (its dict is the notebook's namespace), with the
    notebook's folder as the working directory, as a Jupyter kernel runs it."""
    module = types.ModuleType("__main__", f"namespace of {path.name}")
    ns = module.__dict__
    ns["display"] = lambda *objs, **kw: ns["_displayed"].extend(type(o).__name__
                                                                 for o in objs)
    ns["_displayed"] = []
    saved, cwd = sys.modules.get("__main__"), os.getcwd()
    sys.modules["__main__"] = module
    os.chdir(path.parent)
    try:
        yield ns
    finally:
        os.chdir(cwd)
        if saved is not None:
            sys.modules["__main__"] = saved


def run_notebook(path: Path, roof_gpu: str, timeout_s: float = 0.0,
                 progress: Any = None, bench: bool = False) -> dict[str, Any]:
    """Run every code cell of one notebook in its own namespace; the notebook's record.
    ``bench`` adds ``--bench`` to every ``%%tile`` line (50 timed runs per launch on a GPU
    instead of 3).

    Example:
        >>> r = run_notebook(NOTEBOOKS / "01_hello_tiles.ipynb", "h200")  # doctest: +SKIP
        >>> {c["status"] for c in r["cells"]}                               # doctest: +SKIP
        {'ok'}
    """
    cells, seen = [], {}
    t0 = time.perf_counter()
    with _notebook_main(path) as ns:
        for index, source, tags in _code_cells(path):
            prepared = prepare_cell(source)
            if bench and prepared.kind == "tile" and "--bench" not in prepared.line.split():
                prepared.line = f"{prepared.line} --bench".strip()
                prepared.notes.append("--bench added to the %%tile line (--bench)")
            filename = f"<{path.stem} In[{index}]>"
            ns["_displayed"] = []
            rec = run_cell_record(prepared, index, tags, ns, filename, roof_gpu, timeout_s)
            rec["displayed"] = ns["_displayed"]
            failed = [c["index"] for c in cells if c["status"] == "error"]
            if failed and rec.get("error", "").startswith("NameError"):
                rec["notes"].append(f"a name an earlier cell defines? In[{failed[0]}] failed")
            rec["points"] += [point_record(p, roof_gpu, f"namespace:{var}")
                              for var, p in _new_points(ns, seen)]
            cells.append(rec)
            _close_figures()
            if progress is not None:
                progress(path.stem, rec)
    counts: dict[str, int] = {}
    for c in cells:
        counts[c["status"]] = counts.get(c["status"], 0) + 1
    return {"notebook": path.stem, "path": str(path.relative_to(REPO)),
            "seconds": time.perf_counter() - t0, "status_counts": counts, "cells": cells}


def _close_figures() -> None:
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


# --------------------------------------------------------------------------- the run

def notebook_paths(only: str | None = None, folder: Path = NOTEBOOKS) -> list[Path]:
    """The notebooks to run, in order: all ``NN_*.ipynb``, or those whose number or name
    starts with an entry of ``only`` (comma separated); an entry matching none is an error.

    Example:
        >>> [p.name[:2] for p in notebook_paths("07,01")]
        ['01', '07']
    """
    paths = sorted(folder.glob("[0-9][0-9]_*.ipynb"))
    if not only:
        return paths
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    missing = [w for w in wanted if not any(p.stem.startswith(w) for p in paths)]
    if missing:
        raise SystemExit(f"--only: no notebook starts with {', '.join(missing)} (the "
                         f"notebooks: {', '.join(p.stem for p in paths)})")
    return [p for p in paths if any(p.stem.startswith(w) for w in wanted)]


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.lab.notebooks",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None, help="result JSON (default: "
                    "benchmarks/results/notebooks_<gpu>_<date>.json)")
    ap.add_argument("--only", default=None,
                    help="notebooks by number or name prefix, comma separated: 01,07")
    ap.add_argument("--backend", choices=("cpu", "gpu"), default=None,
                    help="force a backend (sets TILELAB_BACKEND; default: the GPU when "
                         "usable, else the CPU interpreter)")
    ap.add_argument("--bench", action="store_true",
                    help="add --bench to every %%%%tile line: each launch timed with 50 "
                         "runs on a GPU instead of 3")
    ap.add_argument("--cell-timeout-s", type=float, default=300.0,
                    help="stop a cell after this many seconds (0: no limit; default 300)")
    return ap


def _progress(stem: str, rec: dict) -> None:
    what = rec.get("error") or "; ".join(rec["notes"])
    print(f"  {stem[:2]} In[{rec['index']:>2}] {rec['kind']:6} {rec['status']:14} "
          f"{rec['seconds']:7.2f} s  {len(rec['points'])} pt  {what[:90]}", flush=True)


def summarize(notebooks: list[dict]) -> dict[str, Any]:
    """Totals over the notebooks: cells by status, points by time kind, seconds.

    Example:
        >>> summarize([{"seconds": 2.0, "cells": [{"status": "ok", "points": [
        ...     {"time_kind": "predicted"}]}]}])["points"]
        {'predicted': 1}
    """
    cells: dict[str, int] = {}
    points: dict[str, int] = {}
    for nb in notebooks:
        for c in nb["cells"]:
            cells[c["status"]] = cells.get(c["status"], 0) + 1
            for p in c["points"]:
                points[p["time_kind"]] = points.get(p["time_kind"], 0) + 1
    return {"cells": cells, "points": points,
            "seconds": sum(nb["seconds"] for nb in notebooks)}


def _num(value: Any, scale: float = 1.0, fmt: str = "{:.1f}") -> str:
    return "-" if value is None else fmt.format(value * scale)


def print_table(doc: dict) -> None:
    """The notebooks (cells by status, seconds, points), the errors, then the points.

    Example:
        >>> print_table(json.loads(Path("nb.json").read_text()))     # doctest: +SKIP
    """
    roof = doc["nominal"]["gpu"]
    print(f"\n{'notebook':34} {'cells':>5} {'ok':>4} {'error':>5} {'skip':>4} "
          f"{'seconds':>8}  points (measured/predicted)")
    for nb in doc["notebooks"]:
        n = nb["status_counts"]
        pts = [p for c in nb["cells"] for p in c["points"]]
        measured = sum(p["time_kind"] == "measured" for p in pts)
        predicted = sum(p["time_kind"] == "predicted" for p in pts)
        print(f"{nb['notebook']:34} {len(nb['cells']):5} {n.get('ok', 0):4} "
              f"{n.get('error', 0):5} {n.get('skipped', 0):4} {nb['seconds']:8.1f}  "
              f"{measured}/{predicted}")
    errors = [(nb["notebook"], c) for nb in doc["notebooks"] for c in nb["cells"]
              if c["status"] == "error"]
    for stem, c in errors:
        print(f"error {stem[:2]} In[{c['index']}]: {c['error'].splitlines()[0][:150]}")
    rows = [(nb["notebook"], c["index"], p) for nb in doc["notebooks"] for c in nb["cells"]
            for p in c["points"]]
    if rows:
        print(f"\n{'nb':2} {'cell':>4} {'point':28} {'time':9} {'µs':>9} {'GB/s':>8} "
              f"{'TFLOP/s':>8} {'% ' + roof + ' roof':>11}  device")
    for stem, index, p in rows:
        print(f"{stem[:2]} {index:4} {p['name'][:28]:28} {p['time_kind']:9} "
              f"{_num(p['seconds'], 1e6, '{:.3g}'):>9} {_num(p['GBps']):>8} "
              f"{_num(p['TFLOPs'], fmt='{:.2f}'):>8} {_num(p['roof_fraction'], 100):>11}  "
              f"{p['device'] or ''}")


def main(argv: list[str] | None = None) -> int:
    """Run the notebooks, write the JSON, print the table; 1 when a cell failed.

    Example:
        >>> main(["--backend", "cpu", "--only", "01", "--out", "nb.json"])  # doctest: +SKIP
        0
    """
    ns = _parser().parse_args(argv)
    if ns.backend:
        os.environ["TILELAB_BACKEND"] = ns.backend
    os.environ.setdefault("MPLBACKEND", "Agg")        # no display: figures render off-screen
    paths = notebook_paths(ns.only)
    from tilelab.runtime.device import backend

    env = env_info(backend())
    nominal, nominal_doc = nominal_for(env)
    out = Path(ns.out) if ns.out else (
        RESULTS / f"notebooks_{gpu_slug(env)}_{env['date'][:10]}.json")
    out = out.resolve()
    doc: dict[str, Any] = {
        "schema": SCHEMA, "env": env, "nominal": nominal_doc,
        "run": {"argv": sys.argv[1:] if argv is None else list(argv), "only": ns.only,
                "cell_timeout_s": ns.cell_timeout_s, "bench": ns.bench},
        "notebooks": [], "summary": summarize([])}
    t0 = time.perf_counter()
    for path in paths:
        print(f"{path.stem} ({env['backend']})", flush=True)
        doc["notebooks"].append(run_notebook(path, nominal.gpu, ns.cell_timeout_s,
                                             progress=_progress, bench=ns.bench))
        doc["summary"] = summarize(doc["notebooks"])
        doc["run"]["elapsed_s"] = time.perf_counter() - t0
        doc["run"]["ipython_loaded"] = sys.modules.get("IPython") is not None
        write_json(out, doc)
    print_table(doc)
    print(f"\nwrote {out}")
    return 1 if doc["summary"]["cells"].get("error") else 0


if __name__ == "__main__":
    sys.exit(main())
