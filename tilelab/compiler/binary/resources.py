"""What a kernel takes from the GPU (:class:`Resources`), from its cubin's EIATTR
records and PTX directives, and the ``ptxas -v`` printout that alone gives spill sizes.
"""
from __future__ import annotations

import dataclasses
import re
import struct
from dataclasses import dataclass
from typing import Any, Mapping

from tilelab.compiler.binary.elf import Section
from tilelab.compiler.binary.nvinfo import NvInfoRecord, attr_id, dim3

__all__ = ["Resources", "kernel_resources", "parse_ptxas_info"]


def _fmt_bytes(n: int) -> str:
    if n >= 1024:
        return f"{n} B ({n / 1024:.1f} KiB)"
    return f"{n} B"


@dataclass(frozen=True)
class Resources:
    """What one kernel takes from the GPU, as the cubin records it.

    Fields are None where the cubin does not say (spill sizes, for one, are only printed
    by ``ptxas -v``; fill them with :meth:`with_ptxas_info`).

    - ``registers``: registers per thread (EIATTR_REGCOUNT); ``max_registers`` the cap
      ptxas worked under (EIATTR_MAXREG_COUNT).
    - ``block_dim``: the required block shape (EIATTR_REQNTID, PTX ``.reqntid``);
      ``max_block_dim`` the upper bound (EIATTR_MAX_THREADS, PTX ``.maxntid``). tile
      kernels launch with block (1,1,1) and the driver expands it from these.
    - ``shared_bytes``: static shared memory per block (``.nv.shared.<kernel>``);
      ``reserved_shared_bytes``: the module's reserved shared memory
      (``.nv.shared.reserved.*``, used e.g. for sm_100 tensor-memory bookkeeping).
    - ``stack_frame_bytes`` (EIATTR_FRAME_SIZE) is the per-thread local memory frame;
      ``min_stack_bytes``/``max_stack_bytes`` EIATTR_MIN/MAX_STACK_SIZE.
    - ``param_bytes``: kernel parameters (EIATTR_CBANK_PARAM_SIZE) at ``param_offset`` in
      constant bank 0, whose whole size is ``const0_bytes``. It includes hidden
      parameters (the TMA descriptors of kernels that use TMA), which
      :meth:`CubinInfo.params` does not list.
    - ``min_blocks_per_sm``: PTX ``.minnctapersm`` (no EIATTR records it).

    Example:
        >>> r = Resources("k", "sm_90a", registers=40, block_dim=(128, 1, 1))
        >>> r.threads_per_block, r.as_dict()["registers"]
        (128, 40)
    """

    kernel: str
    arch: str | None = None
    registers: int | None = None
    max_registers: int | None = None
    block_dim: tuple[int, int, int] | None = None
    max_block_dim: tuple[int, int, int] | None = None
    shared_bytes: int = 0
    reserved_shared_bytes: int = 0
    stack_frame_bytes: int | None = None
    min_stack_bytes: int | None = None
    max_stack_bytes: int | None = None
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    param_bytes: int | None = None
    param_offset: int | None = None
    const0_bytes: int | None = None
    num_barriers: int | None = None
    num_mbarriers: int | None = None
    min_blocks_per_sm: int | None = None
    cluster_dim: tuple[int, int, int] | None = None

    @property
    def threads_per_block(self) -> int | None:
        """Threads of one block: the product of the required (else maximum) block shape."""
        dims = self.block_dim or self.max_block_dim
        if dims is None:
            return None
        x, y, z = dims
        return x * y * z

    @property
    def local_bytes(self) -> int | None:
        """Per-thread local memory the kernel needs: its stack frame (spills, local arrays)."""
        sizes = [s for s in (self.stack_frame_bytes, self.min_stack_bytes) if s is not None]
        return max(sizes) if sizes else None

    def with_ptxas_info(self, info: Mapping[str, int]) -> "Resources":
        """A copy with the spill sizes (and anything else) from :func:`parse_ptxas_info`.

        Example:
            >>> r = Resources("k").with_ptxas_info({"spill_store_bytes": 8, "spill_load_bytes": 4})
            >>> r.spill_store_bytes, r.spill_load_bytes
            (8, 4)
        """
        known = {f.name for f in dataclasses.fields(self)}
        updates = {k: v for k, v in info.items() if k in known and k != "kernel"}
        return dataclasses.replace(self, **updates)

    def as_dict(self) -> dict[str, Any]:
        """All fields plus ``threads_per_block`` and ``local_bytes``, for tables and JSON.

        Example:
            >>> sorted(Resources("k").as_dict())[:3]
            ['arch', 'block_dim', 'cluster_dim']
        """
        out = dataclasses.asdict(self)
        out["threads_per_block"] = self.threads_per_block
        out["local_bytes"] = self.local_bytes
        return out

    def __str__(self) -> str:
        rows: list[tuple[str, str]] = []
        if self.registers is not None:
            cap = f" (cap {self.max_registers})" if self.max_registers is not None else ""
            rows.append(("registers", f"{self.registers} per thread{cap}"))
        if self.threads_per_block is not None:
            dims = self.block_dim or self.max_block_dim
            how = "required" if self.block_dim else "at most"
            rows.append(("threads/block", f"{self.threads_per_block} ({how} "
                                          f"{dims[0]}x{dims[1]}x{dims[2]})"))
        shared = f"{_fmt_bytes(self.shared_bytes)} static"
        if self.reserved_shared_bytes:
            shared += f" + {self.reserved_shared_bytes} B reserved"
        rows.append(("shared memory", shared))
        if self.stack_frame_bytes is not None:
            rows.append(("stack frame", f"{self.stack_frame_bytes} B per thread"))
        if self.spill_store_bytes is not None or self.spill_load_bytes is not None:
            rows.append(("spills", f"{self.spill_store_bytes or 0} B stored, "
                                   f"{self.spill_load_bytes or 0} B loaded"))
        elif self.stack_frame_bytes:
            rows.append(("spills", "not recorded in the cubin (ptxas -v prints them)"))
        if self.param_bytes is not None:
            const = f", constant bank 0: {self.const0_bytes} B" if self.const0_bytes else ""
            rows.append(("parameters", f"{self.param_bytes} B{const}"))
        if self.num_barriers is not None:
            rows.append(("barriers", str(self.num_barriers)))
        if self.num_mbarriers:
            rows.append(("mbarriers", str(self.num_mbarriers)))
        if self.min_blocks_per_sm is not None:
            rows.append(("min blocks/SM", str(self.min_blocks_per_sm)))
        if self.cluster_dim is not None:
            rows.append(("cluster", "x".join(map(str, self.cluster_dim))))
        width = max(len(k) for k, _ in rows)
        head = self.kernel + (f" ({self.arch})" if self.arch else "")
        return "\n".join([head] + [f"  {k:<{width}}  {v}" for k, v in rows])


