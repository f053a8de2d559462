"""Tile IR, PTX and SASS listings: boilerplate folded, long names shortened with the full
text on demand, and every located line linked to its source line both ways."""
from __future__ import annotations

import doctest
import re
from types import SimpleNamespace as NS

import tilelab.lab.views.linked as linked_module
from tilelab.lab.report.debuginfo import IRLine
from tilelab.lab.views.linked import (is_boilerplate, linked_section, ptx_lines, sass_lines,
                                      shorten)

NAME = "add_Kt1_A1f32_1i16t1_p16_A1f32_1i16t1_p16_A1f32_1i16t1_p16_I256"
KERNEL = NS(source_file="<cell>", source_first_line=3, arch="sm_90",
            source_lines=("def add(z, x, y):\n", "    z.store(x.load() + y.load())\n"))

TILEIR = [IRLine(f"entry @{NAME}(%arg0: tile<ptr<f32>>)", None, None, None)] + [
    IRLine(f"  %assume_{i} = assume div_by<16>, %arg{i} : tile<i32>", "<cell>", 3, 0)
    for i in range(6)] + [
    IRLine("  %tview = make_tensor_view %assume_0, shape = [%a] : tensor_view<?xf32>",
           "<cell>", 3, 0),
    IRLine("  %1 = addf %tile, %tile_20  : tile<256xf32>", "<cell>", 4, 25),
    IRLine("  return", None, None, None)]


def test_boilerplate_is_folded_into_a_collapsed_details_block():
    page = linked_section(KERNEL, TILEIR, str)
    folds = re.findall(r"<details class=\"tl-fold\">(.*?)</details>", page, re.S)
    assert len(folds) == 1 and "7 set-up lines" in folds[0]
    assert "<details open" not in page                  # collapsed by default
    work = page.split("</details>")[1]
    assert "addf" in work and "assume" not in work      # the work stays in view


def test_long_names_are_shortened_with_the_full_text_in_the_tooltip():
    page = linked_section(KERNEL, TILEIR, str)
    assert NAME not in re.sub(r'title="[^"]*"', "", page)   # not in the visible text
    assert f'title="entry @{NAME}' in page                    # on demand
    assert len(shorten(NAME)) <= 26


def test_located_lines_link_to_the_source_and_share_its_colour():
    page = linked_section(KERNEL, TILEIR, str)
    anchor = re.search(r'id="(tl[0-9a-f]{12})"', page).group(1)
    assert f'href="#{anchor}-L4"' in page and f'id="{anchor}-L4"' in page   # listing → source
    assert f"#{anchor}:has(.tl-l4:hover) .tl-l4" in page                     # source → listing
    bars = set(re.findall(r'tl-l4"[^>]*border-left-color: (hsl\([^)]*\))', page))
    assert len(bars) == 1                       # one colour for line 4 on both sides


SASS = f""".target sm_90a
        .section .text.{NAME},"ax",@progbits
        .align 128
        .global {NAME}
        .type {NAME},@function
{NAME}:
	//## File "<cell>", line 3
        /*0000*/                   LDC R1, c[0x0][0x28] ;
	//## File "<cell>", line 4
        /*0010*/                   FADD R0, R2, R3 ;
        /*0020*/                   EXIT ;"""


def test_sass_lines_are_located_by_the_disassemblers_file_comments():
    lines = sass_lines(SASS)
    located = [(l.text.split()[1], l.line) for l in lines if l.line]
    assert located == [("LDC", 3), ("FADD", 4), ("EXIT", 4)]
    assert all("//## File" not in l.text for l in lines)
    page = linked_section(KERNEL, lines, str, kind="sass", title="SASS")
    assert "set-up lines (section directives)" in page and 'href="#' in page


def test_ptx_loc_directives_locate_lines_and_map_to_the_users_file():
    ptx = '.file 1 "lowered.py"\n.loc 1 10 4\nadd.rn.f32 %r1, %r9, %r11;\nret;'
    lines, found = ptx_lines(ptx, lambda f, l, c: ("<cell>", l - 6, c) if f == "lowered.py"
                             else None)
    assert found and [(l.text, l.line) for l in lines if l.line] == [
        ("add.rn.f32 %r1, %r9, %r11;", 4), ("ret;", 4)]
    _, found = ptx_lines(".version 9.4\nret;")
    assert not found                            # then the tab says PTX has no line info


def test_boilerplate_classes():
    assert is_boilerplate("ptx", ".reg .b32 	%r<13>;")
    assert is_boilerplate("sass", "        .align 128")
    assert not is_boilerplate("sass", "        /*0010*/  FADD R0, R2, R3 ;")
    assert not is_boilerplate("python", "anything")


def test_doctests():
    result = doctest.testmod(linked_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted >= 10
