"""The run's lifecycle: one engine execution, recorded in agent_runs before
the first model call and always settled. The run itself executes in a task
of its own, so a client that disconnects does not stop it (policy:
continue); clients follow its events, live from the feed or resumed from
the database. Busy threads, cancellation, approvals, this instance's lease
and the settlement of orphaned runs are here; the work itself is chat work
(``chat``) or ask work (``asks``)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

from opentelemetry import trace
from tenacity import AsyncRetrying, stop_after_attempt, wait_exponential_jitter

from services.engine import texts
from services.engine.budget import BudgetExceeded, RunBudget
from services.engine.collaborators import Collaborators
from services.engine.feed import RunFeed, StreamedEvent
from services.engine.models import AgentRun, RunStatus
from services.engine.providers.base import LLMProvider
from services.engine.repository import RunsRepository
from services.engine.runs import run_context
from services.engine.runs.asks import AgentAsks
from services.engine.runs.chat import ChatWork
from services.engine.runs.convert import APPROVALS, SURFACES
from services.engine.runs.generation import Models
from services.engine.runs.outcome import RunEnd
from services.engine.runs.recorder import Recorder, is_terminal
from services.engine.runs.remote import RemoteAgents
from services.engine.runs.requests import AskSpec, BusyPolicy, RunLimits, RunRequest
from services.engine.runs.scope import LocalRun, RunScope
from services.engine.runs.titles import Titles
from services.engine.runs.tool_loop import ToolLoop
from services.engine.tools import AllowedSources, ToolRegistry
from services.shared import deadlines, language
from services.shared.errors import (
    DependencyUnavailable,
    DomainError,
    Exhausted,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    TooLarge,
)
from services.shared.metrics import RUN_REFUSALS, RUN_SECONDS, RUNS, trace_exemplar
from services.shared.pagination import as_instant, as_text, page_of, page_request
from services.shared.projects import MAX_PROJECT_ID_CHARS, is_personal_name, personal_project_id
from services.shared.wakeups import RUN_CANCEL, RUN_EVENTS, THREAD_FREE, Wakeups
from switchboard.common.v1 import common_pb2
from switchboard.engine.v1 import engine_pb2

log = logging.getLogger(__name__)
tracer = trace.get_tracer("switchboard.engine")

INTERRUPTED = "interrupted"


class RunService:
    def __init__(
        self,
        repo: RunsRepository,
        collaborators: Collaborators,
        providers: dict[str, LLMProvider],
        limits: RunLimits,
        instance_id: str,
        tools: Callable[[RunService], ToolRegistry] | None = None,
        remote: RemoteAgents | None = None,
    ) -> None:
        """``tools`` builds the tools runs may use, given this service: the
        ask_agent tool runs its nested asks through it (None: no tools).
        ``remote`` asks remote A2A agents (None: their asks fail)."""
        self._repo = repo
        self._collab = collaborators
        self._limits = limits
        self._instance_id = instance_id
        # Runs executing in this process, from their spawn to their settlement.
        self._runs: dict[str, LocalRun] = {}
        self._settling: set[asyncio.Future[None]] = set()
        # Runs whose end could not be recorded (the database stayed away past
        # the retries): the lease loop settles them once it is back.
        self._unrecorded: set[str] = set()
        # The lease's renewals and its release take turns: a renewal racing
        # the release at shutdown would update a row that is gone.
        self._lease = asyncio.Lock()
        self._released = False
        models = Models(providers, limits)
        self._loop = ToolLoop(models, tools(self) if tools else None)
        self._titles = Titles(collaborators, providers, limits)
        self._chat = ChatWork(collaborators, models, self._loop, self._titles, limits)
        self._asks = AgentAsks(collaborators, models, self._loop, repo.last_model, remote)
        # The user's default webhook of a conversation or agent (kind, id).
        self._webhook_default: Callable[[str, str, str], Awaitable[str]] | None = None

    @property
    def wakeups(self) -> Wakeups:
        """The process's wake-ups (services.shared.wakeups)."""
        return self._repo.wakeups

    def use_webhook_defaults(self, lookup: Callable[[str, str, str], Awaitable[str]]) -> None:
        """``lookup(user, kind, id)`` gives the default webhook of a run that
        names none: its conversation's ("conversation") or agent's ("agent")."""
        self._webhook_default = lookup

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
            ask = request.ask
            if ask.target_agent is None:
                agent = await self._collab.get_agent(request.user, ask.target)
                ask = dataclasses.replace(ask, target_agent=agent)
            # The target agent's one shared thread, whoever asks.
            thread_id = (await self._collab.ensure_agent_thread(request.user, ask.target)).id
            needs_title = False
            request = dataclasses.replace(request, ask=ask)
            request = await self._with_default_webhook(request, "agent", ask.target)
        else:
            if not request.conversation_id:
                raise InvalidArgument("conversation_id is required", field="conversation_id")
            conversation = await self._collab.get_conversation(request.user, request.conversation_id)
            thread_id, needs_title = conversation.id, not conversation.title
            allowed = AllowedSources.from_proto(conversation.allowed_sources)
            project_id = await self._project_of(request.user, request.project_id)
            request = dataclasses.replace(request, allowed=allowed, project_id=project_id)
            request = await self._with_default_webhook(request, "conversation", conversation.id)
        if request.request_id and request.busy_policy != BusyPolicy.QUEUE:
            # A retry must not be refused or cancel its own first attempt. With
            # QUEUE (the default) nothing happens before the insert, whose
            # unique key already turns a retry into its first run.
            existing = await self._repo.run_by_request(request.user, request.request_id)
            if existing is not None:
                return existing.id
        await self._apply_busy_policy(request.user, thread_id, request.busy_policy)

        run_id = str(uuid.uuid4())
        run = AgentRun(
            id=run_id,
            user_id=request.user,
            agent_id=request.ask.target if request.ask else None,
            parent_run_id=(request.ask.parent_run_id or None) if request.ask else None,
            conversation_id=thread_id,
            surface=SURFACES.name(request.surface, "chat"),
            request_id=request.request_id or None,
            requested_model=request.requested_model,
            instance_id=self._instance_id,
            trigger_id=request.trigger_id or None,
            trigger_payload_json=request.trigger_payload_json,
            webhook_url=request.webhook_url or None,
            run_context_json=run_context.to_json(run_context.recorded(request.context, request.surface)),
            # The run's texts follow the language asked for, else the message's.
            language=language.resolve(request.language, request.message),
            # The correlation every entry of the ask carries (asks.AgentAsks.work).
            correlation_id=(request.ask.correlation_id or run_id) if request.ask else None,
        )
        # Shielded: a client that goes away mid-insert must not leave a row
        # `running` with no task to finish it.
        return await asyncio.shield(self._record_and_spawn(run, request, needs_title=needs_title))

    async def _project_of(self, user: str, project_id: str) -> str:
        """The project a chat run reads: "" for the user's personal project
        (memory resolves it for the user, no call made); another must be one
        the user is a member of (NotFound otherwise: nothing is written), and
        becomes its resolved id. When memory cannot answer, the name is kept:
        memory checks membership again on every read and write of the run."""
        project_id = project_id.strip()
        if is_personal_name(project_id) or project_id == personal_project_id(user):
            return ""
        if len(project_id) > MAX_PROJECT_ID_CHARS:
            raise TooLarge(f"project_id is longer than {MAX_PROJECT_ID_CHARS} characters", field="project_id")
        try:
            return await self._collab.check_project(user, project_id) or project_id
        except DependencyUnavailable:
            log.warning("cannot check project %r for %s: memory is unavailable", project_id, user)
            return project_id

    async def _with_default_webhook(self, request: RunRequest, kind: str, target_id: str) -> RunRequest:
        if request.webhook_url or self._webhook_default is None:
            return request
        url = await self._webhook_default(request.user, kind, target_id)
        return dataclasses.replace(request, webhook_url=url) if url else request

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

    async def _wait_turn(self, scope: RunScope) -> None:
        """Two runs never write to one thread at once: wait while runs that
        arrived earlier are active on it (any replica; the database decides)."""
        run, rec = scope.run, scope.rec
        if not await self._repo.runs_ahead(run):
            return
        async with rec.step("queued", rec.text("step.queued")):
            # Subscribed before the read: a run ending after it wakes this one.
            async with self._repo.wakeups.subscribe(THREAD_FREE, run.conversation_id or "") as waiter:
                while await self._repo.runs_ahead(run):
                    await waiter.wait()

    async def _record_and_spawn(self, run: AgentRun, request: RunRequest, needs_title: bool) -> str:
        feed = RunFeed()
        recorder = Recorder(run.id, feed, self._repo, run.language)
        started = recorder.make(
            run_started=engine_pb2.RunStarted(
                conversation_id=run.conversation_id or "",
                requested_model=request.requested_model,
                language=run.language,
            )
        )
        reject_busy = request.busy_policy == BusyPolicy.REJECT
        try:
            inserted = await self._repo.insert_run(
                run, started.SerializeToString(), reject_busy, quota=self._limits.quota
            )
        except Exhausted as refusal:
            RUN_REFUSALS.labels(common_pb2.ErrorReason.Name(refusal.reason)).inc()
            raise
        if inserted is None:
            # A retry with the same request_id (maybe concurrent) created it first.
            existing = await self._repo.run_by_request(request.user, request.request_id)
            assert existing is not None
            return existing.id
        await feed.publish(started)
        local = LocalRun(run, feed, recorder)
        local.task = asyncio.create_task(self._execute(local, request, needs_title))
        self._runs[run.id] = local
        # Settlement removes it; a task that ended without one must not stay known.
        local.task.add_done_callback(lambda _: self._forget(local))
        return run.id

    def _forget(self, local: LocalRun) -> None:
        if self._runs.get(local.run.id) is local:
            del self._runs[local.run.id]

    async def ask_and_follow(
        self,
        user: str,
        request_id: str,
        ask: AskSpec,
        message: str,
        budget: RunBudget | None = None,
        busy_policy: BusyPolicy = BusyPolicy.QUEUE,
        client_instructions: str = "",
        webhook_url: str = "",
    ) -> AsyncIterator[StreamedEvent]:
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
                client_instructions=client_instructions,
                webhook_url=webhook_url,
            )
        )
        async for streamed in self.stream(user, run_id, 0):
            yield streamed

    async def follow(self, user: str, run_id: str, after: int) -> AsyncIterator[engine_pb2.RunEvent]:
        """The run's events with sequence > after until its terminal event."""
        async for streamed in self.stream(user, run_id, after):
            yield streamed.event

    async def stream(
        self, user: str, run_id: str, after: int, stored_only: bool = False
    ) -> AsyncIterator[StreamedEvent]:
        """The run's events with sequence > after until its terminal event,
        with their JSON: live from this process's feed (shared by all its
        followers), else from the database (another replica's run, or a
        finished one), read again each time the run's writer announces
        events (services.shared.wakeups), or at the safety poll.
        ``stored_only``: those stored now, and no more (a snapshot)."""
        if stored_only:
            await self.get(user, run_id)
            for row in await self._repo.events_after(run_id, after):
                yield StreamedEvent(engine_pb2.RunEvent.FromString(row.payload))
            return
        local = self._runs.get(run_id)
        if local is not None and local.user == user:
            async for streamed in local.feed.follow(after):
                yield streamed
            return
        await self.get(user, run_id)
        # Subscribed before the first read: events stored after it wake this stream.
        async with self._repo.wakeups.subscribe(RUN_EVENTS, run_id) as waiter:
            while True:
                # Status first: a run's terminal event commits with its status, so
                # once it reads finished, the events read next are all there are.
                run = await self._repo.get_run(run_id)
                finished = run is None or run.status != RunStatus.RUNNING
                for row in await self._repo.events_after(run_id, after):
                    event = engine_pb2.RunEvent.FromString(row.payload)
                    after = event.sequence
                    yield StreamedEvent(event)
                    if is_terminal(event):
                        return
                if finished:
                    return
                await waiter.wait()

    async def get(self, user: str, run_id: str) -> AgentRun:
        run = await self._repo.get_run(run_id) if run_id else None
        if run is None or run.user_id != user:
            raise NotFound(f"run {run_id!r} not found", run_id=run_id)
        return run

    async def list_runs(
        self, user: str, conversation_id: str, requested_size: int, token: str, correlation_id: str = ""
    ) -> tuple[list[AgentRun], str]:
        """The user's runs of a conversation, newest first, one page; only
        those of ``correlation_id`` when one is given."""
        if not conversation_id:
            raise InvalidArgument("conversation_id is required", field="conversation_id")
        size, before = page_request(
            requested_size,
            token,
            lambda cursor: (as_instant(cursor["t"]), as_text(cursor["id"])),
            default=20,
            maximum=100,
        )
        rows = await self._repo.list_runs(user, conversation_id, before, size + 1, correlation_id)
        return page_of(rows, size, lambda last: {"t": last.started_at.isoformat(), "id": last.id})

    async def cancel(self, user: str, run_id: str) -> AgentRun:
        """Stops a running run: at once when it executes here; when it
        executes on another replica, that replica is woken (at the latest, it
        finds the flag at its safety poll). Returns the run; one already
        ended is left as it is."""
        run = await self.get(user, run_id)
        if run.status != RunStatus.RUNNING:
            return run
        await self._repo.request_cancel(run_id)
        self._cancel_local(run_id)
        return run

    async def set_webhook(self, user: str, run_id: str, webhook_url: str) -> AgentRun:
        """Sets (or clears, "") the webhook of the user's running run, whichever
        replica executes it: the run's end reads it from its row. A run that
        has ended is refused: its delivery was decided as it ended."""
        run = await self.get(user, run_id)
        if run.status != RunStatus.RUNNING or not await self._repo.set_webhook_if_running(
            run_id, webhook_url or None
        ):
            raise FailedPrecondition(
                f"run {run_id!r} has ended: its webhook is decided", run_id=run_id, field="run_id"
            )
        return await self.get(user, run_id)

    async def record_approval(self, user: str, run_id: str, decision: str) -> AgentRun:
        """The user decided on the proposal the run waited on: the run is done,
        with the decision. Repeating the same decision changes nothing."""
        if decision not in APPROVALS.names:
            raise InvalidArgument("decision must be ACCEPTED or REFUSED", field="decision")
        run = await self.get(user, run_id)
        if run.status == RunStatus.WAITING_APPROVAL:
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
        local = self._runs.get(run_id)
        if local is not None and local.working:
            local.cancelling = True
            local.task.cancel()

    async def watch_cancellations(self) -> None:
        """Cancels this instance's runs that CancelRun flagged elsewhere, until
        cancelled: each time CancelRun announces one, and at the safety poll."""
        async with self._repo.wakeups.subscribe(RUN_CANCEL, self._instance_id) as waiter:
            while True:
                try:
                    if self._runs:
                        for run_id in await self._repo.cancel_requested(self._instance_id):
                            self._cancel_local(run_id)
                except Exception:  # noqa: BLE001 - keep polling through a database blip
                    log.exception("cancellation poll failed")
                await waiter.wait()

    # Execution

    async def _execute(self, local: LocalRun, request: RunRequest, needs_title: bool) -> None:
        # The run outlives the StartRun call that spawned it: not that call's deadline.
        deadlines.detach()
        began = time.monotonic()
        run, recorder = local.run, local.recorder
        with tracer.start_as_current_span("invoke_agent personal") as span:
            span.set_attribute("gen_ai.operation.name", "invoke_agent")
            span.set_attribute("gen_ai.agent.name", "personal")
            span.set_attribute("switchboard.run_id", run.id)
            if run.conversation_id:
                span.set_attribute("gen_ai.conversation.id", run.conversation_id)
            budget = request.budget.over(self._limits.default_budget)
            scope = RunScope(run, request, recorder, budget)
            local.working = True
            try:
                try:
                    await self._wait_turn(scope)  # not counted in the time budget
                    async with asyncio.timeout(budget.max_seconds or None) as deadline:
                        if request.ask is not None:
                            final = await self._asks.work(scope, request.ask)
                        else:
                            final = await self._chat.work(scope, needs_title)
                finally:
                    local.working = False  # past this point CancelRun no longer interrupts
                end = RunEnd.answered(final)
            except asyncio.CancelledError:
                if local.cancelling:
                    cancelled = recorder.text("error.cancelled")
                    end = RunEnd.failed(RunStatus.CANCELLED, "CANCELLED", cancelled)
                else:
                    stopped = recorder.text("error.stopped")
                    end = RunEnd.failed(RunStatus.FAILED, "INTERRUPTED", stopped, error=INTERRUPTED)
            except (BudgetExceeded, TimeoutError) as exc:
                if isinstance(exc, TimeoutError) and not deadline.expired():
                    raise
                message = (
                    exc.say(run.language)
                    if isinstance(exc, BudgetExceeded)
                    else recorder.text("budget.seconds", limit=f"{budget.max_seconds:g}")
                )
                end = RunEnd.failed(RunStatus.BUDGET_EXCEEDED, "BUDGET_EXCEEDED", message)
            except DomainError as exc:
                code = common_pb2.ErrorReason.Name(exc.reason)
                end = RunEnd.failed(RunStatus.FAILED, code, exc.message)
            except Exception as exc:  # noqa: BLE001 - a run always ends, with its cause
                log.exception("run %s failed", run.id)
                end = RunEnd.failed(RunStatus.FAILED, "INTERNAL", f"internal error: {type(exc).__name__}")
            span.set_attribute("switchboard.run_status", end.status)
            exemplar = trace_exemplar()  # the run's own span, current here
            RUNS.labels(end.status).inc(exemplar=exemplar)
            RUN_SECONDS.labels(end.status).observe(time.monotonic() - began, exemplar=exemplar)
            # Shielded: a cancellation (CancelRun, shutdown) arriving while the
            # run is being settled must not leave it half-recorded and its
            # clients without a terminal event.
            settling = asyncio.ensure_future(self._settle(local, end))
            self._settling.add(settling)
            settling.add_done_callback(self._settling.discard)
            await asyncio.shield(settling)

    async def _settle(self, local: LocalRun, end: RunEnd) -> None:
        """Writes the run's end, its last events and its journal (actions,
        skill runs), then publishes the events."""
        run, recorder, feed = local.run, local.recorder, local.feed
        outcome = recorder.outcome
        unwritten = [*await recorder.drain(), recorder.make(**end.terminal())]
        self._forget(local)
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(3),
                wait=wait_exponential_jitter(multiplier=0.1, max=2.0),
                reraise=True,
            ):
                with attempt:
                    await self._repo.finish_run(
                        run.id,
                        {"status": end.status, "error": end.error, **outcome.columns()},
                        [(e.sequence, e.SerializeToString()) for e in unwritten],
                        outcome.journal,
                        thread_id=run.conversation_id,
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

    # Leases and shutdown

    async def heartbeat(self) -> None:
        async with self._lease:
            if not self._released:
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
                error=engine_pb2.RunError(
                    code="INTERRUPTED", message=texts.say(run.language, "error.orphaned")
                ),
            )
            event.create_time.GetCurrentTime()
            if await self._repo.settle_if_running(
                run.id, INTERRUPTED, event.SerializeToString(), sequence, run.conversation_id
            ):
                settled += 1
                RUNS.labels(RunStatus.FAILED).inc()
                log.warning("settled run %s of instance %s as interrupted", run.id, run.instance_id)
        for run_id in list(self._unrecorded):
            sequence = await self._repo.last_sequence(run_id) + 1
            stored = await self._repo.get_run(run_id)
            message = texts.say(stored.language if stored is not None else "", "error.unrecorded")
            code = common_pb2.ErrorReason.Name(common_pb2.ERROR_REASON_DEPENDENCY_UNAVAILABLE)
            event = engine_pb2.RunEvent(
                run_id=run_id, sequence=sequence, error=engine_pb2.RunError(code=code, message=message)
            )
            event.create_time.GetCurrentTime()
            thread_id = stored.conversation_id if stored is not None else None
            if await self._repo.settle_if_running(
                run_id, message, event.SerializeToString(), sequence, thread_id
            ):
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
        if self._runs:
            _, pending = await asyncio.wait({local.task for local in self._runs.values()}, timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        # Settlements run shielded from those cancellations: let them land.
        await asyncio.gather(*self._settling, return_exceptions=True)
        await self._titles.close()
        async with self._lease:
            self._released = True
            await self._repo.release(self._instance_id)