def kernel_resources(name: str, arch: str, records: list[NvInfoRecord],
               by_name: Mapping[str, Section], reserved: int,
               directives: Mapping[str, tuple[int, ...]]) -> Resources:
    """The :class:`Resources` of kernel ``name`` from its EIATTR ``records``, the
    sections ``by_name``, the module's ``reserved`` shared bytes and its PTX
    ``directives`` (``reqntid``, ``maxntid``, ``minnctapersm``, ``maxnreg``).

    Example:
        >>> from tilelab.compiler.binary.nvinfo import NvInfoRecord
        >>> regs = NvInfoRecord(0x2F, 0x04, bytes([5, 0, 0, 0, 40, 0, 0, 0]))
        >>> kernel_resources("k", "sm_90a", [regs], {}, 0, {"reqntid": (128,)}).registers
        40
    """
    def first(attr: str) -> NvInfoRecord | None:
        for rec in records:
            if rec.attr == attr_id(attr):
                return rec
        return None

    def indexed(attr: str) -> int | None:  # SVAL (symbol index, value)
        rec = first(attr)
        return rec.words()[1] if rec is not None and len(rec.words()) >= 2 else None

    def scalar(attr: str) -> int | None:  # BVAL / HVAL
        rec = first(attr)
        return rec.value if rec is not None and isinstance(rec.value, int) else None

    def dims(attr: str) -> tuple[int, int, int] | None:
        rec = first(attr)
        return dim3(rec.words()) if rec is not None else None

    block = dims("EIATTR_REQNTID") or dim3(directives.get("reqntid", ()))
    max_block = dims("EIATTR_MAX_THREADS") or dim3(directives.get("maxntid", ()))
    cbank = first("EIATTR_PARAM_CBANK")
    param_offset = None
    if cbank is not None and isinstance(cbank.value, bytes) and len(cbank.value) >= 8:
        _sec, param_offset, _size = struct.unpack_from("<IHH", cbank.value)
    const0 = by_name.get(f".nv.constant0.{name}")
    shared = by_name.get(f".nv.shared.{name}")
    min_blocks = directives.get("minnctapersm")
    max_registers = scalar("EIATTR_MAXREG_COUNT")
    if max_registers is None and directives.get("maxnreg"):
        max_registers = directives["maxnreg"][0]
    return Resources(
        kernel=name, arch=arch,
        registers=indexed("EIATTR_REGCOUNT"),
        max_registers=max_registers,
        block_dim=block, max_block_dim=max_block,
        shared_bytes=shared.size if shared else 0,
        reserved_shared_bytes=reserved,
        stack_frame_bytes=indexed("EIATTR_FRAME_SIZE"),
        min_stack_bytes=indexed("EIATTR_MIN_STACK_SIZE"),
        max_stack_bytes=indexed("EIATTR_MAX_STACK_SIZE"),
        param_bytes=scalar("EIATTR_CBANK_PARAM_SIZE"),
        param_offset=param_offset,
        const0_bytes=const0.size if const0 else None,
        num_barriers=scalar("EIATTR_NUM_BARRIERS"),
        num_mbarriers=scalar("EIATTR_NUM_MBARRIERS"),
        min_blocks_per_sm=min_blocks[0] if min_blocks else None,
        cluster_dim=dims("EIATTR_CTA_PER_CLUSTER"),
    )


