"""The Safety tab: the checker's record of every memory access, the Tile IR validator's
verdict on every memory op, and the view that shows both (in the exported page too).

The kernels below have one access of each kind, each on a line marked ``# <name>``; the
records must say where each access is, its kind and why it is safe, and the validator's
verdicts must land on the records they belong to.
"""
from __future__ import annotations

import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

import cuda.tile as ct
import tilelab as tl
from tilelab import config
from tilelab.compiler.cache import DiskCache
from tilelab.compiler.safety import AccessKind
from tilelab.compiler.toolchain import find_toolchain
from tilelab.lab.report.cell_report import CellReport, build_kernel_report
from tilelab.lab.views.panels import build_panels
from tilelab.lab.views.safety_view import (CSS, link_verdicts, mark_line, safety_section,
                                           safety_text)
from tilelab.lab.views.tabs import TileView

THIS = Path(__file__).resolve()
needs_disasm = pytest.mark.skipif(find_toolchain().tileirdisasm is None,
                                  reason="tileirdisasm is not installed (CUDA < 13.4)")


def line_of(marker: str) -> int:
    """The line of this file that ends with '# <marker>'."""
    lines = THIS.read_text().splitlines()
    return next(i + 1 for i, ln in enumerate(lines) if ln.rstrip().endswith(f"# {marker}"))


def col_of(marker: str, text: str) -> int:
    """The 1-based column of ``text`` on the marked line."""
    return THIS.read_text().splitlines()[line_of(marker) - 1].index(text) + 1


# ---- the kernels: one access of every kind --------------------------------------------

def first_tile(a, i):
    return ct.load(a, index=(i,), shape=(256,), padding_mode=ct.PaddingMode.ZERO)  # helper


@tl.kernel
def every_kind(z: tl.Out, acc: tl.InOut, x: tl.In, w: tl.In, idx: tl.In):
    a = acc.load()                                                            # own-load
    t = tl.load_like(x, z)                                                    # proven
    b = ct.load(w, index=(0,), shape=(256,), padding_mode=ct.PaddingMode.ZERO)  # padded
    i = ct.load(idx, index=z.tile_index, shape=(256,))                        # index
    g = ct.gather(x, i)                                                       # gather
    acc.store(a + t)                                                          # inout-store
    z.store(t * b + g + first_tile(w, 0))                                     # out-store


@tl.kernel(unsafe=True)
def opt_outs(out: tl.Raw, x: tl.In):
    t = ct.load(x, index=(ct.bid(0),), shape=(256,), check_bounds=False)     # unchecked
    u = ct.load(out, index=(0,), shape=(256,))                                # raw-read
    ct.store(out, index=(ct.bid(0),), tile=t + u)                             # raw-store
    ct.atomic_add(out, (0,), 1.0)                                             # raw-atomic


@tl.kernel(check_bounds=False)
def proven(z: tl.Out, acc: tl.InOut, x: tl.In):
    acc.store(acc.load() + tl.load_like(x, acc))                              # nested
    z.store(
        tl.load_like(x, z))                                                   # two-lines


@tl.kernel
def through_view(z: tl.Out, x: tl.In):
    z.store(x.tiled_view((256,)).load((ct.bid(0),)))                          # view-load


@tl.kernel
def put(z: tl.InOut, k: int):
    z.store(ct.full((4,), 9.0, dtype=ct.float32), offset=(k,))                # sub-tile


N = 4096
F32 = tl.spec(N, "float32")
EVERY = (F32.partition(256), F32.partition(256), F32, tl.spec(100, "float32"),
         tl.spec(N, "int32"))
PROVEN = (F32.partition(256), F32.partition(256), F32)
PUT = (tl.spec(64, "float32").partition(16), 3)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return DiskCache(tmp_path_factory.mktemp("safety-cache"))


def records(kernel) -> dict[int, list]:
    out: dict[int, list] = {}
    for r in kernel.definition.analysis.accesses:
        out.setdefault(r.line, []).append(r)
    return out


# ---- the checker's records ---------------------------------------------------------------

