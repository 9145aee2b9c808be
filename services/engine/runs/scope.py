"""What every step of one run works within, and what this process keeps of
a run while it executes here.

``RunScope``: the run's record, what it was asked, its recorder and its
budget, set once when the run starts working and passed whole to the chat
or ask work, the tool loop, the model call and the fitting of the history
(each takes the scope and what is its own).

``LocalRun``: one record per run executing in this process, registered
whole when the run is spawned and removed whole when it settles, so a run
is never half-known here (a feed without a task, a cancellation flag
outliving its run)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from services.engine.budget import RunBudget
from services.engine.feed import RunFeed
from services.engine.instructions import Layer
from services.engine.models import AgentRun
from services.engine.runs import run_context
from services.engine.runs.recorder import Recorder
from services.engine.runs.requests import AskSpec, RunRequest


@dataclass(frozen=True, slots=True)
class RunScope:
    run: AgentRun
    request: RunRequest
    rec: Recorder
    # The request's budget over the engine's default.
    budget: RunBudget

    @property
    def user(self) -> str:
        return self.request.user

    @property
    def run_id(self) -> str:
        return self.run.id

    @property
    def thread(self) -> str:
        """The conversation's thread, or the asked agent's shared one."""
        return self.run.conversation_id or ""

    @property
    def message(self) -> str:
        return self.request.message

    @property
    def language(self) -> str:
        """The language of the run's texts."""
        return self.rec.language

    @property
    def ask(self) -> AskSpec | None:
        return self.request.ask

    def context_layer(self) -> Layer:
        """The ``run_context`` layer: what the user is working on, or who
        started the run, with the run's own regime."""
        return run_context.layer(run_context.recorded(self.request.context, self.request.surface))


@dataclass(slots=True, eq=False)
class LocalRun:
    """A run executing in this process: its live feed (shared by all its
    followers here), its recorder and its task."""

    run: AgentRun
    feed: RunFeed
    recorder: Recorder
    task: asyncio.Task[None] = field(init=False)
    # Still working: before settlement, the only time CancelRun interrupts it.
    working: bool = False
    # Its task was cancelled by CancelRun (not by a shutdown).
    cancelling: bool = False

    @property
    def user(self) -> str:
        return self.run.user_id
