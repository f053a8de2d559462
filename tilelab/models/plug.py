"""Kernels of one's own in the decode step: the roles a user kernel may take.

Why: the course's capstone has a student write a kernel the engine really uses, and a
kernel writer wants to try a kernel inside the whole model, not only beside a reference.
``Qwen3(weights, kernels={"norm_qkv_gemv": my_kernel})`` (or ``from_pretrained(...,
kernels=...)``) makes the decode step launch ``my_kernel`` in that role, in every layer,
in the replayed graph and in plain launches alike. Each role fixes the kernel's
parameters and what it must compute (:data:`ROLES`).

The engine stays made of safe kernels: a plugged kernel must be a checked ``@tl.kernel``
(a plain function is checked here, so a refused one raises the checker's located
:class:`~tilelab.errors.SafetyError`), never ``unsafe=True``, and its parameters must
have the role's kinds: the output a ``tl.Out`` partition, every tensor an input. So
whatever it computes, it writes only its own tiles of the role's output buffer; a wrong
kernel gives wrong tokens, never a corrupted cache or weight.

Example:
    >>> import tilelab as tl
    >>> def mine(y: tl.Out, w: tl.In, x: tl.In, BK: ct.Constant[int]):
    ...     y.store(tl.load_like(x, y))                 # (wrong, but a safe kernel)
    >>> sorted(plugged({"down_gemv": mine}))
    ['down_gemv']
    >>> plugged({"attention": mine})
    Traceback (most recent call last):
    ...
    tilelab.models.plug.PluggedKernelError: no decode-step role 'attention'; the roles are: norm_qkv_gemv, down_gemv
    hint: Qwen3(..., kernels={role: kernel}) with a role of tilelab.models.plug.ROLES
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import cuda.tile as ct  # noqa: F401  (the docstring's example annotates with it)

import tilelab as tl
from tilelab.errors import TilelabError

__all__ = ["Role", "ROLES", "PluggedKernelError", "plugged"]


class PluggedKernelError(TilelabError, ValueError):
    """A kernel given for a decode-step role that cannot take it: an unknown role, an
    ``unsafe=True`` kernel, or parameters that are not the role's.

    Example:
        >>> print(PluggedKernelError("no decode-step role 'x'", hint="see ROLES"))
        no decode-step role 'x'
        hint: see ROLES
    """


@dataclass(frozen=True)
class Role:
    """A launch of the decode step a user kernel may take: its ``name`` (the step's
    launch kind), the parameters the step passes (``params``: name and kind, ``"Out"``
    for the output partition, ``"In"`` for a tensor, ``"scalar"`` or ``"constant"``)
    and what the kernel computes (``computes``).

    Example:
        >>> ROLES["down_gemv"].signature
        '(y: tl.Out, w: tl.In, x: tl.In, BK: ct.Constant[int])'
    """

    name: str
    params: tuple[tuple[str, str], ...]
    computes: str

    @property
    def signature(self) -> str:
        """The parameters as a kernel declares them."""
        spell = {"Out": "tl.Out", "In": "tl.In", "scalar": "float",
                 "constant": "ct.Constant[int]"}
        return "(" + ", ".join(f"{n}: {spell[k]}" for n, k in self.params) + ")"


#: the roles, by the step's launch kind
ROLES: dict[str, Role] = {r.name: r for r in (
    Role("norm_qkv_gemv",
         (("y", "Out"), ("w", "In"), ("h", "In"), ("down", "In"), ("g", "In"),
          ("eps", "scalar"), ("BK", "constant")),
         "y[N] = w[N, K] @ (rmsnorm(h + down) * g): the residual stream's two parts "
         "added, RMS-normed with eps and the weight g, times the concatenated q/k/v "
         "weights (layer 0 passes zeros as down); y is partitioned into tiles of rows, "
         "BK is a power of two for the walk along K"),
    Role("down_gemv",
         (("y", "Out"), ("w", "In"), ("x", "In"), ("BK", "constant")),
         "y[N] = w[N, K] @ x[K]: the MLP's down projection; y is partitioned into tiles "
         "of rows, BK is a power of two for the walk along K"),
)}

_KINDS = {"Out": {"Out"}, "In": {"In", "auto"}, "scalar": {"auto"},
          "constant": {"constant"}}


def plugged(kernels: Mapping[str, Any] | None, *, fuse_norms: bool = True) -> dict[str, Any]:
    """The checked kernels of ``kernels`` (role -> kernel or plain function), or raise
    :class:`PluggedKernelError` (or the checker's ``SafetyError`` for a refused
    function) saying what to change. ``fuse_norms``: the step's
    ``StepConfig.fuse_norms``; ``norm_qkv_gemv`` is a launch of the fused step only.

    Example:
        >>> plugged(None)
        {}
    """
    if kernels is None:
        return {}
    if not isinstance(kernels, Mapping):
        raise PluggedKernelError(f"kernels must be a dict of role -> kernel, got "
                                 f"{type(kernels).__name__}",
                                 hint="e.g. kernels={'down_gemv': my_gemv}")
    out = {role: _checked(role, k) for role, k in kernels.items()}
    if "norm_qkv_gemv" in out and not fuse_norms:
        raise PluggedKernelError("the role 'norm_qkv_gemv' is a launch of the fused step; "
                                 "this step runs StepConfig(fuse_norms=False)",
                                 hint="plug it into a step with fuse_norms=True (the "
                                      "default)")
    return out


def _checked(role: str, kernel: Any) -> Any:
    spec = ROLES.get(role)
    if spec is None:
        raise PluggedKernelError(f"no decode-step role {role!r}; the roles are: "
                                 + ", ".join(ROLES),
                                 hint="Qwen3(..., kernels={role: kernel}) with a role of "
                                      "tilelab.models.plug.ROLES")
    if not isinstance(kernel, tl.Kernel):
        if not callable(kernel):
            raise PluggedKernelError(f"the kernel for {role!r} is a "
                                     f"{type(kernel).__name__}, not a kernel",
                                     hint=f"a @tl.kernel function {spec.signature}")
        kernel = tl.kernel(kernel)          # a refusal raises the located SafetyError
    if kernel.options.unsafe:
        raise PluggedKernelError(
            f"the kernel {kernel.name!r} for {role!r} is unsafe=True; the engine runs "
            "only checked kernels", hint="write it as a safe kernel: its output a tl.Out "
                                         "partition, every other tensor a tl.In read")
    got = [(p.name, p.kind.value) for p in kernel.definition.analysis.params]
    if len(got) != len(spec.params) or any(
            kind not in _KINDS[want] for (_, kind), (_, want) in zip(got, spec.params)):
        shown = ", ".join(f"{n}: {k}" for n, k in got)
        raise PluggedKernelError(
            f"the kernel {kernel.name!r} takes ({shown}); the role {role!r} passes "
            f"{spec.signature}", hint=f"{role} computes {spec.computes}")
    return kernel
