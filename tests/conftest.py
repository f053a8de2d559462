"""Test-wide setup: a private compile cache, the GPU marker skip, and torch where CI
requires it."""
import os
import tempfile

# Keep the user's ~/.cache/tilelab out of the tests (and start from a cold cache).
os.environ.setdefault("TILELAB_CACHE_DIR", tempfile.mkdtemp(prefix="tilelab-test-cache-"))


def pytest_sessionstart(session):
    """Under TILELAB_REQUIRE_TORCH=1 (as in CI, which installs the torch extra) the torch
    interop tests must run: a missing torch stops the run instead of skipping them."""
    if os.environ.get("TILELAB_REQUIRE_TORCH") == "1":
        try:
            import torch  # noqa: F401
        except ImportError as e:
            raise RuntimeError(f"TILELAB_REQUIRE_TORCH=1 but torch cannot be imported ({e}); "
                               "install it with pip install -e '.[torch]'") from None
