"""The shape of a built-in tool: one module per tool holds its arguments
model, description, offer rule, write flag and handler, as a
:class:`Builtin`; the registry lists them."""

from __future__ import annotations

import copy
import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from services.engine.tools.backend import InstructionProposal, LiveEntry, ProposedNote, ToolBackend
from services.engine.tools.connectors import Connector
from services.engine.tools.context import ToolContext


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


@dataclass(frozen=True)
class ToolServices:
    """What the built-in tools act on: the backend over the other services,
    and the configured connectors by name."""

    backend: ToolBackend
    connectors: Mapping[str, Connector]

    def connectors_allowed(self, context: ToolContext) -> list[str]:
        if context.web_only:
            return []
        return sorted(set(self.connectors) & context.allowed.connectors)


Handler = Callable[
    [ToolServices, Any, ToolContext, str],
    Awaitable[tuple[str, InstructionProposal | ProposedNote | LiveEntry | None]],
]


@dataclass(frozen=True)
class Builtin:
    name: str
    family: str
    description: str
    args: type[Args]
    # (services, arguments, context, call id) -> the result's text and what
    # the engine shows beside it (a proposal, the live state entry set).
    handler: Handler
    offered: Callable[[ToolContext, ToolServices], bool]
    # Writes (memory, another agent's thread, the live state): a call the
    # run is not offered is a refused write, with a notice. Each handler
    # applies its write's own rule (write_guard for memory and asks).
    writes: bool = False
    # Fits the arguments' schema to the run (a fresh copy each time).
    fit: Callable[[dict[str, Any], ToolContext, ToolServices], None] | None = None

    def parameters(self, context: ToolContext, services: ToolServices) -> dict[str, Any]:
        """The arguments' JSON Schema, as this run is offered it."""
        parameters = copy.deepcopy(_built_schema(self.args))
        if self.fit is not None:
            self.fit(parameters, context, services)
        return parameters


@functools.cache
def _built_schema(model: type[BaseModel]) -> dict[str, Any]:
    # Built once per tool: every run asks for the tool list.
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema
