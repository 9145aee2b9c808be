"""Export and import of an agent thread as the files of an agent's folder
(the `.ideai/conversations/agents/` layout). No gRPC here.

    agents/<agent id>/log.N.jsonl     closed segment N, one entry per line
    agents/<agent id>/log.jsonl       the open segment (possibly empty)
    agents/<agent id>/handoff.md      the latest handoff summary, if any
    agents/<agent id>/providers.json  the provider sessions (live and released)
    agents/<agent id>/live_state.json what the agent is doing now, if it says so

Each log line is a JSON object with the entry and its attribution:
thread_id, sequence, requester, target, correlation_id, role, source, run_id,
create_time, content. ``handoff.md`` starts with a front matter naming the
segment it summarizes (``---\\nsegment: N\\n---\\n``), then the summary as
stored. ``live_state.json`` is the agent's unexpired entry in its project's
live state (memory's, read as the exporting user: absent when the agent has
none or that user may not read the project's); an import checks it and
restores nothing from it, since live state says what is true now, not then.
Exporting, importing into a fresh database and exporting again gives the same
thread files byte for byte.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from services.shared.audit import Actor, new_event
from services.shared.enums import EnumNames
from services.shared.errors import FailedPrecondition, InvalidArgument, NotFound, TooLarge
from services.shared.time import aware, utcnow
from services.threads.access import READ, AgentAccess
from services.threads.models import Entry, ProviderSession, Segment, Thread, ThreadsAuditEvent
from services.threads.repository import ThreadsRepository
from services.threads.rotation import check_handoff
from services.threads.sessions import MAX_NATIVE_ID_CHARS, MAX_PROVIDER_ID_CHARS
from services.threads.tables.imports import ImportedThread
from switchboard.memory.v1 import memory_pb2
from switchboard.threads.v1 import threads_pb2

ROLES = EnumNames(threads_pb2.Role)
MAX_FILES = 10_000
_PATH = re.compile(
    r"^agents/(?P<agent>[a-z][a-z0-9-]{0,63})/"
    r"(?P<name>log\.jsonl|log\.(?P<number>[1-9][0-9]{0,8})\.jsonl|handoff\.md|providers\.json"
    r"|live_state\.json)$"
)
_FRONT_MATTER = re.compile(r"^---\nsegment: (?P<number>[1-9][0-9]{0,8})\n---\n")
_LINE_FIELDS: dict[str, type] = {
    "thread_id": str,
    "sequence": int,
    "requester": str,
    "target": str,
    "correlation_id": str,
    "role": str,
    "source": str,
    "run_id": str,
    "create_time": str,
    "content": str,
}


@dataclass(frozen=True)
class ThreadFile:
    path: str
    content: str


class LiveStateReader(Protocol):
    """Where an export reads the agent's live state (memory's, in production)."""

    async def entry(self, actor: Actor, project_id: str, agent_id: str) -> memory_pb2.LiveStateEntry | None:
        """``agent_id``'s unexpired entry in the project, read as ``actor``;
        None when it has none or ``actor`` may not read the project's."""
        ...


def _time(value: datetime) -> str:
    return aware(value).astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _line(entry: Entry) -> str:
    return json.dumps(
        {
            "thread_id": entry.thread_id,
            "sequence": entry.sequence,
            "requester": entry.requester,
            "target": entry.target,
            "correlation_id": entry.correlation_id,
            "role": ROLES.name(entry.role, str(entry.role)),
            "source": entry.source,
            "run_id": entry.run_id,
            "create_time": _time(entry.create_time),
            "content": entry.content,
        },
        ensure_ascii=False,
    )


def _log(entries: Sequence[Entry]) -> str:
    return "".join(_line(entry) + "\n" for entry in entries)


def _providers(sessions: Sequence[ProviderSession]) -> str:
    rows = [
        {
            "provider_id": s.provider_id,
            "native_session_id": s.native_session_id,
            "create_time": _time(s.create_time),
            "release_time": _time(s.release_time) if s.release_time else None,
        }
        for s in sessions
    ]
    rows.sort(key=lambda r: (r["create_time"], r["provider_id"], r["native_session_id"]))
    return json.dumps(rows, ensure_ascii=False, indent=2) + "\n"


