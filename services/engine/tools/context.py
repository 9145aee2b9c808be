"""A run's side of the tools: the sources its conversation allows
(:class:`AllowedSources`), its :class:`ToolContext` — the user, the run,
whether the model is web-only, and ``sources_read``: what the tools actually
read, for the run's ``sources_json`` (a source merely available never
appears there) — and what one call gives back (:class:`ToolResult`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from services.engine.providers.base import ChatMessage
from services.engine.tools.backend import InstructionProposal, LiveEntry
from services.shared.write_guard import asks_instruction_update
from switchboard.threads.v1 import threads_pb2


@dataclass(frozen=True)
class AllowedSources:
    """What a conversation allows its runs to read (its ``allowed_sources``;
    not the run's ``sources``, which is what was read)."""

    workspace: bool = True
    connectors: frozenset[str] = frozenset()
    mcp_servers: frozenset[str] = frozenset()
    # Durable memory recall (on unless the conversation switched it off).
    memory: bool = True

    @classmethod
    def from_proto(cls, message: threads_pb2.AllowedSources) -> AllowedSources:
        return cls(
            message.workspace,
            frozenset(message.connectors),
            frozenset(message.mcp_servers),
            message.memory if message.HasField("memory") else True,
        )


@dataclass(frozen=True)
class SourceRead:
    kind: str  # "page", "connector", "mcp", "agent"
    id: str
    title: str

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "id": self.id, "title": self.title}


@dataclass
class ToolContext:
    user: str
    run_id: str
    allowed: AllowedSources
    web_only: bool = False
    # Whether the instruction tool is offered: when the user's own message
    # asks to remember something or to change the instructions (derived
    # from ``request``; content a tool read never can).
    allow_instruction_update: bool = False
    sources_read: list[SourceRead] = field(default_factory=list)
    # Said to the user before the first model call (an MCP server that could
    # not start, sources a web-only model does not get...).
    notices: list[str] = field(default_factory=list)
    # The user's own message of this run: the only text that may ask for a
    # write, and the only words a write may hold (services.shared.write_guard).
    # Empty: every write is refused.
    request: str = ""
    # Who the run speaks as ("personal" in a chat; the asked agent in an
    # AskAgent run), the agents waiting on it in its chain of asks (itself
    # last), and the correlation id nested asks carry on.
    agent: str = "personal"
    ask_chain: tuple[str, ...] = ()
    correlation_id: str = ""
    # The run's project: the one whose memory it reads, and where save_note
    # writes ("" = the user's personal project; an AskAgent run's is the
    # asked agent's).
    project_id: str = ""
    # The language of the run's texts: the notices below are said in it.
    language: str = "en"

    def __post_init__(self) -> None:
        self.allow_instruction_update = self.allow_instruction_update or asks_instruction_update(self.request)

    @property
    def live_state_id(self) -> str:
        """Whose live-state entry this run reads as its own and sets: the
        asked agent's in an AskAgent run; in a chat, the user's (every
        member's chat speaks as "personal", which would make one entry of
        all of them in a shared project)."""
        return self.agent if self.agent != "personal" else self.user

    def record(self, kind: str, source_id: str, title: str) -> None:
        """Declares a read; each source appears once, in the order first read."""
        if not any(s.kind == kind and s.id == source_id for s in self.sources_read):
            self.sources_read.append(SourceRead(kind, source_id, title))

    def sources_json(self) -> list[dict[str, str]]:
        return [source.as_dict() for source in self.sources_read]


@dataclass(frozen=True)
class ToolResult:
    call_id: str
    tool: str
    family: str
    content: str
    is_error: bool
    proposal: InstructionProposal | None = None
    # The live state entry the call set (set_live_state).
    live_entry: LiveEntry | None = None
    # For the user, as a notice: a write this run's user did not ask for (or
    # not in their words) was refused (WRITE_REFUSED), or a quota refused the
    # call (its reason without the ERROR_REASON_ prefix: QUOTA_EXCEEDED...).
    notice: str | None = None
    notice_code: str = "WRITE_REFUSED"

    def message(self) -> ChatMessage:
        """The result as the "tool" message that answers the call."""
        return ChatMessage(role="tool", content=self.content, tool_call_id=self.call_id)
