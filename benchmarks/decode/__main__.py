"""``python -m benchmarks.decode``: the decode benchmark's command line
(:func:`benchmarks.decode.throughput.main`; ``--help`` lists its options)."""
from .throughput import main

main()