def export_files(
    thread: Thread, entries: Sequence[Entry], segments: Sequence[Segment], sessions: Sequence[ProviderSession]
) -> list[ThreadFile]:
    """The files of an agent thread, closed segments first (by number)."""
    base = f"agents/{thread.agent_id}/"
    closed = [s for s in segments if s.status == "closed"]
    files: list[ThreadFile] = []
    position = 0
    for segment in closed:
        chunk: list[Entry] = []
        while position < len(entries) and entries[position].sequence <= segment.last_sequence:
            chunk.append(entries[position])
            position += 1
        files.append(ThreadFile(f"{base}log.{segment.number}.jsonl", _log(chunk)))
    files.append(ThreadFile(f"{base}log.jsonl", _log(entries[position:])))
    ready = [s for s in closed if s.handoff_status == "ready" and s.handoff_summary is not None]
    if ready:
        latest = ready[-1]
        files.append(
            ThreadFile(f"{base}handoff.md", f"---\nsegment: {latest.number}\n---\n{latest.handoff_summary}")
        )
    files.append(ThreadFile(f"{base}providers.json", _providers(sessions)))
    return files


def live_state_file(agent_id: str, entry: memory_pb2.LiveStateEntry) -> ThreadFile:
    """The agent's live-state entry as ``live_state.json``."""
    fields = {
        "project_id": entry.project_id,
        "agent_id": entry.agent_id,
        "activity": entry.activity,
        "detail": entry.detail,
        "update_time": _time(entry.update_time.ToDatetime(tzinfo=UTC)),
        "expire_time": _time(entry.expire_time.ToDatetime(tzinfo=UTC)),
    }
    return ThreadFile(
        f"agents/{agent_id}/live_state.json", json.dumps(fields, ensure_ascii=False, indent=2) + "\n"
    )


T = TypeVar("T")


