"""tilelab.compiler.versions: versions from .dist-info names agree with importlib.metadata."""
from __future__ import annotations

import importlib.metadata

import pytest

from tilelab.compiler import versions


@pytest.mark.parametrize("name", ["numpy", "cuda-tile", "tilelab", "ml_dtypes", "ml-dtypes",
                                  "nvidia-cuda-tileiras", "pytest"])
def test_agrees_with_importlib_metadata(name):
    try:
        expected = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        expected = None
    assert versions.package_version(name) == expected


def test_missing_package_is_none():
    assert versions.package_version("no-such-distribution-anywhere") is None


def test_reads_the_folder_names(tmp_path, monkeypatch):
    (tmp_path / "Some_Pkg-2.3.4.dist-info").mkdir()
    (tmp_path / "other-1.0.egg-info").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    versions._dist_infos.cache_clear()
    try:
        assert versions.package_version("some-pkg") == "2.3.4"
        assert versions.package_version("SOME.PKG") == "2.3.4"
    finally:
        versions._dist_infos.cache_clear()