def test_each_access_is_recorded_with_its_kind_place_and_reason():
    got = records(every_kind)
    want = {"own-load": (AccessKind.OWN_LOAD, "acc.load()", ("acc",), False),
            "proven": (AccessKind.LAUNCH_PROVEN, "tl.load_like(x, z)", ("x",), False),
            "padded": (AccessKind.BOUNDS_CHECKED, "ct.load(w, ", ("w",), False),
            "index": (AccessKind.BOUNDS_CHECKED, "ct.load(idx, ", ("idx",), False),
            "gather": (AccessKind.MASKED_GATHER, "ct.gather(x, i)", ("x",), False),
            "inout-store": (AccessKind.OWN_STORE, "acc.store(a + t)", ("acc",), True),
            "out-store": (AccessKind.OWN_STORE, "z.store(", ("z",), True),
            "helper": (AccessKind.BOUNDS_CHECKED, "ct.load(a, ", ("a",), False)}
    for marker, (kind, text, arrays, writes) in want.items():
        [r] = got[line_of(marker)]
        assert (r.kind, r.arrays, r.writes) == (kind, arrays, writes), marker
        assert r.text.startswith(text) and r.col == col_of(marker, text), (marker, r)
        assert r.filename == str(THIS) and r.end_line == r.line
        assert r.end_col == r.col + len(r.text), marker
    assert sum(len(v) for v in got.values()) == len(want)
    assert got[line_of("helper")][0].function == "first_tile"
    assert got[line_of("own-load")][0].function == "every_kind"


def test_the_reasons_say_why_each_access_is_safe():
    got = {m: records(every_kind)[line_of(m)][0].reason
           for m in ("own-load", "proven", "padded", "index", "gather", "out-store")}
    assert "this block's own tile of acc (tl.InOut), which no other block writes" \
        in got["own-load"]
    assert "every launch proves from the shapes that each block's tile meets 'x'" \
        in got["proven"]
    assert "elements outside 'w' are padding (ct.PaddingMode.ZERO)" in got["padded"]
    assert "(cuTile's default padding)" in got["index"]
    assert "masks every index against x.shape" in got["gather"]
    assert "the partition fixes the destination, so no two blocks write one element" \
        in got["out-store"] and "(tl.Out)" in got["out-store"]


def test_unsafe_accesses_are_opt_outs_that_say_which():
    got = records(opt_outs)
    kinds = {m: got[line_of(m)][0] for m in ("unchecked", "raw-read", "raw-store",
                                             "raw-atomic")}
    assert {r.kind for r in kinds.values()} == {AccessKind.UNSAFE}
    assert "check_bounds=False) reads without bounds checks" in kinds["unchecked"].reason
    assert "reads tl.Raw 'out'" in kinds["raw-read"].reason
    assert kinds["raw-store"].writes and "writes 'out' (tl.Raw)" in kinds["raw-store"].reason
    assert kinds["raw-atomic"].op == "ct.atomic_add" and kinds["raw-atomic"].writes
    assert "unsafe=True" in kinds["raw-atomic"].reason


def test_nested_and_multi_line_accesses_and_counts():
    got = records(proven)
    nested = sorted(got[line_of("nested")], key=lambda r: r.col)
    assert [r.kind for r in nested] == [AccessKind.OWN_STORE, AccessKind.OWN_LOAD,
                                        AccessKind.LAUNCH_PROVEN]
    outer, inner = nested[0], nested[2]
    assert outer.contains(inner.line, inner.col) and not inner.contains(outer.line, outer.col)
    [store] = [r for r in proven.definition.analysis.accesses if r.text.startswith("z.store")]
    assert (store.line, store.end_line) == (line_of("two-lines") - 1, line_of("two-lines"))
    counts = Counter(r.kind for r in every_kind.definition.analysis.accesses)
    assert counts == {AccessKind.OWN_STORE: 2, AccessKind.OWN_LOAD: 1,
                      AccessKind.LAUNCH_PROVEN: 1, AccessKind.BOUNDS_CHECKED: 3,
                      AccessKind.MASKED_GATHER: 1}


@needs_disasm
@pytest.mark.toolchain
def test_a_load_through_a_tiled_view_of_an_input_is_bounds_checked(cache):
    [load] = [r for r in through_view.definition.analysis.accesses
              if r.line == line_of("view-load") and not r.writes]
    assert load.kind == AccessKind.BOUNDS_CHECKED and load.arrays == ("x",)
    assert "loads a tile of a tiled view of 'x'" in load.reason
    art = through_view.compile(F32.partition(256), F32, arch="sm_90", cache=cache)
    linked, loose = link_verdicts(art.accesses, art.validation.verdicts)
    assert not loose
    [v] = linked[art.accesses.index(load)]
    assert (v.access, v.param) == ("bounds-checked load", "x")


