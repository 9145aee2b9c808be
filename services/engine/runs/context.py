"""What a chat run reads before its model call, and how it becomes the
prompt's parts: recall, personal settings, the active instruction page, the
working context (project context, live state, pages the user mentions), and
the conversation's earlier turns fitted to the model's context window."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from services.engine import history as conversation
from services.engine import instructions
from services.engine.collaborators import Collaborators
from services.engine.entry_log import EntryLog
from services.engine.runs.generation import ModelCall
from services.engine.runs.optional import OptionalServices
from services.engine.runs.recorder import Recorder
from services.engine.runs.requests import RunLimits
from services.engine.runs.scope import RunScope
from services.engine.tools import AllowedSources, SourceRead, ToolContext
from services.engine.tools.policy import mentioned_pages, reads_workspace
from services.shared.errors import DependencyUnavailable, NotFound
from switchboard.common.v1 import common_pb2
from switchboard.memory.v1 import handoff_pb2, memory_pb2, memory_service_pb2, pages_pb2
from switchboard.threads.v1 import threads_pb2

# Makes one entry of the run's thread: (role, content, source) -> Entry.
EntryMaker = Callable[[threads_pb2.Role.ValueType, str, str], threads_pb2.Entry]


@dataclass
class ChatContext:
    """What the context step read."""

    recalled: Sequence[memory_pb2.RecalledNote]
    settings: memory_pb2.PersonalSettings
    page: pages_pb2.ActiveInstructions
    project: str
    live: list[memory_pb2.LiveStateEntry]
    summary: handoff_pb2.HandoffSummary
    # The turns after the summary; this run's own message is not among them.
    earlier: list[threads_pb2.Entry]
    # The active instruction page as a layer ("" when there is none to send).
    instruction_page: str
    # The message's embedding as memory's recall computed it, for the router
    # to reuse; None when recall embedded nothing (or memory was off or down).
    message_embedding: common_pb2.TextEmbedding | None = None

    def sources(self) -> list[SourceRead]:
        """What the context step read, as the run's sources."""
        sources = [SourceRead("memory", n.note.id, n.note.title) for n in self.recalled]
        if self.instruction_page:
            sources.append(SourceRead("page", self.page.page_id, self.page.title))
        return sources


