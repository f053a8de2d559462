"""Toolchain discovery and hygiene: tileiras must never mix CUDA releases."""
import os
import subprocess

import pytest

import tilelab as tl
from tilelab import config
from tilelab.compiler import toolchain as tc_mod
from tilelab.compiler.toolchain import find_toolchain
from tilelab.kernels.examples import gemm


@pytest.fixture
def fresh_toolchain():
    find_toolchain.cache_clear()
    yield
    find_toolchain.cache_clear()


@pytest.mark.toolchain
def test_pip_toolchain_is_found(fresh_toolchain):
    with config.override(tileiras=config.DEFAULT):
        tc = find_toolchain()
    assert tc.source == "pip"
    assert tc.version.startswith("13.4")
    assert tc.tileirdisasm is not None and tc.tileirdisasm.name == "tileirdisasm"
    assert (tc.bin_dir / "ptxas").exists()


@pytest.mark.subprocess
def test_foreign_cuda_home_is_hidden_from_tileiras(fresh_toolchain, monkeypatch, tmp_path):
    """An unrelated CUDA_HOME breaks a bare tileiras run; ours still compiles."""
    foreign = tmp_path / "cuda-13.0"
    (foreign / "bin").mkdir(parents=True)
    monkeypatch.setenv("CUDA_HOME", str(foreign))
    tc = find_toolchain()
    assert tc.dropped_cuda_home == str(foreign)
    assert "CUDA_HOME" in tc.describe() and "hidden" in tc.describe()
    assert "CUDA_HOME" not in tc.env()
    a = tl.spec((256, 256), "bfloat16")
    art = gemm.compile(a.partition((128, 128)), a, a, 64, arch="sm_90", force=True)
    # The same bytecode through tileiras with CUDA_HOME left in place fails: this is
    # the failure the hygiene prevents (so this test could fail without it).
    bc = tmp_path / "k.tileirbc"
    bc.write_bytes(art.bytecode)
    bare = subprocess.run([str(tc.tileiras), str(bc), "-o", str(tmp_path / "k.cubin"),
                           "--gpu-name", "sm_90"], env=dict(os.environ),
                          capture_output=True, text=True)
    assert bare.returncode != 0
    assert "failed to compile Tile IR program" in bare.stderr


@pytest.mark.toolchain
def test_explicit_tileiras_path(fresh_toolchain, monkeypatch):
    pip_path = str(find_toolchain().tileiras)
    find_toolchain.cache_clear()
    with config.override(tileiras=pip_path):
        tc = find_toolchain()
    assert tc.source == "TILELAB_TILEIRAS" and str(tc.tileiras) == pip_path


def test_bad_explicit_path(fresh_toolchain, tmp_path):
    with config.override(tileiras=str(tmp_path / "nope")):
        with pytest.raises(tl.ToolchainError, match="TILELAB_TILEIRAS=.*not an executable"):
            find_toolchain()


def test_missing_toolchain_says_what_to_install(fresh_toolchain, monkeypatch):
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(tc_mod, "_pip_tileiras", lambda: (None, None))
    monkeypatch.setenv("PATH", "/nonexistent")
    with config.override(tileiras=config.DEFAULT):
        with pytest.raises(tl.ToolchainError) as ei:
            find_toolchain()
    assert "no tileiras found" in str(ei.value)
    assert "pip install" in ei.value.hint and "nvidia-cuda-tileiras==13.4.92" in ei.value.hint


def test_mismatched_pip_releases_are_reported(fresh_toolchain, monkeypatch):
    from tilelab.compiler import versions

    real = versions.package_version

    def fake(pkg):
        return "13.2.51" if pkg == "nvidia-nvvm" else real(pkg)

    monkeypatch.setattr(versions, "package_version", fake)
    monkeypatch.setattr(tc_mod.shutil, "which", lambda name: None)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    with config.override(tileiras=config.DEFAULT):
        with pytest.raises(tl.ToolchainError,
                           match="different releases.*nvidia-nvvm==13.2.51"):
            find_toolchain()
