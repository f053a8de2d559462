"""tilelab.compiler.binary.cubin on real tileiras 13.4 cubins, cross-checked with nvdisasm and ptxas."""
from __future__ import annotations

import dataclasses
import doctest
import importlib
import json
import re
import subprocess
from pathlib import Path

import pytest

from support import cubins as _cubins  # noqa: E402

from tilelab.compiler.binary.cubin import (  # noqa: E402
    EIFMT_BVAL, EIFMT_HVAL, EIFMT_NVAL, EIFMT_SVAL, NvInfoRecord, Resources, parse_ptxas_info,
    read_cubin,
)

pytestmark = pytest.mark.toolchain   # every test reads a cubin tileiras built, most run ptxas or nvdisasm

EXPECTED_ARCH = {"sm_80": "sm_80", "sm_90": "sm_90a", "sm_100": "sm_100a", "sm_120": "sm_120a"}


@pytest.fixture(scope="session")
def gemms():
    return {arch: _cubins.build("gemm", arch) for arch in _cubins.ARCHS}


@pytest.fixture(scope="session")
def vadd90():
    return _cubins.build("vadd", "sm_90")


@pytest.fixture(scope="session")
def tma90():
    return _cubins.build("gemm", "sm_90", aligned=True)


def _only_kernel(info):
    assert len(info.kernels) == 1, info.kernels
    return info.kernels[0]


# -- architecture, kernels, sections ----------------------------------------------------


@pytest.mark.parametrize("arch", _cubins.ARCHS)
def test_arch_toolkit_and_kernel(gemms, arch):
    info = read_cubin(gemms[arch].cubin)
    assert info.arch == EXPECTED_ARCH[arch]
    assert info.sm == int(arch[3:])
    assert info.toolkit == "13.4"
    assert info.producer == "ptxas"
    assert "V13.4" in info.producer_version
    assert f"-arch {EXPECTED_ARCH[arch]}" in info.producer_options
    kernel = _only_kernel(info)
    assert kernel.startswith("gemm_")
    names = {s.name for s in info.sections}
    assert {f".text.{kernel}", f".nv.info.{kernel}", f".nv.constant0.{kernel}",
            ".nv.info", ".nv_debug_ptx_txt"} <= names
    assert info.resources(kernel).arch == info.arch


def test_kernel_lookup(vadd90):
    info = read_cubin(vadd90.cubin)
    kernel = _only_kernel(info)
    assert info.resources() is info.resources(kernel)
    assert info.params() == info.params(kernel) and info.nv_info() == info.nv_info(kernel)
    with pytest.raises(KeyError, match=r"no kernel 'gemm' in this cubin; it has: vadd_"):
        info.resources("gemm")
    none = dataclasses.replace(info, kernels=())
    with pytest.raises(KeyError, match=r"the cubin has 0 kernels"):
        none.resources()


def test_section_data(vadd90):
    info = read_cubin(vadd90.cubin)
    kernel = _only_kernel(info)
    text = info.section(f".text.{kernel}")
    assert text is not None and len(info.section_data(text.name)) == text.size > 0
    assert info.section_data(".nv.shared.reserved.0") == b""  # NOBITS: no bytes in the file
    with pytest.raises(KeyError, match=r"no section '\.nope'.*\.nv\.info"):
        info.section_data(".nope")


# -- embedded PTX and Tile IR ------------------------------------------------------------


@pytest.mark.parametrize("arch", _cubins.ARCHS)
def test_ptx_is_clean_single_copy(gemms, arch):
    info = read_cubin(gemms[arch].cubin)
    ptx = info.ptx
    assert ptx is not None and "\0" not in ptx
    assert ptx.startswith(".version 9.")
    assert f".target {EXPECTED_ARCH[arch]}\n" in ptx
    assert ptx.count(".version") == 1  # sm_100/sm_120 carry a second (.nv.merc) copy
    assert f".visible .entry {info.kernels[0]}(" in ptx
    assert "\n\n\n" not in ptx and ptx.endswith("}\n")
    assert ".nv_intermediate_source_section" not in ptx
    assert info.tileir is not None and info.tileir.startswith("entry @gemm_")
    assert "mmaf" in info.tileir


