"""Run webhooks through the engine's gRPC API, on both databases, with a real
receiver: a run that ends (whatever its status) POSTs its record, signed per
Standard Webhooks; failed and hanging attempts are retried under the same
webhook-id without touching the run; every attempt is readable back; two
engines on one database deliver each run once; a restarted engine delivers
what the last one left; refused URLs write nothing; background runs go on
without a stream."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import grpc
import pytest
from prometheus_client import REGISTRY
from standardwebhooks import Webhook

from services.engine.models import AgentRun
from services.engine.repository import RunsRepository
from services.engine.server import build_server as build_engine
from services.engine.settings import EngineSettings
from services.shared.db import create_engine
from services.shared.wakeups import WEBHOOKS, asyncpg_dsn
from switchboard.engine.v1 import engine_pb2, engine_service_pb2, engine_service_pb2_grpc
from switchboard.threads.v1 import threads_pb2, threads_service_pb2
from tests.conftest import DatabaseFactory
from tests.fakes.webhook_receiver import WebhookReceiver, webhook_receiver
from tests.polling import until
from tests.service.harness import as_user, expect_error, running
from tests.service.system import System, collect, conversation, system

# A Standard Webhooks secret (whsec_ + base64 of 32 bytes), for tests only.
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8GKYo="
FAST_RETRIES = {
    "webhook_secret": SECRET,
    "webhook_allow_loopback": True,
    "webhook_backoff_initial": 0.05,
    "webhook_backoff_max": 0.2,
}
State = engine_service_pb2.WebhookDeliveryState


@pytest.fixture
async def receiver() -> AsyncIterator[WebhookReceiver]:
    with webhook_receiver() as running_receiver:
        yield running_receiver


def start(
    engine: engine_service_pb2_grpc.EngineServiceStub,
    conversation_id: str,
    webhook_url: str,
    *,
    background: bool = False,
    budget: engine_pb2.Budget | None = None,
    message: str = "Summarise what a webhook is",
) -> grpc.aio.UnaryStreamCall:
    request = engine_service_pb2.StartRunRequest(
        conversation_id=conversation_id,
        message=message,
        surface=engine_pb2.SURFACE_CHAT,
        webhook_url=webhook_url,
        background=background,
        budget=budget,
    )
    return engine.StartRun(request, metadata=as_user("alice")["metadata"], timeout=30)


async def deliveries(
    engine: engine_service_pb2_grpc.EngineServiceStub, run_id: str
) -> engine_service_pb2.ListWebhookDeliveriesResponse:
    return await engine.ListWebhookDeliveries(
        engine_service_pb2.ListWebhookDeliveriesRequest(run_id=run_id), **as_user("alice")
    )


def settled(response: engine_service_pb2.ListWebhookDeliveriesResponse) -> bool:
    return response.state in (State.WEBHOOK_DELIVERY_STATE_DELIVERED, State.WEBHOOK_DELIVERY_STATE_FAILED)


async def test_a_run_that_ends_posts_its_signed_record(
    make_database: DatabaseFactory, receiver: WebhookReceiver
) -> None:
    async with system(make_database, **FAST_RETRIES) as sb:
        events = await collect(start(sb.engine, await conversation(sb), receiver.url))
        run_id = events[-1].run_id
        assert events[-1].WhichOneof("kind") == "final"
        (request,) = await receiver.arrived(1)
        # The library of the spec verifies it: signature, id, fresh timestamp.
        payload = Webhook(SECRET).verify(request.body, request.headers)
        assert request.headers["webhook-id"] == f"msg_{run_id}"
        assert payload["type"] == "run.ended"
        run = payload["data"]["run"]
        assert run["id"] == run_id and run["status"] == "RUN_STATUS_DONE"
        assert run["webhook_url"] == receiver.url and run["finish_time"]
        record = await until(lambda: deliveries(sb.engine, run_id), settled)
        assert record.state == State.WEBHOOK_DELIVERY_STATE_DELIVERED
        assert record.webhook_url == receiver.url and record.webhook_id == f"msg_{run_id}"
        assert [(d.attempt, d.status_code, d.error) for d in record.deliveries] == [(1, 200, "")]
        assert record.deliveries[0].create_time.seconds > 0
        # A tampered body does not verify.
        with pytest.raises(Exception, match="signature"):
            Webhook(SECRET).verify(request.body.replace(b"DONE", b"FAILED"), request.headers)


async def test_failed_attempts_are_retried_under_the_same_id(
    make_database: DatabaseFactory,
) -> None:
    retries = REGISTRY.get_sample_value("switchboard_webhook_attempts_total", {"outcome": "retry"}) or 0
    with webhook_receiver(["500", "503"]) as receiver:
        async with system(make_database, **FAST_RETRIES) as sb:
            events = await collect(start(sb.engine, await conversation(sb), receiver.url))
            run_id = events[-1].run_id
            record = await until(lambda: deliveries(sb.engine, run_id), settled)
        assert record.state == State.WEBHOOK_DELIVERY_STATE_DELIVERED
        assert [(d.attempt, d.status_code, d.error) for d in record.deliveries] == [
            (1, 500, "HTTP 500"),
            (2, 503, "HTTP 503"),
            (3, 200, ""),
        ]
        # The engine runs in this process: its counters are here.
        assert (
            REGISTRY.get_sample_value("switchboard_webhook_attempts_total", {"outcome": "retry"})
            == retries + 2
        )
        requests = receiver.wait_for(3)
        assert len(requests) == 3
        assert {r.headers["webhook-id"] for r in requests} == {f"msg_{run_id}"}
        for request in requests:
            Webhook(SECRET).verify(request.body, request.headers)


async def test_a_failed_run_is_delivered_with_its_status(
    make_database: DatabaseFactory, receiver: WebhookReceiver
) -> None:
    async with system(make_database, **FAST_RETRIES) as sb:
        call = start(sb.engine, await conversation(sb), receiver.url, budget=engine_pb2.Budget(max_tokens=1))
        events = await collect(call)
        assert events[-1].error.code == "BUDGET_EXCEEDED"
        (request,) = await receiver.arrived(1)
        run = Webhook(SECRET).verify(request.body, request.headers)["data"]["run"]
        assert run["status"] == "RUN_STATUS_BUDGET_EXCEEDED" and run["error"]


async def test_a_hanging_receiver_never_holds_the_run(make_database: DatabaseFactory) -> None:
    with webhook_receiver(["hang"]) as receiver:
        async with system(make_database, **{**FAST_RETRIES, "webhook_timeout": 30}) as sb:
            conversation_id = await conversation(sb)
            events = await collect(start(sb.engine, conversation_id, receiver.url))
            run_id = events[-1].run_id
            assert events[-1].WhichOneof("kind") == "final"
            await receiver.arrived(1)
            # The receiver holds the first attempt; the run is over, and the
            # conversation takes its next run.
            record = await deliveries(sb.engine, run_id)
            assert record.state == State.WEBHOOK_DELIVERY_STATE_PENDING and not record.deliveries
            run = await sb.engine.GetRun(engine_service_pb2.GetRunRequest(run_id=run_id), **as_user("alice"))
            assert run.run.status == engine_pb2.RUN_STATUS_DONE
            following = await collect(start(sb.engine, conversation_id, ""))
            assert following[-1].WhichOneof("kind") == "final"


async def test_an_attempt_that_times_out_is_tried_again(make_database: DatabaseFactory) -> None:
    with webhook_receiver(["hang"]) as receiver:
        async with system(make_database, **{**FAST_RETRIES, "webhook_timeout": 0.5}) as sb:
            events = await collect(start(sb.engine, await conversation(sb), receiver.url))
            record = await until(lambda: deliveries(sb.engine, events[-1].run_id), settled)
        assert record.state == State.WEBHOOK_DELIVERY_STATE_DELIVERED
        first, second = record.deliveries
        assert first.status_code == 0 and "timed out" in first.error
        assert second.status_code == 200
        assert len({r.headers["webhook-id"] for r in receiver.wait_for(2)}) == 1


async def test_attempts_stop_when_the_retry_time_is_over(make_database: DatabaseFactory) -> None:
    with webhook_receiver(default="500") as receiver:
        options = {**FAST_RETRIES, "webhook_retry_seconds": 0.3}
        async with system(make_database, **options) as sb:
            events = await collect(start(sb.engine, await conversation(sb), receiver.url))
            record = await until(lambda: deliveries(sb.engine, events[-1].run_id), settled)
        assert record.state == State.WEBHOOK_DELIVERY_STATE_FAILED
        assert record.deliveries and all(d.status_code == 500 for d in record.deliveries)
        assert len(receiver.requests) == len(record.deliveries)


@pytest.mark.parametrize(
    "url",
    [
        "not a url",
        "ftp://example.com/hook",
        "http://example.com/hook",
        "https://10.0.0.7/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[fd00::1]/hook",
        "https://[::ffff:192.168.1.1]/hook",
        "https://user:secret@example.com/hook",
        "https://example.com:99999/hook",
        "https://" + "a" * 2050 + ".com/",
    ],
)
async def test_refused_urls_start_no_run(make_database: DatabaseFactory, url: str) -> None:
    async with system(make_database, **FAST_RETRIES) as sb:
        conversation_id = await conversation(sb)
        await expect_error(
            collect(start(sb.engine, conversation_id, url)),
            grpc.StatusCode.INVALID_ARGUMENT,
            "ERROR_REASON_INVALID_ARGUMENT",
        )
        runs = await sb.engine.ListRuns(
            engine_service_pb2.ListRunsRequest(conversation_id=conversation_id), **as_user("alice")
        )
        assert not runs.runs


async def test_loopback_is_refused_unless_allowed_and_a_secret_is_required(
    make_database: DatabaseFactory, receiver: WebhookReceiver
) -> None:
    async with system(make_database, webhook_secret=SECRET) as sb:
        await expect_error(
            collect(start(sb.engine, await conversation(sb), receiver.url)),
            grpc.StatusCode.INVALID_ARGUMENT,
            "ERROR_REASON_INVALID_ARGUMENT",
        )
    async with system(make_database, webhook_allow_loopback=True) as sb:
        await expect_error(
            collect(start(sb.engine, await conversation(sb), receiver.url)),
            grpc.StatusCode.FAILED_PRECONDITION,
            "ERROR_REASON_FAILED_PRECONDITION",
        )


async def test_a_background_run_goes_on_without_a_stream(
    make_database: DatabaseFactory, receiver: WebhookReceiver
) -> None:
    async with system(make_database, offline_token_delay=0.02, **FAST_RETRIES) as sb:
        french = "Résume en une phrase ce qu'est un « webhook »"
        call = start(sb.engine, await conversation(sb), receiver.url, background=True, message=french)
        events = await collect(call)
        assert [e.WhichOneof("kind") for e in events] == ["run_started"]
        run_id = events[0].run_id
        # Nobody follows the run: it ends all the same, and says so by webhook.
        (request,) = await receiver.arrived(1)
        run = Webhook(SECRET).verify(request.body, request.headers)["data"]["run"]
        assert run["id"] == run_id and run["status"] == "RUN_STATUS_DONE"
        stored = await sb.engine.GetRun(engine_service_pb2.GetRunRequest(run_id=run_id), **as_user("alice"))
        assert stored.run.status == engine_pb2.RUN_STATUS_DONE
        watched = await collect(
            sb.engine.WatchRun(engine_service_pb2.WatchRunRequest(run_id=run_id), **as_user("alice"))
        )
        assert watched[-1].WhichOneof("kind") == "final"


async def test_a_run_without_a_webhook_has_no_deliveries(make_database: DatabaseFactory) -> None:
    async with system(make_database, **FAST_RETRIES) as sb:
        events = await collect(start(sb.engine, await conversation(sb), ""))
        record = await deliveries(sb.engine, events[-1].run_id)
        assert record == engine_service_pb2.ListWebhookDeliveriesResponse()
        await expect_error(
            deliveries(sb.engine, "no-such-run"), grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND"
        )
        other = sb.engine.ListWebhookDeliveries(
            engine_service_pb2.ListWebhookDeliveriesRequest(run_id=events[-1].run_id), **as_user("bob")
        )
        await expect_error(other, grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")


async def set_webhook(sb: System, run_id: str, url: str) -> engine_pb2.Run:
    request = engine_service_pb2.SetRunWebhookRequest(run_id=run_id, webhook_url=url)
    return (await sb.engine.SetRunWebhook(request, **as_user("alice"))).run


async def test_a_webhook_set_on_a_running_run_gets_its_end_and_a_cleared_one_nothing(
    make_database: DatabaseFactory, receiver: WebhookReceiver
) -> None:
    async with system(make_database, offline_token_delay=0.05, **FAST_RETRIES) as sb:
        conversation_id = await conversation(sb)
        first = await collect(start(sb.engine, conversation_id, "", background=True))
        run_id = first[0].run_id
        # Checked as every webhook, before anything is written.
        await expect_error(
            set_webhook(sb, run_id, "https://169.254.169.254/hook"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "ERROR_REASON_INVALID_ARGUMENT",
        )
        assert (await set_webhook(sb, run_id, receiver.url)).webhook_url == receiver.url
        (request,) = await receiver.arrived(1)
        run = Webhook(SECRET).verify(request.body, request.headers)["data"]["run"]
        assert run["id"] == run_id and run["status"] == "RUN_STATUS_DONE"
        # Its end is decided: another webhook now is refused, clearly.
        await expect_error(
            set_webhook(sb, run_id, receiver.url),
            grpc.StatusCode.FAILED_PRECONDITION,
            "ERROR_REASON_FAILED_PRECONDITION",
        )
        # Set then cleared while running: the run ends with no delivery.
        second = await collect(start(sb.engine, conversation_id, receiver.url, background=True))
        assert (await set_webhook(sb, second[0].run_id, "")).webhook_url == ""
        watched = await collect(
            sb.engine.WatchRun(
                engine_service_pb2.WatchRunRequest(run_id=second[0].run_id), **as_user("alice")
            )
        )
        assert watched[-1].WhichOneof("kind") == "final"
        assert (
            await deliveries(sb.engine, second[0].run_id)
            == engine_service_pb2.ListWebhookDeliveriesResponse()
        )
        assert len(receiver.requests) == 1
        await expect_error(
            sb.engine.SetRunWebhook(
                engine_service_pb2.SetRunWebhookRequest(run_id=run_id, webhook_url=""), **as_user("bob")
            ),
            grpc.StatusCode.NOT_FOUND,
            "ERROR_REASON_NOT_FOUND",
        )


def second_engine(sb: System, instance_id: str, **options: object) -> EngineSettings:
    """Another engine on the same database and collaborators (a replica)."""
    threads, memory, router = (sb.services[name].port for name in ("threads", "memory", "router"))
    return EngineSettings(
        port=0,
        database_url=sb.database_urls["engine"],
        threads_address=f"127.0.0.1:{threads}",
        memory_address=f"127.0.0.1:{memory}",
        router_address=f"127.0.0.1:{router}",
        instance_id=instance_id,
        **{**FAST_RETRIES, **options},  # type: ignore[arg-type]
    )


async def test_a_webhook_set_through_another_replica_is_delivered_without_waiting_for_a_poll(
    make_database: DatabaseFactory, receiver: WebhookReceiver
) -> None:
    """The engine that ends the run never saw its webhook (another replica
    set it): its end queues the delivery from the run's row, and on
    PostgreSQL that INSERT announces it to every replica's webhook workers.
    A safety poll longer than the receiver's wait shows no poll delivered it."""
    slow_poll = {"safety_poll_seconds": 120.0}
    announced: list[str] = []
    async with system(
        make_database, instance_id="engine-a", offline_token_delay=0.05, **slow_poll, **FAST_RETRIES
    ) as sb:
        url = sb.database_urls["engine"]
        listener = await asyncpg.connect(asyncpg_dsn(url)) if url.startswith("postgresql") else None
        if listener is not None:
            await listener.add_listener(
                WEBHOOKS.name, lambda _c, _pid, channel, _key: announced.append(channel)
            )
        try:
            async with running(build_engine, second_engine(sb, "engine-b", **slow_poll)) as (_, channel):
                other = engine_service_pb2_grpc.EngineServiceStub(channel)
                first = await collect(start(sb.engine, await conversation(sb), "", background=True))
                run_id = first[0].run_id
                request = engine_service_pb2.SetRunWebhookRequest(run_id=run_id, webhook_url=receiver.url)
                assert (
                    await other.SetRunWebhook(request, **as_user("alice"))
                ).run.webhook_url == receiver.url
                (delivered,) = await receiver.arrived(1, timeout=60.0)
                run = Webhook(SECRET).verify(delivered.body, delivered.headers)["data"]["run"]
                assert run["id"] == run_id and run["status"] == "RUN_STATUS_DONE"
                if listener is not None:

                    async def heard() -> list[str]:
                        return announced

                    assert set(await until(heard, bool)) == {WEBHOOKS.name}
        finally:
            if listener is not None:
                await listener.close()