def test_a_persistent_store_names_the_minted_tile_and_refusals_record_nothing():
    def walk(z: tl.Out, x: tl.In):
        for t in z.tiles():
            z.store(tl.load_like(x, z, at=t), at=t)
    [store, _load] = tl.kernel(walk).definition.analysis.accesses
    assert "the tile t that z.tiles() handed to this block" in store.reason

    def bad(z: tl.Out, x: tl.In):
        z.store(tl.load_like(x, z))
        ct.store(x, index=(0,), tile=tl.load_like(x, z))
    with pytest.raises(tl.SafetyError) as ei:
        tl.kernel(bad)
    assert ei.value.rule == "write-input"          # recording changed no verdict


# ---- the validator's verdicts -------------------------------------------------------------

@pytest.fixture(scope="module")
def every_art(cache):
    return every_kind.compile(*EVERY, arch="sm_90", cache=cache)


@needs_disasm
@pytest.mark.toolchain
def test_the_validator_gives_every_memory_op_a_located_verdict(every_art):
    art = every_art
    verdicts = art.validation.verdicts
    assert all(v.accepted for v in verdicts) and verdicts == sorted(verdicts,
                                                                     key=lambda v: v.line)
    assert Counter(v.access for v in verdicts) == {"bounds-checked load": 5,
                                                   "masked gather": 1, "partition store": 2}
    stores = [v for v in verdicts if v.writes]
    assert [(v.param, v.location.line) for v in stores] == [
        ("acc", line_of("inout-store")), ("z", line_of("out-store"))]
    for v in stores:
        assert v.op == "store_view_tko" and "store_view_tko" in v.text and "loc(" not in v.text
        assert f"a store into partition '{v.param}'" in v.reason
        assert "through a view of exactly its pointer, shape and strides" in v.reason
    [gather] = [v for v in verdicts if v.op == "load_ptr_tko"]
    assert gather.param == "x" and "mask bounds every dimension by x.shape" in gather.reason
    lines = [v.line for v in verdicts]
    assert len(set(lines)) == len(lines)


@needs_disasm
@pytest.mark.toolchain
def test_each_record_links_to_its_own_tile_ir_ops(every_art):
    recs = every_art.accesses
    assert recs == every_kind.definition.analysis.accesses
    linked, loose = link_verdicts(recs, every_art.validation.verdicts)
    assert not loose
    want = {AccessKind.OWN_STORE: "partition store", AccessKind.OWN_LOAD: "bounds-checked load",
            AccessKind.LAUNCH_PROVEN: "bounds-checked load",
            AccessKind.BOUNDS_CHECKED: "bounds-checked load",
            AccessKind.MASKED_GATHER: "masked gather"}
    for i, r in enumerate(recs):
        [v] = linked[i]
        assert v.access == want[r.kind], r
        assert v.param == r.arrays[0] or r.function != "every_kind", (r, v)
        assert (v.location.line, v.location.col) == (r.line, r.col)


@needs_disasm
@pytest.mark.toolchain
def test_proven_loads_and_sub_tile_stores_have_their_own_verdicts(cache):
    art = proven.compile(*PROVEN, arch="sm_90", cache=cache)
    linked, loose = link_verdicts(art.accesses, art.validation.verdicts)
    assert not loose
    by_kind = {r.kind: linked[i] for i, r in enumerate(art.accesses)
               if r.line == line_of("nested")}
    [load] = by_kind[AccessKind.OWN_LOAD]
    [like] = by_kind[AccessKind.LAUNCH_PROVEN]       # the innermost access holds its op
    [store] = by_kind[AccessKind.OWN_STORE]
    assert (load.access, load.param) == ("unchecked load", "acc")
    assert (like.access, like.param) == ("unchecked load", "x")
    assert "the launch proves this load of 'x' in bounds" in like.reason
    assert "without bounds checks: the launch proved every tile whole" in store.reason
    sub = put.compile(*PUT, arch="sm_90", cache=cache)
    [v] = [v for v in sub.validation.verdicts if v.writes]
    assert v.access == "sub-tile store" and v.location.line == line_of("sub-tile")
    assert "from the guarded store of the sub_tile_store helper" in v.reason


