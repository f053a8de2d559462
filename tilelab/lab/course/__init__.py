"""The tour notebooks' helpers: exercises, their graders and answers, shown errors, and
recorded GPU results.

Beside :mod:`tilelab.lab.cell` (neither imports the other); it may draw with
:mod:`tilelab.lab.figures`. A new exercise goes in its notebook's module of
:mod:`~tilelab.lab.course.exercises` (``nb01`` ... ``nb08``): its grader, registered with
``register``, and its reference answer, registered with ``reference``.
Modules, one job each: :mod:`~tilelab.lab.course.grading` (verdicts and the registry),
:mod:`~tilelab.lab.course.exercises` (``check``, ``grade``, ``solution``; the graders,
one module per notebook, and the machinery they share),
:mod:`~tilelab.lab.course.expect` (an expected error, shown),
:mod:`~tilelab.lab.course.gpu_results` (measurements from ``benchmarks/results``) and
:mod:`~tilelab.lab.course.traffic` (bytes launches move, and small teaching charts).
"""