def test_no_ptx_without_lineinfo_section(vadd90):
    """A cubin whose .nv_debug_ptx_txt section is renamed reads as having no PTX."""
    data = bytearray(vadd90.cubin)
    at = data.find(b".nv_debug_ptx_txt\0")
    assert at > 0
    data[at:at + 2] = b".X"
    info = read_cubin(bytes(data))
    assert info.ptx is None
    assert info.resources().registers is not None


# -- resources ---------------------------------------------------------------------------


def test_gemm_sm90_resources(gemms):
    info = read_cubin(gemms["sm_90"].cubin)
    kernel = _only_kernel(info)
    res = info.resources(kernel)
    assert res.registers == 255 and res.max_registers == 255
    assert res.block_dim == (128, 1, 1) and res.threads_per_block == 128
    assert f".reqntid {res.block_dim[0]}" in info.ptx
    assert res.shared_bytes == info.section(f".nv.shared.{kernel}").size > 100_000
    assert res.stack_frame_bytes and res.stack_frame_bytes > 0
    assert res.local_bytes == res.stack_frame_bytes
    assert res.num_barriers == 1
    assert res.min_blocks_per_sm == 1
    assert res.spill_store_bytes is None  # not in the cubin; only ptxas -v prints it
    # Parameters: cutile_python_v1 packs (ptr, shape, stride) per 2-D array -> 3 x 5 params.
    params = info.params(kernel)
    assert [p.ordinal for p in params] == list(range(15))
    assert [p.size for p in params[:5]] == [8, 4, 4, 4, 4]
    assert params[-1].offset + params[-1].size == res.param_bytes == 72
    assert res.param_offset + res.param_bytes == res.const0_bytes


def test_tma_gemm_resources(tma90):
    """With 16-byte strides tileiras uses TMA: hidden descriptor params, mbarriers, 256 threads."""
    info = read_cubin(tma90.cubin)
    kernel = _only_kernel(info)
    res = info.resources(kernel)
    assert res.threads_per_block == 256
    assert res.num_mbarriers and res.num_mbarriers > 0
    assert res.stack_frame_bytes == 0
    assert len(info.params(kernel)) == 15  # EIATTR_KPARAM_INFO_V2 records
    assert res.param_bytes > 72  # includes the hidden TMA descriptors
    assert ".hidden\t.param" in info.ptx


@pytest.mark.parametrize("arch", ["sm_100", "sm_120"])
def test_reserved_shared_memory(gemms, arch):
    info = read_cubin(gemms[arch].cubin)
    res = info.resources()
    assert res.reserved_shared_bytes == info.section(".nv.shared.reserved.0").size > 0
    assert res.threads_per_block == 256


def test_resources_str_and_dict(gemms):
    info = read_cubin(gemms["sm_90"].cubin)
    res = info.resources()
    text = str(res)
    assert text.splitlines()[0] == f"{res.kernel} (sm_90a)"
    assert re.search(r"registers\s+255 per thread \(cap 255\)", text)
    assert re.search(r"threads/block\s+128 \(required 128x1x1\)", text)
    assert re.search(rf"shared memory\s+{res.shared_bytes} B \(113\.0 KiB\) static", text)
    assert re.search(rf"stack frame\s+{res.stack_frame_bytes} B per thread", text)
    assert "not recorded in the cubin" in text
    d = res.as_dict()
    assert d["threads_per_block"] == 128 and d["registers"] == 255
    assert d["block_dim"] == (128, 1, 1)
    json.dumps(d)  # plain data only
    filled = res.with_ptxas_info({"spill_store_bytes": 84, "spill_load_bytes": 66,
                                  "ptxas_shared_bytes": 1})
    assert "84 B stored, 66 B loaded" in str(filled)
    assert filled.shared_bytes == res.shared_bytes