@needs_disasm
@pytest.mark.toolchain
def test_a_cache_hit_keeps_the_verdicts_and_unsafe_kernels_have_none(cache, every_art):
    again = every_kind.compile(*EVERY, arch="sm_90", cache=cache)
    assert again.cache_hit and again.validation.verdicts == every_art.validation.verdicts
    raw = opt_outs.compile(F32, F32, arch="sm_90", cache=cache)
    assert raw.validation is None
    assert {r.kind for r in raw.accesses} == {AccessKind.UNSAFE} and len(raw.accesses) == 4


# ---- the view ----------------------------------------------------------------------------

class Marks(HTMLParser):
    """The access marks of the source column (class, text, title) and the page's text."""

    def __init__(self, page: str):
        super().__init__()
        self.marks: list[list] = []
        self.open: list[int | None] = []
        self.text = ""
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if tag == "span" and "tl-acc" in cls:
            self.marks.append([cls[-1], "", a.get("title", "")])
            self.open.append(len(self.marks) - 1)
        elif tag == "span":
            self.open.append(None)

    def handle_endtag(self, tag):
        if tag == "span" and self.open:
            self.open.pop()

    def handle_data(self, data):
        self.text += data
        for i in self.open:
            if i is not None:
                self.marks[i][1] += data


def test_mark_line_nests_marks_and_keeps_token_spans_balanced():
    hl = '<span class="tl-v">z</span>.store(<span class="tl-f">f</span>(x))'
    out = mark_line(hl, [(0, 13, "a", "outer"), (8, 12, "b", "inner")])
    assert out == ('<span class="a" title="outer"><span class="tl-v">z</span>.store('
                   '<span class="b" title="inner"><span class="tl-f">f</span>(x)</span>)'
                   "</span>")
    split = mark_line('<span class="tl-k">return</span>', [(2, 4, "m", "&<")])
    assert split == ('<span class="tl-k">re</span><span class="m" title="&amp;&lt;">'
                     '<span class="tl-k">tu</span></span><span class="tl-k">rn</span>')
    assert mark_line("a &lt; b", [(2, 3, "m", "")]) == 'a <span class="m" title="">&lt;</span> b'
    assert mark_line("x", []) == "x"


@needs_disasm
@pytest.mark.toolchain
def test_the_view_marks_every_access_and_shows_each_verdict(every_art):
    k = build_kernel_report(every_kind, EVERY, arch="sm_90", force=False, launches=1,
                            signature="...", views=("safety",))
    page = safety_section(k, lambda f: "In[3]" if f == str(THIS) else f)
    m = Marks(page)
    texts = {(cls, text) for cls, text, _title in m.marks}
    for cls, text in (("tl-acc-own-load", "acc.load()"),
                      ("tl-acc-launch-proven", "tl.load_like(x, z)"),
                      ("tl-acc-masked-gather", "ct.gather(x, i)"),
                      ("tl-acc-own-store", "acc.store(a + t)")):
        assert (cls, text) in texts, (cls, text)
    assert len(m.marks) == len(every_kind.definition.analysis.accesses)
    assert any(t.startswith("launch-proven read: tl.load_like(x, z) reads") for *_x, t in m.marks)
    # the legend counts every kind, zero included
    legend = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.split("tl-safety-legend", 1)[1]
                                        .split("</div>", 1)[0]))
    for label, n in (("own-tile store", 2), ("own-tile load", 1), ("launch-proven read", 1),
                     ("bounds-checked read", 3), ("masked gather", 1), ("unsafe opt-out", 0)):
        assert f"{label} {n}" in legend, (label, legend)
    assert "Tile IR validator: 8 memory ops, 8 accepted" in m.text
    # each verdict, linked to its source line; the writes' reasons spelled out
    for v in every_art.validation.verdicts:
        assert f"IR {v.line}" in m.text
    assert m.text.count("✓") >= 2 * 8 and "✗" not in m.text
    assert "a store into partition 'z' (tl.Out, one the lowering stores into)" in m.text
    row = next(r for r in page.split("\n") if "store_view_tko" in r and "tl-row" in r)
    assert re.search(r'href="#tl[0-9a-f]+-L%d"' % line_of("inout-store"), row)
    assert "in helper first_tile()" in m.text and "In[3]" in m.text
    text = safety_text(k, str)
    assert text.startswith("accesses: 2 own-tile store, 1 own-tile load, 1 launch-proven "
                           "read, 3 bounds-checked read, 1 masked gather")
    assert "Tile IR validator: 8 memory ops, 8 accepted" in text


