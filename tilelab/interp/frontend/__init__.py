"""cuTile's front end, as the interpreter reproduces it: what cuTile refuses before a
kernel runs, and in which of its words and exception classes.

``entry`` checks each function once, before it first runs: cuTile's own front end on its
source, then the rules cuTile's compiler applies that its front end does not, each read
from the source by one module: ``static_rules`` (``ct.static_eval`` and its siblings),
``undefined_rules`` (a variable not surely assigned where it is read), ``path_types``
(a variable whose type depends on the branch taken), ``tuple_rules``,
``call_rules`` (calls cuTile's compiler has no implementation of), with ``static_types``
(the types the source shows) beneath them; ``source_checks`` (a repeated tuple) runs as
the kernel is rebuilt. ``dataclass_rules`` (which dataclasses a kernel may create) and
``grid_rules`` (``ct.launch``'s grid limit) are checked where the kernel creates one or
the launch starts; ``cutile_errors`` says which of cuTile's exception classes a refusal
stands for.
"""
