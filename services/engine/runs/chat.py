"""Chat work: a user's message in a conversation with the personal agent.
Reads the context, routes skills and model, assembles the prompt's layers
and earlier turns, runs the tool loop, then records the turn and titles the
conversation."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

from services.engine import instructions
from services.engine.collaborators import Collaborators
from services.engine.models import SkillRun
from services.engine.providers.base import ChatMessage
from services.engine.runs.context import ChatContext, ChatContextReader, EntryMaker
from services.engine.runs.generation import ModelCall, Models
from services.engine.runs.optional import OptionalServices
from services.engine.runs.proposals import propose_to_remember
from services.engine.runs.recorder import Recorder
from services.engine.runs.requests import RunLimits
from services.engine.runs.scope import RunScope
from services.engine.runs.titles import Titles
from services.engine.runs.tool_loop import ToolLoop
from services.engine.tokens import prompt_tokens
from services.engine.tools import AllowedSources, ToolContext
from services.shared.remember import remembered_fact
from switchboard.common.v1 import common_pb2
from switchboard.engine.v1 import engine_pb2
from switchboard.router.v1 import router_pb2
from switchboard.threads.v1 import threads_pb2


class ChatWork:
    def __init__(
        self,
        collaborators: Collaborators,
        models: Models,
        loop: ToolLoop,
        titles: Titles,
        limits: RunLimits,
    ) -> None:
        self._collab = collaborators
        self._models = models
        self._loop = loop
        self._titles = titles
        self._context = ChatContextReader(collaborators, limits)

    async def work(self, scope: RunScope, needs_title: bool) -> engine_pb2.Final:
        run, request, rec = scope.run, scope.request, scope.rec
        user, text, thread = scope.user, scope.message, scope.thread

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
        optional = OptionalServices(rec)
        allowed = request.allowed or AllowedSources()
        context = await self._context.read(scope, optional, entry)
        outcome = rec.outcome
        outcome.read(context.sources())
        fact = remembered_fact(text)  # the user's own words only, never content read
        if fact is not None:
            return await propose_to_remember(self._collab, scope, fact, context.page, entry)

        fallback = router_pb2.ModelRoute(model=self._models.fallback_model)
        skills, model = await self._route(scope, context, optional, fallback)
        chosen = model.model
        provider = self._models.provider(chosen.provider)
        outcome.record_model(model, fallback=model is fallback)
        tool_context = ToolContext(
            user,
            run.id,
            allowed,
            web_only=model.web_only,
            request=text,
            project_id=request.project_id,
            language=scope.language,
        )
        memory_note = "" if allowed.memory else "memory is off for this conversation"
        recalled = context.recalled
        if model.web_only:
            # A web-only model gets no workspace context: no recalled notes,
            # no project context, no live state.
            recalled = []
            outcome.withhold("memory")
            memory_note = memory_note or "not sent: web-only model"
        context_layers = self._context.working_layers(context, model.web_only)
        specs = await self._loop.specs(scope, tool_context)
        working = await self._context.mentioned_pages(
            scope, context.page.page_id if context.instruction_page else "", tool_context, optional
        )
        layers = [
            *instructions.assemble(
                context.instruction_page,
                recalled,
                list(skills.skills),
                working,
                context_layers,
                memory_note,
                client=instructions.client_layer(
                    request.client_instructions, self._models.limits.max_message_chars
                ),
            ),
            # What the user is working on, last: the most specific part of
            # the working context. Even a web-only model gets it: the user
            # sent it with the message, nothing was read for it.
            scope.context_layer(),
        ]
        counter = self._models.counters.counter(provider.kind, chosen.model)
        # A CLI provider resumes the conversation's native session.
        call = ModelCall(provider, chosen, counter, specs, session_key=thread)
        records = [layer.record(counter) for layer in layers]
        outcome.prompted(records)
        # The system message and the current message, counted once: their
        # layers' tokens, the message and the tools' schemas.
        fixed = sum(r["size_tokens"] for r in records) + prompt_tokens(
            counter, [ChatMessage("system", ""), ChatMessage("user", text)], specs
        )
        earlier_turns = await self._context.fit_history(scope, fixed, call, context, optional)
        messages = instructions.to_messages(
            layers, text, earlier_turns.messages, earlier_turns.summary_text()
        )
        outcome.prompted([*records, *earlier_turns.layers()])
        loop = await self._loop.run(scope, call, messages, tool_context)
        outcome.read(tool_context.sources_read)
        await asyncio.gather(
            self._record_turn(scope, loop.transcript, entry),
            self._titles.after_first_exchange(
                user, thread, text, needs_title, (provider, chosen, loop.answer), rec.language
            ),
        )
        outcome.spent(loop.tokens_in, loop.tokens_out)
        # A proposal made through a tool waits for the user, like "remember that".
        waiting = bool(loop.proposals)
        return engine_pb2.Final(
            text=loop.answer,
            provider=chosen.provider,
            model=chosen.model,
            usage=common_pb2.Usage(tokens_in=loop.tokens_in, tokens_out=loop.tokens_out),
            status=engine_pb2.RUN_STATUS_WAITING_APPROVAL if waiting else engine_pb2.RUN_STATUS_DONE,
        )

    async def _route(
        self,
        scope: RunScope,
        context: ChatContext,
        optional: OptionalServices,
        fallback: router_pb2.ModelRoute,
    ) -> tuple[router_pb2.SkillRoute, router_pb2.ModelRoute]:
        """The "routing" step: skills and model, chosen together in one call
        (without the router: no skill, and ``fallback``). The skills applied
        are said as events; they and the decision go in the outcome. The
        message's embedding from recall goes along: the router reuses it
        rather than embed the message again."""
        request, rec = scope.request, scope.rec
        user, text, offline = scope.user, scope.message, self._models.offline
        async with rec.step("routing", rec.text("step.routing")):
            routed = await optional(
                "router",
                self._collab.route_message(
                    user,
                    text,
                    request.forced_skills,
                    request.requested_model,
                    context.settings.default_model,
                    offline,
                    context.message_embedding,
                ),
                None,
            )
            skills, model = (
                (routed.skills, routed.model) if routed is not None else (router_pb2.SkillRoute(), fallback)
            )
            if skills.decision.arbiter_error:
                rec.say("ARBITER_FAILED", error=skills.decision.arbiter_error)
            self._say_model_notices(model, rec)
            applied = []
            for skill in skills.skills:
                invocation = (
                    engine_pb2.SKILL_INVOCATION_MANUAL if skill.forced else engine_pb2.SKILL_INVOCATION_AUTO
                )
                use = engine_pb2.SkillUse(skill_id=skill.skill_id, name=skill.name, invocation=invocation)
                rec.emit(skill_used=engine_pb2.SkillUsed(skill=use))
                row = SkillRun(
                    id=str(uuid.uuid4()),
                    run_id=scope.run_id,
                    user_id=user,
                    skill_id=use.skill_id,
                    name=use.name,
                    invocation="manual" if skill.forced else "auto",
                )
                applied.append((use, row))
        rec.outcome.applied_skills(applied, skills.decision)
        return skills, model

    @staticmethod
    def _say_model_notices(model: router_pb2.ModelRoute, rec: Recorder) -> None:
        """Said before the first model call: a web-only model gets no
        workspace context, an expensive one was chosen deliberately. The
        router's notices say why in English; the run says the cases it knows
        in its own language, and any other as the router wrote it."""
        if not model.notices:
            return
        if model.web_only:
            rec.say("WEB_ONLY_MODEL")
        elif model.routed and model.model.expensive:
            rec.say("MODEL_CHOICE", model=model.model.id)
        else:
            for message in model.notices:
                rec.notice("MODEL_CHOICE", message)

    async def _record_turn(
        self, scope: RunScope, transcript: Sequence[ChatMessage], entry: EntryMaker
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
        await self._collab.append_entries(scope.user, scope.thread, f"{scope.run_id}:assistant", entries)