async def test_two_engines_on_one_database_deliver_each_run_once(
    make_database: DatabaseFactory, receiver: WebhookReceiver
) -> None:
    async with system(make_database, instance_id="engine-a", **FAST_RETRIES) as sb:
        async with running(build_engine, second_engine(sb, "engine-b")) as (_, channel):
            other = engine_service_pb2_grpc.EngineServiceStub(channel)
            conversations = [await conversation(sb) for _ in range(6)]
            finished = await asyncio.gather(
                *(
                    collect(start(engine, c, receiver.url))
                    for engine, c in zip([sb.engine, other] * 3, conversations, strict=True)
                )
            )
            run_ids = {events[-1].run_id for events in finished}
            for run_id in run_ids:
                record = await until(lambda run_id=run_id: deliveries(sb.engine, run_id), settled)  # type: ignore[misc]
                assert [d.status_code for d in record.deliveries] == [200]
    ids = [r.headers["webhook-id"] for r in receiver.requests]
    assert sorted(ids) == sorted(f"msg_{run_id}" for run_id in run_ids)


async def test_a_restarted_engine_delivers_what_the_last_one_left(make_database: DatabaseFactory) -> None:
    with webhook_receiver(["hang"]) as receiver:
        async with system(
            make_database, instance_id="engine-a", **{**FAST_RETRIES, "webhook_timeout": 30}
        ) as sb:
            events = await collect(start(sb.engine, await conversation(sb), receiver.url))
            run_id = events[-1].run_id
            await receiver.arrived(1)
            # The engine stops while its attempt hangs: the attempt is
            # abandoned and its row freed; the next engine takes it up.
            await sb.services["engine"].stop(None)
            async with running(build_engine, second_engine(sb, "engine-b")) as (_, channel):
                other = engine_service_pb2_grpc.EngineServiceStub(channel)
                record = await until(lambda: deliveries(other, run_id), settled)
        assert record.state == State.WEBHOOK_DELIVERY_STATE_DELIVERED
        assert [d.status_code for d in record.deliveries] == [200]
        requests = receiver.wait_for(2)
        assert {r.headers["webhook-id"] for r in requests} == {f"msg_{run_id}"}


