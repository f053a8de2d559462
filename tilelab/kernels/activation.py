"""The activations the kernel library fuses, named once for every kernel.

:class:`Activation` is the one table: the element-wise ops (``add(x, y,
activation=...)``, :func:`~tilelab.kernels.unary`), the GEMM epilogue
(``matmul(..., activation=...)``, ``bmm``, ``gemv``) and their float64 references all
take it, and the kernels receive its integer value as a compile-time constant (the
device side, :func:`tilelab.kernels._host.device.activate`, branches on it).

Every ``activation=`` keyword accepts ``None`` (the identity), an :class:`Activation`
member, or a name: a member's lower-case name (``"relu"``, ``"gelu_tanh"``,
``"gelu_erf"``, ``"silu"``, ``"sigmoid"``, ``"exp"``, ``"none"``) or an alias
(:data:`ALIASES`: ``"gelu"`` is the tanh form, as in ``torch.nn.GELU(approximate=
"tanh")`` and the library's own ``gelu()`` default).

Example:
    >>> from tilelab.kernels.activation import Activation, activation_code
    >>> activation_code("gelu", "add()") is Activation.GELU_TANH
    True
    >>> int(Activation.SILU), Activation.SILU.label
    (4, 'silu')
"""
from __future__ import annotations

import enum
from typing import Any, Union

__all__ = ["Activation", "ALIASES", "ACTIVATIONS", "ActivationLike", "activation_code",
           "activation_names"]


class Activation(enum.IntEnum):
    """An activation fused into a kernel; its value is the kernels' constant.

    ``GELU_TANH`` is GELU's tanh approximation, ``GELU_ERF`` the exact form (through
    erfc); ``NONE`` is the identity. Members compare equal to their codes, and
    :meth:`parse` turns any accepted spelling into a member.

    Example:
        >>> Activation.parse("gelu_erf"), Activation.parse(None)
        (<Activation.GELU_ERF: 3>, <Activation.NONE: 0>)
        >>> Activation.RELU == 1
        True
    """

    NONE = 0
    RELU = 1
    GELU_TANH = 2
    GELU_ERF = 3
    SILU = 4
    SIGMOID = 5
    EXP = 6

    @property
    def label(self) -> str:
        """The member's name as the keyword spells it (``"gelu_tanh"``).

        Example:
            >>> Activation.GELU_ERF.label
            'gelu_erf'
        """
        return self.name.lower()

    @classmethod
    def parse(cls, value: Any, who: str = "activation") -> "Activation":
        """The member that ``value`` (None, a member, a name or an alias) names.

        Raises ``ValueError`` naming ``who`` and listing the accepted names otherwise.

        Example:
            >>> Activation.parse("gelu")
            <Activation.GELU_TANH: 2>
        """
        return activation_code(value, who)


#: names accepted besides the members' own (``"gelu"`` keeps its meaning everywhere:
#: the tanh form)
ALIASES: dict[str, Activation] = {"gelu": Activation.GELU_TANH}

#: what an ``activation=`` keyword takes
ActivationLike = Union[None, str, Activation]

_BY_NAME: dict[str, Activation] = {**{a.label: a for a in Activation}, **ALIASES}

#: every accepted spelling -> member (``None`` too): the one table the element-wise and
#: matmul modules re-export as their ``ACTIVATIONS``
ACTIVATIONS: dict[str | None, Activation] = {None: Activation.NONE, **_BY_NAME}


def activation_names() -> list[str]:
    """Every name an ``activation=`` keyword accepts, members first, then aliases.

    Example:
        >>> activation_names()[:3]
        ['none', 'relu', 'gelu_tanh']
    """
    return list(_BY_NAME)


def activation_code(value: Any, who: str) -> Activation:
    """``value`` as an :class:`Activation`; ``who`` prefixes the error (``"add()"``).

    Example:
        >>> activation_code(Activation.EXP, "unary()"), activation_code("none", "mm")
        (<Activation.EXP: 6>, <Activation.NONE: 0>)
        >>> activation_code("tanh", "add()")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: add(): unknown activation='tanh'; choose None, ... 'gelu_erf', ...
    """
    if value is None:
        return Activation.NONE
    if isinstance(value, Activation):
        return value
    if isinstance(value, str):
        found = _BY_NAME.get(value)
        if found is not None:
            return found
    names = ", ".join(repr(n) for n in _BY_NAME)
    raise ValueError(f"{who}: unknown activation={value!r}; choose None, a "
                     f"tilelab.kernels.Activation or one of {names}")
