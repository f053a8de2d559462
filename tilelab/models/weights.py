"""Memory-mapped tensors of ``*.safetensors`` files, zero-copy, in their stored dtype.

The ``safetensors`` library checks each file (header syntax, offsets in bounds and
non-overlapping, sizes matching dtype and shape). Its numpy reader cannot make bfloat16
arrays and copies the data, so the bytes are read another way: the file is mapped once
with :class:`numpy.memmap` (read-only) and each tensor is a view of that mapping at the
offsets the header gives (8-byte little-endian header length, the JSON header, then the
data), with :data:`ml_dtypes.bfloat16` for ``BF16``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

from .errors import CheckpointError

__all__ = ["TensorEntry", "SafetensorsFile", "NUMPY_DTYPES"]

# safetensors dtype code -> numpy dtype, for the dtypes the engine reads
NUMPY_DTYPES = {"BF16": np.dtype(ml_dtypes.bfloat16), "F16": np.dtype("<f2"),
                "F32": np.dtype("<f4")}


@dataclass(frozen=True)
class TensorEntry:
    """Where one tensor lives: its file, safetensors dtype code, shape and byte range
    (from the start of the data section).

    Example:
        >>> TensorEntry(Path("model.safetensors"), "BF16", (4, 8), 0, 64).nbytes
        64
    """

    file: Path
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def nbytes(self) -> int:
        """The size of the tensor's data in bytes."""
        return self.end - self.begin


class SafetensorsFile:
    """One ``.safetensors`` file: its tensor table, and views of its mapped bytes.

    Example:
        >>> f = SafetensorsFile("ckpt/model.safetensors")  # doctest: +SKIP
        >>> f.array("model.norm.weight").dtype  # doctest: +SKIP
        dtype(bfloat16)
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise CheckpointError("no such weights file", path=self.path)
        _validate(self.path)
        self.data_start, self.entries = _read_header(self.path)
        self._map: np.memmap | None = None

    def names(self) -> list[str]:
        """The names of the tensors in this file, sorted."""
        return sorted(self.entries)

    def mapping(self) -> np.memmap:
        """The whole file mapped read-only as bytes (made on first use)."""
        if self._map is None:
            self._map = np.memmap(self.path, dtype=np.uint8, mode="r")
        return self._map

    def array(self, name: str) -> np.ndarray:
        """The tensor ``name`` as a read-only view of the mapping (no copy).

        Raises CheckpointError for a dtype other than BF16, F16 and F32.
        """
        entry = self.entries[name]
        dtype = NUMPY_DTYPES.get(entry.dtype)
        if dtype is None:
            raise CheckpointError(f"tensor {name!r} has dtype {entry.dtype}, which is not "
                                  "supported", path=self.path, key=name,
                                  hint="tilelab.models reads BF16, F16 and F32 weights; "
                                       "convert the checkpoint with torch first")
        start = self.data_start + entry.begin
        raw = self.mapping()[start:start + entry.nbytes]
        return raw.view(dtype).reshape(entry.shape)


def _validate(path: Path) -> None:
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            f.keys()
    except (SafetensorError, OSError) as e:
        raise CheckpointError(f"not a valid safetensors file ({e})", path=path,
                              hint="the file may be truncated; download it again") from None


def _read_header(path: Path) -> tuple[int, dict[str, TensorEntry]]:
    with open(path, "rb") as fh:
        length = int.from_bytes(fh.read(8), "little")
        header = json.loads(fh.read(length))
    entries = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        entries[name] = TensorEntry(path, info["dtype"], tuple(info["shape"]), begin, end)
    return 8 + length, entries
