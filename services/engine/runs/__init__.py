"""Runs: one module per job.

- ``requests``: what a run is asked (``RunRequest``, ``AskSpec``), busy
  policies, the engine's ``RunLimits``;
- ``lifecycle``: ``RunService``: start, follow, cancel, approvals, execute and
  settle, leases, shutdown; ``scope``: ``RunScope``, what every step of a
  run works within, and ``LocalRun``, a run executing in this process;
- ``recorder``: write-ahead numbering of a run's events; ``outcome``: what a
  run reached, recorded with its end (``RunEnd``);
- ``chat`` (a conversation's run) and ``asks`` (one agent asking another),
  both on ``generation`` (the model call) and ``tool_loop``;
- ``context``: what a chat run reads and fits into its prompt; ``optional``:
  the services a chat run can do without; ``proposals``: "remember that…";
  ``titles``: a conversation's title; ``convert``: a run as the contract's
  message; ``run_context``: who started a run, the page the user was on and
  what they selected, checked, recorded and made a layer."""

from services.engine.runs.convert import APPROVALS, SURFACES, run_to_proto
from services.engine.runs.lifecycle import RunService
from services.engine.runs.recorder import is_terminal
from services.engine.runs.requests import AskSpec, BusyPolicy, RunLimits, RunRequest

__all__ = [
    "APPROVALS",
    "SURFACES",
    "AskSpec",
    "BusyPolicy",
    "RunLimits",
    "RunRequest",
    "RunService",
    "is_terminal",
    "run_to_proto",
]
