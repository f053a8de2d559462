"""tilelab's benchmark suite: one entry point, ``python -m benchmarks`` (run from the
repository root), and named groups registered in :data:`benchmarks.groups.GROUPS`.

See benchmarks/README.md for the groups, the options and the methodology.
"""
