"""Test-wide setup: a private compile cache, and the GPU marker skip."""
import os
import tempfile

# Keep the user's ~/.cache/tilelab out of the tests (and start from a cold cache).
os.environ.setdefault("TILELAB_CACHE_DIR", tempfile.mkdtemp(prefix="tilelab-test-cache-"))
