"""tilelab.compiler.binary.sass: find nvdisasm, disassemble real cubins, count instructions."""
from __future__ import annotations

import doctest
import os
import re
import stat
from pathlib import Path

import pytest

from support import cubins as _cubins  # noqa: E402

from tilelab.compiler.binary import sass as sass_mod  # noqa: E402
from tilelab.compiler.binary.cubin import read_cubin  # noqa: E402
from tilelab.compiler.binary.sass import (  # noqa: E402
    INSTALL_HINT, Disassembler, SassResult, count_mnemonics, disassemble, find_disassembler,
)

pytestmark = pytest.mark.toolchain   # nvdisasm on cubins tileiras built


@pytest.fixture(scope="session")
def pip_nvdisasm() -> Disassembler:
    tool = find_disassembler()
    if tool is None or "cu13" not in tool.path:
        pytest.skip("the pip package nvidia-cuda-nvdisasm 13.4 is not installed")
    return tool


@pytest.fixture(scope="session")
def sass(pip_nvdisasm):
    """SASS of each test cubin, disassembled once."""
    cache: dict = {}

    def get(kernel: str, arch: str, aligned: bool = False) -> SassResult:
        key = (kernel, arch, aligned)
        if key not in cache:
            cache[key] = disassemble(_cubins.build(kernel, arch, aligned).cubin)
        return cache[key]
    return get