# Default webhooks of conversations and agents


def target(conversation_id: str = "", agent_id: str = "") -> engine_service_pb2.WebhookDefaultTarget:
    return engine_service_pb2.WebhookDefaultTarget(conversation_id=conversation_id, agent_id=agent_id)


async def set_default(
    sb: System, where: engine_service_pb2.WebhookDefaultTarget, url: str, user: str = "alice"
) -> str:
    request = engine_service_pb2.SetWebhookDefaultRequest(target=where, webhook_url=url)
    return (await sb.engine.SetWebhookDefault(request, **as_user(user))).webhook_url


async def get_default(sb: System, where: engine_service_pb2.WebhookDefaultTarget, user: str = "alice") -> str:
    request = engine_service_pb2.GetWebhookDefaultRequest(target=where)
    return (await sb.engine.GetWebhookDefault(request, **as_user(user))).webhook_url


async def test_a_conversation_default_serves_runs_that_name_no_webhook(
    make_database: DatabaseFactory, receiver: WebhookReceiver
) -> None:
    with webhook_receiver() as other:
        async with system(make_database, **FAST_RETRIES) as sb:
            conversation_id = await conversation(sb)
            assert await get_default(sb, target(conversation_id)) == ""
            assert await set_default(sb, target(conversation_id), receiver.url) == receiver.url
            assert await get_default(sb, target(conversation_id)) == receiver.url
            first = (await collect(start(sb.engine, conversation_id, "")))[-1].run_id
            (request,) = await receiver.arrived(1)
            assert request.headers["webhook-id"] == f"msg_{first}"
            # A run's own webhook_url wins over the default.
            second = (await collect(start(sb.engine, conversation_id, other.url)))[-1].run_id
            (request,) = await other.arrived(1)
            assert request.headers["webhook-id"] == f"msg_{second}"
            # Removed: the next run is not delivered.
            assert await set_default(sb, target(conversation_id), "") == ""
            third = (await collect(start(sb.engine, conversation_id, "")))[-1].run_id
            assert (await deliveries(sb.engine, third)).webhook_url == ""
            # Another user's default is theirs alone: bob cannot read or set alice's.
            for call in (
                get_default(sb, target(conversation_id), "bob"),
                set_default(sb, target(conversation_id), receiver.url, "bob"),
            ):
                await expect_error(call, grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")
        assert len(receiver.requests) == 1


async def test_an_agent_default_serves_the_callers_asks(
    make_database: DatabaseFactory, receiver: WebhookReceiver
) -> None:
    async with system(make_database, **FAST_RETRIES) as sb:
        spec = threads_pb2.Agent(id="helper", display_name="Helper", persona="Helps.")
        await sb.threads.CreateAgent(threads_service_pb2.CreateAgentRequest(agent=spec), **as_user("alice"))
        await set_default(sb, target(agent_id="helper"), receiver.url)
        ask = engine_service_pb2.AskAgentRequest(requester="alice", target_agent_id="helper", message="Hi")
        events = await collect(sb.engine.AskAgent(ask, metadata=as_user("alice")["metadata"], timeout=30))
        (request,) = await receiver.arrived(1)
        run = Webhook(SECRET).verify(request.body, request.headers)["data"]["run"]
        assert run["id"] == events[-1].run_id and run["agent_id"] == "helper"
        await expect_error(
            set_default(sb, target(agent_id="nobody"), receiver.url),
            grpc.StatusCode.NOT_FOUND,
            "ERROR_REASON_NOT_FOUND",
        )


async def test_a_default_is_checked_like_a_runs_webhook(make_database: DatabaseFactory) -> None:
    async with system(make_database, **FAST_RETRIES) as sb:
        conversation_id = await conversation(sb)
        for url in ("https://10.0.0.1/hook", "http://example.com/", "nope"):
            await expect_error(
                set_default(sb, target(conversation_id), url),
                grpc.StatusCode.INVALID_ARGUMENT,
                "ERROR_REASON_INVALID_ARGUMENT",
            )
        for where in (target(), target(conversation_id, "helper")):
            await expect_error(
                set_default(sb, where, "https://example.com/hook"),
                grpc.StatusCode.INVALID_ARGUMENT,
                "ERROR_REASON_INVALID_ARGUMENT",
            )
        assert await get_default(sb, target(conversation_id)) == ""


async def test_a_run_whose_engine_died_is_delivered_when_it_is_settled(
    make_database: DatabaseFactory, receiver: WebhookReceiver
) -> None:
    async with system(make_database, lease_seconds=0.6, **FAST_RETRIES) as sb:
        # A run left `running` by an engine that no longer holds a lease (as
        # after its kill -9 mid-run): a live engine settles it "interrupted",
        # and that settlement is delivered like any end.
        database = create_engine(sb.database_urls["engine"])
        try:
            run = AgentRun(
                id=str(uuid.uuid4()),
                user_id="alice",
                conversation_id=await conversation(sb),
                instance_id="dead-engine",
                webhook_url=receiver.url,
            )
            started = engine_pb2.RunEvent(run_id=run.id, sequence=1, run_started=engine_pb2.RunStarted())
            await RunsRepository(database).insert_run(run, started.SerializeToString())
        finally:
            await database.dispose()
        (request,) = await receiver.arrived(1)
        delivered = Webhook(SECRET).verify(request.body, request.headers)["data"]["run"]
        assert delivered["id"] == run.id
        assert delivered["status"] == "RUN_STATUS_FAILED" and delivered["error"] == "interrupted"
        record = await until(lambda: deliveries(sb.engine, run.id), settled)
        assert [d.status_code for d in record.deliveries] == [200]
