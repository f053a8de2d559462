"""The IR views (lab issue #38, item 8): a source column as wide as its code, SASS packed
and linked only to the kernel's lines, a count and a jump for a source line's many
partners, PTX set-up folded without line information, grid-dependency and token ops
folded or explained, and what each Tile IR op does in its tooltip."""
from __future__ import annotations

import doctest
import html
import linecache
import re
from types import SimpleNamespace as NS

import pytest

import tilelab as tl
import tilelab.lab.views.listings as listings_module
import tilelab.lab.views.tileir_ops as ops_module
from tilelab.lab.report.cell_report import CellReport, build_kernel_report
from tilelab.lab.report.debuginfo import IRLine
from tilelab.lab.report.options import VIEWS
from tilelab.lab.views.linked import folded_listing, linked_section
from tilelab.lab.views.listings import device_lines, fold_label, sass_lines, short_file
from tilelab.lab.views.panels import build_panels
from tilelab.lab.views.tabs import CSS
from tilelab.lab.views.tileir_ops import OPS, describe_op, op_name

CELL = "<cell-ir-views>"
# a cell: a helper, a kernel, host code below it (line numbers are the cell's)
CELL_TEXT = """import tilelab as tl
def twice(t):
    return t * 2

def k(z: tl.Out, x: tl.In):
    z.store(twice(tl.load_like(x, z)))

M = N = K = 256
"""
KERNEL = NS(source_file=CELL, source_first_line=5, arch="sm_90",
            source_lines=tuple(CELL_TEXT.splitlines(True)[4:6]))


@pytest.fixture(autouse=True)
def _cell_in_linecache():
    linecache.cache[CELL] = (len(CELL_TEXT), None, CELL_TEXT.splitlines(True), CELL)
    yield
    linecache.cache.pop(CELL, None)


def _sass(*groups: tuple[int, int]) -> str:
    """nvdisasm-like text: per (line, n) n instructions after a File comment."""
    out, addr = [".section .text.k", "k:"], 0
    for line, n in groups:
        out.append(f'\t//## File "{CELL}", line {line}')
        for _ in range(n):
            out.append(f"        /*{addr:04x}*/                   UMOV UR13, 0x80000020 ;")
            addr += 16
    return "\n".join(out)


def _rows(page: str) -> list[str]:
    return re.findall(r'<span class="tl-row[^"]*"[^>]*>.*?</span>(?=\n|</pre>|</details>)',
                      page)


# ------------------------------------------------------------------ source column width

def test_source_column_is_sized_to_its_code_and_capped_at_half():
    page = linked_section(KERNEL, [IRLine("%0 = addf %a, %b", CELL, 6, 0)], str)
    widest = max(len(l.rstrip("\n")) for l in KERNEL.source_lines)
    assert f'class="tl-col tl-col-src" style="--tl-src-ch: {widest}"' in page
    assert 'class="tl-col tl-col-ir"' in page
    rule = re.search(r"\.tl-col-src \{([^}]*)\}", CSS).group(1)
    assert "var(--tl-src-ch" in rule and "min(50%" in rule and "1ch" in rule
    assert re.search(r"\.tl-col-ir \{ flex: 1 1 0; \}", CSS)       # the listing takes the rest
    # narrow outputs stack the two columns, the source at full width
    assert re.search(r"@container \(max-width: 779px\) \{[^@]*flex-direction: column", CSS)


# ------------------------------------------------------------------ SASS

def test_sass_padding_is_packed_into_address_predicate_instruction():
    text = ("        /*0040*/                   @P0 BRA `(.L_x_1) ;\n"
            "        /*0050*/                   S2UR UR10, SR_CgaCtaId ;\n"
            "        /*0060*/              @!UP0 HGMMA.64x64x16.F32 R24, gdesc[UR12], R24 ;")
    got = [l.text for l in sass_lines(text)]
    assert got == ["/*0040*/   @P0 BRA `(.L_x_1) ;", "/*0050*/       S2UR UR10, SR_CgaCtaId ;",
                   "/*0060*/ @!UP0 HGMMA.64x64x16.F32 R24, gdesc[UR12], R24 ;"]
    assert all(l.index("/*") == 0 for l in got)        # no leading gap either


def test_sass_lines_naming_host_code_are_not_linked():
    lines = sass_lines(_sass((6, 2), (8, 3), (6, 1)))     # line 8: M = N = K = 256
    page = linked_section(KERNEL, lines, str, kind="sass", title="SASS",
                          device=device_lines(KERNEL, [IRLine("x", CELL, 6, 0)]))
    anchor = re.search(r'id="(tl[0-9a-f]{12})"', page).group(1)
    assert f'href="#{anchor}-L6"' in page
    assert f'href="#{anchor}-L8"' not in page and "tl-l8" not in page
    assert f'id="{anchor}-L8"' not in page               # host line not in the source column
    host_rows = [r for r in _rows(page) if 'class="tl-ln">·<' in r]
    assert len(host_rows) == 3
    assert all("line 8: host code" in html.unescape(r) for r in host_rows)
    assert "3 lines whose line information names host code, not linked" in page