def _fake_tool(directory: Path, name: str, body: str) -> Path:
    """An executable shell script that stands in for nvdisasm/cuobjdump."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n"
                    'if [ "$1" = "--version" ]; then '
                    'echo "Cuda compilation tools, release 13.4, V13.4.92"; exit 0; fi\n'
                    + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


# -- finding the tool ------------------------------------------------------------------


def test_finds_pip_nvdisasm_first(pip_nvdisasm):
    assert pip_nvdisasm.kind == "nvdisasm"
    assert Path(pip_nvdisasm.path).parts[-4:-1] == ("nvidia", "cu13", "bin")
    assert "release 13.4" in pip_nvdisasm.version
    assert str(pip_nvdisasm) == f"{pip_nvdisasm.path} ({pip_nvdisasm.version})"


def test_search_order_path_then_cuda_home(monkeypatch, tmp_path):
    monkeypatch.setattr(sass_mod, "_pip_tool_dirs", lambda: [])
    on_path = tmp_path / "path"
    home = tmp_path / "cuda"
    _fake_tool(on_path, "cuobjdump", "exit 0")
    _fake_tool(home / "bin", "nvdisasm", "exit 0")
    monkeypatch.setenv("PATH", str(on_path))
    monkeypatch.setenv("CUDA_HOME", str(home))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    assert find_disassembler() == Disassembler(str(on_path / "cuobjdump"), "cuobjdump")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert find_disassembler() == Disassembler(str(home / "bin" / "nvdisasm"), "nvdisasm")


def test_no_tool_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(sass_mod, "_pip_tool_dirs", lambda: [])
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    assert find_disassembler() is None
    result = disassemble(b"\x7fELF")
    assert result.text is None and result.tool is None
    assert "pip install nvidia-cuda-nvdisasm==13.4.92" in result.unavailable_reason
    assert INSTALL_HINT in str(result)
    assert not result.uses_tensor_cores and not result.mnemonics()


# -- running it ------------------------------------------------------------------------


def test_tool_runs_without_cuda_home(monkeypatch, tmp_path):
    tool = _fake_tool(tmp_path, "nvdisasm",
                      'echo "        /*0000*/                   NOP ; // home=${CUDA_HOME-unset}'
                      ' path=${CUDA_PATH-unset} args=$*"')
    monkeypatch.setenv("CUDA_HOME", "/usr/local/cuda-13.0")
    monkeypatch.setenv("CUDA_PATH", "/usr/local/cuda-13.0")
    result = disassemble(b"cubin", tool=Disassembler(str(tool), "nvdisasm"))
    assert result.unavailable_reason is None, result.unavailable_reason
    assert "home=unset path=unset" in result.text
    assert "args=--print-code --print-line-info /" in result.text
    assert result.mnemonics() == {"NOP": 1}
    plain = disassemble(b"cubin", tool=Disassembler(str(tool), "nvdisasm"), line_info=False)
    assert "--print-line-info" not in plain.text


def test_tool_failure_is_a_message(pip_nvdisasm):
    result = disassemble(b"\x7fELF not really a cubin")
    assert result.text is None
    assert result.tool.startswith(pip_nvdisasm.path)
    assert re.match(r"nvdisasm failed \(exit code \d+\): nvdisasm fatal", result.unavailable_reason)
    assert "<cubin>" in result.unavailable_reason
    assert "tilelab-sass-" not in result.unavailable_reason  # no temporary paths


def test_old_tool_failure_suggests_the_package(tmp_path):
    tool = _fake_tool(tmp_path, "nvdisasm", 'echo "unsupported arch" >&2; exit 3')
    tool.write_text(tool.read_text().replace("release 13.4, V13.4.92", "release 13.0, V13.0.48"))
    result = disassemble(b"x", tool=Disassembler(str(tool), "nvdisasm"))
    assert "failed (exit code 3): unsupported arch" in result.unavailable_reason
    assert INSTALL_HINT in result.unavailable_reason


def test_timeout_and_missing_tool(tmp_path):
    slow = _fake_tool(tmp_path, "nvdisasm", "sleep 5")
    result = disassemble(b"x", tool=Disassembler(str(slow), "nvdisasm"), timeout=0.2)
    assert result.text is None
    assert "did not finish within 0.2 s" in result.unavailable_reason
    gone = disassemble(b"x", tool=Disassembler(str(tmp_path / "missing"), "nvdisasm"))
    assert gone.text is None and "could not run" in gone.unavailable_reason


def test_cuobjdump_arguments(tmp_path):
    tool = _fake_tool(tmp_path, "cuobjdump",
                      'echo "        /*0000*/                   EXIT ;'
                      '                 /* 0x000000000000794d */ args=$1"')
    result = disassemble(b"x", tool=Disassembler(str(tool), "cuobjdump"))
    assert "args=-sass" in result.text and result.mnemonics() == {"EXIT": 1}


# -- real SASS -------------------------------------------------------------------------


@pytest.mark.parametrize("arch, tensor_op", [("sm_80", "HMMA"), ("sm_90", "HGMMA"),
                                             ("sm_100", "UTCHMMA"), ("sm_120", "HMMA")])
def test_gemm_uses_tensor_cores(sass, arch, tensor_op):
    result = sass("gemm", arch)
    assert result.unavailable_reason is None
    assert result.tool.endswith("(Cuda compilation tools, release 13.4, V13.4.92)")
    counts = result.mnemonics()
    assert counts[tensor_op] > 0
    assert result.uses_tensor_cores
    if arch != "sm_90":
        assert counts["HGMMA"] == 0  # warpgroup MMA exists only on Hopper
    target = read_cubin(_cubins.build("gemm", arch).cubin).arch
    assert f".target\t{target}" in result.text


def test_vadd_has_no_tensor_cores(sass):
    result = sass("vadd", "sm_90")
    counts = result.mnemonics()
    assert not result.uses_tensor_cores
    assert counts["LDG"] > 0 and counts["STG"] > 0 and counts["EXIT"] > 0


def test_hgmma_is_attributed_to_the_mma_line(sass):
    """With line info, HGMMAs sit under the source line of ct.mma.

    tileiras 13.4 also files some of them under a line just past the kernel's end (no
    such line exists in its Tile IR locations), so only membership is asserted."""
    current, lines = None, set()
    for text in sass("gemm", "sm_90").text.splitlines():
        m = re.search(r'//## File "([^"]+)", line (\d+)', text)
        if m:
            current = (Path(m.group(1)).name, int(m.group(2)))
        elif re.search(r"\bHGMMA\.", text):
            lines.add(current)
    assert (_cubins.SOURCE.name, _cubins.line_of("gemm-mma")) in lines
    assert all(name == _cubins.SOURCE.name and line >= _cubins.line_of("gemm-mma") for name, line in lines)


def test_local_memory_matches_stack_frame(sass):
    """LDL/STL appear exactly when the cubin records a stack frame (spills)."""
    for kernel, arch, aligned in [("gemm", "sm_80", False), ("gemm", "sm_90", True),
                                  ("vadd", "sm_90", False)]:
        counts = sass(kernel, arch, aligned).mnemonics()
        info = read_cubin(_cubins.build(kernel, arch, aligned).cubin)
        frame = info.resources().stack_frame_bytes
        assert (counts["LDL"] + counts["STL"] > 0) == (frame > 0), (kernel, arch, frame)


def test_map_location_rewrites_line_info(pip_nvdisasm):
    cubin = _cubins.build("vadd", "sm_90").cubin
    result = disassemble(cubin, map_location=lambda f, line, col:
                         ("cell.py", line - 10, col) if f.endswith(_cubins.SOURCE.name) else None)
    assert '//## File "cell.py", line ' in result.text
    assert _cubins.SOURCE.name not in result.text


def test_count_mnemonics_forms():
    text = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/              @!PT SHFL.IDX PT, RZ, RZ, RZ, RZ ;
        /*0020*/               @P0 LDG.E.64.SYS R2, [R16] ;                  /* 0x0000000410027381 */
        /*0030*/              @!P1 BRA `(.L_x_1) ;
        /*0040*/             @!UP0 UTCHMMA gdesc[UR4], gdesc[UR6], tmem[UR8], idesc[UR12] ;
        /*0050*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4].tnspB, R24 ;
    //## File "k.py", line 3
    .L_x_1:
    """
    assert count_mnemonics(text) == {"LDC": 1, "SHFL": 1, "LDG": 1, "BRA": 1, "UTCHMMA": 1,
                                     "HGMMA": 1}
    assert count_mnemonics("") == {}


def test_docstring_examples():
    assert doctest.testmod(sass_mod, optionflags=doctest.ELLIPSIS).failed == 0


def test_env_not_modified_for_caller():
    before = dict(os.environ)
    sass_mod._clean_env()
    assert dict(os.environ) == before
