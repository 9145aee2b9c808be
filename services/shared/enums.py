"""Proto enums seen as the short names the domain stores and compares.

A value's short name is its proto name without the enum's prefix, in lower
case: ``ROLE_USER`` is ``"user"``, ``SEGMENT_STATE_OPEN`` is ``"open"``. One
table per enum, built from the enum's descriptor, so a value added to a
.proto is known everywhere at once; the few domain names that differ from
the proto's are given as aliases."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from google.protobuf.internal.enum_type_wrapper import _EnumTypeWrapper

V = TypeVar("V", bound=int)


class EnumNames(Generic[V]):
    """Between the numbers of one proto enum and their short names.

    ``aliases`` maps a domain name to the proto short name it stands for
    (``{"none": "not_due"}``); ``separator`` replaces "_" in short names
    (``"-"``: ``ROUTE_BRANCH_GREY_LLM`` is ``"grey-llm"``)."""

    def __init__(
        self, enum: _EnumTypeWrapper[V], aliases: Mapping[str, str] | None = None, separator: str = "_"
    ) -> None:
        unspecified = enum.DESCRIPTOR.values[0].name
        prefix = unspecified.removesuffix("UNSPECIFIED")
        self._unspecified = enum.Value(unspecified)
        short = {
            enum.Value(value.name): value.name.removeprefix(prefix).lower().replace("_", separator)
            for value in enum.DESCRIPTOR.values
            if value.number != 0
        }
        by_short_name = {name: number for number, name in short.items()}
        renamed = {by_short_name[proto]: domain for domain, proto in (aliases or {}).items()}
        names = {number: renamed.get(number, name) for number, name in short.items()}
        self._names: dict[int, str] = {int(number): name for number, name in names.items()}
        self._numbers = {name: number for number, name in names.items()}

    @property
    def names(self) -> tuple[str, ...]:
        """The short names, in the enum's order (UNSPECIFIED has none)."""
        return tuple(self._names.values())

    def __contains__(self, number: object) -> bool:
        """Whether ``number`` is a value of the enum (UNSPECIFIED included)."""
        return number == 0 or number in self._names

    def name(self, number: int, default: str = "") -> str:
        """The short name of ``number``; ``default`` for UNSPECIFIED or a number the enum lacks."""
        return self._names.get(number, default)

    def number(self, name: str) -> V:
        """The number of a short name; 0 (UNSPECIFIED) for a name the enum lacks."""
        return self._numbers.get(name, self._unspecified)
