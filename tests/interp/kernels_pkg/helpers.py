"""Tile helpers in another module, referring to cuda.tile under a different alias."""
import cuda.tile as cutile
from cuda.tile import load as tile_load


def load_row(x, row, width):
    return tile_load(x, (row, 0), (1, width), padding_mode=cutile.PaddingMode.ZERO)


def scale(t, factor):
    return t * factor
