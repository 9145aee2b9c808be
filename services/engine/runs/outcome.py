"""What a run reached, recorded on its row when it ends, whatever the end:
a run that fails, is cancelled or runs out of budget keeps the sources,
skills, routing decision, model and layers it had reached."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format

from services.engine.models import AgentAction, RunStatus, SkillRun
from services.engine.tools import SourceRead
from services.shared.enums import EnumNames
from switchboard.engine.v1 import engine_pb2
from switchboard.router.v1 import router_pb2, router_service_pb2

# Run statuses as stored ("running", "waiting_approval", "done"...), and as
# the contract numbers them.
STATUSES = EnumNames(engine_pb2.RunStatus)


@dataclass(frozen=True, slots=True)
class RunEnd:
    """How a run ended: its status, and its terminal event, the answer
    (``final``) or an error (``code``, ``message``). ``error`` is what the
    run's row records: the message, or a shorter cause ("interrupted")."""

    status: RunStatus
    final: engine_pb2.Final | None = None
    code: str = ""
    message: str = ""
    error: str | None = None

    @classmethod
    def answered(cls, final: engine_pb2.Final) -> RunEnd:
        return cls(RunStatus(STATUSES.name(final.status)), final)

    @classmethod
    def failed(cls, status: RunStatus, code: str, message: str, error: str | None = None) -> RunEnd:
        return cls(status, code=code, message=message, error=message if error is None else error)

    def terminal(self) -> dict[str, engine_pb2.Final | engine_pb2.RunError]:
        """The terminal event's kind, for ``Recorder.make``."""
        if self.final is not None:
            return {"final": self.final}
        return {"error": engine_pb2.RunError(code=self.code, message=self.message)}


@dataclass
class Outcome:
    """Filled in by the run's work as it goes, each step giving its part
    through one of the methods below as soon as it has it; its tokens are
    set when the work ends normally (a run that stops early records none)."""

    provider: str | None = None
    model: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    sources: list[SourceRead] = dataclasses.field(default_factory=list)
    skills: list[engine_pb2.SkillUse] = dataclasses.field(default_factory=list)
    layers: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    router_decision: engine_pb2.RouterDecision = dataclasses.field(default_factory=engine_pb2.RouterDecision)
    # Rows of agent_actions and skill_runs, written with the run's end.
    actions: list[AgentAction] = dataclasses.field(default_factory=list)
    skill_runs: list[SkillRun] = dataclasses.field(default_factory=list)

    def read(self, sources: Iterable[SourceRead]) -> None:
        """Sources the run read (after those it read before)."""
        self.sources.extend(sources)

    def only_read(self, sources: Iterable[SourceRead]) -> None:
        """The sources the run's answer rests on, instead of those read so far."""
        self.sources = list(sources)

    def withhold(self, kind: str) -> None:
        """Sources of ``kind`` read but not sent to the model after all."""
        self.sources = [s for s in self.sources if s.kind != kind]

    def applied_skills(
        self, uses: Iterable[tuple[engine_pb2.SkillUse, SkillRun]], decision: router_pb2.SkillDecision
    ) -> None:
        """The skills routing applied, each with its skill_runs row, and why."""
        for use, row in uses:
            self.skills.append(use)
            self.skill_runs.append(row)
        self.router_decision.skills.CopyFrom(decision)

    def prompted(self, layers: Iterable[dict[str, Any]]) -> None:
        """The records of the prompt's layers, as far as it is assembled."""
        self.layers = list(layers)

    def acted(self, action: AgentAction) -> None:
        """A tool call's row of agent_actions."""
        self.actions.append(action)

    def spent(self, tokens_in: int, tokens_out: int) -> None:
        self.tokens_in, self.tokens_out = tokens_in, tokens_out

    def answered_by(self, provider: str, model: str) -> None:
        """The answer came from elsewhere than a routed model (a remote agent)."""
        self.provider, self.model = provider, model

    def record_model(
        self, route: router_service_pb2.RouteModelResponse | router_pb2.ModelRoute, fallback: bool = False
    ) -> None:
        """The model that answers, and the router's reasons for it
        (``fallback``: the router could not be reached)."""
        self.provider, self.model = route.model.provider, route.model.model
        self.router_decision.model.CopyFrom(
            engine_pb2.ModelDecision(
                model=route.model,
                reason=route.reason,
                routed=route.routed,
                request_profile=route.request_profile,
                web_only=route.web_only,
                fallback=fallback,
                needs_web=route.needs_web,
            )
        )

    def columns(self) -> dict[str, Any]:
        """The agent_runs columns this outcome sets."""
        return {
            "provider": self.provider,
            "model": self.model,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "sources_json": json.dumps([s.as_dict() for s in self.sources]),
            "skills_json": json.dumps(
                [json_format.MessageToDict(u, preserving_proto_field_name=True) for u in self.skills]
            ),
            "layers_json": json.dumps(self.layers),
            # The column keeps its name; it holds the RouterDecision message as JSON.
            "router_decision_json": json_format.MessageToJson(
                self.router_decision, preserving_proto_field_name=True, indent=None
            ),
        }

    @property
    def journal(self) -> list[AgentAction | SkillRun]:
        return [*self.actions, *self.skill_runs]
