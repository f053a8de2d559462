"""Installed package versions, read from the ``.dist-info`` folder names on ``sys.path``.

``importlib.metadata`` answers the same question but costs more to import than a warm
``tilelab compile`` may take in all; a wheel-installed (or editable) distribution's
folder is named ``<name>-<version>.dist-info`` (the packaging spec's naming), so the
version is in the listing. Anything else (an ``.egg-info`` install, a zipped path) falls
back to ``importlib.metadata``.
"""
from __future__ import annotations

import functools
import os
import re
import sys

__all__ = ["package_version"]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


@functools.lru_cache(maxsize=None)
def _dist_infos(path: str) -> dict[str, str]:
    """normalized name -> version of the ``.dist-info`` folders in one sys.path entry."""
    out: dict[str, str] = {}
    try:
        entries = sorted(os.listdir(path))
    except OSError:
        return out
    for entry in entries:
        if entry.endswith(".dist-info"):
            name, _, version = entry[:-len(".dist-info")].partition("-")
            if version:
                out.setdefault(_normalized(name), version)
    return out


def package_version(name: str) -> str | None:
    """The installed version of distribution ``name``, or None when it is not installed.

    Example:
        >>> package_version("numpy") is not None
        True
        >>> package_version("no-such-package-here") is None
        True
    """
    want = _normalized(name)
    for path in sys.path:
        version = _dist_infos(path or ".").get(want)
        if version is not None:
            return version
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
