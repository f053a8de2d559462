"""GPU ceilings for rooflines: an immutable table in which every number names its source.

Why this module exists: a roofline is only as honest as its ceilings, and vendor sheets make
three traps easy to fall into. Tensor-core rates are usually printed *with* 2:4 structured
sparsity (twice the dense rate); GeForce parts run FP16/FP8 with FP32 accumulation at half the
rate of FP16 accumulation; memory sizes are binary (GiB) while bandwidths are decimal (TB/s).
So every rate here is a :class:`Peak` that holds the dense and the sparse figure separately,
every precision key names its accumulator, and every number is a :class:`Figure` or
:class:`Peak` carrying a :class:`Source` (document, URL, and a note on how it was read).

Units: bandwidth in B/s (decimal), sizes in bytes, clocks in Hz, rates in FLOP/s (OP/s for
INT8). The table is the vendors' peak numbers; measured ceilings of the machine at hand are
built with :func:`measured_spec` from numbers the runtime layer measures.

Example:
    >>> h200 = lookup_gpu("H200 SXM")
    >>> h200.bandwidth / 1e12, h200.peak("bf16") / 1e12, h200.peak("bf16", Density.SPARSE) / 1e12
    (4.8, 989.5, 1979.0)
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from enum import Enum
from types import MappingProxyType
from typing import Iterable, Mapping

from tilelab.errors import TilelabError

__all__ = [
    "Density", "Precision", "PRECISIONS", "Source", "Figure", "Peak", "GPUSpec",
    "GPUS", "ROOFLINE_GPUS", "lookup_gpu", "spec_for_device", "measured_spec",
    "check_precision", "all_specs", "UnknownGPUError", "UnknownPrecisionError",
    "UnsupportedPrecisionError",
    "GiB", "MiB",
]

GiB = 1 << 30
MiB = 1 << 20


# --------------------------------------------------------------------------- errors

class UnknownGPUError(TilelabError, KeyError):
    """A GPU name that is neither a key, an alias nor a known CUDA device name.

    It is a KeyError (a failed lookup) and a TilelabError (one ``except`` catches all of
    tilelab's errors); its message lists the known GPUs.

    Example:
        >>> try:
        ...     lookup_gpu("rtx 9090")
        ... except KeyError as e:
        ...     print(str(e).splitlines()[0])
        unknown GPU 'rtx 9090'
    """


class UnknownPrecisionError(TilelabError, ValueError):
    """A precision key outside the closed vocabulary of :data:`PRECISIONS` (usually a typo).

    Example:
        >>> try:
        ...     check_precision("bf61")
        ... except ValueError as e:
        ...     print(str(e).splitlines()[0])
        unknown precision 'bf61'
    """


class UnsupportedPrecisionError(TilelabError, KeyError):
    """The GPU has no ceiling for this precision (A100 has no FP8 tensor cores, ...).

    Example:
        >>> try:
        ...     lookup_gpu("a100").peak("fp8")
        ... except KeyError as e:
        ...     print(str(e).splitlines()[0])
        NVIDIA A100 80GB SXM has no fp8 rate (FP8 tensor, FP32 accumulate)
    """


# --------------------------------------------------------------------------- vocabulary

class Density(str, Enum):
    """Whether a tensor-core rate assumes 2:4 structured sparsity (SPARSE) or not (DENSE).

    Ordinary kernels run at the DENSE rate; vendors often print the SPARSE one.

    Example:
        >>> Density.parse("sparse") is Density.SPARSE
        True
    """

    DENSE = "dense"
    SPARSE = "sparse"

    @classmethod
    def parse(cls, value: "Density | str") -> "Density":
        """The member for ``value`` ('dense' or 'sparse', any case).

        Example:
            >>> Density.parse("Dense")
            <Density.DENSE: 'dense'>
        """
        if isinstance(value, Density):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            raise ValueError(f"density must be 'dense' or 'sparse', got {value!r}") from None


@dataclass(frozen=True)
class Precision:
    """One key of the precision vocabulary: what executes and how it accumulates.

    Example:
        >>> PRECISIONS["fp16_acc16"].label
        'FP16 tensor, FP16 accumulate'
    """

    key: str
    label: str
    tensor: bool
    unit: str = "FLOP/s"


PRECISIONS: Mapping[str, Precision] = MappingProxyType({p.key: p for p in (
    Precision("fp64", "FP64 (CUDA cores)", tensor=False),
    Precision("fp64_tc", "FP64 tensor", tensor=True),
    Precision("fp32", "FP32 (CUDA cores)", tensor=False),
    Precision("tf32", "TF32 tensor, FP32 accumulate", tensor=True),
    Precision("bf16", "BF16 tensor, FP32 accumulate", tensor=True),
    Precision("fp16", "FP16 tensor, FP32 accumulate", tensor=True),
    Precision("fp16_acc16", "FP16 tensor, FP16 accumulate", tensor=True),
    Precision("fp8", "FP8 tensor, FP32 accumulate", tensor=True),
    Precision("fp8_acc16", "FP8 tensor, FP16 accumulate", tensor=True),
    Precision("fp4", "FP4 tensor, FP32 accumulate", tensor=True),
    Precision("int8", "INT8 tensor, INT32 accumulate", tensor=True, unit="OP/s"),
)})
"""The closed precision vocabulary (key -> :class:`Precision`)."""


def check_precision(precision: str) -> str:
    """Return ``precision`` if it is a key of :data:`PRECISIONS`, else raise.

    Example:
        >>> check_precision("bf16")
        'bf16'
    """
    if precision not in PRECISIONS:
        raise UnknownPrecisionError(
            f"unknown precision {precision!r}",
            hint="use one of " + ", ".join(PRECISIONS))
    return precision


# --------------------------------------------------------------------------- sourced numbers

SOURCE_KINDS = ("vendor", "derived", "third-party", "measured")


@dataclass(frozen=True)
class Source:
    """Where a number comes from: document title, URL and a short note on how it was read.

    ``kind`` says how much to trust it: 'vendor' (printed in an NVIDIA document), 'derived'
    (computed from vendor numbers, the note says how), 'third-party' (not published by
    NVIDIA; measured or reported by others) or 'measured' (on this machine).

    Example:
        >>> Source("H200 datasheet", "https://example.com").noted("lists sparse").note
        'lists sparse'
    """

    title: str
    url: str
    note: str = ""
    kind: str = "vendor"

    def __post_init__(self) -> None:
        if self.kind not in SOURCE_KINDS:
            raise ValueError(f"source kind must be one of {SOURCE_KINDS}, got {self.kind!r}")
        if not self.title:
            raise ValueError("a source needs a title")

    def noted(self, note: str, kind: str | None = None) -> "Source":
        """A copy with ``note`` (and, if given, ``kind``) replaced.

        Example:
            >>> Source("t", "u").noted("derived", kind="derived").kind
            'derived'
        """
        return replace(self, note=note, kind=kind or self.kind)

    def cite(self) -> str:
        """One line for tables and tooltips.

        Example:
            >>> Source("H200 datasheet", "https://x.y", "sparse listed").cite()
            'H200 datasheet <https://x.y> (sparse listed)'
        """
        text = self.title + (f" <{self.url}>" if self.url else "")
        return text + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class Figure:
    """One number with its unit and source.

    Example:
        >>> lookup_gpu("rtx5090").memory_bandwidth.value
        1792000000000.0
    """

    value: float
    unit: str
    source: Source

    def __post_init__(self) -> None:
        if not (isinstance(self.value, (int, float)) and math.isfinite(self.value)
                and self.value > 0):
            raise ValueError(f"a figure must be a positive finite number, got {self.value!r}")


@dataclass(frozen=True)
class Peak:
    """A compute ceiling of one precision: the dense rate and, where it exists, the sparse one.

    ``listed`` records which figure the source printed ('dense', 'sparse' or 'both'); the
    other one is derived (sparse = 2 x dense). Non-tensor precisions have no sparse rate.

    Example:
        >>> p = lookup_gpu("h100").peaks["fp8"]
        >>> p.listed, p.dense / 1e12, p.rate("sparse") / 1e12
        ('sparse', 1979.0, 3958.0)
    """

    precision: str
    dense: float
    sparse: float | None
    listed: str
    source: Source

    def __post_init__(self) -> None:
        info = PRECISIONS.get(self.precision)
        if info is None:
            check_precision(self.precision)
        if not (math.isfinite(self.dense) and self.dense > 0):
            raise ValueError(f"{self.precision}: dense rate must be positive, got {self.dense!r}")
        if self.sparse is not None:
            if not info.tensor:
                raise ValueError(f"{self.precision} runs on CUDA cores and has no sparse rate")
            if not (math.isfinite(self.sparse) and self.sparse > 0):
                raise ValueError(f"{self.precision}: sparse rate must be positive")
        if self.listed not in ("dense", "sparse", "both"):
            raise ValueError(f"listed must be 'dense', 'sparse' or 'both', got {self.listed!r}")

    def rate(self, density: "Density | str" = Density.DENSE) -> float:
        """The rate in FLOP/s (OP/s for int8) at ``density``.

        Example:
            >>> lookup_gpu("a100").peaks["tf32"].rate() / 1e12
            156.0
        """
        if Density.parse(density) is Density.DENSE:
            return self.dense
        if self.sparse is None:
            raise UnsupportedPrecisionError(
                f"{self.precision} has no 2:4-sparse rate",
                hint="sparse rates exist only for tensor-core precisions; use density='dense'")
        return self.sparse


def _sparse_listed(precision: str, sparse: float, source: Source, note: str = "",
                   kind: str | None = None) -> Peak:
    """A peak whose document prints the 2:4-sparse rate; dense is half of it."""
    text = "listed with 2:4 sparsity; dense = half" + (f"; {note}" if note else "")
    return Peak(precision, sparse / 2, sparse, "sparse", source.noted(text, kind=kind))


def _both_listed(precision: str, dense: float, sparse: float, source: Source,
                 note: str = "", kind: str | None = None) -> Peak:
    """A peak whose document prints both the dense and the sparse rate."""
    text = "dense/sparse both listed" + (f"; {note}" if note else "")
    return Peak(precision, dense, sparse, "both", source.noted(text, kind=kind))


def _dense_listed(precision: str, dense: float, source: Source, note: str = "",
                  kind: str | None = None) -> Peak:
    """A peak with only a dense rate (CUDA-core precisions, FP64 tensor)."""
    return Peak(precision, dense, None, "dense", source.noted(note, kind=kind))


# --------------------------------------------------------------------------- the spec

_ARCH_RE = re.compile(r"^sm_\d{2,3}[a-z]?$")


@dataclass(frozen=True)
class GPUSpec:
    """The ceilings and sizes of one GPU, every number sourced.

    ``rates`` holds one :class:`Peak` per supported precision; ``peaks`` is the same as a
    read-only mapping. ``measured`` is True for specs built by :func:`measured_spec`.

    Example:
        >>> s = lookup_gpu("b200")
        >>> s.arch, s.sm_count.value, s.peak("fp4") / 1e15
        ('sm_100', 148, 9.0)
    """

    key: str
    name: str
    arch: str
    compute_capability: tuple[int, int]
    arch_source: Source
    memory_bandwidth: Figure
    rates: tuple[Peak, ...]
    memory_size: Figure | None = None
    sm_count: Figure | None = None
    l2_size: Figure | None = None
    boost_clock: Figure | None = None
    aliases: tuple[str, ...] = ()
    device_names: tuple[str, ...] = ()
    measured: bool = False

    def __post_init__(self) -> None:
        if not _ARCH_RE.match(self.arch):
            raise ValueError(f"{self.name}: arch must look like 'sm_90', got {self.arch!r}")
        seen = [p.precision for p in self.rates]
        if len(seen) != len(set(seen)):
            raise ValueError(f"{self.name}: a precision is listed twice in {seen}")
        if not self.rates:
            raise ValueError(f"{self.name}: a spec needs at least one compute rate")

    # -- numbers
    @property
    def bandwidth(self) -> float:
        """Peak DRAM bandwidth in B/s.

        Example:
            >>> lookup_gpu("h100").bandwidth
            3350000000000.0
        """
        return float(self.memory_bandwidth.value)

    @property
    def peaks(self) -> Mapping[str, Peak]:
        """Precision key -> :class:`Peak`, read-only.

        Example:
            >>> sorted(lookup_gpu("a100").peaks)[:3]
            ['bf16', 'fp16', 'fp16_acc16']
        """
        return MappingProxyType({p.precision: p for p in self.rates})

    @property
    def precisions(self) -> tuple[str, ...]:
        """The precisions this GPU has a ceiling for, in vocabulary order.

        Example:
            >>> "fp4" in lookup_gpu("h200").precisions
            False
        """
        have = {p.precision for p in self.rates}
        return tuple(k for k in PRECISIONS if k in have)

    def supports(self, precision: str) -> bool:
        """Whether there is a ceiling for ``precision`` (which must be a known key).

        Example:
            >>> lookup_gpu("rtx5090").supports("fp4")
            True
        """
        return check_precision(precision) in self.peaks

    def peak(self, precision: str, density: "Density | str" = Density.DENSE) -> float:
        """Peak rate of ``precision`` in FLOP/s (OP/s for int8) at ``density``.

        Example:
            >>> lookup_gpu("rtx4090").peak("fp16") / 1e12   # FP32 accumulate: half rate
            165.2
        """
        check_precision(precision)
        entry = self.peaks.get(precision)
        if entry is None:
            raise UnsupportedPrecisionError(
                f"{self.name} has no {precision} rate ({PRECISIONS[precision].label})",
                hint=f"{self.name} has: {', '.join(self.precisions)}")
        return entry.rate(density)

    def ridge(self, precision: str, density: "Density | str" = Density.DENSE) -> float:
        """Arithmetic intensity (FLOP/B) where the compute and memory ceilings meet.

        Example:
            >>> round(lookup_gpu("h200").ridge("bf16"), 1)
            206.1
        """
        return self.peak(precision, density) / self.bandwidth

    # -- provenance
    def figures(self) -> dict[str, Figure]:
        """Every number of the spec as a sourced :class:`Figure` (peaks as dense and sparse).

        Example:
            >>> f = lookup_gpu("h200").figures()
            >>> f["peak.bf16.sparse"].value / 1e12, f["peak.bf16.sparse"].source.kind
            (1979.0, 'vendor')
        """
        out: dict[str, Figure] = {}
        for name in ("memory_bandwidth", "memory_size", "sm_count", "l2_size", "boost_clock"):
            fig = getattr(self, name)
            if fig is not None:
                out[name] = fig
        for p in self.rates:
            unit = PRECISIONS[p.precision].unit
            out[f"peak.{p.precision}.dense"] = Figure(p.dense, unit, p.source)
            if p.sparse is not None:
                out[f"peak.{p.precision}.sparse"] = Figure(p.sparse, unit, p.source)
        return out

    def matches(self, device_name: str) -> bool:
        """Whether ``device_name`` (a CUDA device name or a friendly name) names this GPU.

        Example:
            >>> lookup_gpu("h100").matches("NVIDIA H100 80GB HBM3")
            True
        """
        n = _normalize(device_name)
        return n in {_normalize(x) for x in (self.key, self.name, *self.aliases,
                                                  *self.device_names)}


# --------------------------------------------------------------------------- name handling

def _normalize(name: str) -> str:
    """Lower case, drop 'nvidia'/'geforce' and every non-alphanumeric character."""
    s = str(name).lower()
    s = s.replace("nvidia", "").replace("geforce", "")
    return re.sub(r"[^a-z0-9]", "", s)


# --------------------------------------------------------------------------- sources

_CUDA_GPUS = Source("NVIDIA CUDA GPUs: compute capability list",
                    "https://developer.nvidia.com/cuda-gpus")
_CUDA_GUIDE = Source(
    "CUDA C++ Programming Guide: throughput of native arithmetic instructions",
    "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#arithmetic-instructions")

_B200_DS = Source("NVIDIA Blackwell datasheet, HGX B200 column (per GPU)",
                  "https://nvdam.widen.net/s/wwnsxrhm2w/blackwell-datasheet-3384703")
_DGX_B200 = Source("NVIDIA DGX B200 datasheet",
                   "https://resources.nvidia.com/en-us-dgx-systems/dgx-b200-datasheet")
_B200_MICRO = Source(
    "Jarmusch & Chandrasekaran, Microbenchmarking NVIDIA's Blackwell Architecture, "
    "arXiv:2512.02189", "https://arxiv.org/abs/2512.02189", kind="third-party")
_B200_CNC = Source("Chips and Cheese, Nvidia's B200: Keeping the CUDA Juggernaut Rolling",
                   "https://chipsandcheese.com/p/nvidias-b200-keeping-the-cuda-juggernaut",
                   kind="third-party")
_RTX_BW = Source(
    "NVIDIA RTX Blackwell GPU Architecture whitepaper v1.1, Appendix A (GeForce RTX 5090)",
    "https://images.nvidia.com/aem-dam/Solutions/geforce/blackwell/"
    "nvidia-rtx-blackwell-gpu-architecture.pdf")
_H200_DS = Source("NVIDIA H200 Tensor Core GPU datasheet (H200 SXM)",
                  "https://nvdam.widen.net/s/nb5zzzsjdf/hpc-datasheet-sc23-h200-datasheet-3002446")
_H100_DS = Source("NVIDIA H100 Tensor Core GPU datasheet (H100 SXM)",
                  "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet")
_HOPPER_WP = Source("NVIDIA H100 Tensor Core GPU Architecture whitepaper (H100 SXM5)",
                    "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper")
_A100_DS = Source(
    "NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM)",
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")
_AMPERE_WP = Source(
    "NVIDIA A100 Tensor Core GPU Architecture whitepaper",
    "https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/"
    "nvidia-ampere-architecture-whitepaper.pdf")
_L40S_DS = Source("NVIDIA L40S datasheet",
                  "https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413")
_ADA_WP = Source(
    "NVIDIA Ada GPU Architecture whitepaper v2.1, Appendix A",
    "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf")

_DC_ACC16 = ("derived: the datasheet prints one rate per input type; data-center tensor cores "
             "run FP16 accumulation at the FP32-accumulation rate (the Hopper and Ampere "
             "whitepapers list the two equal)")
_FP64_1_64 = ("derived: FP32 rate / 64 (2 FP64 vs 128 FP32 results per clock per SM for "
              "compute capability {cc}); not printed by NVIDIA")


def _fp64_geforce(fp32: float, cc: str) -> Peak:
    """FP64 of GeForce/Ada-class parts: 1/64 of FP32 per the CUDA guide's throughput table."""
    return _dense_listed("fp64", fp32 / 64, _CUDA_GUIDE, _FP64_1_64.format(cc=cc), kind="derived")


# --------------------------------------------------------------------------- the table

B200 = GPUSpec(
    key="b200", name="NVIDIA B200", arch="sm_100", compute_capability=(10, 0),
    arch_source=_CUDA_GPUS.noted("B200: compute capability 10.0"),
    memory_bandwidth=Figure(8.0e12, "B/s", _DGX_B200.noted(
        "64 TB/s for 8 GPUs = 8 TB/s per GPU; the later Blackwell datasheet's HGX B200 column "
        "prints 7.7 TB/s")),
    memory_size=Figure(180 * GiB, "B", _DGX_B200.noted(
        "1,440 GB for 8 GPUs = 180 GB per GPU exposed (192 GB on the package); "
        "memory GB are binary")),
    sm_count=Figure(148, "SM", _B200_CNC.noted(
        "74 of 80 SMs enabled on each of the two dies; NVIDIA does not print the count")),
    l2_size=Figure(126 * MiB, "B", _B200_MICRO.noted(
        "126 MB L2 reported by microbenchmarks; NVIDIA does not print the size")),
    boost_clock=Figure(1.98e9, "Hz", _B200_DS.noted(
        "derived: FP32 75 TFLOP/s / (148 SMs x 128 lanes x 2 FLOP); the tensor rates imply "
        "about 1.86 GHz", kind="derived")),
    rates=(
        _dense_listed("fp64", 37e12, _B200_DS,
                      "FP64/FP64 Tensor Core row; launch material (GTC 2024) printed 40"),
        _dense_listed("fp64_tc", 37e12, _B200_DS,
                      "FP64/FP64 Tensor Core row; launch material (GTC 2024) printed 40"),
        _dense_listed("fp32", 75e12, _B200_DS, "launch material (GTC 2024) printed 80"),
        _sparse_listed("tf32", 2.2e15, _B200_DS, "2.2 PFLOP/s is rounded"),
        _sparse_listed("bf16", 4.5e15, _B200_DS, "FP16/BF16 row"),
        _sparse_listed("fp16", 4.5e15, _B200_DS, "FP16/BF16 row"),
        _sparse_listed("fp16_acc16", 4.5e15, _B200_DS, _DC_ACC16, kind="derived"),
        _sparse_listed("fp8", 9e15, _B200_DS, "FP8/FP6 row"),
        _sparse_listed("fp8_acc16", 9e15, _B200_DS, _DC_ACC16, kind="derived"),
        _sparse_listed("fp4", 18e15, _B200_DS, "FP4 row"),
        _sparse_listed("int8", 9e15, _B200_DS, "INT8 row, in OP/s"),
    ),
    aliases=("b200", "b200 sxm", "hgx b200", "dgx b200"),
    device_names=("NVIDIA B200",),
)

RTX5090 = GPUSpec(
    key="rtx5090", name="NVIDIA GeForce RTX 5090", arch="sm_120", compute_capability=(12, 0),
    arch_source=_CUDA_GPUS.noted("GeForce RTX 5090: compute capability 12.0"),
    memory_bandwidth=Figure(1792e9, "B/s", _RTX_BW.noted("1792 GB/s GDDR7")),
    memory_size=Figure(32 * GiB, "B", _RTX_BW.noted("32 GB GDDR7")),
    sm_count=Figure(170, "SM", _RTX_BW.noted("170 SMs")),
    l2_size=Figure(96 * MiB, "B", _RTX_BW.noted("98304 KB L2")),
    boost_clock=Figure(2.407e9, "Hz", _RTX_BW.noted("GPU boost clock 2407 MHz; peak rates use it")),
    rates=(
        _fp64_geforce(104.8e12, "12.0"),
        _dense_listed("fp32", 104.8e12, _RTX_BW, "peak FP32 (non-tensor)"),
        _both_listed("tf32", 104.8e12, 209.5e12, _RTX_BW),
        _both_listed("bf16", 209.5e12, 419e12, _RTX_BW, "GeForce: FP32 accumulate at half rate"),
        _both_listed("fp16", 209.5e12, 419e12, _RTX_BW, "GeForce: FP32 accumulate at half rate"),
        _both_listed("fp16_acc16", 419e12, 838e12, _RTX_BW),
        _both_listed("fp8", 419e12, 838e12, _RTX_BW, "GeForce: FP32 accumulate at half rate"),
        _both_listed("fp8_acc16", 838e12, 1676e12, _RTX_BW),
        _both_listed("fp4", 1676e12, 3352e12, _RTX_BW,
                     "FP4 with FP32 accumulate, the only FP4 row ('AI TOPS' = sparse)"),
        _both_listed("int8", 838e12, 1676e12, _RTX_BW, "in OP/s"),
    ),
    aliases=("rtx5090", "5090", "rtx 5090", "geforce rtx 5090"),
    device_names=("NVIDIA GeForce RTX 5090",),
)

_GH100_SAME = ("H200 is the H100 SXM5's GH100 configuration with HBM3e (identical compute rates "
               "on the two datasheets); value from the Hopper whitepaper")

H200 = GPUSpec(
    key="h200", name="NVIDIA H200 SXM", arch="sm_90", compute_capability=(9, 0),
    arch_source=_CUDA_GPUS.noted("H200: compute capability 9.0"),
    memory_bandwidth=Figure(4.8e12, "B/s", _H200_DS.noted("4.8 TB/s HBM3e")),
    memory_size=Figure(141 * GiB, "B", _H200_DS.noted("141 GB HBM3e; memory GB are binary")),
    sm_count=Figure(132, "SM", _HOPPER_WP.noted("132 SMs; " + _GH100_SAME, kind="derived")),
    l2_size=Figure(50 * MiB, "B", _HOPPER_WP.noted("50 MB L2; " + _GH100_SAME, kind="derived")),
    boost_clock=Figure(1.98e9, "Hz", _H200_DS.noted(
        "derived: FP32 67 TFLOP/s / (132 SMs x 128 lanes x 2 FLOP); the tensor rates are "
        "quoted at 1.83 GHz", kind="derived")),
    rates=(
        _dense_listed("fp64", 34e12, _H200_DS, "FP64 34 TFLOP/s"),
        _dense_listed("fp64_tc", 67e12, _H200_DS, "FP64 Tensor Core 67 TFLOP/s"),
        _dense_listed("fp32", 67e12, _H200_DS, "FP32 67 TFLOP/s"),
        _sparse_listed("tf32", 989e12, _H200_DS),
        _sparse_listed("bf16", 1979e12, _H200_DS),
        _sparse_listed("fp16", 1979e12, _H200_DS),
        _sparse_listed("fp16_acc16", 1979e12, _H200_DS, _DC_ACC16, kind="derived"),
        _sparse_listed("fp8", 3958e12, _H200_DS),
        _sparse_listed("fp8_acc16", 3958e12, _H200_DS, _DC_ACC16, kind="derived"),
        _sparse_listed("int8", 3958e12, _H200_DS, "in OP/s"),
    ),
    aliases=("h200", "h200 sxm", "h200-sxm", "h200 141gb"),
    device_names=("NVIDIA H200",),
)

H100 = GPUSpec(
    key="h100", name="NVIDIA H100 SXM", arch="sm_90", compute_capability=(9, 0),
    arch_source=_CUDA_GPUS.noted("H100: compute capability 9.0"),
    memory_bandwidth=Figure(3.35e12, "B/s", _H100_DS.noted("3.35 TB/s HBM3")),
    memory_size=Figure(80 * GiB, "B", _H100_DS.noted("80 GB HBM3; memory GB are binary")),
    sm_count=Figure(132, "SM", _HOPPER_WP.noted("132 SMs (H100 SXM5)")),
    l2_size=Figure(50 * MiB, "B", _HOPPER_WP.noted("50 MB L2 (H100 SXM5)")),
    boost_clock=Figure(1.98e9, "Hz", _H100_DS.noted(
        "derived: FP32 67 TFLOP/s / (132 SMs x 128 lanes x 2 FLOP); the tensor rates are "
        "quoted at 1.83 GHz", kind="derived")),
    rates=(
        _dense_listed("fp64", 34e12, _H100_DS, "FP64 34 TFLOP/s"),
        _dense_listed("fp64_tc", 67e12, _H100_DS, "FP64 Tensor Core 67 TFLOP/s"),
        _dense_listed("fp32", 67e12, _H100_DS, "FP32 67 TFLOP/s"),
        _sparse_listed("tf32", 989e12, _H100_DS),
        _sparse_listed("bf16", 1979e12, _H100_DS),
        _sparse_listed("fp16", 1979e12, _H100_DS),
        _sparse_listed("fp16_acc16", 1979e12, _H100_DS, _DC_ACC16, kind="derived"),
        _sparse_listed("fp8", 3958e12, _H100_DS),
        _sparse_listed("fp8_acc16", 3958e12, _H100_DS, _DC_ACC16, kind="derived"),
        _sparse_listed("int8", 3958e12, _H100_DS, "in OP/s"),
    ),
    aliases=("h100", "h100 sxm", "h100 sxm5", "h100-sxm", "h100 sxm5 80gb"),
    device_names=("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5 80GB"),
)

A100 = GPUSpec(
    key="a100", name="NVIDIA A100 80GB SXM", arch="sm_80", compute_capability=(8, 0),
    arch_source=_CUDA_GPUS.noted("A100: compute capability 8.0"),
    memory_bandwidth=Figure(2039e9, "B/s", _A100_DS.noted("2,039 GB/s HBM2e (80GB SXM)")),
    memory_size=Figure(80 * GiB, "B", _A100_DS.noted("80 GB HBM2e; memory GB are binary")),
    sm_count=Figure(108, "SM", _AMPERE_WP.noted("108 SMs")),
    l2_size=Figure(40 * MiB, "B", _AMPERE_WP.noted("40960 KB L2")),
    boost_clock=Figure(1.41e9, "Hz", _AMPERE_WP.noted("GPU boost clock 1410 MHz")),
    rates=(
        _dense_listed("fp64", 9.7e12, _A100_DS, "FP64 9.7 TFLOP/s"),
        _dense_listed("fp64_tc", 19.5e12, _A100_DS, "FP64 Tensor Core 19.5 TFLOP/s"),
        _dense_listed("fp32", 19.5e12, _A100_DS, "FP32 19.5 TFLOP/s"),
        _both_listed("tf32", 156e12, 312e12, _A100_DS),
        _both_listed("bf16", 312e12, 624e12, _A100_DS),
        _both_listed("fp16", 312e12, 624e12, _A100_DS),
        _both_listed("fp16_acc16", 312e12, 624e12, _AMPERE_WP,
                     "FP16 with FP16 accumulate 312/624, same as FP32 accumulate"),
        _both_listed("int8", 624e12, 1248e12, _A100_DS, "in OP/s"),
    ),
    aliases=("a100", "a100 80gb", "a100 sxm", "a100 sxm4", "a100-sxm4-80gb", "a100 80gb sxm"),
    device_names=("NVIDIA A100-SXM4-80GB",),
)

_L40S_ACC16 = ("derived: the datasheet prints one rate per input type; data-center Ada runs "
               "FP16 and FP32 accumulation at one rate (Ada whitepaper, L40 column)")
_L40_COLUMN = ("from the whitepaper's L40 column: L40S uses the same AD102 configuration "
               "(142 SMs, 18,176 CUDA cores)")

L40S = GPUSpec(
    key="l40s", name="NVIDIA L40S", arch="sm_89", compute_capability=(8, 9),
    arch_source=_CUDA_GPUS.noted("L40S: compute capability 8.9"),
    memory_bandwidth=Figure(864e9, "B/s", _L40S_DS.noted("864 GB/s GDDR6")),
    memory_size=Figure(48 * GiB, "B", _L40S_DS.noted("48 GB GDDR6 with ECC")),
    sm_count=Figure(142, "SM", _L40S_DS.noted(
        "derived: 18,176 CUDA cores / 128 per SM", kind="derived")),
    l2_size=Figure(96 * MiB, "B", _ADA_WP.noted("98304 KB L2; " + _L40_COLUMN, kind="derived")),
    boost_clock=Figure(2.52e9, "Hz", _L40S_DS.noted(
        "derived: FP32 91.6 TFLOP/s / (18,176 lanes x 2 FLOP)", kind="derived")),
    rates=(
        _fp64_geforce(91.6e12, "8.9"),
        _dense_listed("fp32", 91.6e12, _L40S_DS, "FP32 91.6 TFLOP/s"),
        _both_listed("tf32", 183e12, 366e12, _L40S_DS),
        Peak("bf16", 362.05e12, 724.1e12, "dense", _L40S_DS.noted(
            "datasheet prints 362.05 dense and 733 sparse, which is not 2x; dense kept, "
            "sparse = 2 x dense")),
        Peak("fp16", 362.05e12, 724.1e12, "dense", _L40S_DS.noted(
            "datasheet prints 362.05 dense and 733 sparse, which is not 2x; dense kept, "
            "sparse = 2 x dense")),
        Peak("fp16_acc16", 362.05e12, 724.1e12, "dense",
             _L40S_DS.noted(_L40S_ACC16, kind="derived")),
        _both_listed("fp8", 733e12, 1466e12, _L40S_DS),
        _both_listed("fp8_acc16", 733e12, 1466e12, _L40S_DS, _L40S_ACC16, kind="derived"),
        _both_listed("int8", 733e12, 1466e12, _L40S_DS, "in OP/s"),
    ),
    aliases=("l40s", "l40-s"),
    device_names=("NVIDIA L40S",),
)

RTX4090 = GPUSpec(
    key="rtx4090", name="NVIDIA GeForce RTX 4090", arch="sm_89", compute_capability=(8, 9),
    arch_source=_CUDA_GPUS.noted("GeForce RTX 4090: compute capability 8.9"),
    memory_bandwidth=Figure(1008e9, "B/s", _ADA_WP.noted("1008 GB/s GDDR6X (RTX 4090)")),
    memory_size=Figure(24 * GiB, "B", _ADA_WP.noted("24 GB GDDR6X (RTX 4090)")),
    sm_count=Figure(128, "SM", _ADA_WP.noted("128 SMs (RTX 4090)")),
    l2_size=Figure(72 * MiB, "B", _ADA_WP.noted("73728 KB L2 (RTX 4090)")),
    boost_clock=Figure(2.52e9, "Hz", _ADA_WP.noted("GPU boost clock 2520 MHz (RTX 4090)")),
    rates=(
        _fp64_geforce(82.6e12, "8.9"),
        _dense_listed("fp32", 82.6e12, _ADA_WP, "peak FP32 (non-tensor), RTX 4090"),
        _both_listed("tf32", 82.6e12, 165.2e12, _ADA_WP),
        _both_listed("bf16", 165.2e12, 330.4e12, _ADA_WP, "GeForce: FP32 accumulate at half rate"),
        _both_listed("fp16", 165.2e12, 330.4e12, _ADA_WP, "GeForce: FP32 accumulate at half rate"),
        _both_listed("fp16_acc16", 330.3e12, 660.6e12, _ADA_WP),
        _both_listed("fp8", 330.3e12, 660.6e12, _ADA_WP,
                     "GeForce: FP32 accumulate at half rate; corrected in whitepaper v2.02"),
        _both_listed("fp8_acc16", 660.6e12, 1321.2e12, _ADA_WP),
        _both_listed("int8", 660.6e12, 1321.2e12, _ADA_WP, "in OP/s"),
    ),
    aliases=("rtx4090", "4090", "rtx 4090", "geforce rtx 4090"),
    device_names=("NVIDIA GeForce RTX 4090",),
)

GPUS: Mapping[str, GPUSpec] = MappingProxyType(
    {s.key: s for s in (B200, RTX5090, H200, H100, A100, L40S, RTX4090)})
"""key -> :class:`GPUSpec` of every GPU in the table, read-only."""

ROOFLINE_GPUS: tuple[str, ...] = ("b200", "rtx5090", "h200")
"""The GPUs whose ceilings the lab draws by default (beside the current device)."""


# --------------------------------------------------------------------------- lookups

def _known_list() -> str:
    return ", ".join(f"{s.key} ({s.name})" for s in GPUS.values())


def lookup_gpu(name: "str | GPUSpec") -> GPUSpec:
    """The spec for a key, a friendly alias or a CUDA device name; a GPUSpec passes through.

    Matching ignores case, spaces, punctuation and the words 'NVIDIA'/'GeForce'.

    Example:
        >>> [lookup_gpu(n).key for n in ("5090", "NVIDIA GeForce RTX 5090", "H200 SXM")]
        ['rtx5090', 'rtx5090', 'h200']
    """
    if isinstance(name, GPUSpec):
        return name
    wanted = _normalize(name)
    if wanted:
        for spec in GPUS.values():
            if spec.matches(name):
                return spec
    raise UnknownGPUError(
        f"unknown GPU {name!r}\nknown GPUs: {_known_list()}",
        hint="pass a key such as 'h200', an alias such as '5090' or 'H200 SXM', a CUDA device "
             "name such as 'NVIDIA H100 80GB HBM3', or build a spec with measured_spec()")


def spec_for_device(device_name: str) -> GPUSpec | None:
    """The spec of a CUDA device name (as ``cudaGetDeviceProperties`` reports it), else None.

    Only exact device names count, so PCIe and NVL variants (different clocks and
    bandwidth) are not mistaken for the SXM parts in the table.

    Example:
        >>> spec_for_device("NVIDIA H100 80GB HBM3").key
        'h100'
        >>> spec_for_device("NVIDIA H100 PCIe") is None
        True
    """
    wanted = _normalize(device_name)
    for spec in GPUS.values():
        if wanted in {_normalize(d) for d in spec.device_names}:
            return spec
    return None


def measured_spec(
    device_name: str,
    *,
    copy_bandwidth: float,
    gemm_flops: "Mapping[str, float] | float",
    precision: str = "bf16",
    method: str = "",
    compute_capability: tuple[int, int] | None = None,
    base: GPUSpec | None = None,
) -> GPUSpec:
    """A spec of the current device from ceilings the caller measured (marked ``measured``).

    ``copy_bandwidth`` is in B/s (bytes read + bytes written per second of a device copy);
    ``gemm_flops`` is FLOP/s, either one number for ``precision`` or a mapping precision ->
    FLOP/s. Measuring happens in the runtime layer; this only records the numbers. Sizes,
    SM count, clock and arch come from ``base`` (default: the table entry for
    ``device_name``, if any) with their own sources; the compute and memory ceilings are only
    the measured ones, so datasheet and measured numbers never mix in one ceiling set. For a
    device outside the table pass ``compute_capability`` (as the driver reports it).

    Example:
        >>> s = measured_spec("NVIDIA H200", copy_bandwidth=4.1e12, gemm_flops=7.3e14,
        ...                   method="cuBLAS 8192^3 bf16")
        >>> s.measured, s.key, s.peak("bf16"), s.sm_count.value
        (True, 'current', 730000000000000.0, 132)
    """
    rates = dict(gemm_flops) if isinstance(gemm_flops, Mapping) else {precision: gemm_flops}
    if not rates:
        raise ValueError("gemm_flops needs at least one measured precision")
    for key, value in [("copy_bandwidth", copy_bandwidth), *rates.items()]:
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"measured {key} must be a positive number, got {value!r}")
    base = base if base is not None else spec_for_device(device_name)
    src = Source(f"measured on this machine ({device_name})", "", method, kind="measured")
    if compute_capability is not None:
        cc = (int(compute_capability[0]), int(compute_capability[1]))
        arch, arch_source = f"sm_{cc[0]}{cc[1]}", src.noted("compute capability from the driver")
    elif base is not None:
        cc, arch, arch_source = base.compute_capability, base.arch, base.arch_source
    else:
        raise ValueError(
            f"{device_name!r} is not in the spec table; pass compute_capability=(major, minor)")
    peaks = tuple(_dense_listed(check_precision(p), float(v), src,
                                (method or "measured") + "; dense, no sparsity")
                  for p, v in rates.items())
    return GPUSpec(
        key="current",
        name=f"{device_name} (measured)",
        arch=arch,
        compute_capability=cc,
        arch_source=arch_source,
        memory_bandwidth=Figure(float(copy_bandwidth), "B/s", src.noted(
            (method or "measured") + "; device-to-device copy, read + write bytes")),
        rates=peaks,
        memory_size=base.memory_size if base else None,
        sm_count=base.sm_count if base else None,
        l2_size=base.l2_size if base else None,
        boost_clock=base.boost_clock if base else None,
        aliases=("current",),
        device_names=(device_name,),
        measured=True,
    )


def all_specs() -> Iterable[GPUSpec]:
    """Every spec in the table, in table order.

    Example:
        >>> [s.key for s in all_specs()][:3]
        ['b200', 'rtx5090', 'h200']
    """
    return tuple(GPUS.values())
