"""AskAgent: one agent asks another.

The run belongs to the target agent and happens on its **one shared thread**
(every requester's asks land there, so a fact Main gave QA is there when
Architect asks QA), with the requester and the correlation id on every entry.

What the model receives is composed afresh for every ask, whatever the
provider: the agent's persona, the handoff summary, the recent transcript
tail of its thread, and from the agent's **project** (every member and agent
of it shares them) memory recalled for its persona and the question, the
project context and the live state, each read with the requester's identity
and afresh at each ask (a change between two asks is in the second). The
agent says what it is doing with the set_live_state tool (its own entry,
written as the requester, whose project role must allow it).
That is also what makes a **provider swap** work: when the agent's model now
belongs to another provider than its live session, the old session is
released, the handoff summary is checkpointed first (so it holds everything
recorded), and the new provider starts from the same composed context; no
native session is ever transferred. An agent **pinned to a provider**
(``provider_id``) runs there only: the router chooses among that provider's
models, and without the router the ask keeps the thread's model of that
provider, or the engine's fallback when it is that provider's, or fails.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import TypeVar

from services.engine import instructions
from services.engine.collaborators import Collaborators
from services.engine.providers.base import LLMProvider
from services.engine.runs.generation import ModelCall, Models
from services.engine.runs.optional import OptionalServices
from services.engine.runs.recorder import Recorder
from services.engine.runs.remote import RemoteAgentFailed, RemoteAgents
from services.engine.runs.requests import AskSpec
from services.engine.runs.scope import RunScope
from services.engine.runs.tool_loop import ToolLoop
from services.engine.tools import AllowedSources, SourceRead, ToolContext
from services.shared.errors import DependencyUnavailable, FailedPrecondition, NotFound
from services.shared.projects import personal_project_id
from switchboard.common.v1 import common_pb2
from switchboard.engine.v1 import engine_pb2
from switchboard.memory.v1 import handoff_pb2, memory_pb2
from switchboard.router.v1 import router_pb2, router_service_pb2
from switchboard.threads.v1 import threads_pb2

INJECTION_STRATEGIES = {
    threads_pb2.INJECTION_STRATEGY_CONVENTION_FILE: "convention_file",
    threads_pb2.INJECTION_STRATEGY_FLAG: "flag",
    threads_pb2.INJECTION_STRATEGY_STDIN: "stdin",
    threads_pb2.INJECTION_STRATEGY_ENV: "env",
}
_T = TypeVar("_T")

# Entries of the target's thread put in the context (newest last).
TRANSCRIPT_TAIL = 20
# The provider a remote A2A agent's run records (its model: the card's URL).
REMOTE_PROVIDER = "a2a"
MAX_TAIL_ENTRY_CHARS = 500


def native_session_id(provider: str, thread_id: str) -> str:
    """The session id of an API provider on a thread: API providers keep no
    session of their own, so the live session is this stable name, which is
    what lets concurrent asks on two engines bind one and the same session."""
    return f"{provider}:{thread_id}"


# What an asked agent is told besides its persona: it works in a team, and
# marks what the handoff summary must keep (the summariser reads the marks).
AGENT_SYSTEM = (
    "You are one agent of a team working on a shared project; other agents ask you questions "
    "on your thread. Answer the question you are asked, concisely.\n"
    "When your answer settles something, put it on a line of its own that starts with "
    '"Decision:"; something that blocks the work with "Blocker:"; a blocker that is lifted with '
    '"Unblocked:"; and a change of what the work is for with "Objective:". These lines are '
    "kept in the handoff summary that your successor (or another model) starts from.\n"
    "The live state says who is doing what now in the project. When you take up or finish work the "
    "others should know of, say so with set_live_state: it expires by itself and is not memory."
)


def transcript_lines(entries: list[threads_pb2.Entry]) -> list[str]:
    """The thread's entries as the model reads them, each saying who spoke:
    a question is "main asked qa", its answer "qa answered main"."""
    lines = []
    for entry in entries:
        content = " ".join(entry.content.split())
        if len(content) > MAX_TAIL_ENTRY_CHARS:
            content = content[:MAX_TAIL_ENTRY_CHARS] + " …"
        if entry.role == threads_pb2.ROLE_ASSISTANT:
            who = f"{entry.target} answered {entry.requester}"
        else:
            who = f"{entry.requester} asked {entry.target}"
        tag = f", correlation {entry.correlation_id}" if entry.correlation_id else ""
        lines.append(f"- [thread #{entry.sequence}{tag}] {who}: {content}")
    return lines


def working_context(
    agent: threads_pb2.Agent, project: str, summary: str, tail: list[threads_pb2.Entry]
) -> str:
    parts = [f"# You are the agent {agent.display_name or agent.id} ({agent.id})"]
    if agent.persona:
        parts.append(agent.persona)
    if project:
        parts.append(f"# Project context (rules every agent applies)\n{project}")
    if summary:
        parts.append(f"# Handoff summary\n{summary}")
    if tail:
        parts.append(
            "# Recent entries of your thread since its last rotation (oldest first)\n"
            + "\n".join(transcript_lines(tail))
        )
    return "\n\n".join(parts)


def _correlation(scope: RunScope, ask: AskSpec) -> str:
    """The id tying the answer to the question: the asker's, else the run's."""
    return ask.correlation_id or scope.run_id


def _entry(
    scope: RunScope, ask: AskSpec, role: threads_pb2.Role.ValueType, content: str, source: str
) -> threads_pb2.Entry:
    """An entry of the ask on the target's thread: who asked whom, under which correlation."""
    return threads_pb2.Entry(
        role=role,
        content=content,
        source=source,
        requester=ask.requester,
        target=ask.target,
        correlation_id=_correlation(scope, ask),
        run_id=scope.run_id,
    )