class ChatContextReader:
    def __init__(self, collaborators: Collaborators, limits: RunLimits) -> None:
        self._collab = collaborators
        self._limits = limits
        self._entries = EntryLog(self._entries_after, limits.history_cache_bytes)
        self._turns = conversation.TurnCache(limits.history_cache_bytes)

    async def _entries_after(
        self, user: str, thread: str, after_sequence: int, page_size: int
    ) -> list[threads_pb2.Entry]:
        return await self._collab.entries_after(user, thread, after_sequence, page_size)

    async def read(self, scope: RunScope, optional: OptionalServices, entry: EntryMaker) -> ChatContext:
        """The "context" step. Memory is optional: without it a run goes on
        without recall and says so once. Threads is not: a run whose message
        cannot be recorded fails here, before any model call."""
        request, rec = scope.request, scope.rec
        user, text, thread = scope.user, scope.message, scope.thread
        allowed = request.allowed or AllowedSources()
        collab, limits = self._collab, self._limits
        async with rec.step("context", rec.text("step.context")):
            # Memory's parts come in one call beside recording the user's
            # message. Recall only when the conversation allows memory; the
            # settings only matter for the user's default model: not read
            # when the request names one.
            unread = memory_service_pb2.GetChatContextResponse()
            read, _ = await asyncio.gather(
                optional(
                    "memory",
                    collab.chat_context(
                        user,
                        thread,
                        request.project_id,
                        text if allowed.memory else None,
                        settings=not request.requested_model,
                        live_state_entries=limits.live_state_entries,
                    ),
                    unread,
                ),
                collab.append_entries(
                    user, thread, f"{scope.run_id}:user", [entry(threads_pb2.ROLE_USER, text, "user")]
                ),
            )
            if read is not unread:
                rec.live_state(memory_pb2.LIVE_STATE_EVENT_TYPE_SNAPSHOT, read.live_state)
            summary = (
                read.handoff_summary
                if read.HasField("handoff_summary")
                else handoff_pb2.HandoffSummary(thread_id=thread)
            )
            # The turns after the summary; this run's own message comes last, apart.
            earlier = [
                e
                for e in await self._entries.after(user, thread, summary.last_folded_sequence)
                if e.run_id != scope.run_id
            ]
        page = read.active_instructions
        return ChatContext(
            recalled=read.recalled_notes,
            settings=read.settings,
            page=page,
            project=read.project_context.body,
            live=list(read.live_state),
            summary=summary,
            earlier=earlier,
            instruction_page=self._instruction_layer(page, rec),
            message_embedding=(
                read.recall_query_embedding if read.HasField("recall_query_embedding") else None
            ),
        )

    def _instruction_layer(self, page: pages_pb2.ActiveInstructions, rec: Recorder) -> str:
        """The active instruction page as a layer, within its budget. A page
        the user can no longer read is skipped with a notice, never a failure."""
        if page.state == pages_pb2.INSTRUCTION_PAGE_STATE_UNREADABLE:
            rec.say("INSTRUCTION_PAGE_UNREADABLE", page_id=page.page_id)
            return ""
        if page.state != pages_pb2.INSTRUCTION_PAGE_STATE_READABLE or not page.body.strip():
            return ""
        budget = self._limits.instruction_page_budget_chars
        layer, truncated = instructions.instruction_page_layer(page.title, page.body, budget)
        if truncated:
            rec.say("INSTRUCTION_PAGE_TRUNCATED", title=page.title, budget=budget)
        return layer

    def working_layers(self, context: ChatContext, web_only: bool) -> list[instructions.Layer]:
        """The project context and the live state, each within its budget. A
        web-only model gets neither (nor recalled notes: see the chat work)."""
        limits = self._limits
        layers = [
            instructions.bounded(
                "project_context",
                "# Project context (rules every agent applies)",
                context.project,
                limits.project_context_budget_chars,
            ),
            instructions.bounded(
                "live_state",
                "# Live state (who is doing what now)",
                instructions.live_state_text(context.live),
                limits.live_state_budget_chars,
                items=len(context.live),
            ),
        ]
        if not web_only:
            return layers
        return [
            instructions.Layer(layer.key, "", layer.items, "not sent: web-only model") for layer in layers
        ]

    async def mentioned_pages(
        self, scope: RunScope, instruction_page_id: str, context: ToolContext, optional: OptionalServices
    ) -> str:
        """The working-context layer: the pages the user mentions with
        ``@page:<id>``, read with their rights when the conversation allows
        the workspace. The active instruction page is already a layer of its
        own, so a mention of it adds nothing (it appears once)."""
        if not reads_workspace(context):
            return ""  # refused_mentions has said so
        budget = self._limits.instruction_page_budget_chars
        parts = []
        for page_id in mentioned_pages(scope.message):
            if page_id == instruction_page_id:
                continue
            try:
                page = await self._collab.get_page(scope.user, page_id)
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

    async def fit_history(
        self, scope: RunScope, fixed: int, call: ModelCall, context: ChatContext, optional: OptionalServices
    ) -> conversation.History:
        """The conversation's earlier turns that fit ``call``'s model's context
        window beside the rest of the prompt (``fixed`` tokens) and the
        answer's reserve; older turns are folded into the persisted summary
        first."""
        counter, summary = call.counter, context.summary
        window = call.model.context_window or self._limits.default_context_window
        reserve = min(call.provider.max_output_tokens, window // 4)
        budget = window - reserve - fixed
        turns = conversation.turns(context.earlier, counter, self._turns)

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
                    scope.user, scope.thread, conversation.handoff_entries(folded)
                )
            except DependencyUnavailable as exc:
                optional.failed("memory", exc)
                note = f"{len(folded)} older turns left out: memory could not fold them into the summary"
            else:
                if summary.fallback_reason:
                    scope.rec.say("SUMMARY_MODEL_FAILED", reason=summary.fallback_reason)
        return conversation.History(
            summary=summary.text,
            summary_tokens=summary_tokens(summary.text) if folded else current,
            folded_now=len(folded) if not note else 0,
            turns=tuple(kept),
            note=note,
        )