def test_device_lines_are_the_kernel_and_the_helpers_the_tile_ir_names():
    # the Tile IR names line 3 (inside the helper twice): its whole body is device code
    assert device_lines(KERNEL, [IRLine("%1 = mulf", CELL, 3, 0)]) == {2, 3, 5, 6}
    assert device_lines(KERNEL, []) == {5, 6}              # no helper named: the kernel only
    assert 8 not in device_lines(KERNEL, [IRLine("%1 = mulf", CELL, 3, 0)])


def test_a_helper_line_in_the_sass_is_linked_and_shown_after_the_kernel():
    lines = sass_lines(_sass((6, 1), (3, 2)))
    page = linked_section(KERNEL, lines, str, kind="sass", title="SASS",
                          device=device_lines(KERNEL, [IRLine("%1 = mulf", CELL, 3, 0)]))
    anchor = re.search(r'id="(tl[0-9a-f]{12})"', page).group(1)
    assert f'href="#{anchor}-L3"' in page and f'id="{anchor}-L3"' in page
    assert "⋮" in page


def test_tilelab_helper_files_are_named_by_their_module():
    assert short_file("<tilelab-device helpers device.py:1 daa3626a12>") == "device.py"
    lines = [IRLine("/*0010*/ NOP ;", "<tilelab-device helpers device.py:1 daa3626a12>", 176, 0)]
    page = linked_section(KERNEL, lines, str, kind="sass", title="SASS")
    assert ">device.py:176<" in page and "daa3626a12" in page.split("title=")[-1]


# ------------------------------------------------------------------ count and jump

def test_hovering_a_source_line_shows_its_count_and_jumps_to_each_partner_in_turn():
    lines = sass_lines(_sass((6, 3), (5, 1), (6, 2)))
    page = linked_section(KERNEL, lines, str, kind="sass", title="SASS")
    anchor = re.search(r'id="(tl[0-9a-f]{12})"', page).group(1)
    src6 = re.search(rf'<span class="tl-row tl-l6" id="{anchor}-L6".*?</span>\n', page,
                     re.S).group(0)
    assert f'<a class="tl-jump" href="#{anchor}-p6-0">5 SASS lines — first ↓</a>' in src6
    steps = re.findall(rf'id="{anchor}-p6-(\d)".*?<a class="tl-jump" href="#{anchor}-p6-(\d)">'
                       rf"(\d)/5 (next ↓|↑ first)</a>", page)
    assert steps == [("0", "1", "1", "next ↓"), ("1", "2", "2", "next ↓"),
                     ("2", "3", "3", "next ↓"), ("3", "4", "4", "next ↓"),
                     ("4", "0", "5", "↑ first")]
    # a line with one partner: its count and the jump, no chain
    assert f'href="#{anchor}-p5-0">1 SASS line — first ↓</a>' in page
    assert "1/1" not in page
    # the badge shows on hover only, and sticks to the visible edge of a scrolled pane
    assert re.search(r"\.tl-jump \{ display: none; position: sticky", CSS)
    assert ".tl-row:hover > .tl-jump { display: inline-block; }" in CSS


def test_partners_inside_a_fold_are_counted_and_left_out_of_the_chain():
    ir = [IRLine(f"  %a{i} = assume div_by<16>, %arg{i} : tile<i32>", CELL, 5, 0)
          for i in range(5)] + [IRLine("  %1 = addf %t, %u : tile<256xf32>", CELL, 5, 0)]
    page = linked_section(KERNEL, ir, str)
    assert "6 Tile IR lines (5 folded) — first ↓" in page
    anchor = re.search(r'id="(tl[0-9a-f]{12})"', page).group(1)
    assert page.count(f'id="{anchor}-p5-') == 1           # only the visible partner


# ------------------------------------------------------------------ folds and tooltips

def test_grid_dependency_ops_are_folded_with_the_set_up_and_named():
    ir = [IRLine("  %0 = make_token : token", CELL, 5, 0),
          IRLine("  %assume = assume div_by<16>, %arg0 : tile<ptr<f32>>", CELL, 5, 0),
          IRLine("  %tview = make_tensor_view %assume, shape = [%a] : tensor_view<?xf32>",
                 CELL, 5, 0),
          IRLine("  %1 = gdc_wait_tko token = %0 -> token", CELL, 6, 0),
          IRLine("  %2 = gdc_launch_dependents_tko token = %1 -> token", CELL, 6, 0),
          IRLine("  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>",
                 CELL, 6, 0)]
    page = linked_section(KERNEL, ir, str)
    fold = re.search(r'<details class="tl-fold"><summary>(.*?)</summary>(.*?)</details>',
                     page, re.S)
    assert fold.group(1) == ("⋯ 5 set-up lines (tokens, argument assumptions, tensor views, "
                             "grid-dependency control): show")
    assert "gdc_wait_tko" in fold.group(2)
    after = page.split("</details>")[1]
    assert "gdc_" not in after.split("title=")[0] and "get_tile_block_id" in after
    assert "grid-dependency control: wait until the previous kernel" in html.unescape(page)


