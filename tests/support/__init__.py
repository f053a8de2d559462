"""Helpers and fixtures that more than one test folder uses, defined once.

``pyproject.toml`` puts ``tests/`` on ``sys.path`` (``pythonpath``), so a test imports them
as ``from support.backends import cpu_backend`` under any pytest import mode:

* :mod:`support.backends`: the CPU backend for a module's tests (``cpu_backend``,
  ``cpu_backend_private_cache``);
* :mod:`support.data`: seeded random inputs (``randn``, ``rand_tensor``);
* :mod:`support.cubins`: real cubins and remark files built once per test process.

A helper used by one folder only stays in that folder, imported by its path from
``tests/`` (``from compiler import corpus_kernels``).
"""
