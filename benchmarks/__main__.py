"""``python -m benchmarks``: run the benchmark suite (see benchmarks/README.md)."""
import sys

from .suite.cli import cli

sys.exit(cli())
