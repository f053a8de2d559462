"""Helper modules imported by kernels in the interpreter tests (a user library)."""
