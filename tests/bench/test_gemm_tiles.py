"""benchmarks/device/gemm_tiles.py names the two tile shapes default_config chooses between."""
from __future__ import annotations

import importlib

from tilelab.kernels.matmul.config import default_config

gemm_tiles = importlib.import_module("benchmarks.device.gemm_tiles")


def test_variants_are_the_defaults_either_side_of_the_big_rule():
    v = gemm_tiles.tile_variants()
    assert v["128x128"] == default_config(8192, 8192, 8192)
    assert v["128x256_ws"] == default_config(16384, 16384, 16384)
    assert {default_config(*s) for s in gemm_tiles.SHAPES} == set(v.values())