# --------------------------------------------------------------------------------------
# ptxas -v


_PTXAS_FUNC = re.compile(r"(?:Compiling entry function|Function properties for) '?([\w$.]+)'?")
_PTXAS_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, "
                          r"(\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (\d+) registers")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")
_PTXAS_BARRIERS = re.compile(r"used (\d+) barriers")


def parse_ptxas_info(text: str) -> dict[str, dict[str, int]]:
    """Per kernel, the numbers ``ptxas -v`` prints (the only source of spill sizes).

    Keys: ``registers``, ``stack_frame_bytes``, ``spill_store_bytes``,
    ``spill_load_bytes``, ``ptxas_shared_bytes`` (without the 1 KiB system reserve that
    sm_90+ cubins add), ``num_barriers``. Feed one kernel's dict to
    :meth:`Resources.with_ptxas_info`.

    Example:
        >>> out = parse_ptxas_info(
        ...     "ptxas info    : Function properties for k\\n"
        ...     "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\\n"
        ...     "ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem\\n")
        >>> out["k"]["spill_store_bytes"], out["k"]["registers"]
        (4, 40)
    """
    out: dict[str, dict[str, int]] = {}
    current: dict[str, int] | None = None
    for line in text.splitlines():
        m = _PTXAS_FUNC.search(line)
        if m:
            current = out.setdefault(m.group(1), {})
            continue
        if current is None:
            continue
        m = _PTXAS_STACK.search(line)
        if m:
            current["stack_frame_bytes"], current["spill_store_bytes"], \
                current["spill_load_bytes"] = map(int, m.groups())
        m = _PTXAS_USED.search(line)
        if m:
            current["registers"] = int(m.group(1))
            sm = _PTXAS_SMEM.search(line)
            current["ptxas_shared_bytes"] = int(sm.group(1)) if sm else 0
            bm = _PTXAS_BARRIERS.search(line)
            if bm:
                current["num_barriers"] = int(bm.group(1))
    return out
