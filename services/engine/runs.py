"""The run: one engine execution, recorded in agent_runs before the first
model call and always settled. The run itself executes in a task of its own,
so a client that disconnects does not stop it (policy: continue); clients
follow its events, live from the feed or resumed from the database."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from google.protobuf import json_format
from opentelemetry import trace
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from services.engine import history as conversation
from services.engine import instructions
from services.engine.asks import PROJECT_ID, AgentAsks
from services.engine.budget import BudgetExceeded, RunBudget
from services.engine.collaborators import Collaborators
from services.engine.feed import RunFeed
from services.engine.models import AgentAction, AgentRun, SkillRun
from services.engine.providers.base import (
    ChatMessage,
    LLMProvider,
    ProviderError,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    ToolSpec,
    UsageChunk,
    count_tokens,
)
from services.engine.remember import remembered_fact, with_fact
from services.engine.repository import RunsRepository
from services.engine.tokens import Counter, TokenCounters, prompt_tokens
from services.engine.tools import (
    FAMILY_LABELS,
    AllowedSources,
    InstructionProposal,
    ToolContext,
    ToolRegistry,
    mentioned_pages,
    reads_workspace,
)
from services.shared import deadlines
from services.shared.errors import (
    DependencyUnavailable,
    DomainError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    TooLarge,
)
from services.shared.metrics import LLM_TOKENS, RUN_SECONDS, RUNS
from services.shared.pagination import decode_token, encode_token
from switchboard.common.v1 import common_pb2
from switchboard.engine.v1 import engine_pb2
from switchboard.memory.v1 import handoff_pb2, memory_pb2, pages_pb2, pages_service_pb2
from switchboard.router.v1 import router_pb2, router_service_pb2
from switchboard.threads.v1 import threads_pb2

log = logging.getLogger(__name__)
tracer = trace.get_tracer("switchboard.engine")

TERMINAL_KINDS = ("final", "error")
SURFACES: dict[engine_pb2.Surface.ValueType, str] = {
    engine_pb2.SURFACE_CHAT: "chat",
    engine_pb2.SURFACE_EDITOR: "editor",
    engine_pb2.SURFACE_AGENT: "agent",
}
STATUSES = {
    "running": engine_pb2.RUN_STATUS_RUNNING,
    "waiting_approval": engine_pb2.RUN_STATUS_WAITING_APPROVAL,
    "done": engine_pb2.RUN_STATUS_DONE,
    "failed": engine_pb2.RUN_STATUS_FAILED,
    "cancelled": engine_pb2.RUN_STATUS_CANCELLED,
    "budget_exceeded": engine_pb2.RUN_STATUS_BUDGET_EXCEEDED,
}
INTERRUPTED = "interrupted"
APPROVALS = {
    "accepted": engine_pb2.APPROVAL_DECISION_ACCEPTED,
    "refused": engine_pb2.APPROVAL_DECISION_REFUSED,
}


@dataclass(frozen=True)
class AskSpec:
    """One agent asking another (AskAgent): who asks, who is asked, and the
    correlation id tying the answer to the question ("" = the run's id)."""

    requester: str
    target: str
    correlation_id: str = ""
    # The run that asked, when an agent asks through the ask_agent tool.
    parent_run_id: str = ""
    # Who is already waiting in this chain of asks, the requester last (the
    # requester alone for a first ask): a target among them would be a cycle.
    chain: tuple[str, ...] = ()

    @property
    def waiting(self) -> tuple[str, ...]:
        return self.chain or (self.requester,)


class BusyPolicy(StrEnum):
    """What a request for a conversation or agent thread with an active run gets."""

    QUEUE = "queue"  # wait for the active runs, in arrival order (default)
    REJECT = "reject"  # FAILED_PRECONDITION, nothing written
    INTERRUPT = "interrupt"  # cancel the active runs, then run


@dataclass(frozen=True)
class RunRequest:
    user: str
    request_id: str
    conversation_id: str
    message: str
    requested_model: str
    surface: engine_pb2.Surface.ValueType
    forced_skills: Sequence[str]
    budget: RunBudget = RunBudget()
    busy_policy: BusyPolicy = BusyPolicy.QUEUE
    # Set for AskAgent: the run belongs to the target agent and its thread.
    ask: AskSpec | None = None
    # What the conversation allows its runs to read (set by start()).
    allowed: AllowedSources | None = None


@dataclass(frozen=True)
class RunLimits:
    max_message_chars: int
    delta_flush_seconds: float
    delta_flush_chars: int
    lease_seconds: float
    # Record prompt and answer text on `chat` spans (gen_ai.input.messages /
    # gen_ai.output.messages). Off by default: traces often leave the trust
    # boundary the conversations live in.
    capture_message_content: bool = False
    # Attempts at a model call that fails before any text reached the client.
    provider_attempts: int = 3
    # Longest instruction page put in the prompt; longer ones are cut, with a notice.
    instruction_page_budget_chars: int = 8000
    # What a run may spend when its request sets no budget.
    default_budget: RunBudget = RunBudget(max_tokens=200_000, max_steps=20, max_seconds=600.0)
    # How often this instance looks for cancellations asked on other replicas.
    cancel_poll_seconds: float = 0.5
    # How often a queued run checks whether its turn has come.
    queue_poll_seconds: float = 0.1
    # The model that answers when the router cannot be reached ("provider/model").
    fallback_model: str = "offline/switchboard-offline-balanced"
    # A model's input tokens when its entry sets no context_window.
    default_context_window: int = 128_000
    # Working-context budgets of a chat run (characters): the project context,
    # and the live state (at most live_state_entries entries).
    project_context_budget_chars: int = 6000
    live_state_budget_chars: int = 2000
    live_state_entries: int = 20
    # The model that titles a conversation after its first exchange
    # ("provider/model"); empty: the run's own model. Offline runs keep the
    # cut of the request.
    title_model: str = ""
    title_timeout_seconds: float = 20.0


@dataclass(frozen=True)
class Generation:
    """What one model call produced."""

    text: str
    tokens_in: int
    tokens_out: int
    tool_calls: tuple[ToolCallChunk, ...] = ()


@dataclass
class ToolLoop:
    """What the tool loop produced: the answer as the client saw it, the
    tokens, the proposals tools made, and the turn's messages after the
    prompt (tool calls, their results, the last answer) to record."""

    answer: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    proposals: list[InstructionProposal] = dataclasses.field(default_factory=list)
    transcript: list[ChatMessage] = dataclasses.field(default_factory=list)


class _DeltaStream:
    """Coalesces a model's text into delta events: the first piece at once,
    then at most one event per flush interval or size."""

    def __init__(self, rec: _Recorder, limits: RunLimits) -> None:
        self._rec, self._limits = rec, limits
        self._parts: list[str] = []
        self._buffer: list[str] = []
        self._buffered = 0
        self._last_flush = 0.0
        self.sent_any = False
        self.tokens = 0  # estimated (count_tokens), for the token budget

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def add(self, text: str) -> None:
        self.tokens += count_tokens(text)
        self._parts.append(text)
        self._buffer.append(text)
        self._buffered += len(text)
        now = time.monotonic()
        if (
            not self.sent_any
            or now - self._last_flush >= self._limits.delta_flush_seconds
            or self._buffered >= self._limits.delta_flush_chars
        ):
            self.flush()
            self._last_flush = now

    def flush(self) -> None:
        if self._buffer:
            self._rec.emit(delta=engine_pb2.Delta(text="".join(self._buffer)))
            self._buffer, self._buffered, self.sent_any = [], 0, True


def _messages_json(messages: Sequence[ChatMessage]) -> str:
    """Messages in the GenAI semantic conventions' JSON shape (role + parts)."""
    return json.dumps(
        [{"role": m.role, "parts": [{"type": "text", "content": m.content}]} for m in messages],
        ensure_ascii=False,
    )


def is_terminal(event: engine_pb2.RunEvent) -> bool:
    return event.WhichOneof("kind") in TERMINAL_KINDS


class _Recorder:
    """Numbers a run's events and writes each to the database *before* any
    client sees it (write-ahead), so a resumed stream, another replica, or the
    settlement of a crashed run never reuses a sequence a client has seen.
    Events emitted while a write is in flight go in the next batch: a fast
    producer costs few transactions."""

    def __init__(self, run_id: str, feed: RunFeed, repo: RunsRepository) -> None:
        self.run_id = run_id
        self._feed = feed
        self._repo = repo
        # Rows of agent_actions, kept here so that a run that fails, is
        # cancelled or runs out of budget still records what it did.
        self.actions: list[AgentAction] = []
        # What the run has reached so far (sources, skills, routing decision,
        # model, layers): kept by a run that fails, is cancelled or runs out
        # of budget.
        self.reached: dict[str, Any] = {}
        self._sequence = 0
        self._pending: list[engine_pb2.RunEvent] = []
        self._writer: asyncio.Task[None] | None = None
        self._broken = False

    def make(self, **kind: Any) -> engine_pb2.RunEvent:
        self._sequence += 1
        event = engine_pb2.RunEvent(run_id=self.run_id, sequence=self._sequence, **kind)
        event.create_time.GetCurrentTime()
        return event

    def emit(self, **kind: Any) -> None:
        self._pending.append(self.make(**kind))
        if not self._broken and (self._writer is None or self._writer.done()):
            self._writer = asyncio.create_task(self._write())

    @asynccontextmanager
    async def step(self, key: str, label: str) -> AsyncIterator[None]:
        """A named step around real work: started, then completed or failed."""
        self.emit(step=engine_pb2.Step(key=key, label=label, status=engine_pb2.STEP_STATUS_STARTED))
        try:
            yield
        except BaseException:
            self.emit(step=engine_pb2.Step(key=key, label=label, status=engine_pb2.STEP_STATUS_FAILED))
            raise
        self.emit(step=engine_pb2.Step(key=key, label=label, status=engine_pb2.STEP_STATUS_COMPLETED))

    async def _write(self) -> None:
        while self._pending and not self._broken:
            batch, self._pending = self._pending, []
            try:
                await self._repo.append_events(
                    self.run_id, [(e.sequence, e.SerializeToString()) for e in batch]
                )
            except Exception:
                # Stop writing; the run's finishing transaction retries these.
                self._broken = True
                self._pending = batch + self._pending
                log.exception("persisting events of run %s failed; retrying at finish", self.run_id)
                return
            for event in batch:
                await self._feed.publish(event)

    async def drain(self) -> list[engine_pb2.RunEvent]:
        """Waits for the writer; returns the events it has not written."""
        if self._writer is not None:
            await asyncio.shield(self._writer)
        unwritten, self._pending = self._pending, []
        return unwritten


_T = TypeVar("_T")


async def _ready(value: _T) -> _T:
    return value


class _Optional:
    """Calls to a service a run can do without: a failure gives the
    fallback value, and the run's one notice about that service."""

    NOTICES = {
        "memory": (
            "MEMORY_UNAVAILABLE",
            "memory is unavailable, so this answer uses no recalled notes, personal settings, "
            "instruction page or mentioned pages",
        ),
        "router": (
            "ROUTER_UNAVAILABLE",
            "routing is unavailable, so no skill was applied automatically and the engine's "
            "fallback model answers",
        ),
    }

    def __init__(self, rec: _Recorder) -> None:
        self._rec = rec
        self._failed: set[str] = set()

    async def __call__(self, service: str, call: Awaitable[_T], fallback: _T) -> _T:
        try:
            return await call
        except DependencyUnavailable as exc:
            self.failed(service, exc)
            return fallback

    def failed(self, service: str, exc: DependencyUnavailable) -> None:
        log.warning("run %s goes on without %s: %s", self._rec.run_id, service, exc.message)
        if service not in self._failed:
            self._failed.add(service)
            code, message = self.NOTICES[service]
            self._rec.emit(notice=engine_pb2.Notice(code=code, message=f"{message} ({exc.message})"))


class RunService:
    def __init__(
        self,
        repo: RunsRepository,
        collaborators: Collaborators,
        providers: dict[str, LLMProvider],
        limits: RunLimits,
        instance_id: str,
    ) -> None:
        self._repo = repo
        self._collab = collaborators
        self._providers = providers
        self._limits = limits
        self._instance_id = instance_id
        # Runs executing in this process: their feed and their user.
        self._feeds: dict[str, tuple[RunFeed, str]] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        # Runs whose task was cancelled by CancelRun (not by a shutdown), and
        # runs still working (before settlement: the only time CancelRun cancels).
        self._cancelling: set[str] = set()
        self._working: set[str] = set()
        self._settling: set[asyncio.Future[None]] = set()
        # Work that outlives a run's final (model-written titles).
        self._background: set[asyncio.Task[None]] = set()
        # Runs whose end could not be recorded (the database stayed away past
        # the retries): the lease loop settles them once it is back.
        self._unrecorded: set[str] = set()
        self._asks = AgentAsks(self, collaborators)
        self._tools: ToolRegistry | None = None
        self.counters = TokenCounters()

    def attach_tools(self, tools: ToolRegistry) -> None:
        """The tools runs may use (built after the service: the ask_agent tool
        runs asks through it)."""
        self._tools = tools

    @property
    def _fallback_model(self) -> router_pb2.ModelOption:
        provider, _, model = self._limits.fallback_model.partition("/")
        return router_pb2.ModelOption(id=f"fallback-{model}", provider=provider, model=model)

    @property
    def offline(self) -> bool:
        """No real provider configured: Auto picks the deterministic test
        models and the Skill Router never asks an LLM to arbitrate."""
        return set(self._providers) == {"offline"}

    def provider(self, name: str) -> LLMProvider:
        provider = self._providers.get(name)
        if provider is None:
            raise FailedPrecondition(f"model provider {name!r} is not available in this engine")
        return provider

    # Start and follow

    async def start(self, request: RunRequest) -> str:
        """Validates, checks the conversation, writes the run row and starts
        the run. Nothing is written for a bad request. Returns the run id."""
        message = request.message.strip()
        if not message:
            raise InvalidArgument("message must not be empty", field="message")
        if len(request.message) > self._limits.max_message_chars:
            raise TooLarge(f"message exceeds {self._limits.max_message_chars} characters", field="message")
        if request.ask is not None:
            # The target agent's one shared thread, whoever asks (seed 000).
            await self._collab.get_agent(request.user, request.ask.target)
            thread_id = (await self._collab.ensure_agent_thread(request.user, request.ask.target)).id
            needs_title = False
        else:
            if not request.conversation_id:
                raise InvalidArgument("conversation_id is required", field="conversation_id")
            conversation = await self._collab.get_conversation(request.user, request.conversation_id)
            thread_id, needs_title = conversation.id, not conversation.title
            allowed = AllowedSources.from_proto(conversation.allowed_sources)
            request = dataclasses.replace(request, allowed=allowed)
        if request.request_id and request.busy_policy != BusyPolicy.QUEUE:
            # A retry must not be refused or cancel its own first attempt. With
            # QUEUE (the default) nothing happens before the insert, whose
            # unique key already turns a retry into its first run.
            existing = await self._repo.run_by_request(request.user, request.request_id)
            if existing is not None:
                return existing.id
        await self._apply_busy_policy(request.user, thread_id, request.busy_policy)

        run = AgentRun(
            id=str(uuid.uuid4()),
            user_id=request.user,
            agent_id=request.ask.target if request.ask else None,
            parent_run_id=(request.ask.parent_run_id or None) if request.ask else None,
            conversation_id=thread_id,
            surface=SURFACES.get(request.surface, "chat"),
            request_id=request.request_id or None,
            requested_model=request.requested_model,
            instance_id=self._instance_id,
        )
        # Shielded: a client that goes away mid-insert must not leave a row
        # `running` with no task to finish it.
        return await asyncio.shield(self._record_and_spawn(run, request, needs_title=needs_title))

    async def _apply_busy_policy(self, user: str, thread_id: str, policy: BusyPolicy) -> None:
        """INTERRUPT cancels the caller's own active runs (another user's run
        on a shared agent thread is never cancelled: the new run queues behind
        it). REJECT is decided by the insert (``reject_busy``), atomically;
        QUEUE does nothing here: the run waits for its turn once started."""
        if policy != BusyPolicy.INTERRUPT:
            return
        for run_id, owner in await self._repo.active_runs(thread_id):
            if owner == user:
                await self._repo.request_cancel(run_id)
                self._cancel_local(run_id)

    async def _wait_turn(self, run: AgentRun, rec: _Recorder) -> None:
        """Two runs never write to one thread at once: wait while runs that
        arrived earlier are active on it (any replica; the database decides)."""
        if not await self._repo.runs_ahead(run):
            return
        async with rec.step("queued", "Waiting for the previous request on this thread"):
            while await self._repo.runs_ahead(run):
                await asyncio.sleep(self._limits.queue_poll_seconds)

    async def _record_and_spawn(self, run: AgentRun, request: RunRequest, needs_title: bool) -> str:
        feed = RunFeed()
        recorder = _Recorder(run.id, feed, self._repo)
        started = recorder.make(
            run_started=engine_pb2.RunStarted(
                conversation_id=run.conversation_id or "", requested_model=request.requested_model
            )
        )
        reject_busy = request.busy_policy == BusyPolicy.REJECT
        if await self._repo.insert_run(run, started.SerializeToString(), reject_busy) is None:
            # A retry with the same request_id (maybe concurrent) created it first.
            existing = await self._repo.run_by_request(request.user, request.request_id)
            assert existing is not None
            return existing.id
        await feed.publish(started)
        self._feeds[run.id] = (feed, request.user)
        task = asyncio.create_task(self._execute(run, request, recorder, needs_title))
        self._tasks[run.id] = task
        task.add_done_callback(lambda _: self._tasks.pop(run.id, None))
        return run.id

    async def ask_and_follow(
        self,
        user: str,
        request_id: str,
        ask: AskSpec,
        message: str,
        budget: RunBudget | None = None,
        busy_policy: BusyPolicy = BusyPolicy.QUEUE,
    ) -> AsyncIterator[engine_pb2.RunEvent]:
        """Starts an AskAgent run and follows it to its terminal event."""
        run_id = await self.start(
            RunRequest(
                user=user,
                request_id=request_id,
                conversation_id="",
                message=message,
                requested_model="",
                surface=engine_pb2.SURFACE_AGENT,
                forced_skills=[],
                budget=budget or RunBudget(),
                busy_policy=busy_policy,
                ask=ask,
            )
        )
        async for event in self.follow(user, run_id, 0):
            yield event

    async def follow(self, user: str, run_id: str, after: int) -> AsyncIterator[engine_pb2.RunEvent]:
        """The run's events with sequence > after until its terminal event:
        live from this process's feed, else from the database (another
        replica's run, or a finished one), polling until it ends."""
        local = self._feeds.get(run_id)
        if local is not None and local[1] == user:
            async for event in local[0].follow(after):
                yield event
            return
        await self.get(user, run_id)
        while True:
            # Status first: a run's terminal event commits with its status, so
            # once it reads finished, the events read next are all there are.
            run = await self._repo.get_run(run_id)
            finished = run is None or run.status != "running"
            for row in await self._repo.events_after(run_id, after):
                event = engine_pb2.RunEvent.FromString(row.payload)
                after = event.sequence
                yield event
                if is_terminal(event):
                    return
            if finished:
                return
            await asyncio.sleep(0.05)

    async def get(self, user: str, run_id: str) -> AgentRun:
        run = await self._repo.get_run(run_id) if run_id else None
        if run is None or run.user_id != user:
            raise NotFound(f"run {run_id!r} not found", run_id=run_id)
        return run

    async def list_runs(
        self, user: str, conversation_id: str, requested_size: int, token: str
    ) -> tuple[list[AgentRun], str]:
        """The user's runs of a conversation, newest first, one page."""
        if not conversation_id:
            raise InvalidArgument("conversation_id is required", field="conversation_id")
        if requested_size < 0:
            raise InvalidArgument("page_size must not be negative", field="page_size")
        size = min(requested_size or 20, 100)
        cursor = decode_token(token)
        before = None
        if cursor:
            try:
                before = (datetime.fromisoformat(str(cursor["t"])), str(cursor["id"]))
            except (KeyError, ValueError) as exc:
                raise InvalidArgument(
                    "page_token is not a token this service issued", field="page_token"
                ) from exc
        rows = list(await self._repo.list_runs(user, conversation_id, before, size + 1))
        next_token = ""
        if len(rows) > size:
            last = rows[size - 1]
            next_token = encode_token({"t": last.started_at.isoformat(), "id": last.id})
        return rows[:size], next_token

    async def cancel(self, user: str, run_id: str) -> AgentRun:
        """Stops a running run: at once when it executes here, within
        cancel_poll_seconds when it executes on another replica (which polls
        the flag). Returns the run; one already ended is left as it is."""
        run = await self.get(user, run_id)
        if run.status != "running":
            return run
        await self._repo.request_cancel(run_id)
        self._cancel_local(run_id)
        return run

    async def record_approval(self, user: str, run_id: str, decision: str) -> AgentRun:
        """The user decided on the proposal the run waited on: the run is done,
        with the decision. Repeating the same decision changes nothing."""
        if decision not in APPROVALS:
            raise InvalidArgument("decision must be ACCEPTED or REFUSED", field="decision")
        run = await self.get(user, run_id)
        if run.status == "waiting_approval":
            settled = await self._repo.record_approval(run_id, decision)
            # Settled now, or by a concurrent decision: read what was recorded.
            run = await self.get(user, run_id)
            if settled:
                return run
        if run.approval != decision:
            what = f"was {run.approval}" if run.approval else f"is {run.status}, not waiting for approval"
            raise FailedPrecondition(f"run {run_id!r} {what}", run_id=run_id)
        return run

    def _cancel_local(self, run_id: str) -> None:
        task = self._tasks.get(run_id)
        if task is not None and run_id in self._working:
            self._cancelling.add(run_id)
            task.cancel()

    async def watch_cancellations(self) -> None:
        """Cancels this instance's runs that CancelRun flagged elsewhere, until cancelled."""
        while True:
            try:
                if self._tasks:
                    for run_id in await self._repo.cancel_requested(self._instance_id):
                        self._cancel_local(run_id)
            except Exception:  # noqa: BLE001 - keep polling through a database blip
                log.exception("cancellation poll failed")
            await asyncio.sleep(self._limits.cancel_poll_seconds)

    # Execution

    async def _execute(
        self, run: AgentRun, request: RunRequest, recorder: _Recorder, needs_title: bool
    ) -> None:
        # The run outlives the StartRun call that spawned it: not that call's deadline.
        deadlines.detach()
        outcome: dict[str, Any] = {}
        began = time.monotonic()
        with tracer.start_as_current_span("invoke_agent personal") as span:
            span.set_attribute("gen_ai.operation.name", "invoke_agent")
            span.set_attribute("gen_ai.agent.name", "personal")
            span.set_attribute("switchboard.run_id", run.id)
            if run.conversation_id:
                span.set_attribute("gen_ai.conversation.id", run.conversation_id)
            budget = request.budget.over(self._limits.default_budget)
            self._working.add(run.id)
            try:
                try:
                    await self._wait_turn(run, recorder)  # not counted in the time budget
                    async with asyncio.timeout(budget.max_seconds or None) as deadline:
                        if request.ask is not None:
                            outcome = await self._asks.work(run, request, request.ask, recorder, budget)
                        else:
                            outcome = await self._work(run, request, recorder, needs_title, budget)
                finally:
                    self._working.discard(run.id)  # past this point CancelRun no longer interrupts
                status, error = outcome.pop("status", "done"), None
                terminal = {"final": outcome.pop("final")}
            except asyncio.CancelledError:
                outcome = dict(recorder.reached)
                if run.id in self._cancelling:
                    status, error = "cancelled", "cancelled by the user"
                    terminal = {"error": engine_pb2.RunError(code="CANCELLED", message=error)}
                else:
                    status, error = "failed", INTERRUPTED
                    terminal = {
                        "error": engine_pb2.RunError(code="INTERRUPTED", message="the engine stopped")
                    }
            except (BudgetExceeded, TimeoutError) as exc:
                if isinstance(exc, TimeoutError) and not deadline.expired():
                    raise
                outcome = dict(recorder.reached)
                message = (
                    str(exc)
                    if isinstance(exc, BudgetExceeded)
                    else f"time budget of {budget.max_seconds:g} s exceeded"
                )
                status, error = "budget_exceeded", message
                terminal = {"error": engine_pb2.RunError(code="BUDGET_EXCEEDED", message=message)}
            except DomainError as exc:
                outcome = dict(recorder.reached)
                status, error = "failed", exc.message
                code = common_pb2.ErrorReason.Name(exc.reason)
                terminal = {"error": engine_pb2.RunError(code=code, message=exc.message)}
            except Exception as exc:  # noqa: BLE001 - a run always ends, with its cause
                outcome = dict(recorder.reached)
                log.exception("run %s failed", run.id)
                status, error = "failed", f"internal error: {type(exc).__name__}"
                terminal = {"error": engine_pb2.RunError(code="INTERNAL", message=error)}
            span.set_attribute("switchboard.run_status", status)
            RUNS.labels(status).inc()
            RUN_SECONDS.labels(status).observe(time.monotonic() - began)
            # Shielded: a cancellation (CancelRun, shutdown) arriving while the
            # run is being settled must not leave it half-recorded and its
            # clients without a terminal event.
            settling = asyncio.ensure_future(self._settle(run, recorder, status, error, terminal, outcome))
            self._settling.add(settling)
            settling.add_done_callback(self._settling.discard)
            await asyncio.shield(settling)

    async def _settle(
        self,
        run: AgentRun,
        recorder: _Recorder,
        status: str,
        error: str | None,
        terminal: dict[str, Any],
        outcome: dict[str, Any],
    ) -> None:
        """Writes the run's end, its last events and its journal (actions,
        skill runs), then publishes the events."""
        journal = [*recorder.actions, *outcome.pop("skill_runs", [])]
        unwritten = [*await recorder.drain(), recorder.make(**terminal)]
        feed, _ = self._feeds.pop(run.id)
        self._cancelling.discard(run.id)
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(3),
                wait=wait_exponential_jitter(multiplier=0.1, max=2.0),
                reraise=True,
            ):
                with attempt:
                    await self._repo.finish_run(
                        run.id,
                        {"status": status, "error": error, **outcome},
                        [(e.sequence, e.SerializeToString()) for e in unwritten],
                        journal,
                    )
        except Exception:
            # Never show clients events that are not stored: end their
            # streams; the lease loop settles the run failed when it can.
            log.exception("could not record the end of run %s", run.id)
            self._unrecorded.add(run.id)
            await feed.close()
            return
        for event in unwritten:
            await feed.publish(event, last=event is unwritten[-1])

    async def _title_after_first_exchange(
        self,
        user: str,
        conversation_id: str,
        text: str,
        needed: bool,
        answered: tuple[LLMProvider, router_pb2.ModelOption, str] | None = None,
    ) -> None:
        """Titles an untitled conversation after its first complete exchange
        (threads never overwrites a manual title): at once with the cut of
        the request, then, when a real model answered, with a short title a
        model writes, in the background so the run's final never waits for
        it. Best effort: a run does not fail for want of a title."""
        if not needed:
            return
        try:
            await self._collab.set_auto_title(user, conversation_id, text)
        except DomainError as exc:
            log.warning("could not title conversation %s: %s", conversation_id, exc.message)
            return
        if answered is None or answered[0].kind == "offline":
            return
        titler = self._titler(*answered[:2])
        task = asyncio.create_task(self._model_title(titler, user, conversation_id, text, answered[2]))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _titler(
        self, provider: LLMProvider, model: router_pb2.ModelOption
    ) -> tuple[LLMProvider, router_pb2.ModelOption]:
        """The configured title model, else the run's own."""
        name, _, title_model = self._limits.title_model.partition("/")
        if title_model and name in self._providers:
            return self._providers[name], router_pb2.ModelOption(provider=name, model=title_model)
        return provider, model

    async def _model_title(
        self,
        titler: tuple[LLMProvider, router_pb2.ModelOption],
        user: str,
        conversation_id: str,
        request: str,
        answer: str,
    ) -> None:
        provider, model = titler
        messages = instructions.title_messages(request, answer)
        try:
            async with asyncio.timeout(self._limits.title_timeout_seconds):
                parts = [
                    chunk.text
                    async for chunk in provider.stream(model.model, messages)
                    if isinstance(chunk, TextChunk)
                ]
            title = instructions.clean_title("".join(parts))
            if title:
                await self._collab.set_auto_title(user, conversation_id, request, title=title)
        except (DomainError, TimeoutError) as exc:
            # The cut of the request stays the title; nothing else depends on it.
            log.warning("the title model did not title conversation %s: %s", conversation_id, exc)

    async def _work(
        self, run: AgentRun, request: RunRequest, rec: _Recorder, needs_title: bool, budget: RunBudget
    ) -> dict[str, Any]:
        user, text = request.user, request.message
        thread = run.conversation_id or ""

        def entry(role: threads_pb2.Role.ValueType, content: str, source: str) -> threads_pb2.Entry:
            return threads_pb2.Entry(
                role=role,
                content=content,
                source=source,
                requester=user,
                target="personal",
                correlation_id=run.id,
                run_id=run.id,
            )

        # Memory and the router are optional: without them a run goes on
        # without recall or automatic skills and says so once per service.
        # Threads is not: a run whose messages cannot be recorded fails here,
        # before any model call.
        optional = _Optional(rec)
        allowed = request.allowed or AllowedSources()
        limits = self._limits
        async with rec.step("context", "Reading context"):
            # Recall, settings, the instruction page, the working context,
            # the conversation's summary and recording the user's message are
            # independent. The settings only matter for the user's default
            # model: not read when the request names one.
            (recalled, settings, page), (project, live, summary, _) = await asyncio.gather(
                asyncio.gather(
                    optional("memory", self._collab.recall(user, text, ""), ())
                    if allowed.memory
                    else _ready(()),
                    optional("memory", self._collab.personal_settings(user), memory_pb2.PersonalSettings())
                    if not request.requested_model
                    else _ready(memory_pb2.PersonalSettings()),
                    optional(
                        "memory",
                        self._collab.active_instructions(user),
                        pages_service_pb2.GetActiveInstructionsResponse(),
                    ),
                ),
                asyncio.gather(
                    optional("memory", self._collab.project_context(user, PROJECT_ID), ""),
                    optional(
                        "memory", self._collab.live_state(user, PROJECT_ID, limits.live_state_entries), []
                    ),
                    optional(
                        "memory",
                        self._collab.handoff_summary(user, thread, checkpoint=False),
                        handoff_pb2.HandoffSummary(),
                    ),
                    self._collab.append_entries(
                        user, thread, f"{run.id}:user", [entry(threads_pb2.ROLE_USER, text, "user")]
                    ),
                ),
            )
            # The turns after the summary; this run's own message comes last, apart.
            earlier = [
                e
                for e in await self._collab.entries_after(user, thread, summary.last_folded_sequence)
                if e.run_id != run.id
            ]
        sources = [{"kind": "memory", "id": n.note.id, "title": n.note.title} for n in recalled]
        instruction_page = self._instruction_layer(page, rec)
        if instruction_page:
            sources.append({"kind": "page", "id": page.page_id, "title": page.title})
        rec.reached["sources_json"] = json.dumps(sources)
        fact = remembered_fact(text)  # the user's own words only, never content read
        if fact is not None:
            return await self._propose_to_remember(run, user, fact, page, rec, entry)

        offline = self.offline
        async with rec.step("routing", "Choosing skills and model"):
            skills, model = await asyncio.gather(
                optional(
                    "router",
                    self._collab.route_skills(user, text, request.forced_skills, offline),
                    router_service_pb2.RouteSkillsResponse(),
                ),
                optional(
                    "router",
                    self._collab.route_model(
                        user, text, request.requested_model, settings.default_model, offline
                    ),
                    router_service_pb2.RouteModelResponse(model=self._fallback_model),
                ),
            )
            if skills.decision.arbiter_error:
                message = f"{skills.decision.arbiter_error}; the skills were chosen without it"
                rec.emit(notice=engine_pb2.Notice(code="ARBITER_FAILED", message=message))
            # Said before the first model call: a web-only model gets no
            # workspace context, an expensive one was chosen deliberately.
            for message in model.notices:
                code = "WEB_ONLY_MODEL" if model.web_only else "MODEL_CHOICE"
                rec.emit(notice=engine_pb2.Notice(code=code, message=message))
            used = []
            for skill in skills.skills:
                invocation = (
                    engine_pb2.SKILL_INVOCATION_MANUAL if skill.forced else engine_pb2.SKILL_INVOCATION_AUTO
                )
                use = engine_pb2.SkillUse(skill_id=skill.skill_id, name=skill.name, invocation=invocation)
                used.append(use)
                rec.emit(skill_used=engine_pb2.SkillUsed(skill=use))

        chosen = model.model
        provider = self.provider(chosen.provider)
        rec.reached.update(
            provider=chosen.provider,
            model=chosen.model,
            skills_json=json.dumps(
                [json_format.MessageToDict(u, preserving_proto_field_name=True) for u in used]
            ),
            skill_runs=[
                SkillRun(
                    id=str(uuid.uuid4()),
                    run_id=run.id,
                    user_id=user,
                    skill_id=u.skill_id,
                    name=u.name,
                    invocation="manual" if u.invocation == engine_pb2.SKILL_INVOCATION_MANUAL else "auto",
                )
                for u in used
            ],
            router_decision_json=json_format.MessageToJson(
                skills.decision, preserving_proto_field_name=True, indent=None
            ),
        )
        tool_context = ToolContext(user, run.id, allowed, web_only=model.web_only, request=text)
        memory_note = "" if allowed.memory else "memory is off for this conversation"
        context_layers = [
            instructions.bounded(
                "project_context",
                "# Project context (rules every agent applies)",
                project,
                limits.project_context_budget_chars,
            ),
            instructions.bounded(
                "live_state",
                "# Live state (who is doing what now)",
                instructions.live_state_text(live),
                limits.live_state_budget_chars,
                items=len(live),
            ),
        ]
        if model.web_only:
            # A web-only model gets no workspace context: no recalled notes,
            # no project context, no live state.
            recalled, sources = [], [s for s in sources if s["kind"] != "memory"]
            memory_note = memory_note or "not sent: web-only model"
            context_layers = [
                instructions.Layer(layer.key, "", layer.items, "not sent: web-only model")
                for layer in context_layers
            ]
        specs = await self.tool_specs(tool_context, text, rec)
        working = await self._mentioned_pages(
            user, text, page.page_id if instruction_page else "", tool_context, optional
        )
        layers = instructions.assemble(
            instruction_page, recalled, list(skills.skills), working, context_layers, memory_note
        )
        counter = self.counters.counter(provider.kind, chosen.model)
        records = [layer.record(counter) for layer in layers]
        rec.reached["layers_json"] = json.dumps(records)
        # The system message and the current message, counted once: their
        # layers' tokens, the message and the tools' schemas.
        fixed = sum(r["size_tokens"] for r in records) + prompt_tokens(
            counter, [ChatMessage("system", ""), ChatMessage("user", text)], specs
        )
        earlier_turns = await self._fit_history(
            user, thread, fixed, chosen, provider, counter, summary, earlier, rec, optional
        )
        messages = instructions.to_messages(
            layers, text, earlier_turns.messages, earlier_turns.summary_text()
        )
        rec.reached["layers_json"] = json.dumps([*records, *earlier_turns.layers()])
        # A CLI provider resumes the conversation's native session.
        loop = await self.model_and_tools(
            provider, chosen, messages, specs, tool_context, rec, thread, budget, counter, session_key=thread
        )
        sources += tool_context.sources_json()
        rec.reached["sources_json"] = json.dumps(sources)
        await asyncio.gather(
            self._record_turn(user, thread, run.id, loop.transcript, entry),
            self._title_after_first_exchange(
                user, thread, text, needs_title, (provider, chosen, loop.answer)
            ),
        )
        usage = {"tokens_in": loop.tokens_in, "tokens_out": loop.tokens_out}
        # A proposal made through a tool waits for the user, like "remember that".
        waiting = bool(loop.proposals)
        status = engine_pb2.RUN_STATUS_WAITING_APPROVAL if waiting else engine_pb2.RUN_STATUS_DONE
        return {
            **rec.reached,
            "status": "waiting_approval" if waiting else "done",
            "final": engine_pb2.Final(
                text=loop.answer,
                provider=chosen.provider,
                model=chosen.model,
                usage=common_pb2.Usage(**usage),
                status=status,
            ),
            **usage,
        }

    async def _fit_history(
        self,
        user: str,
        thread: str,
        fixed: int,
        model: router_pb2.ModelOption,
        provider: LLMProvider,
        counter: Counter,
        summary: handoff_pb2.HandoffSummary,
        earlier: Sequence[threads_pb2.Entry],
        rec: _Recorder,
        optional: _Optional,
    ) -> conversation.History:
        """The conversation's earlier turns that fit the model's context window
        beside the rest of the prompt (``fixed`` tokens) and the answer's
        reserve; older turns are folded into the persisted summary first."""
        window = model.context_window or self._limits.default_context_window
        reserve = min(provider.max_output_tokens, window // 4)
        budget = window - reserve - fixed
        turns = conversation.turns(earlier, counter)

        def summary_tokens(text: str) -> int:
            return counter(conversation.SUMMARY_HEADING + "\n" + text) if text else 0

        # Room for a full summary (its bound, in ordinary words at this
        # counter's rate), never more than half of what the history may use.
        full_summary = counter("word " * (conversation.SUMMARY_MAX_CHARS // 5))
        current = summary_tokens(summary.text)
        summary_reserve = min(max(current, full_summary), max(budget // 2, 0))
        folded, kept = conversation.split(turns, budget, current, summary_reserve)
        note = ""
        if folded:
            try:
                summary = await self._collab.fold_into_summary(
                    user, thread, conversation.handoff_entries(folded)
                )
            except DependencyUnavailable as exc:
                optional.failed("memory", exc)
                note = f"{len(folded)} older turns left out: memory could not fold them into the summary"
            else:
                if summary.fallback_reason:
                    message = f"the conversation summary was written by the rules: {summary.fallback_reason}"
                    rec.emit(notice=engine_pb2.Notice(code="SUMMARY_MODEL_FAILED", message=message))
        return conversation.History(
            summary=summary.text,
            summary_tokens=summary_tokens(summary.text) if folded else current,
            folded_now=len(folded) if not note else 0,
            turns=tuple(kept),
            note=note,
        )

    async def _record_turn(
        self,
        user: str,
        thread: str,
        run_id: str,
        transcript: Sequence[ChatMessage],
        entry: Any,
    ) -> None:
        """Records what the model did after the user's message: its tool calls
        with their results, then its answer (a later run replays them)."""
        entries = []
        for message in transcript:
            if message.role == "tool":
                row = entry(threads_pb2.ROLE_TOOL, message.content, "tool")
                row.tool_call_id = message.tool_call_id
            else:
                row = entry(threads_pb2.ROLE_ASSISTANT, message.content, "engine")
                row.tool_calls.extend(
                    threads_pb2.ToolCall(id=c.call_id, name=c.name, arguments=c.arguments)
                    for c in message.tool_calls
                )
            entries.append(row)
        await self._collab.append_entries(user, thread, f"{run_id}:assistant", entries)

    async def _mentioned_pages(
        self, user: str, text: str, instruction_page_id: str, context: ToolContext, optional: _Optional
    ) -> str:
        """The working-context layer: the pages the user mentions with
        ``@page:<id>``, read with their rights when the conversation allows
        the workspace. The active instruction page is already a layer of its
        own, so a mention of it adds nothing (it appears once)."""
        if not reads_workspace(context):
            return ""  # refused_mentions has said so
        budget = self._limits.instruction_page_budget_chars
        parts = []
        for page_id in mentioned_pages(text):
            if page_id == instruction_page_id:
                continue
            try:
                page = await self._collab.get_page(user, page_id)
            except NotFound:
                continue  # another user's page is exactly like a missing one: nothing is read
            except DependencyUnavailable as exc:
                optional.failed("memory", exc)
                break
            layer, _ = instructions.instruction_page_layer(page.title, page.body, budget)
            parts.append(
                layer.replace("# Instructions from the user's page", "# Page mentioned by the user", 1)
            )
            context.record("page", page.id, page.title)
        return "\n\n".join(parts)

    async def tool_specs(self, context: ToolContext, text: str, rec: _Recorder) -> list[ToolSpec]:
        """The tools this run may use, and what the user must know before the
        first model call: sources a web-only model will not read, @mentions
        of sources the conversation does not allow, MCP servers that failed."""
        if self._tools is None:
            return []
        specs = await self._tools.specs(context)
        withheld = self._tools.withheld_notice(context)
        notices = [("SOURCES_WITHHELD", withheld)] if withheld else []
        notices += [("MENTION_NOT_ALLOWED", n) for n in self._tools.refused_mentions(text, context)]
        notices += [("TOOLS_UNAVAILABLE", n) for n in context.notices]
        for code, message in notices:
            rec.emit(notice=engine_pb2.Notice(code=code, message=message))
        return specs

    async def model_and_tools(
        self,
        provider: LLMProvider,
        model: router_pb2.ModelOption,
        messages: list[ChatMessage],
        specs: Sequence[ToolSpec],
        context: ToolContext,
        rec: _Recorder,
        thread: str,
        budget: RunBudget,
        counter: Counter | None = None,
        session_key: str = "",
        label: str = "",
        context_strategy: str = "",
    ) -> ToolLoop:
        """The tool loop: call the model; while it calls tools, run them (each
        a named step, an action event and a row of agent_actions) and give it
        their results; every model call and tool call is a step of the
        budget."""
        texts: list[str] = []
        loop = ToolLoop()
        steps = 0
        prompt_length = len(messages)
        while True:
            steps += 1
            if budget.max_steps and steps > budget.max_steps:
                raise BudgetExceeded(f"step budget of {budget.max_steps} exceeded")
            async with rec.step("generate", label or f"Writing with {model.model}"):
                first = counter if steps == 1 else None  # the prompt's own count corrects the estimate
                generated = await self.generate(
                    provider,
                    model,
                    messages,
                    rec,
                    thread,
                    budget,
                    specs,
                    session_key=session_key,
                    counter=first,
                    context_strategy=context_strategy,
                )
            texts.append(generated.text)
            loop.tokens_in += generated.tokens_in
            loop.tokens_out += generated.tokens_out
            if not generated.tool_calls:
                loop.answer = "".join(texts)
                loop.transcript = [*messages[prompt_length:], ChatMessage("assistant", generated.text)]
                return loop
            messages.append(ChatMessage("assistant", generated.text, tool_calls=generated.tool_calls))
            for call in generated.tool_calls:
                steps += 1
                if budget.max_steps and steps > budget.max_steps:
                    raise BudgetExceeded(f"step budget of {budget.max_steps} exceeded")
                assert self._tools is not None  # the model only calls tools it was offered
                family = self._tools.family_of(call.name)
                async with rec.step(f"tools.{family}", FAMILY_LABELS[family]):
                    with tracer.start_as_current_span(f"execute_tool {call.name}") as span:
                        span.set_attribute("gen_ai.operation.name", "execute_tool")
                        span.set_attribute("gen_ai.tool.name", call.name)
                        span.set_attribute("gen_ai.tool.call.id", call.call_id)
                        result = await self._tools.execute(call, context)
                        if result.is_error:
                            span.set_status(trace.StatusCode.ERROR)
                outcome = "error" if result.is_error else "ok"
                rec.emit(action=engine_pb2.ActionTaken(tool=call.name, family=family, status=outcome))
                if result.notice:  # a write the user did not ask for (tools.WriteRefused)
                    rec.emit(notice=engine_pb2.Notice(code="WRITE_REFUSED", message=result.notice))
                rec.actions.append(
                    AgentAction(
                        id=str(uuid.uuid4()),
                        run_id=context.run_id,
                        user_id=context.user,
                        tool=call.name[:200],
                        family=family,
                        status=outcome,
                    )
                )
                messages.append(result.message())
                if result.proposal is not None:
                    loop.proposals.append(result.proposal)
                    rec.emit(
                        proposal=engine_pb2.ProposalMade(
                            proposal_id=result.proposal.proposal_id,
                            page_id=result.proposal.page_id,
                            page_title=result.proposal.page_title,
                            summary=result.proposal.summary,
                            unified_diff=result.proposal.unified_diff,
                        )
                    )

    async def _propose_to_remember(
        self,
        run: AgentRun,
        user: str,
        fact: str,
        page: pages_service_pb2.GetActiveInstructionsResponse,
        rec: _Recorder,
        entry: Any,
    ) -> dict[str, Any]:
        """Proposes adding ``fact`` to the active instruction page (created
        from the template first if the user has none); the run ends
        waiting_approval. Nothing is written to the page here."""
        async with rec.step("proposal", "Preparing a change to your instructions"):
            if page.state == pages_pb2.INSTRUCTION_PAGE_STATE_UNREADABLE:
                raise FailedPrecondition(
                    "your active instruction page cannot be read; "
                    "choose another one before asking me to remember"
                )
            page_id, title, body = page.page_id, page.title, page.body
            if page.state != pages_pb2.INSTRUCTION_PAGE_STATE_READABLE:
                created = await self._collab.create_instruction_page(user, f"{run.id}:instruction-page")
                page_id, title, body = created.id, created.title, created.body
            proposal = await self._collab.create_proposal(
                user,
                f"{run.id}:proposal",
                page_id,
                with_fact(body, fact),
                f"The user asked me to remember: {fact}",
                run_id=run.id,
            )
        rec.emit(
            proposal=engine_pb2.ProposalMade(
                proposal_id=proposal.id,
                page_id=page_id,
                page_title=title,
                summary=fact,
                unified_diff=proposal.diff.unified,
            )
        )
        text = (
            f'I would add this to your instruction page "{title}": {fact}. '
            "Nothing changes until you accept the proposal."
        )
        await self._collab.append_entries(
            user,
            run.conversation_id or "",
            f"{run.id}:assistant",
            [entry(threads_pb2.ROLE_ASSISTANT, text, "engine")],
        )
        return {
            "status": "waiting_approval",
            "final": engine_pb2.Final(text=text, status=engine_pb2.RUN_STATUS_WAITING_APPROVAL),
            "sources_json": json.dumps([{"kind": "page", "id": page_id, "title": title}]),
        }

    def _instruction_layer(
        self, page: pages_service_pb2.GetActiveInstructionsResponse, rec: _Recorder
    ) -> str:
        """The active instruction page as a layer, within its budget. A page
        the user can no longer read is skipped with a notice, never a failure
        (seed 002 P2-T05)."""
        if page.state == pages_pb2.INSTRUCTION_PAGE_STATE_UNREADABLE:
            message = page.notice or "the active instruction page cannot be read; it was skipped"
            rec.emit(notice=engine_pb2.Notice(code="INSTRUCTION_PAGE_UNREADABLE", message=message))
            return ""
        if page.state != pages_pb2.INSTRUCTION_PAGE_STATE_READABLE or not page.body.strip():
            return ""
        layer, truncated = instructions.instruction_page_layer(
            page.title, page.body, self._limits.instruction_page_budget_chars
        )
        if truncated:
            budget = self._limits.instruction_page_budget_chars
            message = f"the instruction page '{page.title}' was cut to its first {budget} characters"
            rec.emit(notice=engine_pb2.Notice(code="INSTRUCTION_PAGE_TRUNCATED", message=message))
        return layer

    async def generate(
        self,
        provider: LLMProvider,
        model: router_pb2.ModelOption,
        messages: list[ChatMessage],
        rec: _Recorder,
        conversation_id: str,
        budget: RunBudget,
        tools: Sequence[ToolSpec] = (),
        session_key: str = "",
        counter: Counter | None = None,
        context_strategy: str = "",
    ) -> Generation:
        """One model call: streams its text as coalesced deltas (the first
        piece at once, then at most one event per flush interval or size) and
        collects the tool calls it makes. With ``counter``, the provider's
        count of the prompt corrects that counter's estimate."""
        with tracer.start_as_current_span(f"chat {model.model}") as span:
            span.set_attribute("gen_ai.operation.name", "chat")
            span.set_attribute("gen_ai.provider.name", model.provider)
            span.set_attribute("gen_ai.request.model", model.model)
            span.set_attribute("gen_ai.conversation.id", conversation_id)
            if self._limits.capture_message_content:
                span.set_attribute("gen_ai.input.messages", _messages_json(messages))
            stream = _DeltaStream(rec, self._limits)
            tokens_in = tokens_out = 0
            calls: list[ToolCallChunk] = []
            # The token budget is checked on an estimate while streaming (the
            # provider's own count arrives last) and stops the answer there.
            estimate_in = sum(count_tokens(m.content) for m in messages)
            if budget.max_tokens and estimate_in > budget.max_tokens:
                raise BudgetExceeded(f"token budget of {budget.max_tokens} exceeded by the prompt alone")
            # A provider failure is retried only while no text has reached the
            # client: after that a retry would show the answer twice.
            attempts = AsyncRetrying(
                stop=stop_after_attempt(self._limits.provider_attempts),
                wait=wait_exponential_jitter(multiplier=0.2, max=4.0),
                retry=retry_if_exception(
                    lambda exc: isinstance(exc, ProviderError) and exc.retryable and not stream.sent_any
                ),
                reraise=True,
            )
            async for attempt in attempts:
                with attempt:
                    calls = []  # a retried attempt starts over (no text was shown)
                    try:
                        chunks = provider.stream(
                            model.model,
                            messages,
                            tools,
                            session_key=session_key,
                            context_strategy=context_strategy,
                        )
                        async for chunk in chunks:
                            if isinstance(chunk, UsageChunk):
                                tokens_in, tokens_out = chunk.tokens_in, chunk.tokens_out
                            elif isinstance(chunk, ToolCallChunk):
                                calls.append(chunk)
                            elif isinstance(chunk, ReasoningChunk):
                                stream.flush()  # keep the order the model produced
                                rec.emit(reasoning=engine_pb2.Reasoning(text=chunk.text))
                                stream.sent_any = True  # shown: a retry would repeat it
                            elif isinstance(chunk, TextChunk):
                                stream.add(chunk.text)
                                if budget.max_tokens and estimate_in + stream.tokens > budget.max_tokens:
                                    raise BudgetExceeded(f"token budget of {budget.max_tokens} exceeded")
                    finally:
                        stream.flush()  # what did arrive is shown, even before a failure
            if counter is not None and self.counters.corrects(counter):
                estimated = prompt_tokens(counter, messages, tools)
                self.counters.observe(counter, model.model, estimated, tokens_in)
            span.set_attribute("gen_ai.response.model", model.model)
            span.set_attribute("gen_ai.usage.input_tokens", tokens_in)
            span.set_attribute("gen_ai.usage.output_tokens", tokens_out)
            LLM_TOKENS.labels(model.provider, model.model, "input").inc(tokens_in)
            LLM_TOKENS.labels(model.provider, model.model, "output").inc(tokens_out)
            answer = stream.text
            if self._limits.capture_message_content:
                output = _messages_json([ChatMessage("assistant", answer, tool_calls=tuple(calls))])
                span.set_attribute("gen_ai.output.messages", output)
            return Generation(answer, tokens_in, tokens_out, tuple(calls))

    # Leases and shutdown

    async def heartbeat(self) -> None:
        await self._repo.heartbeat(self._instance_id)

    async def settle_orphans(self, at_start: bool = False) -> int:
        """Settles `failed` ("interrupted") every run left `running` by an
        engine instance whose lease expired: a crash never leaves a zombie,
        and another live engine's runs are never touched. At start-up, runs
        recorded under this instance's own id are orphans too (a restart that
        reuses an instance id inherits a lease, not the runs)."""
        settled = 0
        own = self._instance_id if at_start else None
        for run in await self._repo.orphaned_runs(self._limits.lease_seconds, own):
            sequence = await self._repo.last_sequence(run.id) + 1
            event = engine_pb2.RunEvent(
                run_id=run.id,
                sequence=sequence,
                error=engine_pb2.RunError(code="INTERRUPTED", message="the engine running this run stopped"),
            )
            event.create_time.GetCurrentTime()
            if await self._repo.settle_if_running(run.id, INTERRUPTED, event.SerializeToString(), sequence):
                settled += 1
                RUNS.labels("failed").inc()
                log.warning("settled run %s of instance %s as interrupted", run.id, run.instance_id)
        for run_id in list(self._unrecorded):
            sequence = await self._repo.last_sequence(run_id) + 1
            message = "the database was unavailable when the run ended; its end could not be recorded"
            code = common_pb2.ErrorReason.Name(common_pb2.ERROR_REASON_DEPENDENCY_UNAVAILABLE)
            event = engine_pb2.RunEvent(
                run_id=run_id, sequence=sequence, error=engine_pb2.RunError(code=code, message=message)
            )
            event.create_time.GetCurrentTime()
            if await self._repo.settle_if_running(run_id, message, event.SerializeToString(), sequence):
                settled += 1
                log.warning("settled run %s failed: its end could not be recorded", run_id)
            self._unrecorded.discard(run_id)
        return settled

    async def maintain(self) -> None:
        """Renews this instance's lease and settles orphans, until cancelled."""
        while True:
            try:
                await self.heartbeat()
                await self.settle_orphans()
            except Exception:  # noqa: BLE001 - keep the lease loop alive through a database blip
                log.exception("lease maintenance failed")
            await asyncio.sleep(self._limits.lease_seconds / 3)

    async def close(self, grace: float | None) -> None:
        """Lets in-flight runs finish within ``grace``; the rest are cancelled
        and settled `failed` ("interrupted") by their own task."""
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks.values()), timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        # Settlements run shielded from those cancellations: let them land.
        await asyncio.gather(*self._settling, return_exceptions=True)
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self._repo.release(self._instance_id)


def run_to_proto(run: AgentRun) -> engine_pb2.Run:
    proto = engine_pb2.Run(
        id=run.id,
        agent_id=run.agent_id or "",
        user_id=run.user_id,
        conversation_id=run.conversation_id or "",
        parent_run_id=run.parent_run_id or "",
        surface={v: k for k, v in SURFACES.items()}.get(run.surface, engine_pb2.SURFACE_UNSPECIFIED),
        trigger_id=run.trigger_id or "",
        trigger_payload_json=run.trigger_payload_json,
        status=STATUSES.get(run.status, engine_pb2.RUN_STATUS_UNSPECIFIED),
        provider=run.provider or "",
        model=run.model or "",
        credits=run.credits,
        router_decision_json=run.router_decision_json,
        error=run.error or "",
        request_id=run.request_id or "",
        requested_model=run.requested_model,
        approval=APPROVALS.get(run.approval, engine_pb2.APPROVAL_DECISION_UNSPECIFIED),
    )
    proto.usage.tokens_in = run.tokens_in
    proto.usage.tokens_out = run.tokens_out
    for skill in json.loads(run.skills_json):
        json_format.ParseDict(skill, proto.skills.add())
    for source in json.loads(run.sources_json):
        json_format.ParseDict(source, proto.sources.add())
    for layer in json.loads(run.layers_json):
        json_format.ParseDict(layer, proto.layers.add())
    proto.start_time.FromDatetime(run.started_at)
    if run.finished_at is not None:
        proto.finish_time.FromDatetime(run.finished_at)
    return proto
