"""What a run is asked to do (``RunRequest``, and ``AskSpec`` for one agent
asking another), what a busy thread does with it (``BusyPolicy``), and the
limits every run of this engine works within (``RunLimits``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from services.engine.budget import RunBudget
from services.engine.quotas import RunQuota
from services.engine.tools import AllowedSources
from switchboard.engine.v1 import engine_pb2
from switchboard.threads.v1 import threads_pb2


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
    # The asked agent, read once per run: by the caller that already read it
    # (a nested ask names the agent in its answer), else by start(); the run
    # works from that read.
    target_agent: threads_pb2.Agent | None = field(default=None, compare=False)

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
    # The client application's own instructions (OpenAI-compatible requests).
    client_instructions: str = ""
    # What started the run when no client did (a schedule's id), and what
    # it carried (a JSON object).
    trigger_id: str = ""
    trigger_payload_json: str = "{}"
    # Where the run's record is POSTed once it ends (checked by the caller).
    webhook_url: str = ""
    # The project whose durable notes, context and live state a chat run
    # reads and whose memory its save_note tool writes: "" = the user's
    # personal project; another is checked (NOT_FOUND for a non-member) and
    # resolved by start(). An AskAgent run ignores it: it works in the asked
    # agent's project.
    project_id: str = ""
    # The page the user is on and the blocks they selected (checked by the
    # caller: runs.run_context.checked); its regime is the engine's to set,
    # from the surface.
    context: engine_pb2.RunContext = field(default_factory=engine_pb2.RunContext)
    # The language the client asked the run's texts in (a BCP 47 tag); ""
    # or one the product has no texts in: the message's (services.shared.language).
    language: str = ""


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
    # Conversations' earlier entries kept between runs (bytes; 0: none).
    history_cache_bytes: int = 32 * 1024 * 1024
    # What a run may spend when its request sets no budget.
    default_budget: RunBudget = RunBudget(max_tokens=200_000, max_steps=20, max_seconds=600.0)
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
    # Per-user run quotas, checked when a run is inserted.
    quota: RunQuota = RunQuota()
