"""The registry of a run's tools: which it is offered (an unchecked
workspace, connector or MCP server is neither offered nor callable; a
web-only model gets no tool that reads the workspace, a connector, an MCP
server or another agent), their specs, and :meth:`ToolRegistry.execute`,
which never raises for a bad call: a refused, malformed or failed call is
an error result the model can read.

A built-in tool is one module of this package; adding one is its module
and a line in ``BUILTINS``."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from services.engine import texts
from services.engine.providers.base import ToolCallChunk, ToolSpec
from services.engine.tools import (
    ask_agent,
    live_state,
    propose_instruction_update,
    query_connector,
    read_page,
    save_note,
    search_workspace,
    set_live_state,
)
from services.engine.tools.backend import (
    AskUnanswered,
    InstructionProposal,
    LiveEntry,
    ProposedNote,
    ToolBackend,
)
from services.engine.tools.builtin import Builtin, ToolServices
from services.engine.tools.connectors import Connector
from services.engine.tools.context import ToolContext, ToolResult
from services.engine.tools.delimiting import MAX_RESULT_CHARS, wrap_result
from services.engine.tools.mcp_client import McpHub, McpUnavailable, split_mcp_tool_name
from services.engine.tools.policy import (
    MENTION,
    QUOTA_NOTICES,
    ToolRefused,
    WriteRefused,
    reads_workspace,
)
from services.shared.errors import DomainError, Exhausted
from services.shared.write_guard import Refusal

log = logging.getLogger(__name__)

# The built-in tools, in the order a run is offered them.
BUILTINS: tuple[Builtin, ...] = (
    search_workspace.TOOL,
    read_page.TOOL,
    query_connector.TOOL,
    save_note.TOOL,
    propose_instruction_update.TOOL,
    ask_agent.TOOL,
    live_state.TOOL,
    set_live_state.TOOL,
)

# Families of tools: each is one named step of the run (its SSE `step`).
FAMILY_LABELS = {
    "workspace": "Searching the workspace",
    "connectors": "Querying connectors",
    "mcp": "Calling MCP tools",
    "agents": "Asking another agent",
    "memory": "Saving to memory",
    "live_state": "Using the live state",
    "instructions": "Preparing a change to your instructions",
    "tools": "Using tools",  # a call naming no tool the engine knows
}


class ToolRegistry:
    """The tools of the engine: built-ins over a :class:`ToolBackend`, the
    configured connectors, and the MCP servers' tools. Stateless per run:
    everything about a run is in its :class:`ToolContext`."""

    def __init__(
        self,
        backend: ToolBackend,
        connectors: Iterable[Connector] = (),
        mcp: McpHub | None = None,
        max_result_chars: int = MAX_RESULT_CHARS,
    ) -> None:
        self._services = ToolServices(backend, {connector.name: connector for connector in connectors})
        self._mcp = mcp or McpHub(())
        self._limit = max_result_chars
        self._builtins = {tool.name: tool for tool in BUILTINS}

    def _mcp_allowed(self, context: ToolContext) -> list[str]:
        if context.web_only:
            return []
        return sorted(self._mcp.servers & context.allowed.mcp_servers)

    def withheld_notice(self, context: ToolContext) -> str | None:
        """For a web-only model: which of the conversation's sources it does
        not get, to say before the first model call."""
        if not context.web_only:
            return None
        language = context.language
        withheld = [texts.say(language, "withheld.workspace")] if context.allowed.workspace else []
        connectors = sorted(set(self._services.connectors) & context.allowed.connectors)
        if connectors:
            withheld.append(texts.say(language, "withheld.connectors", names=", ".join(connectors)))
        servers = sorted(self._mcp.servers & context.allowed.mcp_servers)
        if servers:
            withheld.append(texts.say(language, "withheld.mcp", names=", ".join(servers)))
        if not withheld:
            return texts.say(language, "sources_withheld.all")
        return texts.say(language, "SOURCES_WITHHELD", withheld=", ".join(withheld))

    def refused_mentions(self, message: str, context: ToolContext) -> list[str]:
        """Notices for the ``@page:<id>``, ``@connector:<name>`` and
        ``@mcp:<server>`` mentions of the user's message that name a source
        this run may not read (mentions are limited to the allowed
        sources); the engine says them before the first model call."""
        notices = []
        for kind, name in MENTION.findall(message):
            if kind == "page":
                allowed = reads_workspace(context)
            elif kind == "connector":
                allowed = name in self._services.connectors_allowed(context)
            else:
                allowed = name in self._mcp_allowed(context)
            if not allowed:
                key = "mention_not_allowed.web_only" if context.web_only else "MENTION_NOT_ALLOWED"
                notices.append(texts.say(context.language, key, kind=kind, name=name))
        return notices

    async def specs(self, context: ToolContext) -> list[ToolSpec]:
        """The tools offered to this run. An allowed MCP server that cannot
        start or list its tools is left out, with a notice in the context."""
        specs = []
        for tool in self._builtins.values():
            if tool.offered(context, self._services):
                specs.append(ToolSpec(tool.name, tool.description, tool.parameters(context, self._services)))
        for server in self._mcp_allowed(context):
            try:
                tools = await self._mcp.list_tools(server)
            except McpUnavailable as exc:
                context.notices.append(texts.say(context.language, "TOOLS_UNAVAILABLE", cause=exc))
                continue
            for mcp_tool in tools:
                description = f"[MCP server {server}] {mcp_tool.description}".strip()
                specs.append(ToolSpec(mcp_tool.qualified_name, description, mcp_tool.input_schema))
        return specs

    def family_of(self, tool: str) -> str:
        """The family of a tool name (for the run's step of that call)."""
        if split_mcp_tool_name(tool):
            return "mcp"
        builtin = self._builtins.get(tool)
        return builtin.family if builtin else "tools"

    async def execute(self, call: ToolCallChunk, context: ToolContext) -> ToolResult:
        """Runs one call if this run may make it. Never raises for the call's
        sake (a cancellation still propagates): a refused, malformed or
        failed call is an error result."""
        mcp_name = split_mcp_tool_name(call.name)
        builtin = self._builtins.get(call.name)
        family = "mcp" if mcp_name else builtin.family if builtin else "tools"

        def result(
            body: str,
            error: bool,
            proposal: InstructionProposal | None = None,
            notice: str | None = None,
            notice_code: str = "WRITE_REFUSED",
            live_entry: LiveEntry | None = None,
        ) -> ToolResult:
            content = wrap_result(call.name, body, error=error, limit=self._limit)
            return ToolResult(
                call.call_id, call.name, family, content, error, proposal, live_entry, notice, notice_code
            )

        try:
            arguments = _arguments(call)
            if mcp_name is not None:
                return result(*await self._call_mcp(mcp_name[0], mcp_name[1], arguments, context))
            if builtin is None:
                raise ToolRefused(f"there is no tool named {call.name!r}")
            if not builtin.offered(context, self._services):
                message = f"the tool {call.name!r} is not available in this conversation"
                if builtin.writes:
                    refusal = Refusal(message, f"{call.name} was refused: {message}.", "unavailable")
                    raise WriteRefused(refusal)
                raise ToolRefused(message)
            try:
                args = builtin.args.model_validate(arguments)
            except ValidationError as exc:
                raise ToolRefused(f"bad arguments for {call.name}: {_errors(exc)}") from None
            body, payload = await builtin.handler(self._services, args, context, call.call_id)
            if isinstance(payload, ProposedNote):
                notice = texts.say(
                    context.language, "NOTE_PROPOSED", proposal_id=payload.proposal_id, title=payload.title
                )
                return result(body, False, notice=notice, notice_code="NOTE_PROPOSED")
            if isinstance(payload, LiveEntry):
                return result(body, False, live_entry=payload)
            return result(body, False, payload)
        except WriteRefused as exc:
            log.info("run %s: %s", context.run_id, exc.refusal.for_user)
            return result(str(exc), True, notice=exc.notice(call.name, context.language))
        except ToolRefused as exc:
            return result(str(exc), True)
        except Exhausted as exc:
            # A quota, not an outage: the user learns which one and what to do.
            code = QUOTA_NOTICES.get(type(exc), "QUOTA_EXCEEDED")
            notice = texts.say(context.language, "tool_refused", tool=call.name, cause=exc.message)
            return result(exc.message, True, notice=notice, notice_code=code)
        except AskUnanswered as exc:
            if exc.notice is None:
                return result(exc.message, True)
            code, notice = exc.notice
            return result(exc.message, True, notice=notice, notice_code=code)
        except DomainError as exc:
            return result(exc.message, True)
        except Exception:  # noqa: BLE001 - a tool's failure is the model's to read, not the run's end
            log.exception("tool %s failed in run %s", call.name, context.run_id)
            return result("the tool failed unexpectedly", True)

    async def _call_mcp(
        self, server: str, tool: str, arguments: Mapping[str, Any], context: ToolContext
    ) -> tuple[str, bool]:
        if server not in self._mcp_allowed(context):
            raise ToolRefused(f"the MCP server {server!r} is not available in this conversation")
        try:
            answer = await self._mcp.call_tool(server, tool, arguments)
        except McpUnavailable as exc:
            return str(exc), True
        if not answer.is_error:
            context.record("mcp", server, f"MCP server {server}")
        return answer.text, answer.is_error


def _arguments(call: ToolCallChunk) -> dict[str, Any]:
    """The call's arguments as an object; broken JSON is refused (unlike
    providers.tool_arguments) so that the model learns what it did wrong."""
    try:
        value = json.loads(call.arguments or "{}")
    except ValueError:
        raise ToolRefused(f"the arguments of {call.name} are not valid JSON") from None
    if not isinstance(value, dict):
        raise ToolRefused(f"the arguments of {call.name} must be a JSON object")
    return value


def _errors(error: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in error.errors()
    )
