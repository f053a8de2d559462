"""The benchmark suite is the ``benchmarks`` package at the repository root (run as
``python -m benchmarks``); its tests import it from there, whatever directory pytest
was started in. This is the one place that puts the root on ``sys.path``."""
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
