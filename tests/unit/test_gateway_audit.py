"""GET /api/audit merges the services' audit logs and the tokens file's,
newest first, paged by keyset: each source is asked only for what is older
than the last event sent. The services are fakes that keep their events in
memory and answer ListAuditEvents as the real ones do (strictly before
``before``, newest first)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from gateway.app import create_app
from gateway.settings import GatewaySettings
from gateway.tokens import audit_path
from services.shared.time import to_timestamp
from switchboard.common.v1 import common_pb2
from switchboard.memory.v1 import projects_service_pb2
from switchboard.router.v1 import router_service_pb2
from switchboard.threads.v1 import threads_service_pb2

START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def at(minute: int) -> datetime:
    return START + timedelta(minutes=minute)


class FakeLog:
    def __init__(self, response: Any, events: list[tuple[int, str, str]]) -> None:
        self._response = response
        self.events = [
            common_pb2.AuditEvent(
                id=event_id,
                actor="ada",
                actor_role="admin",
                action=action,
                target="t",
                create_time=to_timestamp(at(m)),
            )
            for m, event_id, action in events
        ]
        self.asked: list[Any] = []

    async def ListAuditEvents(self, request: Any, **_: Any) -> Any:  # noqa: N802 - the RPC's name
        self.asked.append(request)
        key = (request.before.time.ToDatetime(tzinfo=UTC), request.before.id)
        older = [
            e
            for e in self.events
            if not request.HasField("before") or (e.create_time.ToDatetime(tzinfo=UTC), e.id) < key
        ]
        older.sort(key=lambda e: (e.create_time.ToDatetime(tzinfo=UTC), e.id), reverse=True)
        return self._response(events=older[: request.page_size])


async def test_four_logs_merge_newest_first_page_by_page(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text('{"tokens": []}')
    lines = [
        {"id": "f1", "actor": "ops", "actor_role": "admin", "action": "token.create", "target": "k1",
         "detail": "user=bob role=user", "create_time": at(2).isoformat()},
        {"id": "f2", "actor": "ops", "actor_role": "admin", "action": "token.role", "target": "k1",
         "detail": "user=bob role=user->admin", "create_time": at(5).isoformat()},
        {"id": "bad", "create_time": "yesterday"},  # a hand-edited line: left out, never a 500
    ]  # fmt: skip
    audit_path(tokens).write_text("".join(json.dumps(line) + "\n" for line in lines))
    app = create_app(GatewaySettings(tokens="t-admin:ada:admin,t-user:bob", tokens_file=tokens))
    router = FakeLog(
        router_service_pb2.ListAuditEventsResponse, [(1, "r1", "skill.create"), (4, "r4", "skill.update")]
    )
    threads = FakeLog(
        threads_service_pb2.ListAuditEventsResponse, [(3, "t3", "agent.create"), (6, "t6", "agent.update")]
    )
    projects = FakeLog(projects_service_pb2.ListAuditEventsResponse, [(7, "p7", "project.member_add")])
    app.state.router, app.state.threads, app.state.projects = router, threads, projects
    headers = {"Authorization": "Bearer t-admin"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        seen: list[str] = []
        token = ""
        pages = 0
        while True:
            page = (
                await client.get("/api/audit", params={"page_size": 2, "page_token": token}, headers=headers)
            ).json()
            seen += [e["id"] for e in page["events"]]
            pages += 1
            token = page["next_page_token"]
            if not token:
                break
        assert seen == ["p7", "t6", "f2", "r4", "t3", "f1", "r1"] and pages == 4
        # Each page asked each service only for events older than the last one sent.
        assert [r.before.id for r in router.asked] == ["", "t6", "r4", "f1"]
        everything = (await client.get("/api/audit", headers=headers)).json()["events"]
        assert everything[2] == lines[1]
        asked = len(router.asked) + len(threads.asked) + len(projects.asked)
        refused = await client.get("/api/audit", headers={"Authorization": "Bearer t-user"})
        assert refused.status_code == 403
        # Refused before any service is called.
        assert len(router.asked) + len(threads.asked) + len(projects.asked) == asked
