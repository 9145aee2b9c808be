"""docs/grpc.md is what protos/reference.py writes from the contracts: a
field, RPC or comment added to a .proto and not to the page fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("grpc_reference", ROOT / "protos" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_grpc_reference_page_is_generated_from_the_contracts() -> None:
    page = (ROOT / "docs" / "grpc.md").read_text()
    assert page == reference().render(), "docs/grpc.md is stale: run .venv/bin/python protos/reference.py"


def test_every_rpc_and_field_of_the_contracts_is_on_the_page_with_its_comment() -> None:
    module = reference()
    page = (ROOT / "docs" / "grpc.md").read_text()
    from switchboard.comments import COMMENTS

    for file in module.files():
        for service in file.services_by_name.values():
            for method in service.methods:
                assert f"| `{method.name}` |" in page
                assert module._comment(method.full_name) in page
        for message in file.message_types_by_name.values():
            assert f'<a id="{module._anchor(message.full_name)}"></a>' in page
            for field in message.fields:
                assert f"| `{field.name}` | {field.number} |" in page
    # The run event's oneof and a comment, as a reader would look them up.
    assert "| `delta` | 13 |" in page and COMMENTS["switchboard.engine.v1.RunEvent.delta"] in page
