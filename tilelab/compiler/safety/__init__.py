"""The safety checker: an allowlist over the captured source of a kernel and of every
helper it reaches (docs/safety.md, "The allowlist").

Modules, one job each: :mod:`kinds` (parameter and op kinds), :mod:`rules` (rule ids,
messages' advice), :mod:`optable` (cuda.tile's public API, classified, and the other
allowlists), :mod:`scope` (name resolution), :mod:`snapshot` (what the check resolved),
:mod:`structure`, :mod:`partitions`, :mod:`hints`, :mod:`calls`, :mod:`combiners`,
:mod:`views`, :mod:`bounds`, :mod:`waits` and :mod:`defaults` (the rules),
:mod:`accesses` (the record of each accepted memory access and why it is safe),
:mod:`checker` (one function), :mod:`program` (helpers, captured once) and
:mod:`analysis` (the entry points).
"""
from tilelab.compiler.safety.accesses import AccessKind, AccessRecord
from tilelab.compiler.safety.analysis import (KernelAnalysis, ParamInfo, analyze_kernel,
                                              recheck)
from tilelab.compiler.safety.kinds import OpKind, ParamKind
from tilelab.compiler.safety.partitions import Site
from tilelab.compiler.safety.program import Program
from tilelab.compiler.safety.rules import RULES, Rule

__all__ = ["AccessKind", "AccessRecord", "KernelAnalysis", "ParamInfo", "Site", "Program",
           "ParamKind", "OpKind", "RULES", "Rule", "analyze_kernel", "recheck"]