@pytest.mark.toolchain
def test_an_unsafe_kernels_view_says_it_was_not_validated(cache):
    k = build_kernel_report(opt_outs, (F32, F32), arch="sm_90", force=False, launches=1,
                            signature="...", views=("safety",))
    page = safety_section(k, str)
    m = Marks(page)
    assert {cls for cls, *_ in m.marks} == {"tl-acc-unsafe"} and len(m.marks) == 4
    assert "Tile IR validator: not run" in m.text and "not validated (unsafe=True)" in m.text
    assert "unsafe opt-out 4" in re.sub(r"\s+", " ", m.text)


def test_the_tab_is_registered_and_themed():
    from tilelab.lab.report.options import DEFAULT_VIEWS, VIEWS, parse_show

    assert "safety" in VIEWS and "safety" in DEFAULT_VIEWS and parse_show("safety") == ("safety",)
    view = TileView(build_panels(CellReport(views=("safety",))), "h")
    assert view.panel("safety").title == "Safety"
    assert CSS in view.to_html()
    # colours: translucent tints and mid-tone lines only (both themes), text keeps --tl-fg
    assert not re.search(r"(?<!-)color:\s*#", CSS)
    for kind in AccessKind:
        assert f".tl-acc-{kind.value} {{" in CSS


# ---- the exported page -----------------------------------------------------------------

@pytest.fixture(scope="module")
def shell():
    IPython = pytest.importorskip("IPython")
    import tilelab.lab as lab

    sh = IPython.core.interactiveshell.InteractiveShell.instance()
    lab.load_ipython_extension(sh)
    yield sh
    lab.unload_ipython_extension(sh)


CELL = '''%%tile --show safety
import tilelab as tl
from tilelab import config
def add(z: tl.Out, x: tl.In, y: tl.In):
    z.store(tl.load_like(x, z) + tl.load_like(y, z))
x = tl.arange(1024, dtype="float32"); z = tl.empty(1024, dtype="float32")
add(z.partition(256), x, x)
'''


@needs_disasm
@pytest.mark.toolchain
def test_the_exported_notebook_shows_the_safety_view(shell):
    nbformat = pytest.importorskip("nbformat")
    nbconvert = pytest.importorskip("nbconvert")
    from IPython.utils.capture import capture_output

    with config.override(backend="cpu", lab_view=config.DEFAULT), capture_output() as cap:
        res = shell.run_cell(CELL, store_history=True)
    assert res.success, res.error_in_exec
    [data] = [o.data for o in cap.outputs if "tilelab-view" in o.data.get("text/html", "")]
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(CELL)
    cell.outputs = [nbformat.v4.new_output("display_data", data=data)]
    nb.cells = [cell]
    body, _ = nbconvert.HTMLExporter(template_name="lab").from_notebook_node(nb)
    view = body[body.index('<div class="tilelab-view tilelab-static"'):]
    assert 'data-view="safety"' in view and ">Safety</label>" in view
    m = Marks(view)
    got = [(cls, text) for cls, text, _ in m.marks]
    assert got == [("tl-acc-own-store", "z.store(tl.load_like(x, z) + tl.load_like(y, z))"),
                   ("tl-acc-launch-proven", "tl.load_like(x, z)"),
                   ("tl-acc-launch-proven", "tl.load_like(y, z)")]
    assert "own-tile store 1" in re.sub(r"\s+", " ", m.text)
    assert "partition store of z" in m.text and "accepted" in m.text
    # offline: the view's page refers to nothing outside itself
    own = data["text/html"].replace('xmlns="http://www.w3.org/2000/svg"', "")
    for ref in ("http://", "https://", "<script", "<link", "@import", "url("):
        assert ref not in own, ref
