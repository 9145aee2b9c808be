"""The offline model: deterministic, no network. Tests, demos and the
benchmarks run on it."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Sequence

from services.engine.providers.base import (
    ChatMessage,
    Chunk,
    TextChunk,
    ToolCallChunk,
    ToolSpec,
    UsageChunk,
    count_tokens,
)

# A directive the offline model follows wherever it appears in the system
# layers (an instruction page, typically): "Signature: Your QA bot" ends every
# answer with "— Your QA bot". French too ("Signature :", "Signe : ...").
_SIGNATURE = re.compile(r"^\s*[-*]?\s*(?:signature|sign as|signe)\s*:\s*(\S.*?)\s*$", re.I | re.M)


_THREAD_LINE = re.compile(r"^- \[thread[^\]]*\] (.*)$", re.M)


def _thread_fact(system: str, request: str) -> str:
    """The most recent line of the agent's thread (the "- [thread …] " lines the
    engine puts in an ask's context) that shares a word of four letters or
    more with the request: how the offline model "answers from facts in its
    context" when one agent asks another about something it was told earlier."""
    wanted = {w.strip("?.!,:;").lower() for w in request.split() if len(w.strip("?.!,:;")) >= 4}
    lines = [match.group(1) for match in _THREAD_LINE.finditer(system)]
    for line in reversed(lines):
        if wanted & {w.strip("?.!,:;").lower() for w in line.split()}:
            return line
    return ""


class OfflineProvider:
    """Deterministic: the same messages give the same answer, token by token.
    It answers from what its context holds (the request, recalled memory,
    applied skills) and follows the signature directive of its instructions,
    so tests can observe that context reached the model and that changing
    the instruction page changes the next answer."""

    name = "offline"
    kind = "offline"
    max_output_tokens = 1024

    def __init__(self, token_delay: float = 0.0) -> None:
        self._token_delay = token_delay

    async def close(self) -> None:
        """Holds nothing."""

    def answer(self, model: str, messages: Sequence[ChatMessage]) -> str:
        system = "\n".join(m.content for m in messages if m.role == "system")
        request = next((m.content for m in reversed(messages) if m.role == "user"), "")
        words = request.split()
        echo = " ".join(words[:12]) + (" …" if len(words) > 12 else "")
        parts = [f"You asked: {echo}."] if echo else ["You sent an empty message."]
        skills = [line[len("## Skill: ") :] for line in system.splitlines() if line.startswith("## Skill: ")]
        if skills:
            parts.append(f"Applying the skill {', '.join(skills)}.")
        memory = [line[2:] for line in system.splitlines() if line.startswith("- [memory] ")]
        if memory:
            parts.append(f"From memory: {memory[0][len('[memory] ') :]}.")
        thread_fact = _thread_fact(system, request)
        if thread_fact:
            parts.append(f"From the thread: {thread_fact}")
        parts.extend(tool_facts(messages))
        parts.append(f"This answer comes from {model}.")
        signature = _SIGNATURE.findall(system)
        if signature:
            parts.append(f"— {signature[-1]}")
        return " ".join(parts)

    async def stream(
        self,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        *,
        session_key: str = "",
        context_strategy: str = "",
    ) -> AsyncIterator[Chunk]:
        call = tool_call(messages, tools)
        if call is not None:
            yield call
            yield UsageChunk(tokens_in=sum(count_tokens(m.content) for m in messages), tokens_out=1)
            return
        text = self.answer(model, messages)
        tokens = text.split(" ")
        for index, token in enumerate(tokens):
            if self._token_delay:
                await asyncio.sleep(self._token_delay)
            yield TextChunk(token if index == 0 else " " + token)
        yield UsageChunk(tokens_in=sum(count_tokens(m.content) for m in messages), tokens_out=len(tokens))


# Tool rules. When tools are offered and the last message is the user's, a
# request of one of these forms becomes a call of that tool (if offered),
# instead of text; anything else is answered as before. When the last
# messages are tool results, the answer quotes them ("According to ...").
#
#   @mcp:<server>:<tool> {json}            -> mcp__<server>__<tool>, the JSON as arguments
#   read page <id>                          -> read_page
#   check|search|query [my|the] <connector> for <words>
#                                           -> query_connector (a connector offered by that
#                                              name; "mail", "email", "inbox": the first
#                                              offered connector whose name holds "mail")
#   search [my|the] [workspace|pages|wiki|docs] for <words>
#                                           -> search_workspace
#   ask <agent>: <message>                  -> ask_agent
#   save a decision|feature summary|preference|fact: <text>
#                                           -> save_note (title: the text's first words)
#   update|change my instructions: <text>, add to my instructions: <text>
#                                           -> propose_instruction_update