# -- EIATTR decoding, checked against nvdisasm's names ---------------------------------


_NVINFO_SECTION = re.compile(r"^\t\.section\t(\.nv\.info[^,]*),")
_NVINFO_NAME = re.compile(r"//----- nvinfo : (EIATTR_\w+)")
_NVINFO_BYTES = re.compile(r"\.byte\s+0x([0-9a-f]+), 0x([0-9a-f]+)")
_NVINFO_INDEX = re.compile(r"\.word\s+index@\(([^)]*)\)")


def _nvdisasm_records(cubin: bytes, tmp_path: Path, kernel: str):
    """(name, format, id) of the records nvdisasm prints for ``kernel``: those of
    .nv.info.<kernel>, and those of .nv.info whose symbol index names the kernel."""
    nvdisasm = _cubins.tool_path("nvdisasm")
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    text = subprocess.run([str(nvdisasm), str(path)], capture_output=True, text=True,
                          check=True, env=_cubins.clean_env(), timeout=120).stdout
    records, section, pending = [], None, None  # records: [section, name, fmt, id, symbol]
    for line in text.splitlines():
        m = _NVINFO_SECTION.match(line)
        if m:
            section = m.group(1)
            continue
        if line.startswith("\t.section\t"):
            section = None
        if section not in (".nv.info", f".nv.info.{kernel}"):
            continue
        m = _NVINFO_NAME.search(line)
        if m:
            pending = m.group(1)
            continue
        m = _NVINFO_BYTES.search(line)
        if m and pending:
            records.append([section, pending, int(m.group(1), 16), int(m.group(2), 16), None])
            pending = None
            continue
        m = _NVINFO_INDEX.search(line)
        if m and records and records[-1][4] is None:
            records[-1][4] = m.group(1)
    return [(name, fmt, attr) for sec, name, fmt, attr, symbol in records
            if sec != ".nv.info" or symbol == kernel]


@pytest.mark.parametrize("which", ["vadd", *_cubins.ARCHS, "tma"])
def test_eiattr_records_match_nvdisasm(gemms, vadd90, tma90, which, tmp_path):
    built = {"vadd": vadd90, "tma": tma90}.get(which) or gemms[which]
    info = read_cubin(built.cubin)
    kernel = _only_kernel(info)
    theirs = _nvdisasm_records(built.cubin, tmp_path, kernel)
    assert len(theirs) > 10
    ours = [(r.name, r.fmt, r.attr) for r in info.nv_info(kernel)]
    assert ours == theirs


def test_nv_info_record_formats():
    rec = NvInfoRecord(0x2F, EIFMT_SVAL, (15).to_bytes(4, "little") + (40).to_bytes(4, "little"))
    assert rec.name == "EIATTR_REGCOUNT" and rec.words() == (15, 40)
    assert str(rec) == "EIATTR_REGCOUNT (EIFMT_SVAL) 0xf 0x28"
    assert str(NvInfoRecord(0x51, EIFMT_NVAL, None)) == "EIATTR_TCGEN05_1CTA_USED (EIFMT_NVAL)"
    assert NvInfoRecord(0x4C, EIFMT_BVAL, 1).words() == ()
    assert NvInfoRecord(0x99, EIFMT_HVAL, 3).name == "EIATTR_0x99"


# -- cross-check with ptxas -v on the embedded PTX ----------------------------------------