def test_join_tokens_is_dimmed_and_explained():
    ir = [IRLine("  %4 = join_tokens %0, %2, %1 : token", CELL, 6, 0),
          IRLine("  %8 = mmaf %tile, %tile_43, %iterArg0 : tile<64x32xf16>", CELL, 6, 0)]
    page = linked_section(KERNEL, ir, str)
    # a tooltip of several lines keeps its row on one line of the page
    assert "&#10;" in page and not re.search(r'title="[^"]*\n', page)
    rows = _rows(page)
    join, mma = [html.unescape(r) for r in rows if "tl-col" not in r][-2:]
    assert join.startswith('<span class="tl-row tl-aux tl-l6"')
    assert "join_tokens: join memory-ordering tokens" in join and "no instruction" in join
    assert 'class="tl-row tl-l6"' in mma and "mmaf: matrix multiply-accumulate" in mma
    assert ".tilelab-view .tl-aux { opacity: .6; }" in CSS


def test_op_names_and_descriptions():
    assert op_name("  %for = for %loopIdx in (%a to %b, step %c) : tile<i32> {") == "for"
    assert op_name("  continue %8 : tile<64x64xf32>") == "continue"
    assert op_name("}") is None and describe_op("}") is None
    assert describe_op("  %x = frobnicate %a") is None
    assert OPS["addf"] == "element-wise addition of float tiles"
    assert OPS["maxi"] == "element-wise maximum of integer tiles"


def test_ptx_without_line_information_folds_its_declarations():
    ptx = "\n".join([".version 9.4", ".target sm_90a", ".address_size 64", "",
                     ".visible .entry k_Kt1_A1f32_1i16t1_p16_A1f32_1i16t1_p16_I256("]
                    + [f".param .u32 k_Kt1_A1f32_1i16t1_p16_A1f32_1i16t1_p16_I256_param_{i},"
                       for i in range(14)]
                    + [".hidden\t.param .align 64 .b8 k_Kt1_A1f32_1i16t1_p16_A1f32_1i16t1_p16"
                       "_I256_param_15[128]", ")", ".reqntid 128", ".minnctapersm 1", "{",
                       ".reg .b32 \t%r<9>;", "ld.param.b32 \t%r1, [k_param_7];",
                       "mov.u32 \t%r2, %tid.x;", "ret;", "}"])
    page = folded_listing(ptx, "ptx")
    fold = re.search(r"<details class=\"tl-fold\"><summary>(.*?)</summary>(.*?)</details>",
                     page, re.S)
    assert fold.group(1).startswith("⋯ 26 set-up lines (module header, declarations, "
                                    "parameters, launch directives, parameter loads)")
    rest = page.split("</details>")[1]
    assert ".param" not in rest and "mov" in rest and "ret" in rest
    assert '<span class="tl-dim">…</span>' in page and 'class="tl-e">…' not in page
    assert fold_label("ptx", ".hidden\t.param .align 64 .b8 p[128],") == "parameters"


# ------------------------------------------------------------------ a real kernel

@tl.kernel
def double(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) * 2)


@pytest.fixture(scope="module")
def report() -> CellReport:
    spec = tl.spec(1024, "float32")
    k = build_kernel_report(double, (spec.partition(128), spec), arch="sm_90", force=False,
                            launches=0, signature="z, x", views=VIEWS)
    return CellReport(cell_name="In[1]", views=VIEWS, kernels=[k])


@pytest.mark.toolchain
def test_every_op_of_a_real_listing_is_described(report):
    k = report.kernels[0]
    if k.ir_problem:
        pytest.skip(k.ir_problem)
    names = {op_name(l.text) for l in k.ir_lines} - {None}
    assert names and names <= set(OPS), names - set(OPS)


@pytest.mark.toolchain
def test_real_panels_fold_ptx_and_pack_sass(report):
    panels = {p.key: p for p in build_panels(report)}
    ptx = panels["ptx"].html
    assert '<details class="tl-fold">' in ptx
    visible = re.sub(r"<details.*?</details>", "", ptx, flags=re.S)
    assert ".param" not in re.sub(r'title="[^"]*"', "", visible)
    k = report.kernels[0]
    if k.sass is not None:
        sass = panels["sass"].html
        assert not re.search(r"\*/\s{8,}\w", re.sub(r"<[^>]+>", "", sass))


@pytest.mark.parametrize("module", [listings_module, ops_module])
def test_doctests(module):
    assert doctest.testmod(module).failed == 0
