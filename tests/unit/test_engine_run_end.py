"""A run's status and end as typed values: the statuses are the strings
agent_runs has always stored (the contract's short names), and an end gives
the terminal event and the row's error the run settles with."""

from __future__ import annotations

from services.engine.models import RunStatus
from services.engine.runs.outcome import STATUSES, RunEnd
from switchboard.engine.v1 import engine_pb2


def test_statuses_are_the_stored_strings_the_contract_names() -> None:
    assert {str(s) for s in RunStatus} == set(STATUSES.names)
    assert [s.value for s in RunStatus] == [
        "running",
        "waiting_approval",
        "done",
        "failed",
        "cancelled",
        "budget_exceeded",
    ]
    assert RunStatus("waiting_approval") is RunStatus.WAITING_APPROVAL
    assert STATUSES.number(RunStatus.BUDGET_EXCEEDED) == engine_pb2.RUN_STATUS_BUDGET_EXCEEDED


def test_an_answered_run_ends_with_its_final_and_no_error() -> None:
    final = engine_pb2.Final(text="bonjour", status=engine_pb2.RUN_STATUS_WAITING_APPROVAL)
    end = RunEnd.answered(final)
    assert end.status is RunStatus.WAITING_APPROVAL
    assert end.error is None
    assert end.terminal() == {"final": final}
    assert RunEnd.answered(engine_pb2.Final(status=engine_pb2.RUN_STATUS_DONE)).status == "done"


def test_a_failed_run_records_its_message_unless_given_a_shorter_cause() -> None:
    budget = RunEnd.failed(RunStatus.BUDGET_EXCEEDED, "BUDGET_EXCEEDED", "budget de jetons dépassé")
    assert budget.error == "budget de jetons dépassé"
    assert budget.terminal() == {
        "error": engine_pb2.RunError(code="BUDGET_EXCEEDED", message="budget de jetons dépassé")
    }
    stopped = RunEnd.failed(RunStatus.FAILED, "INTERRUPTED", "The run was stopped.", error="interrupted")
    assert (stopped.status, stopped.error) == ("failed", "interrupted")
    assert stopped.terminal()["error"] == engine_pb2.RunError(
        code="INTERRUPTED", message="The run was stopped."
    )
