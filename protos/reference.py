"""Writes docs/grpc.md, the reference of every gRPC contract, from the
generated descriptors and the .proto files' comments (switchboard.comments):
the services with their RPCs, then each package's messages with their
fields and its enums with their values. The contracts are the one source:
`tests/unit/test_grpc_reference.py` fails when the page is not what this
writes.

    .venv/bin/python protos/reference.py            # rewrites docs/grpc.md
    .venv/bin/python protos/reference.py --check    # exits 1 when it is stale
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Iterator
from pathlib import Path

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor, FileDescriptor

import switchboard
from switchboard.comments import COMMENTS

PAGE = Path(__file__).resolve().parents[1] / "docs" / "grpc.md"

HEAD = """# gRPC reference

Every contract of the four services, generated from `protos/` by
`protos/reference.py` (do not edit: run it after changing a `.proto`; a test
fails while this page is stale). How the services behave, their errors and
an example client are in [api.md](api.md#grpc-api); this page is what each
element is, in the words of its contract.
"""

_TYPES = {
    FieldDescriptor.TYPE_DOUBLE: "double",
    FieldDescriptor.TYPE_FLOAT: "float",
    FieldDescriptor.TYPE_INT64: "int64",
    FieldDescriptor.TYPE_UINT64: "uint64",
    FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_UINT32: "uint32",
    FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BYTES: "bytes",
    FieldDescriptor.TYPE_SINT32: "sint32",
    FieldDescriptor.TYPE_SINT64: "sint64",
    FieldDescriptor.TYPE_FIXED32: "fixed32",
    FieldDescriptor.TYPE_FIXED64: "fixed64",
}


def files() -> list[FileDescriptor]:
    """The descriptors of every generated _pb2 module, by file name."""
    found = {}
    for module in pkgutil.walk_packages(switchboard.__path__, "switchboard."):
        if module.name.endswith("_pb2"):
            descriptor = importlib.import_module(module.name).DESCRIPTOR
            found[descriptor.name] = descriptor
    return [found[name] for name in sorted(found)]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _comment(full_name: str) -> str:
    return _cell(COMMENTS.get(full_name, ""))


def _anchor(full_name: str) -> str:
    return full_name.lower().replace(".", "")


def _link(full_name: str) -> str:
    if full_name.startswith("switchboard."):
        return f"[`{full_name.rsplit('.', 1)[-1]}`](#{_anchor(full_name)})"
    return f"`{full_name}`"


def _type(field: FieldDescriptor) -> str:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        return f"map<{_type(key)}, {_type(value)}>"
    if field.message_type is not None:
        name = _link(field.message_type.full_name)
    elif field.enum_type is not None:
        name = _link(field.enum_type.full_name)
    else:
        name = f"`{_TYPES[field.type]}`"
    if field.is_repeated:
        return f"repeated {name}"
    if field.has_presence and field.containing_oneof is None and field.message_type is None:
        return f"optional {name}"
    return name


def _message(message: Descriptor, level: int) -> Iterator[str]:
    if message.GetOptions().map_entry:
        return
    yield f"{'#' * level} {message.full_name.split('.', 3)[-1]}"
    yield f'<a id="{_anchor(message.full_name)}"></a>'
    yield ""
    if comment := _comment(message.full_name):
        yield comment
        yield ""
    if message.fields:
        yield "| Field | Number | Type | Description |"
        yield "|---|---:|---|---|"
        for field in sorted(message.fields, key=lambda f: f.number):
            oneof = field.containing_oneof
            where = (
                f" (one of `{oneof.name}`)" if oneof is not None and not oneof.name.startswith("_") else ""
            )
            yield f"| `{field.name}` | {field.number} | {_type(field)} | {_comment(field.full_name)}{where} |"
        yield ""
    for enum in message.enum_types:
        yield from _enum(enum, level + 1)
    for nested in message.nested_types:
        yield from _message(nested, level + 1)


def _enum(enum: EnumDescriptor, level: int) -> Iterator[str]:
    yield f"{'#' * level} {enum.full_name.split('.', 3)[-1]}"
    yield f'<a id="{_anchor(enum.full_name)}"></a>'
    yield ""
    if comment := _comment(enum.full_name):
        yield comment
        yield ""
    yield "| Value | Number | Description |"
    yield "|---|---:|---|"
    scope = enum.full_name.rsplit(".", 1)[0]
    for value in enum.values:
        yield f"| `{value.name}` | {value.number} | {_comment(f'{scope}.{value.name}')} |"
    yield ""


def render() -> str:
    lines = [HEAD]
    described = files()
    lines += ["## Services", ""]
    for file in described:
        for service in file.services_by_name.values():
            lines += [f"### {service.full_name}", "", f"`{file.name}`. {_comment(service.full_name)}", ""]
            lines += ["| RPC | Request | Response | Description |", "|---|---|---|---|"]
            for method in service.methods:
                streams = " (stream)" if method.server_streaming else ""
                lines.append(
                    f"| `{method.name}` | {_link(method.input_type.full_name)} "
                    f"| {_link(method.output_type.full_name)}{streams} | {_comment(method.full_name)} |"
                )
            lines.append("")
    for file in described:
        if not file.message_types_by_name and not file.enum_types_by_name:
            continue
        lines += [f"## {file.name}", "", f"Package `{file.package}`.", ""]
        for enum in file.enum_types_by_name.values():
            lines += _enum(enum, 3)
        for message in file.message_types_by_name.values():
            lines += _message(message, 3)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if PAGE.read_text() != text:
            print(f"{PAGE} is stale: run .venv/bin/python protos/reference.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