async def _readable(call: Awaitable[_T], fallback: _T, unreadable: list[str]) -> _T:
    """``call``'s result; ``fallback`` when memory says NOT_FOUND (the
    requester is no member of the project), noted in ``unreadable``."""
    try:
        return await call
    except NotFound as exc:
        unreadable.append(exc.message)
        return fallback


class AgentAsks:
    def __init__(
        self,
        collaborators: Collaborators,
        models: Models,
        loop: ToolLoop,
        last_model: Callable[[str], Awaitable[tuple[str, str] | None]] | None = None,
        remote: RemoteAgents | None = None,
    ) -> None:
        """``last_model``: the (provider, model) that last answered on a
        thread; ``remote``: how remote A2A agents are asked (None: they are not)."""
        self._collab = collaborators
        self._models = models
        self._loop = loop
        self._last_model = last_model
        self._remote = remote

    async def work(self, scope: RunScope, ask: AskSpec) -> engine_pb2.Final:
        assert ask.target_agent is not None  # read by start()
        if ask.target_agent.remote.card_url:
            return await self._remote_work(scope, ask)
        run, request, rec = scope.run, scope.request, scope.rec
        user, text, thread = scope.user, scope.message, scope.thread
        correlation = _correlation(scope, ask)
        entry = functools.partial(_entry, scope, ask)

        # Recall, the project context, the live state and the router are
        # optional, as in a chat run: without them the ask goes on, with one
        # notice each. They are the asked agent's project's, read as the
        # requester: a requester who may ask the agent (a member of it) but
        # is no member of its project gets none of them, and is told so.
        optional = OptionalServices(rec)
        limits = self._models.limits
        async with rec.step("context", rec.text("step.ask_context", agent=ask.target)):
            agent = ask.target_agent
            # The requester's own personal project by its name (""): memory
            # resolves it for its owner, created on first use.
            project_id = "" if agent.project_id == personal_project_id(user) else agent.project_id
            unreadable: list[str] = []
            (tail, open_from), recalled, project, live_read = await asyncio.gather(
                self._collab.transcript_tail(user, thread, TRANSCRIPT_TAIL),
                optional(
                    "memory",
                    _readable(self._collab.recall(user, text, agent.persona, project_id), [], unreadable),
                    [],
                ),
                optional("memory", self._collab.project_context(user, project_id), ""),
                optional(
                    "memory",
                    _readable(
                        self._collab.live_state(user, project_id, limits.live_state_entries), None, unreadable
                    ),
                    None,
                ),
            )
            # None: not read (memory down, or the requester is no member of the project).
            live = live_read or []
            if live_read is not None:
                rec.live_state(memory_pb2.LIVE_STATE_EVENT_TYPE_SNAPSHOT, live_read)
            if unreadable:
                rec.say("PROJECT_MEMORY_UNREADABLE", user=user, agent=ask.target, project=agent.project_id)
            asked = await self._collab.append_entries(
                user, thread, f"{run.id}:ask", [entry(threads_pb2.ROLE_USER, text, f"agent:{ask.requester}")]
            )

        async with rec.step("routing", rec.text("step.ask_routing")):
            offline = self._models.offline
            fallback = await self._fallback(agent, thread)
            # A pinned agent is routed among its provider's models only.
            routing = self._collab.route_model(
                user, text, agent.model or "auto", "", offline, agent.provider_id
            )
            route: router_service_pb2.RouteModelResponse | router_pb2.ModelRoute = (
                await self._pinned_route(agent, routing)
                if fallback is None
                else await optional("router", routing, fallback)
            )
            chosen = route.model
            if agent.provider_id and chosen.provider != agent.provider_id:
                # A router that does not know the pin (an older replica) chose elsewhere.
                raise FailedPrecondition(
                    f"agent {agent.id!r} is pinned to provider {agent.provider_id!r}, "
                    f"but {chosen.id!r} is served by {chosen.provider!r}",
                    provider=agent.provider_id,
                )
            provider = self._models.provider(chosen.provider)
            summary = await self._switch_session(scope, chosen.provider, open_from)

        live_layer = instructions.bounded(
            "live_state",
            "# Live state (who is doing what now)",
            instructions.live_state_text(live),
            limits.live_state_budget_chars,
            items=len(live),
        )
        layers = [
            *instructions.assemble(
                "",
                recalled,
                [],
                working_context(agent, project, summary, tail),
                [live_layer],
                product_system=AGENT_SYSTEM,
                client=instructions.client_layer(
                    request.client_instructions, self._models.limits.max_message_chars
                ),
            ),
            # Who started the ask: a schedule's tick says so to the agent.
            scope.context_layer(),
        ]
        messages = instructions.to_messages(layers, f"{ask.requester} asks: {text}")
        counter = self._models.counters.counter(provider.kind, chosen.model)
        # The asked agent works with the same tools as a chat, under the same
        # write guard (the question is the request), and asks others within
        # its chain: never back up the chain, never deeper than the limit.
        tools = ToolContext(
            user,
            run.id,
            AllowedSources(),
            request=text,
            agent=ask.target,
            ask_chain=(*ask.waiting, ask.target),
            correlation_id=correlation,
            project_id=project_id,
            language=scope.language,
        )
        specs = await self._loop.specs(scope, tools)
        strategy = self._injection_strategy(agent, provider, rec)
        # The thread is the session key: a CLI provider resumes its native session.
        call = ModelCall(provider, chosen, counter, specs, session_key=thread, context_strategy=strategy)
        label = rec.text("step.ask_generate", agent=ask.target, model=chosen.model)
        loop = await self._loop.run(scope, call, messages, tools, label=label)
        answer, tokens_in, tokens_out = loop.answer, loop.tokens_in, loop.tokens_out
        await self._record_answer(scope, ask, asked[0], answer)
        outcome = rec.outcome
        outcome.record_model(route, fallback=route is fallback)
        outcome.spent(tokens_in, tokens_out)
        outcome.read(SourceRead("memory", n.note.id, n.note.title) for n in recalled)
        outcome.read([SourceRead("thread", thread, f"{ask.target}'s thread"), *tools.sources_read])
        outcome.prompted(layer.record(counter) for layer in layers)
        return engine_pb2.Final(
            text=answer,
            provider=chosen.provider,
            model=chosen.model,
            usage=common_pb2.Usage(tokens_in=tokens_in, tokens_out=tokens_out),
            status=engine_pb2.RUN_STATUS_DONE,
        )

    async def _record_answer(
        self, scope: RunScope, ask: AskSpec, asked: threads_pb2.Entry, answer: str
    ) -> None:
        """The answer on the thread, said by the target to the requester, and
        the exchange in the thread's handoff log (what its summary folds)."""
        user, thread, correlation = scope.user, scope.thread, _correlation(scope, ask)
        answered = await self._collab.append_entries(
            user,
            thread,
            f"{scope.run_id}:answer",
            [_entry(scope, ask, threads_pb2.ROLE_ASSISTANT, answer, f"agent:{ask.target}")],
        )
        await self._collab.record_handoff(
            user,
            thread,
            [
                handoff_pb2.HandoffEntry(
                    sequence=e.sequence,
                    author_agent_id=author,
                    requester=ask.requester,
                    correlation_id=correlation,
                    kind=kind,
                    text=e.content,
                )
                for e, author, kind in (
                    (asked, ask.requester, handoff_pb2.HANDOFF_ENTRY_KIND_REQUEST),
                    (answered[0], ask.target, handoff_pb2.HANDOFF_ENTRY_KIND_ANSWER),
                )
            ],
        )

    async def _remote_work(self, scope: RunScope, ask: AskSpec) -> engine_pb2.Final:
        """An ask of a remote A2A agent: no model runs here. The question and
        the answer land on the agent's shared thread as a local agent's do
        (who asked, who answered, the correlation id, the handoff log); the
        correlation id is the A2A contextId, so the remote sees one
        conversation per correlation. A remote that fails is a notice and a
        failed run, which the asking model reads as the failed ask."""
        agent = ask.target_agent
        assert agent is not None
        run, rec = scope.run, scope.rec
        user, text, thread = scope.user, scope.message, scope.thread
        correlation = _correlation(scope, ask)
        if self._remote is None:
            raise FailedPrecondition(
                f"agent {agent.id!r} is a remote A2A agent, which this engine does not ask"
            )
        name = agent.display_name or agent.id
        async with rec.step("remote", rec.text("step.ask_remote", agent=name)):
            asked = await self._collab.append_entries(
                user,
                thread,
                f"{run.id}:ask",
                [_entry(scope, ask, threads_pb2.ROLE_USER, text, f"agent:{ask.requester}")],
            )
            try:
                answer = await self._remote.ask(agent.remote.card_url, text, correlation, run.id)
            except RemoteAgentFailed as exc:
                rec.say("REMOTE_AGENT_FAILED", agent=name, cause=exc.message)
                raise
        await self._record_answer(scope, ask, asked[0], answer)
        rec.outcome.answered_by(REMOTE_PROVIDER, agent.remote.card_url)
        rec.outcome.read([SourceRead("thread", thread, f"{ask.target}'s thread")])
        return engine_pb2.Final(
            text=answer,
            provider=REMOTE_PROVIDER,
            model=agent.remote.card_url,
            status=engine_pb2.RUN_STATUS_DONE,
        )

    @staticmethod
    def _injection_strategy(agent: threads_pb2.Agent, provider: LLMProvider, rec: Recorder) -> str:
        """The agent's own way for a CLI to receive its context, when it has
        one the CLI can use; API providers get the context as the system
        message whatever the strategy. A strategy the CLI is not configured
        for (no context_flag, no context_env) falls back to the provider's,
        with a notice."""
        strategy = INJECTION_STRATEGIES.get(agent.injection_strategy, "")
        problem = getattr(provider, "strategy_problem", None)
        if not strategy or problem is None:
            return ""
        why = problem(strategy)
        if why:
            rec.say("INJECTION_STRATEGY_UNAVAILABLE", agent=agent.id, strategy=strategy, why=why)
            return ""
        return strategy

    async def _fallback(self, agent: threads_pb2.Agent, thread: str) -> router_pb2.ModelRoute | None:
        """The model when the router does not answer. An agent pinned to a
        model or to a provider keeps the one its thread last ran on: a router
        blip must not swap its provider (a handoff, the provider session
        released). Others, and a pinned agent whose thread never ran, get the
        engine's fallback; None when the agent is pinned to a provider the
        fallback is not on: it does not run elsewhere."""
        model_pinned = bool(agent.model) and agent.model != "auto"
        pinned = model_pinned or bool(agent.provider_id)
        kept = await self._last_model(thread) if pinned and thread and self._last_model else None
        if (
            kept is not None
            and kept[0] in self._models.providers
            and (not agent.provider_id or kept[0] == agent.provider_id)
        ):
            provider, model = kept
            return router_pb2.ModelRoute(
                model=router_pb2.ModelOption(
                    id=agent.model if model_pinned else model, provider=provider, model=model
                ),
                reason=f"the router did not answer: agent {agent.id!r} keeps its thread's model",
            )
        fallback = self._models.fallback_model
        if agent.provider_id and fallback.provider != agent.provider_id:
            return None
        return router_pb2.ModelRoute(model=fallback)

    @staticmethod
    async def _pinned_route(
        agent: threads_pb2.Agent, routing: Awaitable[router_service_pb2.RouteModelResponse]
    ) -> router_service_pb2.RouteModelResponse:
        """The router's route for an agent with no fallback on its pinned
        provider: without the router nothing may answer for it, so the ask
        fails (a retry may help) rather than run on another provider."""
        try:
            return await routing
        except DependencyUnavailable as exc:
            raise DependencyUnavailable(
                f"routing is unavailable and agent {agent.id!r} is pinned to provider "
                f"{agent.provider_id!r}, which the engine's fallback model is not on: "
                f"it does not run elsewhere ({exc.message})",
                provider=agent.provider_id,
            ) from exc

    async def _switch_session(self, scope: RunScope, provider: str, open_from: int) -> str:
        """Makes ``provider`` the thread's one live session, releasing any
        other provider's; returns the handoff summary the new context carries.
        It is checkpointed first on a swap, and when entries of a closed
        segment are not folded yet (the tail no longer shows them): nothing
        recorded is left out of what the model gets."""
        user, thread, rec = scope.user, scope.thread, scope.rec
        live = await self._collab.live_provider_sessions(user, thread)
        others = [s.provider_id for s in live if s.provider_id != provider]
        summary = await self._collab.handoff_summary(user, thread, checkpoint=bool(others))
        if not others and summary.pending_entries and summary.last_folded_sequence + 1 < open_from:
            summary = await self._collab.handoff_summary(user, thread, checkpoint=True)
        for old in others:
            await self._collab.release_provider_session(user, thread, old)
            rec.say("PROVIDER_SWITCHED", old=old, new=provider)
        # A provider with native sessions (a CLI) binds its own id on its first
        # call; the others get the stable name of an API session.
        native_sessions = getattr(self._models.provider(provider), "native_sessions", False)
        if not native_sessions and not any(s.provider_id == provider for s in live):
            native = native_session_id(provider, thread)
            await self._collab.bind_provider_session(user, thread, provider, native)
        return summary.text
