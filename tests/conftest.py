"""Test-wide setup: a private compile cache and cache key, the GPU marker skip, torch where CI
requires it, the report of tests whose markers miss a process they start (support.spawns),
and ``kernel_file`` (a kernel file the ``tilelab`` command is tested on)."""
import os
import tempfile
import textwrap

import pytest

# support.spawns lists, at the end of a run, the tests that start a process their markers
# (toolchain, subprocess) do not name
pytest_plugins = ["support.spawns"]

# Keep the user's ~/.cache/tilelab out of the tests (and start from a cold cache), and
# the user's cache key (~/.config/tilelab/cache.key) too: a private cache is signed with
# a private key. A cache the caller named keeps the key the caller uses (their own, or
# TILELAB_CACHE_KEY), so that a warm cache kept between runs stays warm.
_OWN_CACHE = None
if "TILELAB_CACHE_DIR" not in os.environ:
    _OWN_CACHE = os.environ["TILELAB_CACHE_DIR"] = tempfile.mkdtemp(prefix="tilelab-test-cache-")
_OWN_KEY = None
if _OWN_CACHE is not None and "TILELAB_CACHE_KEY" not in os.environ:
    _OWN_KEY = tempfile.mkdtemp(prefix="tilelab-test-key-")
    os.environ["TILELAB_CACHE_KEY"] = os.path.join(_OWN_KEY, "cache.key")


def pytest_sessionfinish(session, exitstatus):
    """Remove the private compile cache and key made above (ones the caller named stay)."""
    import shutil

    for own in (_OWN_CACHE, _OWN_KEY):
        if own is not None:
            shutil.rmtree(own, ignore_errors=True)


def pytest_sessionstart(session):
    """Under TILELAB_REQUIRE_TORCH=1 (as in CI, which installs the torch extra) the torch
    interop tests must run: a missing torch stops the run instead of skipping them."""
    from tilelab import config

    if config.require_torch():
        try:
            import torch  # noqa: F401
        except ImportError as e:
            raise RuntimeError(f"TILELAB_REQUIRE_TORCH=1 but torch cannot be imported ({e}); "
                               "install it with pip install -e '.[torch]'") from None


@pytest.fixture
def kernel_file(tmp_path):
    """A file defining the safe kernel ``add`` and its ``TILELAB_EXAMPLES`` entry, as
    ``tilelab compile FILE::add`` takes it."""
    f = tmp_path / "mykernels.py"
    f.write_text(textwrap.dedent('''
        import tilelab as tl
        import cuda.tile as ct

        @tl.kernel
        def add(z: tl.Out, x: tl.In, y: tl.In):
            z.store(tl.load_like(x, z) + tl.load_like(y, z))

        X = tl.spec(4096, "float32")
        TILELAB_EXAMPLES = {"add": (X.partition(256), X, X)}
        '''))
    return f
