"""The Resources tab (lab issue #38, item 10): how many blocks fit per SM, what limits
them, the occupancy, per target arch — and ``min blocks/SM`` said to be the compiler hint
it is."""
from __future__ import annotations

import doctest
import itertools
import re

import pytest

import tilelab as tl
import tilelab.lab.views.resources_view as resources_module
from tilelab.compiler.binary.resources import Resources
from tilelab.lab.report.cell_report import CellReport, build_kernel_report
from tilelab.lab.views.panels import build_panels
from tilelab.lab.views.resources_view import (HINT, base_arch, occupancy, resources_html,
                                              resources_text)
from tilelab.perf.predict_model import SM_LIMITS, blocks_per_sm


def test_the_count_is_the_time_predictions_and_each_limit_is_its_own_division():
    for arch, threads, regs, shared in itertools.product(
            SM_LIMITS, (32, 128, 256, 384, 1024), (None, 16, 40, 64, 128, 255),
            (0, 9296, 48 * 1024, 107824)):
        if regs and regs * threads > SM_LIMITS[arch].registers:
            continue                                   # ptxas never makes such a kernel
        if shared > SM_LIMITS[arch].shared_bytes:
            continue
        r = Resources("k", arch + "a", registers=regs, block_dim=(threads, 1, 1),
                      shared_bytes=shared)
        occ = occupancy(r)
        assert occ.blocks == blocks_per_sm(arch, threads, regs, shared or None)[0]
        fits = [l.fits for l in occ.limits if l.fits is not None]
        assert occ.blocks == min(fits)
        lim = SM_LIMITS[arch]
        assert occ.max_warps == lim.threads // 32
        assert occ.warps == occ.blocks * -(-threads // 32) <= occ.max_warps
        assert 0 < occ.occupancy <= 1


@pytest.mark.parametrize("res, blocks, limit, occ_text", [
    (Resources("k", "sm_90a", registers=255, block_dim=(256, 1, 1), shared_bytes=107824),
     1, ("registers",), "8 of 64 warps = 12.5%"),
    (Resources("k", "sm_90a", registers=32, block_dim=(128, 1, 1), shared_bytes=100 * 1024),
     2, ("shared memory",), "8 of 64 warps = 12.5%"),
    (Resources("k", "sm_90", registers=16, block_dim=(128, 1, 1)),
     16, ("threads",), "64 of 64 warps = 100%"),
    (Resources("k", "sm_90", registers=16, block_dim=(32, 1, 1)),
     32, ("block slots",), "32 of 64 warps = 50%"),
    (Resources("k", "sm_120", registers=64, block_dim=(256, 1, 1)),
     4, ("registers",), "32 of 48 warps = 66.7%"),
])
def test_blocks_limit_and_occupancy(res, blocks, limit, occ_text):
    occ = occupancy(res)
    assert (occ.blocks, occ.limited_by) == (blocks, limit)
    assert occ.summary() == (f"blocks/SM that fit: {blocks} (limited by {limit[0]}), "
                             f"occupancy {occ_text}")


def test_tied_limits_are_named_together_and_reserved_shared_memory_counts():
    occ = occupancy(Resources("k", "sm_90", registers=32, block_dim=(128, 1, 1)))
    assert occ.limited_by == ("registers", "threads") and "registers and threads" in occ.summary()
    occ = occupancy(Resources("k", "sm_90", registers=16, block_dim=(128, 1, 1),
                              shared_bytes=57 * 1024, reserved_shared_bytes=1024))
    assert occ.blocks == 3 and occ.limited_by == ("shared memory",)     # 228 // 58 KiB


def test_arch_is_the_compiles_and_unknown_limits_are_said():
    assert base_arch("sm_100a") == "sm_100" and base_arch("sm_90") == "sm_90"
    r = Resources("k", "sm_86", registers=32, block_dim=(128, 1, 1))
    assert occupancy(r) is None
    assert "unknown for sm_86" in resources_text(r) and "sm_90" in resources_text(r)
    assert occupancy(r, "sm_90a").arch == "sm_90"
    assert "no threads per block" in resources_text(Resources("k", "sm_90"))


def test_min_blocks_per_sm_is_explained_as_a_hint_not_shown_as_a_count():
    r = Resources("k", "sm_90a", registers=255, block_dim=(256, 1, 1), min_blocks_per_sm=1)
    page = resources_html(r)
    listing = re.search(r'<pre class="tl-code">(.*?)</pre>', page, re.S).group(1)
    assert "min blocks/SM" not in listing
    assert "min blocks/SM 1: a compiler hint (PTX .minnctapersm" in page
    assert "it is not how many fit" in HINT
    assert "blocks/SM that fit: 1 (limited by registers)" in page
    table = re.search(r"<table class=\"tl-table tl-occupancy\">.*?</table>", page, re.S).group(0)
    names = re.findall(r"<tr[^>]*><td>([a-z ]+)</td>", table)
    assert names == ["registers", "shared memory", "threads", "block slots"]
    assert '<tr class="tl-limit"><td>registers</td>' in table
    text = resources_text(r)
    assert text.count("min blocks/SM") == 1 and "compiler hint" in text


@tl.kernel
def triple(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) * 3)


@pytest.mark.toolchain
def test_the_resources_tab_of_a_compiled_kernel():
    spec = tl.spec(1024, "float32")
    k = build_kernel_report(triple, (spec.partition(128), spec), arch="sm_90", force=False,
                            launches=0, signature="z, x", views=("resources",))
    panel = build_panels(CellReport(views=("resources",), kernels=[k]))[0]
    occ = occupancy(k.artifacts.resources, "sm_90")
    assert occ is not None and occ.arch == "sm_90"
    assert occ.summary() in panel.html and occ.summary() in panel.text
    assert "tl-occupancy" in panel.html and "toolchain:" in panel.html


def test_doctests():
    assert doctest.testmod(resources_module).failed == 0
