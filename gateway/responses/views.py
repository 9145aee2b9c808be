"""HTTP views of proto messages: a `ProtoView` subclass names its message
(`class Agent(ProtoView, proto=threads_pb2.Agent)`) and gets its fields
from the message's descriptor; each field the HTTP body shows differently
is declared once, its annotation typing it and a `Reshape` converting its
value from the message (`injection_strategy: str = short(...)`).
`Agent.from_proto(message)` is the body a route returns,
`Agent.proto_dict(message)` the same as a dict.

A body is the message as `message_dict` prints it (proto JSON with the
proto field names; int64 as strings, enums by name, a Timestamp as RFC 3339
text, an unset message or `optional` field absent), then reshaped field by
field (an enum shortened to `done`, an int64 turned into a number, a nested
message reshaped by its own view). A field added to a proto appears in its
view without a copy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Self, cast

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from pydantic import BaseModel, Field, create_model

# BaseModel's metaclass, which pydantic exports only from here.
from pydantic._internal._model_construction import ModelMetaclass
from pydantic_core import PydanticUndefined

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
    """A field the HTTP body shows differently from proto JSON, or adds: what
    the body says of it (after the proto's comment), and how its value
    comes from the message. Its type is the field's annotation. Without
    `convert` the value is the printed one, or one the route adds
    (`from_proto(message, name=value)`)."""

    description: str
    convert: Convert | None = None
    # Some bodies leave it out (else every body has it).
    optional: bool = False


class _ProtoViewMeta(ModelMetaclass):
    """Builds a view's fields from its message's descriptor before pydantic
    reads them: each proto field in order, typed as message_dict prints it,
    unless the class declares it (a `Reshape`); declared fields the message
    lacks come last."""

    def __new__(
        mcs,
        cls_name: str,
        bases: tuple[type[Any], ...],
        namespace: dict[str, Any],
        proto: type[Message] | None = None,
        name: str | None = None,
        drop: tuple[str, ...] = (),
        **kwargs: Any,
    ) -> type:
        if proto is None:
            return super().__new__(mcs, cls_name, bases, namespace, **kwargs)
        descriptor = cast(Descriptor, proto.DESCRIPTOR)
        cls_name = name or cls_name
        namespace["__qualname__"] = cls_name
        namespace.setdefault("__doc__", COMMENTS.get(descriptor.full_name))
        # Declares nothing: the one view of the message, the one nested views use.
        shared = cls_name == descriptor.name and not drop and not namespace.get("__annotations__")
        converters = _derive(descriptor, namespace, drop)
        # Annotations resolve in the declaring module, not in this frame.
        kwargs["__pydantic_reset_parent_namespace__"] = False
        cls = super().__new__(mcs, cls_name, bases, namespace, **kwargs)
        view = cast("type[ProtoView]", cls)
        view.reshaped = converters
        view.dropped = drop
        if shared:
            if descriptor.full_name in _DERIVED:
                raise TypeError(f"{cls_name}: declare it before a view that nests it")
            _DERIVED[descriptor.full_name] = view
        return cls


class ProtoView(BaseModel, metaclass=_ProtoViewMeta):
    """A response model derived from a proto message: `class
    Agent(ProtoView, proto=threads_pb2.Agent)`, with `name` (the model's name
    when it differs from the class's) and `drop` (fields the body leaves
    out); each field it reshapes or adds is declared with its type and a
    `Reshape` (short, number, nested, computed...)."""

    model_config = STRICT
    reshaped: ClassVar[dict[str, Convert]] = {}
    dropped: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(
        cls,
        proto: type[Message] | None = None,
        name: str | None = None,
        drop: tuple[str, ...] = (),
        **kwargs: Any,
    ) -> None:
        # The metaclass uses the arguments; declared here for the type checker.
        super().__init_subclass__(**kwargs)

    @classmethod
    def proto_dict(cls, message: Message, **added: Any) -> dict[str, Any]:
        """The body of `message` as a dict; `added` are the fields the route
        sets itself."""
        data = message_dict(message)
        printed = dict(data)
        for field_name in cls.dropped:
            data.pop(field_name, None)
        for field_name, convert in cls.reshaped.items():
            value = convert(message, field_name, printed)
            if value is ABSENT:
                data.pop(field_name, None)
            else:
                data[field_name] = value
        data.update(added)
        return data

    @classmethod
    def from_proto(cls, message: Message, **added: Any) -> Self:
        """The body of `message`, validated against this model."""
        return cls.model_validate(cls.proto_dict(message, **added))


# The declarations return Any, as pydantic's Field does: the field's
# annotation is its type.
def required(description: str) -> Any:
    """A field every body has, as printed or added by the route."""
    return Reshape(description)


def optional(description: str) -> Any:
    """A field some bodies leave out, as printed or added by the route."""
    return Reshape(description, optional=True)


def computed(description: str, value: Callable[[Any], Any]) -> Any:
    """A field every body has, computed from the message."""
    return Reshape(description, lambda message, _name, _printed: value(message))


def printed_or(description: str, default: Any) -> Any:
    """A message field every body has: `default` when the message leaves it unset."""
    return Reshape(description, lambda _message, name, printed: printed.get(name, default))


def short(names: EnumNames[Any], description: str | None = None) -> Any:
    """An enum as the routes name it (gateway/enums.py)."""
    return Reshape(
        enums.documented(names) if description is None else description,
        lambda message, name, _printed: enums.json_name(names, getattr(message, name)),
    )


def number(description: str = NUMBER, *, optional: bool = False) -> Any:
    """An int64 as a JSON number (proto JSON prints it as text); with
    `optional`, not required by the schema."""

    def convert(_message: Any, name: str, printed: dict[str, Any]) -> Any:
        # A field with presence left unset is not printed: it stays absent.
        return int(printed[name]) if name in printed else ABSENT

    return Reshape(description, convert, optional=optional)


def nested(view: type[ProtoView], description: str = "", *, null_when_unset: bool = False) -> Any:
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

    return Reshape(description, convert)


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


def _derive(descriptor: Descriptor, namespace: dict[str, Any], drop: tuple[str, ...]) -> dict[str, Convert]:
    """Fills `namespace` with the view's fields (see _ProtoViewMeta); the
    converters of the declared fields."""
    declared: dict[str, Any] = namespace.get("__annotations__", {})
    annotations: dict[str, Any] = {}
    converters: dict[str, Convert] = {}
    for field in descriptor.fields:
        if field.name in drop or field.name in declared:
            if field.name in declared:
                annotations[field.name] = declared[field.name]
            continue
        kind, note = _field_type(field)
        is_map = field.message_type is not None and field.message_type.GetOptions().map_entry
        if field.is_repeated and not is_map:
            kind = list[kind]  # type: ignore[valid-type]
        annotations[field.name] = kind
        description = _described(COMMENTS.get(field.full_name), note)
        default = None if field.has_presence else PydanticUndefined
        namespace[field.name] = Field(default=default, description=description)
    annotations |= declared
    for field_name in declared:
        reshape = namespace.get(field_name)
        if not isinstance(reshape, Reshape):
            continue
        proto_field = descriptor.fields_by_name.get(field_name)
        comment = COMMENTS.get(proto_field.full_name) if proto_field is not None else None
        default = None if reshape.optional else PydanticUndefined
        namespace[field_name] = Field(default=default, description=_described(comment, reshape.description))
        if reshape.convert is not None:
            converters[field_name] = reshape.convert
    namespace["__annotations__"] = annotations
    return converters


def proto_model(descriptor: Descriptor) -> type[ProtoView]:
    """The shared view of a message no field of which is reshaped (the view
    of a nested message that declares none), named after the message."""
    if descriptor.full_name not in _DERIVED:
        # Registered as shared by the metaclass.
        create_model(
            descriptor.name, __base__=ProtoView, __cls_kwargs__={"proto": _message_class(descriptor)}
        )
    return _DERIVED[descriptor.full_name]


def _message_class(descriptor: Descriptor) -> type[Message]:
    return GetMessageClass(descriptor)
