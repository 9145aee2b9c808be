"""The engine sends each event with its SSE JSON (``event_json``): the JSON
of that very event, the same on the run's live stream and when the run is
replayed from the database, in French and in English."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from services.shared.api_json import event_json
from switchboard.engine.v1 import engine_service_pb2 as pb
from tests.conftest import DatabaseFactory
from tests.service.harness import as_user
from tests.service.system import System, conversation, system


@pytest.fixture
async def sb(make_database: DatabaseFactory) -> AsyncIterator[System]:
    async with system(make_database) as running_system:
        yield running_system


async def sent(call: Any) -> list[tuple[str, str]]:
    """The kind and JSON of each event of a stream, checked against its event."""
    events = []
    while (response := await call.read()) is not grpc.aio.EOF:
        assert response.event_json == event_json(response.event)
        events.append((response.event.WhichOneof("kind"), response.event_json))
    return events


@pytest.mark.parametrize(
    ("message", "language"),
    [("Résume la réunion d'hier, s'il te plaît", "fr"), ("Summarise yesterday's meeting", "en")],
)
async def test_every_stream_of_a_run_carries_the_json_of_its_events(
    sb: System, message: str, language: str
) -> None:
    conversation_id = await conversation(sb)
    started = sb.engine.StartRun(
        pb.StartRunRequest(conversation_id=conversation_id, message=message, language=language),
        **as_user("alice"),
    )
    live = await sent(started)
    run_id = json.loads(live[0][1])["run_id"]
    # The run's events as the database keeps them.
    replayed = await sent(sb.engine.WatchRun(pb.WatchRunRequest(run_id=run_id), **as_user("alice")))
    assert live == replayed
    kinds = [kind for kind, _ in live]
    assert kinds[0] == "run_started" and kinds[-1] == "final" and "step" in kinds
    data = [json.loads(encoded) for _, encoded in live]
    assert [d["sequence"] for d in data] == list(range(1, len(live) + 1))
    assert {d["run_id"] for d in data} == {run_id}
    assert data[0]["language"] == language and data[-1]["status"] == "done"
    deltas = [d["text"] for kind, d in zip(kinds, data, strict=True) if kind == "delta"]
    assert "".join(deltas) == data[-1]["text"]