_MCP_RULE = re.compile(r"@mcp:([a-z0-9-]+):([A-Za-z0-9_-]+)\s*(\{.*\})?", re.S)
_READ_RULE = re.compile(r"\bread (?:the )?page\s+([\w.:-]+)", re.I)
_SEARCH_RULE = re.compile(
    r"\b(check|search|query)\s+(?:(?:my|the)\s+)?(?:([\w-]+)\s+)?for\s+(.+?)[\s.?!]*$", re.I | re.S
)
_ASK_RULE = re.compile(r"^\s*(?:please\s+)?ask\s+@?([\w-]+)\s*[:,]?\s+(.+?)\s*$", re.I | re.S)
_SAVE_RULE = re.compile(
    r"\bsave (?:a |an |the |this )?(decision|feature[ _]summary|preference|fact)\s*:\s*(.+?)\s*$", re.I | re.S
)
_INSTRUCTIONS_RULE = re.compile(
    r"\b(?:(?:update|change) my instructions|add to my instructions)\s*:\s*(.+?)\s*$", re.I | re.S
)
_MAIL_WORDS = {"mail", "mails", "email", "emails", "e-mail", "inbox", "mailbox"}
_WORKSPACE_WORDS = {"workspace", "pages", "wiki", "docs"}


def tool_call(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> ToolCallChunk | None:
    """The call the offline model makes for the last user message, if any."""
    if not tools or not messages or messages[-1].role != "user":
        return None
    offered = {tool.name: tool for tool in tools}
    text = messages[-1].content
    call_id = f"offline-call-{sum(1 for m in messages if m.tool_calls) + 1}"

    def make(name: str, arguments: dict[str, object] | str) -> ToolCallChunk | None:
        if name not in offered:
            return None
        encoded = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        return ToolCallChunk(call_id=call_id, name=name, arguments=encoded)

    if match := _MCP_RULE.search(text):
        return make(f"mcp__{match[1]}__{match[2]}", match[3] or "{}")
    if match := _READ_RULE.search(text):
        return make("read_page", {"page_id": match[1]})
    if match := _SAVE_RULE.search(text):
        kind = match[1].lower().replace(" ", "_")
        body = match[2]
        return make("save_note", {"kind": kind, "title": " ".join(body.split()[:8]), "body": body})
    if match := _INSTRUCTIONS_RULE.search(text):
        return make("propose_instruction_update", {"addition": match[1], "reason": f"The user asked: {text}"})
    if match := _ASK_RULE.match(text):
        return make("ask_agent", {"agent": match[1], "message": match[2]})
    if match := _SEARCH_RULE.search(text):
        source, query = (match[2] or "").lower(), match[3]
        connectors = _connector_names(offered.get("query_connector"))
        chosen = source if source in connectors else ""
        if source in _MAIL_WORDS:
            chosen = next((name for name in connectors if "mail" in name), "")
        if chosen:
            return make("query_connector", {"connector": chosen, "query": query})
        if match[1].lower() == "search" and (not source or source in _WORKSPACE_WORDS):
            return make("search_workspace", {"query": query})
    return None


def _connector_names(spec: ToolSpec | None) -> list[str]:
    """The connectors the query_connector tool offers (its schema's enum)."""
    properties = spec.parameters.get("properties") if spec is not None else None
    connector = properties.get("connector") if isinstance(properties, dict) else None
    names = connector.get("enum") if isinstance(connector, dict) else None
    return [str(name) for name in names] if isinstance(names, list) else []


_RESULT_HEADER = re.compile(r'^<tool-result tool="[^"]*" status="(ok|error)">$')


def tool_facts(messages: Sequence[ChatMessage]) -> list[str]:
    """What the tool results that end the conversation say, quoted (their
    first 80 words each), naming each tool."""
    results: list[ChatMessage] = []
    for message in reversed(messages):
        if message.role != "tool":
            break
        results.insert(0, message)
    names = {call.call_id: call.name for m in messages for call in m.tool_calls}
    facts = []
    for result in results:
        lines = result.content.strip().split("\n")
        header = _RESULT_HEADER.match(lines[0]) if lines else None
        failed = header is not None and header[1] == "error"
        # The wrapper's first line after the header is its data notice.
        data = lines[2:-1] if header is not None and len(lines) >= 3 else lines
        words = " ".join(data).split()
        quoted = " ".join(words[:80]) + (" …" if len(words) > 80 else "")
        name = names.get(result.tool_call_id, "the tool")
        fact = f"{name} failed: {quoted}" if failed else f"According to {name}: {quoted}"
        facts.append(fact if fact.endswith((".", "!", "?", "…")) else f"{fact}.")
    return facts
