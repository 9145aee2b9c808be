"""HTTP views of proto messages: `proto_model` derives a response model from
a message's descriptor, and each field the HTTP body shows differently is
declared once, as a `Reshape` that both types the field and converts its
value from the message. `Model.from_proto(message)` is the body a route
returns, `Model.proto_dict(message)` the same as a dict.

A body is the message as `message_dict` prints it (proto JSON with the
proto field names; int64 as strings, enums by name, a Timestamp as RFC 3339
text, an unset message or `optional` field absent), then reshaped field by
field (an enum shortened to `done`, an int64 turned into a number, a nested
message reshaped by its own view). A field added to a proto appears in its
view without a copy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from pydantic import BaseModel, Field, create_model

from gateway import enums
from gateway.responses.base import NUMBER, STRICT
from services.shared.api_json import message_dict
from services.shared.enums import EnumNames
from switchboard.comments import COMMENTS

# What a converter returns to leave its field out of the body.
ABSENT: Any = object()
# (the message, the field's name, the message as message_dict prints it) →
# the field's value in the body, or ABSENT.
Convert = Callable[[Any, str, dict[str, Any]], Any]


@dataclass(frozen=True)
class Reshape:
    """A field the HTTP body shows differently from proto JSON, or adds:
    its type, what the body says of it (after the proto's comment), and how
    its value comes from the message. Without `convert` the value is the
    printed one, or one the route adds (`from_proto(message, name=value)`)."""

    kind: Any
    description: str
    convert: Convert | None = None
    # Some bodies leave it out (else every body has it).
    optional: bool = False
    # `kind` is one element's type: a repeated proto field is a list of them.
    per_element: bool = False


class ProtoView(BaseModel):
    """A response model derived from a proto message (see `proto_model`)."""

    model_config = STRICT
    reshaped: ClassVar[dict[str, Convert]] = {}
    dropped: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def proto_dict(cls, message: Message, **added: Any) -> dict[str, Any]:
        """The body of `message` as a dict; `added` are the fields the route
        sets itself."""
        data = message_dict(message)
        printed = dict(data)
        for name in cls.dropped:
            data.pop(name, None)
        for name, convert in cls.reshaped.items():
            value = convert(message, name, printed)
            if value is ABSENT:
                data.pop(name, None)
            else:
                data[name] = value
        data.update(added)
        return data

    @classmethod
    def from_proto(cls, message: Message, **added: Any) -> Self:
        """The body of `message`, validated against this model."""
        return cls.model_validate(cls.proto_dict(message, **added))


def required(kind: Any, description: str) -> Reshape:
    """A field every body has, as printed or added by the route."""
    return Reshape(kind, description)


def optional(kind: Any, description: str) -> Reshape:
    """A field some bodies leave out, as printed or added by the route."""
    return Reshape(kind, description, optional=True)


def computed(kind: Any, description: str, value: Callable[[Any], Any]) -> Reshape:
    """A field every body has, computed from the message."""
    return Reshape(kind, description, lambda message, _name, _printed: value(message))


def printed_or(kind: Any, description: str, default: Any) -> Reshape:
    """A message field every body has: `default` when the message leaves it unset."""
    return Reshape(kind, description, lambda _message, name, printed: printed.get(name, default))


def short(names: EnumNames[Any], description: str | None = None) -> Reshape:
    """An enum as the routes name it (gateway/enums.py)."""
    return Reshape(
        str,
        enums.documented(names) if description is None else description,
        lambda message, name, _printed: enums.json_name(names, getattr(message, name)),
    )


def number(description: str = NUMBER, *, optional: bool = False) -> Reshape:
    """An int64 as a JSON number; with `optional`, absent when the message
    leaves it unset."""

    def convert(message: Any, name: str, printed: dict[str, Any]) -> Any:
        if optional and name not in printed:
            return ABSENT
        return int(getattr(message, name))

    return Reshape(int, description, convert, optional=optional)


def nested(view: type[ProtoView], description: str = "", *, null_when_unset: bool = False) -> Reshape:
    """A message field (or each element of a repeated one) through its own
    view. Always in the body: an unset message shows as its empty view, or
    with `null_when_unset` as null."""

    def convert(message: Any, name: str, _printed: dict[str, Any]) -> Any:
        value = getattr(message, name)
        if message.DESCRIPTOR.fields_by_name[name].is_repeated:
            return [view.proto_dict(element) for element in value]
        if null_when_unset and not message.HasField(name):
            return None
        return view.proto_dict(value)

    kind = view | None if null_when_unset else view
    return Reshape(kind, description, convert, per_element=True)


_SCALARS: dict[int, Any] = {
    FieldDescriptor.TYPE_DOUBLE: float,
    FieldDescriptor.TYPE_FLOAT: float,
    FieldDescriptor.TYPE_BOOL: bool,
    FieldDescriptor.TYPE_STRING: str,
    FieldDescriptor.TYPE_BYTES: str,  # base64
    FieldDescriptor.TYPE_ENUM: str,  # the value's name (RUN_STATUS_DONE)
    FieldDescriptor.TYPE_INT32: int,
    FieldDescriptor.TYPE_SINT32: int,
    FieldDescriptor.TYPE_SFIXED32: int,
    FieldDescriptor.TYPE_UINT32: int,
    FieldDescriptor.TYPE_FIXED32: int,
    # 64-bit integers are strings in proto JSON.
    FieldDescriptor.TYPE_INT64: str,
    FieldDescriptor.TYPE_SINT64: str,
    FieldDescriptor.TYPE_SFIXED64: str,
    FieldDescriptor.TYPE_UINT64: str,
    FieldDescriptor.TYPE_FIXED64: str,
}
_WELL_KNOWN: dict[str, tuple[Any, str]] = {
    "google.protobuf.Timestamp": (str, "RFC 3339 time, UTC (2026-01-31T12:00:00Z)"),
    "google.protobuf.Duration": (str, 'seconds with an "s" suffix ("90s", "1.500s")'),
    "google.protobuf.FieldMask": (str, "comma-separated field paths"),
    "google.protobuf.Struct": (dict[str, Any], "a JSON object"),
}
_DERIVED: dict[str, type[ProtoView]] = {}


def _described(*parts: str | None) -> str | None:
    """The parts that say something, joined: a proto comment, then what the
    HTTP body does differently."""
    text = " — ".join(part for part in parts if part)
    return text[:1].upper() + text[1:] or None


def _field_type(field: FieldDescriptor) -> tuple[Any, str]:
    if field.message_type is None:
        return _SCALARS[field.type], ""
    if field.message_type.GetOptions().map_entry:
        value_type, _ = _field_type(field.message_type.fields_by_name["value"])
        return dict[str, value_type], ""  # type: ignore[valid-type]
    if field.message_type.full_name in _WELL_KNOWN:
        return _WELL_KNOWN[field.message_type.full_name]
    return proto_model(field.message_type), ""


def proto_model(
    descriptor: Descriptor,
    name: str | None = None,
    *,
    drop: tuple[str, ...] = (),
    **reshaped: Reshape,
) -> type[ProtoView]:
    """The view of `descriptor`'s message. A field without presence is
    required (message_dict always prints it); a message, oneof member or
    `optional` field is absent when unset. `drop` removes fields the body
    leaves out; each `Reshape` replaces or adds a field. Without arguments
    the model is shared, named after the message."""
    shared = name is None and not drop and not reshaped
    if shared and descriptor.full_name in _DERIVED:
        return _DERIVED[descriptor.full_name]
    fields: dict[str, Any] = {}
    for field in descriptor.fields:
        if field.name in drop:
            continue
        kind, note = _field_type(field)
        is_map = field.message_type is not None and field.message_type.GetOptions().map_entry
        if field.is_repeated and not is_map:
            kind = list[kind]  # type: ignore[valid-type]
        description = _described(COMMENTS.get(field.full_name), note)
        if field.has_presence:
            fields[field.name] = (kind, Field(default=None, description=description))
        else:
            fields[field.name] = (kind, Field(description=description))
    for field_name, reshape in reshaped.items():
        proto_field = descriptor.fields_by_name.get(field_name)
        comment = COMMENTS.get(proto_field.full_name) if proto_field is not None else None
        kind = reshape.kind
        if reshape.per_element and proto_field is not None and proto_field.is_repeated:
            kind = list[kind]  # type: ignore[valid-type]
        info = Field(description=_described(comment, reshape.description))
        if reshape.optional:
            info = Field(default=None, description=_described(comment, reshape.description))
        fields[field_name] = (kind, info)
    model = create_model(
        name or descriptor.name,
        __base__=ProtoView,
        __doc__=COMMENTS.get(descriptor.full_name),
        **fields,
    )
    model.reshaped = {
        field_name: reshape.convert for field_name, reshape in reshaped.items() if reshape.convert is not None
    }
    model.dropped = drop
    if shared:
        _DERIVED[descriptor.full_name] = model
    return model
