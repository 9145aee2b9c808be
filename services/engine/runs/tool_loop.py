"""The tool loop, which chat and ask work both drive: call the model; while it
calls tools, run them (each a named step, an action event and a row of
agent_actions) and give it their results. Every model call and every tool
call is a step of the run's budget."""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass

from opentelemetry import trace

from services.engine import texts as catalogue
from services.engine.budget import BudgetExceeded
from services.engine.models import AgentAction
from services.engine.providers.base import ChatMessage, ToolSpec
from services.engine.runs.generation import ModelCall, Models
from services.engine.runs.scope import RunScope
from services.engine.tools import ToolContext, ToolRegistry
from services.engine.tools.backend import InstructionProposal, LiveEntry
from services.engine.tools.registry import FAMILY_LABELS
from switchboard.engine.v1 import engine_pb2
from switchboard.memory.v1 import memory_pb2

tracer = trace.get_tracer("switchboard.engine")


@dataclass
class LoopResult:
    """What the tool loop produced: the answer as the client saw it, the
    tokens, the proposals tools made, and the turn's messages after the
    prompt (tool calls, their results, the last answer) to record."""

    answer: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    proposals: list[InstructionProposal] = dataclasses.field(default_factory=list)
    transcript: list[ChatMessage] = dataclasses.field(default_factory=list)


class ToolLoop:
    def __init__(self, models: Models, tools: ToolRegistry | None = None) -> None:
        self._models = models
        # None: runs are offered no tool.
        self._tools = tools

    async def specs(self, scope: RunScope, context: ToolContext) -> list[ToolSpec]:
        """The tools this run may use, and what the user must know before the
        first model call: sources a web-only model will not read, @mentions
        of sources the conversation does not allow, MCP servers that failed."""
        if self._tools is None:
            return []
        specs = await self._tools.specs(context)
        withheld = self._tools.withheld_notice(context)
        notices = [("SOURCES_WITHHELD", withheld)] if withheld else []
        notices += [("MENTION_NOT_ALLOWED", n) for n in self._tools.refused_mentions(scope.message, context)]
        notices += [("TOOLS_UNAVAILABLE", n) for n in context.notices]
        for code, message in notices:
            scope.rec.notice(code, message)
        return specs

    async def run(
        self,
        scope: RunScope,
        model_call: ModelCall,
        messages: list[ChatMessage],
        context: ToolContext,
        label: str = "",
    ) -> LoopResult:
        rec, budget = scope.rec, scope.budget
        texts: list[str] = []
        loop = LoopResult()
        steps = 0
        prompt_length = len(messages)
        while True:
            steps += 1
            if budget.max_steps and steps > budget.max_steps:
                raise BudgetExceeded("steps", budget.max_steps)
            async with rec.step("generate", label or rec.text("step.generate", model=model_call.model.model)):
                # The first call's own count of the prompt corrects the estimate.
                generated = await self._models.generate(
                    scope, model_call, messages, corrects_count=steps == 1
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
                    raise BudgetExceeded("steps", budget.max_steps)
                assert self._tools is not None  # the model only calls tools it was offered
                family = self._tools.family_of(call.name)
                step = f"step.tools.{family}"
                tools_label = rec.text(step) if catalogue.has(step) else FAMILY_LABELS[family]
                async with rec.step(f"tools.{family}", tools_label):
                    with tracer.start_as_current_span(f"execute_tool {call.name}") as span:
                        span.set_attribute("gen_ai.operation.name", "execute_tool")
                        span.set_attribute("gen_ai.tool.name", call.name)
                        span.set_attribute("gen_ai.tool.call.id", call.call_id)
                        result = await self._tools.execute(call, context)
                        if result.is_error:
                            span.set_status(trace.StatusCode.ERROR)
                status = "error" if result.is_error else "ok"
                rec.emit(
                    action=engine_pb2.ActionTaken(
                        tool=call.name,
                        family=family,
                        status=status,
                        call_id=call.call_id,
                        arguments=call.arguments,
                        result=result.content,
                    )
                )
                if result.live_entry is not None:
                    entry = live_entry_proto(result.live_entry)
                    rec.live_state(memory_pb2.LIVE_STATE_EVENT_TYPE_SET, [entry])
                if result.notice:  # a write the user did not ask for, or a quota's refusal
                    rec.notice(result.notice_code, result.notice)
                rec.outcome.acted(
                    AgentAction(
                        id=str(uuid.uuid4()),
                        run_id=context.run_id,
                        user_id=context.user,
                        tool=call.name[:200],
                        family=family,
                        status=status,
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


def live_entry_proto(entry: LiveEntry) -> memory_pb2.LiveStateEntry:
    """An entry a tool set, as memory's message (the run's live_state event)."""
    message = memory_pb2.LiveStateEntry(
        project_id=entry.project_id, agent_id=entry.agent_id, activity=entry.activity, detail=entry.detail
    )
    if entry.update_time is not None:
        message.update_time.FromDatetime(entry.update_time)
    if entry.expire_time is not None:
        message.expire_time.FromDatetime(entry.expire_time)
    return message