def _json(path: str, text: str, kind: type[T], what: str, line: int | None = None) -> T:
    """``text`` parsed as JSON of ``kind``; the import's refusal otherwise."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise _bad(path, f"not valid JSON ({exc.args[0] if exc.args else exc})", line) from exc
    if not isinstance(value, kind):
        raise _bad(path, f"must be {what}", line)
    return value


def _bad(path: str, reason: str, line: int | None = None) -> InvalidArgument:
    where = f"{path} line {line}" if line is not None else path
    metadata = {"file": path} | ({"line": str(line)} if line is not None else {})
    return InvalidArgument(f"{where}: {reason}", field="files", **metadata)


def _parse_time(path: str, line: int | None, value: Any, name: str) -> datetime:
    if not isinstance(value, str):
        raise _bad(path, f"{name} must be an RFC 3339 timestamp", line)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise _bad(path, f"{name} {value!r} is not an RFC 3339 timestamp", line) from exc
    if parsed.tzinfo is None:
        raise _bad(path, f"{name} {value!r} has no time zone", line)
    return parsed.astimezone(UTC)


class _Reader:
    """Validates the log files in segment order, checking the sequence numbers
    follow each other from 1 and every line names the same thread and agent."""

    def __init__(self, agent_id: str, max_entry_chars: int) -> None:
        self.agent_id = agent_id
        self.max_entry_chars = max_entry_chars
        self.thread_id = ""
        self.next_sequence = 1

    def entries(self, path: str, content: str) -> list[Entry]:
        lines = content.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return [self._entry(path, number, text) for number, text in enumerate(lines, start=1)]

    def _entry(self, path: str, number: int, text: str) -> Entry:
        data = _json(path, text, dict, "a JSON object", number)
        for name, kind in _LINE_FIELDS.items():
            value = data.get(name)
            if value is None:
                raise _bad(path, f"missing field {name!r}", number)
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise _bad(path, f"field {name!r} must be a {kind.__name__}", number)
        if not self.thread_id:
            if not data["thread_id"] or len(data["thread_id"]) > 36:
                raise _bad(path, "thread_id must have 1 to 36 characters", number)
            self.thread_id = data["thread_id"]
        elif data["thread_id"] != self.thread_id:
            raise _bad(path, f"thread_id {data['thread_id']!r} differs from {self.thread_id!r}", number)
        if data["target"] != self.agent_id:
            raise _bad(path, f"target must be the agent of the folder, {self.agent_id!r}", number)
        if not data["requester"]:
            raise _bad(path, "requester must not be empty", number)
        if data["role"] not in ROLES.names:
            raise _bad(path, f"role must be one of {', '.join(ROLES.names)}", number)
        if data["sequence"] != self.next_sequence:
            raise _bad(path, f"sequence {data['sequence']} where {self.next_sequence} was expected", number)
        if len(data["content"]) > self.max_entry_chars:
            raise TooLarge(
                f"{path} line {number}: content exceeds {self.max_entry_chars} characters",
                field="files",
                file=path,
                line=str(number),
            )
        self.next_sequence += 1
        return Entry(
            id=str(uuid.uuid4()),
            thread_id=self.thread_id,
            sequence=data["sequence"],
            requester=data["requester"],
            target=data["target"],
            correlation_id=data["correlation_id"],
            role=ROLES.number(data["role"]),
            source=data["source"],
            run_id=data["run_id"],
            content=data["content"],
            create_time=_parse_time(path, number, data["create_time"], "create_time"),
        )


def _segment(number: int, first: int, entries: Sequence[Entry], closed: bool) -> Segment:
    now = utcnow()
    return Segment(
        thread_id="",
        number=number,
        first_sequence=first,
        last_sequence=first + len(entries) - 1,
        entry_count=len(entries),
        char_count=sum(len(e.content) for e in entries),
        status="closed" if closed else "open",
        handoff_status="pending" if closed else "none",
        open_time=entries[0].create_time if entries else now,
        # The layout does not carry close times: the last entry's time.
        close_time=entries[-1].create_time if closed and entries else None,
    )


def _sessions(path: str, content: str) -> list[ProviderSession]:
    rows = _json(path, content, list, "a JSON array of provider sessions")
    sessions: list[ProviderSession] = []
    live: set[str] = set()
    for index, row in enumerate(rows):
        where = f"session {index}"
        if not isinstance(row, dict):
            raise _bad(path, f"{where} must be a JSON object")
        provider, native = row.get("provider_id"), row.get("native_session_id")
        if not isinstance(provider, str) or not 0 < len(provider) <= MAX_PROVIDER_ID_CHARS:
            raise _bad(path, f"{where}: provider_id must have 1 to {MAX_PROVIDER_ID_CHARS} characters")
        if not isinstance(native, str) or not 0 < len(native) <= MAX_NATIVE_ID_CHARS:
            raise _bad(path, f"{where}: native_session_id must have 1 to {MAX_NATIVE_ID_CHARS} characters")
        released = row.get("release_time")
        release_time = (
            None if released is None else _parse_time(path, None, released, f"{where} release_time")
        )
        if release_time is None:
            if provider in live:
                raise _bad(path, f"{where}: provider {provider!r} has two live sessions")
            live.add(provider)
        sessions.append(
            ProviderSession(
                id=str(uuid.uuid4()),
                agent_thread_id="",
                provider_id=provider,
                native_session_id=native,
                create_time=_parse_time(path, None, row.get("create_time"), f"{where} create_time"),
                release_time=release_time,
            )
        )
    return sessions


def _check_live_state(path: str, content: str, agent_id: str) -> None:
    """A ``live_state.json`` must be what an export writes, about the agent
    of its folder; nothing of it is imported."""
    data = _json(path, content, dict, "a JSON object")
    for name in ("project_id", "agent_id", "activity", "detail", "update_time", "expire_time"):
        if not isinstance(data.get(name), str):
            raise _bad(path, f"field {name!r} must be a string")
    if data["agent_id"] != agent_id:
        raise _bad(path, f"agent_id must be the agent of the folder, {agent_id!r}")
    for name in ("update_time", "expire_time"):
        _parse_time(path, None, data[name], name)


def parse_files(files: Sequence[ThreadFile], max_entry_chars: int) -> ImportedThread:
    """Validates the files of one agent and builds the rows to import. Any
    problem is INVALID_ARGUMENT naming the file (and the line)."""
    if not files:
        raise InvalidArgument("files must not be empty", field="files")
    if len(files) > MAX_FILES:
        raise InvalidArgument(f"at most {MAX_FILES} files", field="files")
    agents: set[str] = set()
    logs: dict[int, str] = {}
    open_log: str | None = None
    handoff: tuple[str, str] | None = None
    providers: tuple[str, str] | None = None
    live_state: tuple[str, str] | None = None
    seen: set[str] = set()
    for file in files:
        match = _PATH.match(file.path)
        if match is None:
            raise _bad(
                file.path or "(empty path)",
                "not a file of the layout agents/<agent id>/"
                "{log.jsonl, log.N.jsonl, handoff.md, providers.json, live_state.json}",
            )
        if file.path in seen:
            raise _bad(file.path, "appears twice")
        seen.add(file.path)
        agents.add(match["agent"])
        if match["number"]:
            logs[int(match["number"])] = file.content
        elif match["name"] == "log.jsonl":
            open_log = file.content
        elif match["name"] == "handoff.md":
            handoff = (file.path, file.content)
        elif match["name"] == "live_state.json":
            live_state = (file.path, file.content)
        else:
            providers = (file.path, file.content)
    if len(agents) != 1:
        raise InvalidArgument(f"files are of several agents: {', '.join(sorted(agents))}", field="files")
    agent_id = agents.pop()
    base = f"agents/{agent_id}/"
    if open_log is None:
        raise _bad(f"{base}log.jsonl", "is missing (the open segment; empty when it has no entries)")
    numbers = sorted(logs)
    if numbers != list(range(1, len(numbers) + 1)):
        missing = next(n for n in range(1, len(numbers) + 2) if n not in logs)
        raise _bad(
            f"{base}log.{missing}.jsonl", "is missing: closed segments are numbered from 1 without gaps"
        )

    reader = _Reader(agent_id, max_entry_chars)
    entries: list[Entry] = []
    segments: list[Segment] = []
    for number in numbers:
        path = f"{base}log.{number}.jsonl"
        chunk = reader.entries(path, logs[number])
        if not chunk:
            raise _bad(path, "a closed segment holds at least one entry")
        segments.append(_segment(number, len(entries) + 1, chunk, closed=True))
        entries.extend(chunk)
    chunk = reader.entries(f"{base}log.jsonl", open_log)
    segments.append(_segment(len(numbers) + 1, len(entries) + 1, chunk, closed=False))
    entries.extend(chunk)

    if handoff is not None:
        path, content = handoff
        front = _FRONT_MATTER.match(content)
        if front is None:
            raise _bad(path, "must start with a front matter '---\\nsegment: N\\n---\\n'")
        number = int(front["number"])
        if number not in logs:
            raise _bad(path, f"names segment {number}, which is not a closed segment of these files")
        summary = check_handoff(content[front.end() :], field=path)
        target = segments[number - 1]
        target.handoff_status, target.handoff_summary, target.handoff_time = "ready", summary, utcnow()
    sessions = _sessions(*providers) if providers is not None else []
    if live_state is not None:
        _check_live_state(*live_state, agent_id)
    return ImportedThread(
        thread_id=reader.thread_id or str(uuid.uuid4()),
        agent_id=agent_id,
        entries=entries,
        segments=segments,
        sessions=sessions,
    )


class ThreadArchive:
    """ExportAgentThread and ImportAgentThread: rules over the repository."""

    def __init__(
        self,
        repository: ThreadsRepository,
        access: AgentAccess,
        max_entry_chars: int,
        max_export_chars: int,
        live_state: LiveStateReader | None = None,
    ) -> None:
        """``live_state``: where the agent's live state is read (None: the
        export carries none, as without a memory service)."""
        self._repo = repository
        self._access = access
        self._max_entry_chars = max_entry_chars
        self._max_export_chars = max_export_chars
        self._live_state = live_state

    async def export(self, actor: Actor, agent_id: str) -> tuple[Thread, list[ThreadFile]]:
        """For the agent's members and its project's (viewers and up)."""
        if not agent_id:
            raise InvalidArgument("agent_id must not be empty", field="agent_id")
        agent = await self._access.require_member(actor, agent_id, READ)
        thread = await self._repo.threads.live_agent_thread(agent_id)
        if thread is None:
            if await self._repo.agents.get_agent(agent_id) is None:
                raise NotFound(f"agent {agent_id!r} not found", agent_id=agent_id)
            raise NotFound(f"agent {agent_id!r} has no thread yet", agent_id=agent_id)
        segments = await self._repo.segments.all_segments(thread.id)
        chars = sum(s.char_count for s in segments)
        if chars > self._max_export_chars:
            raise FailedPrecondition(
                f"the thread holds {chars} characters, more than one export message carries "
                f"({self._max_export_chars}); read it with ListEntries",
                agent_id=agent_id,
            )
        entries = await self._repo.entries.entries_between(thread.id, 1, thread.last_sequence)
        sessions = await self._repo.provider_sessions.all_provider_sessions(thread.id)
        files = export_files(thread, entries, segments, sessions)
        if self._live_state is not None:
            # The agent's entry in its own project, as the exporting user
            # may read it: the same entry the agent's runs receive.
            live = await self._live_state.entry(actor, agent.project_id, agent_id)
            if live is not None:
                files.append(live_state_file(agent_id, live))
        return thread, files

    async def import_(self, actor: Actor, files: Sequence[ThreadFile]) -> Thread:
        """Imports as ``actor``: a member of the agent when it exists, its
        owner when the import registers it."""
        imported = parse_files(files, self._max_entry_chars)
        await self._access.require_member_if_registered(actor, imported.agent_id)
        audit = new_event(ThreadsAuditEvent, actor, "agent.create", imported.agent_id, "by thread import")
        thread_id = await self._repo.imports.import_agent_thread(imported, audit)
        if thread_id is None:
            raise FailedPrecondition(
                f"agent {imported.agent_id!r} already has a live thread with entries (or the thread id "
                f"{imported.thread_id!r} or a live provider session is taken); nothing was imported",
                agent_id=imported.agent_id,
            )
        thread = await self._repo.threads.get_thread(thread_id)
        assert thread is not None
        return thread
