"""Find tileiras (and its ptxas and libnvvm) and run it in a clean environment.

tileiras turns Tile IR bytecode into a cubin by way of libnvvm and ptxas, which it looks
for next to itself *or under CUDA_HOME*. A machine that carries an older system CUDA
(CUDA_HOME=/usr/local/cuda at 13.0, say) beside a newer pip tileiras (13.4) then mixes
releases and fails with "failed to compile Tile IR program". So every tool runs with an
environment that points at its own release only, and errors say which toolchain ran.

Search order: ``$TILELAB_TILEIRAS`` (a path to tileiras), the pip packages
(``nvidia-cuda-tileiras``, ``nvidia-cuda-nvcc``, ``nvidia-nvvm`` of one release), ``PATH``,
``$CUDA_HOME/bin``.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tilelab.errors import ToolchainError

__all__ = ["Toolchain", "find_toolchain", "ToolResult", "INSTALL_HINT"]

PIP_PACKAGES = ("nvidia-cuda-tileiras", "nvidia-cuda-nvcc", "nvidia-nvvm")
INSTALL_HINT = ('pip install "nvidia-cuda-tileiras==13.4.92" "nvidia-cuda-nvcc==13.4.92" '
                '"nvidia-nvvm==13.4.92"  (or reinstall tilelab, which pins them)')


@dataclass(frozen=True)
class ToolResult:
    """A finished tool run."""

    returncode: int
    stdout: str
    stderr: str
    command: tuple[str, ...]


@dataclass(frozen=True)
class Toolchain:
    """One CUDA release's tileiras, tileirdisasm, ptxas and libnvvm.

    Example:
        >>> tc = find_toolchain()          # doctest: +SKIP
        >>> tc.version, tc.source          # doctest: +SKIP
        ('13.4.92', 'pip')
    """

    tileiras: Path
    tileirdisasm: Path | None
    version: str
    source: str  # "TILELAB_TILEIRAS", "pip", "PATH" or "CUDA_HOME"
    #: whether CUDA_HOME/CUDA_PATH were removed from the tools' environment
    dropped_cuda_home: str | None = None

    @property
    def bin_dir(self) -> Path:
        return self.tileiras.parent

    @property
    def major_minor(self) -> tuple[int, int]:
        m = re.match(r"(\d+)\.(\d+)", self.version)
        return (int(m.group(1)), int(m.group(2))) if m else (0, 0)

    def describe(self) -> str:
        """One line saying which toolchain runs, for messages and artifacts."""
        extra = ""
        if self.dropped_cuda_home:
            extra = f"; CUDA_HOME={self.dropped_cuda_home} hidden from it (another release)"
        return f"tileiras {self.version} from {self.source} ({self.tileiras}){extra}"

    def env(self) -> dict[str, str]:
        """The environment tools run in: this release first, other CUDA releases out."""
        env = dict(os.environ)
        if self.source != "CUDA_HOME":
            env.pop("CUDA_HOME", None)
            env.pop("CUDA_PATH", None)
        lib_dirs = [d for d in (self.bin_dir.parent / "lib", self.bin_dir.parent / "nvvm" / "lib64")
                    if d.is_dir()]
        env["PATH"] = os.pathsep.join([str(self.bin_dir), env.get("PATH", "")])
        if lib_dirs:
            env["LD_LIBRARY_PATH"] = os.pathsep.join(
                [*map(str, lib_dirs), env.get("LD_LIBRARY_PATH", "")]).rstrip(os.pathsep)
        return env

    def run(self, tool: Path, args: list[str], timeout: float = 300.0) -> ToolResult:
        """Run a tool of this toolchain; a missing or hung tool becomes ToolchainError."""
        cmd = (str(tool), *args)
        try:
            p = subprocess.run(cmd, env=self.env(), capture_output=True, text=True,
                               timeout=timeout)
        except FileNotFoundError:
            raise ToolchainError(f"{tool} is gone (toolchain: {self.describe()})",
                                 hint=INSTALL_HINT) from None
        except subprocess.TimeoutExpired:
            raise ToolchainError(f"{tool.name} did not finish within {timeout:.0f} s "
                                 f"(toolchain: {self.describe()})",
                                 hint="smaller tiles compile faster; or raise the timeout") \
                from None
        return ToolResult(p.returncode, p.stdout, p.stderr, cmd)


def _version_of(tileiras: Path) -> str:
    try:
        out = subprocess.run([str(tileiras), "--version"], capture_output=True, text=True,
                             timeout=30, env={k: v for k, v in os.environ.items()
                                              if k not in ("CUDA_HOME", "CUDA_PATH")})
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ToolchainError(f"cannot run {tileiras} --version: {e}", hint=INSTALL_HINT) \
            from None
    m = re.search(r"V(\d+\.\d+\.\d+)", out.stdout) or re.search(r"release (\d+\.\d+)",
                                                                  out.stdout)
    if not m:
        raise ToolchainError(f"{tileiras} --version printed no version:\n{out.stdout}"
                             f"{out.stderr}", hint=INSTALL_HINT)
    return m.group(1)


def _pip_tileiras() -> tuple[Path | None, str | None]:
    """(path, problem): the pip tileiras if its three packages are one release."""
    from tilelab.compiler.versions import package_version

    versions = {}
    for pkg in PIP_PACKAGES:
        version = package_version(pkg)
        if version is None:
            return None, None
        versions[pkg] = version
    if len({".".join(v.split(".")[:2]) for v in versions.values()}) != 1:
        listed = ", ".join(f"{k}=={v}" for k, v in versions.items())
        return None, (f"the pip CUDA packages are of different releases ({listed}); "
                      "tileiras needs ptxas and libnvvm of its own release")
    try:
        import nvidia.cu13 as cu13  # type: ignore[import-not-found]
    except ImportError:
        return None, None
    for root in getattr(cu13, "__path__", []):
        cand = Path(root) / "bin" / "tileiras"
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand, None
    return None, None


def _disasm_beside(tileiras: Path) -> Path | None:
    cand = tileiras.parent / "tileirdisasm"
    return cand if cand.is_file() else None


@functools.lru_cache(maxsize=1)
def find_toolchain() -> Toolchain:
    """Locate the toolchain once per process (see the module docstring for the order).

    Raises :class:`~tilelab.errors.ToolchainError` naming the packages to install.
    """
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    problems: list[str] = []
    from tilelab import config

    explicit = config.tileiras()
    candidates: list[tuple[Path, str]] = []
    if explicit:
        p = Path(explicit)
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise ToolchainError(f"TILELAB_TILEIRAS={explicit} is not an executable file",
                                 hint="point it at a tileiras binary or unset it")
        candidates.append((p, "TILELAB_TILEIRAS"))
    pip_path, pip_problem = _pip_tileiras()
    if pip_problem:
        problems.append(pip_problem)
    if pip_path is not None:
        candidates.append((pip_path, "pip"))
    on_path = shutil.which("tileiras")
    if on_path:
        candidates.append((Path(on_path), "PATH"))
    if cuda_home:
        cand = Path(cuda_home) / "bin" / "tileiras"
        if cand.is_file():
            candidates.append((cand, "CUDA_HOME"))
    if not candidates:
        msg = "no tileiras found (looked in TILELAB_TILEIRAS, the pip packages, PATH"
        msg += f", CUDA_HOME={cuda_home})" if cuda_home else ", CUDA_HOME)"
        if problems:
            msg += "; " + "; ".join(problems)
        raise ToolchainError(msg, hint=INSTALL_HINT)
    path, source = candidates[0]
    version = _version_of(path)
    dropped = None
    if cuda_home and source != "CUDA_HOME":
        try:
            inside = path.resolve().is_relative_to(Path(cuda_home).resolve())
        except OSError:
            inside = False
        if inside:
            source = "CUDA_HOME"
        else:
            dropped = cuda_home
    return Toolchain(path, _disasm_beside(path), version, source, dropped)