def _ptxas_v(info, tmp_path: Path) -> tuple[dict, bytes]:
    ptxas = _cubins.tool_path("ptxas")
    src, out = tmp_path / "k.ptx", tmp_path / "re.cubin"
    src.write_text(info.ptx)
    proc = subprocess.run([str(ptxas), f"-arch={info.arch}", "-O3", "-v", str(src), "-o",
                           str(out)], capture_output=True, text=True, env=_cubins.clean_env(),
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return parse_ptxas_info(proc.stdout + proc.stderr), out.read_bytes()


@pytest.mark.parametrize("which", ["vadd", "sm_90", "sm_100"])
def test_resources_agree_with_ptxas_v(gemms, vadd90, which, tmp_path):
    built = vadd90 if which == "vadd" else gemms[which]
    info = read_cubin(built.cubin)
    kernel = _only_kernel(info)
    report, recompiled = _ptxas_v(info, tmp_path)
    assert set(report) == {kernel}
    got, res = report[kernel], info.resources(kernel)
    assert got["registers"] == res.registers
    assert got["stack_frame_bytes"] == res.stack_frame_bytes
    assert got.get("num_barriers", 0) == (res.num_barriers or 0)
    # sm_90+ cubins hold 1 KiB more static shared memory than ptxas -v reports.
    expected_shared = got["ptxas_shared_bytes"] + (1024 if got["ptxas_shared_bytes"] else 0)
    assert res.shared_bytes == expected_shared
    if which == "sm_90":
        assert got["spill_store_bytes"] > 0 and got["spill_load_bytes"] > 0
        assert res.with_ptxas_info(got).spill_store_bytes == got["spill_store_bytes"]
    # ptxas on the extracted PTX reproduces the resources of tileiras' own cubin.
    again = read_cubin(recompiled).resources(kernel)
    for name in ("registers", "block_dim", "shared_bytes", "stack_frame_bytes",
                 "param_bytes", "num_barriers"):
        assert getattr(again, name) == getattr(res, name), name


def test_parse_ptxas_info_text():
    text = """ptxas info    : 64 bytes gmem
ptxas info    : Compiling entry function 'k1' for 'sm_90a'
ptxas info    : Function properties for k1
    88 bytes stack frame, 84 bytes spill stores, 66 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 88 bytes cumulative stack size, 114688 bytes smem
ptxas info    : Compiling entry function 'k2' for 'sm_90a'
ptxas info    : Function properties for k2
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 34 registers, used 0 barriers
"""
    out = parse_ptxas_info(text)
    assert out["k1"] == {"stack_frame_bytes": 88, "spill_store_bytes": 84,
                         "spill_load_bytes": 66, "registers": 255,
                         "ptxas_shared_bytes": 114688, "num_barriers": 1}
    assert out["k2"]["registers"] == 34 and out["k2"]["ptxas_shared_bytes"] == 0


# -- bad input ---------------------------------------------------------------------------


def test_not_a_cubin():
    with pytest.raises(ValueError, match="not a cubin: .*ELF magic"):
        read_cubin(b"hello world" * 10)


def test_host_elf_is_rejected(vadd90):
    host = read_cubin(vadd90.cubin).section_data(".nv.host")  # an x86-64 ELF inside the cubin
    assert host[:4] == b"\x7fELF"
    with pytest.raises(ValueError, match="not EM_CUDA"):
        read_cubin(host)


def test_truncated_cubin(vadd90):
    with pytest.raises(ValueError, match="truncated cubin: section header"):
        read_cubin(vadd90.cubin[:4096])


def test_corrupt_nv_info(vadd90):
    info = read_cubin(vadd90.cubin)
    sec = info.section(f".nv.info.{info.kernels[0]}")
    data = bytearray(vadd90.cubin)
    data[sec.offset] = 0x09  # an EIFMT that does not exist
    with pytest.raises(ValueError,
                       match=r"unknown EIATTR format 0x09 .* at byte 0 of \.nv\.info\."):
        read_cubin(bytes(data))


def test_resources_defaults():
    res = Resources("k")
    assert res.threads_per_block is None and res.local_bytes is None
    assert str(res) == "k\n  shared memory  0 B static"
    assert Resources("k", max_block_dim=(64, 2, 1)).threads_per_block == 128


@pytest.mark.parametrize("module", ["cubin", "elf", "nvinfo", "resources"])
def test_docstring_examples(module):
    mod = importlib.import_module(f"tilelab.compiler.binary.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and (module == "cubin" or result.attempted > 0)
