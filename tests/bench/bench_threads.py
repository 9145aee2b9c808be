"""The threads benchmark: appends per second through the RPC, and the latency
of reading one page of 50 entries from a thread of 1,000,000 entries, on SQLite
and on PostgreSQL, against the real threads service in a process of its own.

    scripts/bench.sh threads                          # both backends, 1,000,000 entries
    scripts/bench.sh threads --smoke --out /tmp/bench # 2,000 entries, 100 appends per level
    scripts/bench.sh threads --backends sqlite --profile /tmp/prof

For each backend the benchmark starts ``python -m services.threads`` on a free
port (its own SQLite file, or a fresh PostgreSQL database ``sbbench_<hex>``
dropped at the end), waits for gRPC health SERVING, and talks to it through
the generated stub over a real socket, as user ``bench``:

1. Appends: an agent and its thread (CreateAgent, EnsureAgentThread), then
   appends of one entry each at concurrency 1 and 8 (workers on one channel,
   all on that one thread, so they contend for its sequence), of one entry
   each at concurrency 8 spread over 8 agent threads, and of batches of 10
   entries at concurrency 1 and 8. Each level is warmed up first, unmeasured.
   Then chat turns at the same levels, one conversation per worker: what the
   engine asks per chat run (GetConversation, ListEntries of the history
   newest first, AppendEntries of the user's entry and of the answer).
2. Seeding: another agent thread gets ``--entries`` entries written directly
   into the service's database (after its migrations ran), in chunks of
   10,000 (sqlite3 executemany in one transaction; asyncpg COPY, then
   VACUUM ANALYZE), with its ``last_sequence`` set to match. Entries come in
   exchanges of two (a request and its answer, one correlation id and one
   request_id each); the requesters are 16 agents in turn, plus a rare one on
   one exchange in 1,000, and every entry targets the thread's agent. When
   the schema has rotation's ``segments``, the thread gets the segments the
   service's thresholds would have cut (closed ones pending a handoff, the
   last one open), so appends after the seeding count into a real segment.
3. Page reads of 50 through ListEntries on that thread: the first page, a
   page after a token in the middle, pages after tokens at random positions,
   the page before the middle (previous token), the last page (descending),
   ForPair pages (a common and a rare requester) and a ForCorrelation page.
   Tokens for chosen positions are built like the service's own (the
   benchmark knows their format; clients must not).
4. Appends again, at concurrency 1, on the big thread.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import random
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import grpc

from services.shared.identity import user_metadata
from services.shared.pagination import decode_token, encode_token
from switchboard.threads.v1 import threads_pb2, threads_service_pb2, threads_service_pb2_grpc
from tests.bench.bench_runs import cpu_seconds, git_commit, machine, percentile, profiled
from tests.processes import free_port, wait_channel_serving

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ("sqlite", "postgres")
ADMIN_URL = os.environ.get("SWITCHBOARD_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
USER = "bench"

TIMEOUT = 30.0
READY_TIMEOUT = 60.0
STOP_GRACE = 20.0
SEED_CHUNK = 10_000
PAGE = 50
REQUESTERS = 16  # common requesters, in turn
RARE_EVERY = 1_000  # one exchange in RARE_EVERY is the rare requester's
CONTENT = (
    "Summarise the open questions of the design review and who owns each one, "
    "then say which of them block the release and by how much."
)

# (key, label, limit, "max" or "min"), per backend.
TARGETS = (
    ("appends_per_s", "Appends/s through the RPC (1 entry, c8, one thread)", 2000.0, "min"),
    ("page_p50_ms", "Page of 50 from the big thread, p50 (worst read)", 5.0, "max"),
)


class BenchError(RuntimeError):
    pass


def stats(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(values, 50), 3),
        "p99_ms": round(percentile(values, 99), 3),
        "mean_ms": round(sum(values) / len(values), 3),
    }


# The service and its database


@asynccontextmanager
async def postgres_database() -> AsyncIterator[str]:
    """A fresh database sbbench_<hex>, dropped (WITH FORCE) after the block."""
    name = f"sbbench_{uuid.uuid4().hex[:12]}"
    try:
        admin = await asyncpg.connect(ADMIN_URL, timeout=5)
    except (OSError, asyncpg.PostgresError) as exc:
        raise BenchError(f"PostgreSQL at {ADMIN_URL} is not reachable: {exc}") from exc
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    base = ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://", 1)
    try:
        yield f"{base}/{name}"
    finally:
        admin = await asyncpg.connect(ADMIN_URL, timeout=5)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


@asynccontextmanager
async def threads_service(url: str, folder: Path) -> AsyncIterator[tuple[int, grpc.aio.Channel]]:
    """``python -m services.threads`` on a free port over ``url``, tracing off;
    yields its pid and a channel once health says SERVING. Stopped with
    SIGTERM (killed after STOP_GRACE)."""
    port = free_port()
    env = {
        **os.environ,
        "SWITCHBOARD_THREADS_PORT": str(port),
        "SWITCHBOARD_THREADS_DATABASE_URL": url,
        "SWITCHBOARD_DATA_DIR": str(folder),
    }
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    log = folder / "threads.log"
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "services.threads"],
            cwd=ROOT,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        await wait_channel_serving(channel, process, log, READY_TIMEOUT, interval=0.1, error=BenchError)
        yield process.pid, channel
    finally:
        await channel.close()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(process.wait, STOP_GRACE)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


# Appends


class Meter:
    """CPU time of the service and of this process between start() and per_call()."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._before: dict[str, float] = {}

    def _now(self) -> dict[str, float]:
        own = os.times()
        return {"threads": sum(cpu_seconds(self._pid)), "bench": own.user + own.system}

    def start(self) -> None:
        self._before = self._now()

    def per_call(self, calls: int) -> dict[str, float]:
        after = self._now()
        out = {k: round((after[k] - self._before[k]) * 1000 / calls, 3) for k in after}
        out["total"] = round(sum(out.values()), 3)
        return out


async def new_agent_thread(stub: threads_service_pb2_grpc.ThreadsServiceStub, agent_id: str) -> str:
    await stub.CreateAgent(
        threads_service_pb2.CreateAgentRequest(agent=threads_pb2.Agent(id=agent_id, display_name=agent_id)),
        metadata=user_metadata(USER),
        timeout=TIMEOUT,
    )
    reply = await stub.EnsureAgentThread(
        threads_service_pb2.EnsureAgentThreadRequest(target_agent_id=agent_id),
        metadata=user_metadata(USER),
        timeout=TIMEOUT,
    )
    return str(reply.thread.id)


async def appends(
    stub: threads_service_pb2_grpc.ThreadsServiceStub,
    threads: list[tuple[str, str]],
    concurrency: int,
    total: int,
    batch: int,
) -> tuple[list[float], float]:
    """``total`` AppendEntries calls of ``batch`` entries by ``concurrency``
    workers back to back, worker i on threads[i % len(threads)] (thread id,
    agent id); each call a new request_id. Returns latencies (ms) and elapsed s."""
    tickets = iter(range(total))

    async def worker(index: int) -> list[float]:
        thread_id, agent_id = threads[index % len(threads)]
        entry = threads_pb2.Entry(
            requester=f"bench-{index}",
            target=agent_id,
            role=threads_pb2.ROLE_USER,
            source=f"agent:bench-{index}",
            content=CONTENT,
        )
        latencies = []
        for _ in tickets:
            request = threads_service_pb2.AppendEntriesRequest(
                request_id=uuid.uuid4().hex,
                thread_id=thread_id,
                entries=[entry] * batch,
            )
            request.entries[0].correlation_id = request.request_id
            started = time.perf_counter()
            reply = await stub.AppendEntries(request, metadata=user_metadata(USER), timeout=TIMEOUT)
            latencies.append((time.perf_counter() - started) * 1000)
            if len(reply.entries) != batch:
                raise BenchError(f"AppendEntries wrote {len(reply.entries)} entries, not {batch}")
        return latencies

    started = time.perf_counter()
    batches = await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return [ms for b in batches for ms in b], time.perf_counter() - started


async def measure_appends(
    args: argparse.Namespace,
    stub: threads_service_pb2_grpc.ThreadsServiceStub,
    pid: int,
    label: str,
    threads: list[tuple[str, str]],
    concurrency: int,
    batch: int,
    total: int,
    profiles: dict[str, Any],
) -> dict[str, Any]:
    await appends(stub, threads, concurrency, args.warmup, batch)
    meter = Meter(pid)
    meter.start()
    with profiled(args.profile, label, {"threads": pid}, profiles):
        latencies, elapsed = await appends(stub, threads, concurrency, total, batch)
    print(f"  {label}: done", file=sys.stderr, flush=True)
    return {
        "concurrency": concurrency,
        "threads": len(threads),
        "entries_per_call": batch,
        "calls": total,
        "calls_per_s": round(total / elapsed, 1),
        "entries_per_s": round(total * batch / elapsed, 1),
        "elapsed_s": round(elapsed, 3),
        "latency": stats(latencies),
        "cpu_ms_per_call": meter.per_call(total),
    }


# Chat turns: the calls the engine makes to the threads service per chat run


async def chat_turns(
    stub: threads_service_pb2_grpc.ThreadsServiceStub, conversations: list[str], concurrency: int, total: int
) -> tuple[list[float], float]:
    """``total`` chat turns by ``concurrency`` workers, worker i on
    conversations[i % len]: what the engine asks per chat run (the
    conversation, its history newest first, the user's entry, the
    assistant's entry, each append with a request_id). Returns latencies (ms)."""
    tickets = iter(range(total))

    async def worker(index: int) -> list[float]:
        conversation_id = conversations[index % len(conversations)]
        latencies = []
        for _ in tickets:
            run_id = uuid.uuid4().hex
            started = time.perf_counter()
            await stub.GetConversation(
                threads_service_pb2.GetConversationRequest(conversation_id=conversation_id),
                metadata=user_metadata(USER),
                timeout=TIMEOUT,
            )
            await stub.ListEntries(
                threads_service_pb2.ListEntriesRequest(
                    thread_id=conversation_id, page_size=200, descending=True
                ),
                metadata=user_metadata(USER),
                timeout=TIMEOUT,
            )
            for role, suffix in ((threads_pb2.ROLE_USER, "user"), (threads_pb2.ROLE_ASSISTANT, "assistant")):
                entry = threads_pb2.Entry(role=role, source="user", run_id=run_id, content=CONTENT)
                await stub.AppendEntries(
                    threads_service_pb2.AppendEntriesRequest(
                        request_id=f"{run_id}:{suffix}", thread_id=conversation_id, entries=[entry]
                    ),
                    metadata=user_metadata(USER),
                    timeout=TIMEOUT,
                )
            latencies.append((time.perf_counter() - started) * 1000)
        return latencies

    started = time.perf_counter()
    batches = await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return [value for batch in batches for value in batch], time.perf_counter() - started


async def measure_chat(
    args: argparse.Namespace,
    stub: threads_service_pb2_grpc.ThreadsServiceStub,
    pid: int,
    label: str,
    concurrency: int,
    profiles: dict[str, Any],
) -> dict[str, Any]:
    conversations = []
    for _ in range(concurrency):
        created = await stub.CreateConversation(
            threads_service_pb2.CreateConversationRequest(title="bench"),
            metadata=user_metadata(USER),
            timeout=TIMEOUT,
        )
        conversations.append(created.conversation.id)
    total = max(1, args.appends // 2)
    await chat_turns(stub, conversations, concurrency, max(1, args.warmup // 2))
    meter = Meter(pid)
    meter.start()
    with profiled(args.profile, label, {"threads": pid}, profiles):
        latencies, elapsed = await chat_turns(stub, conversations, concurrency, total)
    print(f"  {label}: done", file=sys.stderr, flush=True)
    return {
        "concurrency": concurrency,
        "turns": total,
        "calls_per_turn": 4,
        "turns_per_s": round(total / elapsed, 1),
        "latency": stats(latencies),
        "cpu_ms_per_turn": meter.per_call(total),
    }


# Seeding the big thread directly in the database

COLUMNS = (
    "id",
    "thread_id",
    "sequence",
    "requester",
    "target",
    "correlation_id",
    "role",
    "source",
    "run_id",
    "content",
    "request_id",
    "request_index",
    "create_time",
)


def requester_of(exchange: int) -> str:
    return (
        "rare-requester" if exchange % RARE_EVERY == RARE_EVERY // 2 else f"requester-{exchange % REQUESTERS}"
    )


def correlation_of(exchange: int) -> str:
    return str(uuid.UUID(int=(0xBE7C << 64) + exchange))


def content_of(sequence: int) -> str:
    return f"{CONTENT} ({sequence})"


SEGMENT_COLUMNS = (
    "thread_id",
    "number",
    "first_sequence",
    "last_sequence",
    "entry_count",
    "char_count",
    "status",
    "handoff_status",
    "open_time",
    "close_time",
)


def segment_rows(thread_id: str, total: int, when: Any) -> list[tuple[Any, ...]]:
    """The segments rotation would have cut the seeded entries into, had they
    been appended one by one under the service's thresholds (its settings,
    from the same environment): closed ones pending a handoff, the last open."""
    from services.threads.settings import ThreadsSettings

    settings = ThreadsSettings()
    after_entries = getattr(settings, "rotate_after_entries", 0) or total + 1
    after_chars = getattr(settings, "rotate_after_chars", 0) or 2**62
    rows: list[tuple[Any, ...]] = []
    first, count, chars = 1, 0, 0
    for sequence in range(1, total + 1):
        count, chars = count + 1, chars + len(content_of(sequence))
        if count >= after_entries or chars >= after_chars:
            rows.append(
                (thread_id, len(rows) + 1, first, sequence, count, chars, "closed", "pending", when, when)
            )
            first, count, chars = sequence + 1, 0, 0
    rows.append((thread_id, len(rows) + 1, first, total, count, chars, "open", "none", when, None))
    return rows


def seed_rows(
    thread_id: str, agent_id: str, total: int, to_time: Callable[[datetime.datetime], Any]
) -> Iterator[list[tuple[Any, ...]]]:
    """The entries of the big thread, sequence 1..total, in chunks."""
    start = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=total)
    chunk: list[tuple[Any, ...]] = []
    for sequence in range(1, total + 1):
        exchange, index = divmod(sequence - 1, 2)
        requester = requester_of(exchange)
        chunk.append(
            (
                str(uuid.uuid4()),
                thread_id,
                sequence,
                requester,
                agent_id,
                correlation_of(exchange),
                threads_pb2.ROLE_ASSISTANT if index else threads_pb2.ROLE_USER,
                f"agent:{agent_id}" if index else f"agent:{requester}",
                f"run-{exchange}",
                content_of(sequence),
                f"seed-{exchange}",
                index,
                to_time(start + datetime.timedelta(seconds=sequence)),
            )
        )
        if len(chunk) == SEED_CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def seed_sqlite(path: Path, thread_id: str, agent_id: str, total: int) -> None:
    from sqlalchemy.dialects import sqlite as sqlite_dialect

    # Timestamps stored exactly as SQLAlchemy stores them on SQLite.
    to_time = sqlite_dialect.DATETIME().bind_processor(sqlite_dialect.dialect())  # type: ignore[no-untyped-call]
    assert to_time is not None
    db = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        db.execute("PRAGMA busy_timeout=30000")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("BEGIN IMMEDIATE")
        insert = f"INSERT INTO entries ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
        for chunk in seed_rows(thread_id, agent_id, total, to_time):
            db.executemany(insert, chunk)
        db.execute("UPDATE threads SET last_sequence = ? WHERE id = ?", (total, thread_id))
        if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'segments'").fetchone():
            db.execute("DELETE FROM segments WHERE thread_id = ?", (thread_id,))
            db.executemany(
                f"INSERT INTO segments ({', '.join(SEGMENT_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(SEGMENT_COLUMNS))})",
                segment_rows(thread_id, total, to_time(datetime.datetime.now(datetime.UTC))),
            )
        db.execute("COMMIT")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()


async def seed_postgres(url: str, thread_id: str, agent_id: str, total: int) -> float:
    """Seeds, then VACUUM ANALYZE (what autovacuum would do soon after);
    returns the seconds the VACUUM ANALYZE took."""
    db = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://", 1))
    try:
        async with db.transaction():
            for chunk in seed_rows(thread_id, agent_id, total, lambda t: t):
                await db.copy_records_to_table("entries", records=chunk, columns=COLUMNS)
            await db.execute("UPDATE threads SET last_sequence = $1 WHERE id = $2", total, thread_id)
            if await db.fetchval("SELECT to_regclass('segments') IS NOT NULL"):
                await db.execute("DELETE FROM segments WHERE thread_id = $1", thread_id)
                segments = segment_rows(thread_id, total, datetime.datetime.now(datetime.UTC))
                await db.copy_records_to_table("segments", records=segments, columns=SEGMENT_COLUMNS)
        started = time.perf_counter()
        await db.execute("VACUUM (ANALYZE) entries")
        if await db.fetchval("SELECT to_regclass('segments') IS NOT NULL"):
            await db.execute("VACUUM (ANALYZE) segments")
        return time.perf_counter() - started
    finally:
        await db.close()


async def database_size(backend: str, url: str) -> int:
    if backend == "sqlite":
        path = Path(url.split("///", 1)[1])
        return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    db = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://", 1))
    try:
        return int(await db.fetchval("SELECT pg_database_size(current_database())"))
    finally:
        await db.close()


# Page reads

Read = Callable[[], threads_service_pb2.ListEntriesRequest]
Check = Callable[[threads_service_pb2.ListEntriesResponse, threads_service_pb2.ListEntriesRequest], None]


def token_at(issued: str, forward: bool, position: int) -> str:
    """A token for ``position`` of the view that issued ``issued`` (the
    service's format: direction, position, view fingerprint)."""
    cursor = decode_token(issued)
    return encode_token({"d": "n" if forward else "p", "s": position, "v": cursor["v"]})


async def timed_reads(
    stub: threads_service_pb2_grpc.ThreadsServiceStub, make: Read, check: Check, count: int
) -> list[float]:
    """``count`` reads one after the other, each checked; latencies in ms."""
    latencies = []
    for _ in range(count):
        request = make()
        started = time.perf_counter()
        reply = await stub.ListEntries(request, metadata=user_metadata(USER), timeout=TIMEOUT)
        latencies.append((time.perf_counter() - started) * 1000)
        check(reply, request)
    return latencies


async def measure_reads(
    args: argparse.Namespace,
    stub: threads_service_pb2_grpc.ThreadsServiceStub,
    pid: int,
    backend: str,
    thread_id: str,
    agent_id: str,
    total: int,
    profiles: dict[str, Any],
) -> dict[str, Any]:
    rng = random.Random(7)
    middle = total // 2

    def whole(**fields: Any) -> threads_service_pb2.ListEntriesRequest:
        return threads_service_pb2.ListEntriesRequest(
            for_agent=threads_service_pb2.ListEntriesRequest.ForAgent(agent_id=agent_id),
            page_size=PAGE,
            **fields,
        )

    def pair(requester: str, **fields: Any) -> threads_service_pb2.ListEntriesRequest:
        return threads_service_pb2.ListEntriesRequest(
            for_pair=threads_service_pb2.ListEntriesRequest.ForPair(requester=requester, target=agent_id),
            page_size=PAGE,
            **fields,
        )

    async def first(
        request: threads_service_pb2.ListEntriesRequest,
    ) -> threads_service_pb2.ListEntriesResponse:
        reply: threads_service_pb2.ListEntriesResponse = await stub.ListEntries(
            request, metadata=user_metadata(USER), timeout=TIMEOUT
        )
        return reply

    issued = (await first(whole())).next_page_token
    pair_issued = (await first(pair("requester-3"))).next_page_token
    if not issued or not pair_issued:
        raise BenchError("the first pages issued no next token")

    def sequences(reply: threads_service_pb2.ListEntriesResponse) -> list[int]:
        return [e.sequence for e in reply.entries]

    def expect(name: str, want: Callable[[threads_service_pb2.ListEntriesRequest], list[int]]) -> Check:
        def check(
            reply: threads_service_pb2.ListEntriesResponse, request: threads_service_pb2.ListEntriesRequest
        ) -> None:
            got = sequences(reply)
            if got != want(request):
                raise BenchError(f"{name}: unexpected page {got[:3]}…{got[-3:]} ({len(got)} entries)")

        return check

    def after(request: threads_service_pb2.ListEntriesRequest) -> list[int]:
        position = int(decode_token(request.page_token)["s"]) if request.page_token else 0
        return list(range(position + 1, min(position + PAGE, total) + 1))

    def pair_check(requester: str) -> Check:
        def check(
            reply: threads_service_pb2.ListEntriesResponse, request: threads_service_pb2.ListEntriesRequest
        ) -> None:
            wanted = min(PAGE, per_requester[requester])
            if len(reply.entries) != wanted or any(e.requester != requester for e in reply.entries):
                raise BenchError(f"pair {requester}: {len(reply.entries)} entries, wanted {wanted}")

        return check

    correlation = correlation_of(middle // 2)
    per_requester: dict[str, int] = {}
    for exchange in range(total // 2):
        per_requester[requester_of(exchange)] = per_requester.get(requester_of(exchange), 0) + 2
    reads: dict[str, tuple[str, Read, Check]] = {
        "first": ("first page (ascending, no token)", whole, expect("first", after)),
        "middle": (
            "page after a token in the middle",
            lambda: whole(page_token=token_at(issued, True, middle)),
            expect("middle", after),
        ),
        "random": (
            "pages after tokens at random positions",
            lambda: whole(page_token=token_at(issued, True, rng.randrange(0, max(1, total - PAGE)))),
            expect("random", after),
        ),
        "previous": (
            "page before the middle (previous token)",
            lambda: whole(page_token=token_at(issued, False, middle + 1)),
            expect("previous", lambda _: list(range(max(1, middle + 1 - PAGE), middle + 1))),
        ),
        "last": (
            "last page (descending, no token)",
            lambda: whole(descending=True),
            expect("last", lambda _: list(range(total, max(0, total - PAGE), -1))),
        ),
        "pair": (
            f"ForPair, 1 requester in {REQUESTERS}, first page",
            lambda: pair("requester-3"),
            pair_check("requester-3"),
        ),
        "pair_middle": (
            f"ForPair, 1 requester in {REQUESTERS}, after a token in the middle",
            lambda: pair("requester-3", page_token=token_at(pair_issued, True, middle)),
            pair_check("requester-3"),
        ),
        "pair_rare": (
            f"ForPair, 1 exchange in {RARE_EVERY}, first page",
            lambda: pair("rare-requester"),
            pair_check("rare-requester"),
        ),
        "correlation": (
            "ForCorrelation, one exchange in the middle",
            lambda: threads_service_pb2.ListEntriesRequest(
                for_correlation=threads_service_pb2.ListEntriesRequest.ForCorrelation(
                    thread_id=thread_id, correlation_id=correlation
                ),
                page_size=PAGE,
            ),
            expect("correlation", lambda _: [middle // 2 * 2 + 1, middle // 2 * 2 + 2]),
        ),
    }
    out: dict[str, Any] = {}
    for key, (label, make, check) in reads.items():
        await timed_reads(stub, make, check, min(args.warmup, 20))
        meter = Meter(pid)
        meter.start()
        with profiled(args.profile, f"{backend}_read_{key}", {"threads": pid}, profiles):
            latencies = await timed_reads(stub, make, check, args.reads)
        out[key] = {"label": label, "reads": len(latencies), **stats(latencies)}
        out[key]["cpu_ms_per_call"] = meter.per_call(len(latencies))
    print(f"  {backend} reads: done", file=sys.stderr, flush=True)
    return out


# One backend


async def bench_backend(args: argparse.Namespace, backend: str, folder: Path) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"appends": {}, "profiles": {}}
    profiles = result["profiles"]
    async with _database(backend, folder) as url:
        result["database"] = (
            "SQLite file (WAL)" if backend == "sqlite" else "PostgreSQL (asyncpg), fresh database"
        )
        async with threads_service(url, folder) as (pid, channel):
            stub = threads_service_pb2_grpc.ThreadsServiceStub(channel)
            one = [(await new_agent_thread(stub, "bench-appends"), "bench-appends")]
            eight = one + [
                (await new_agent_thread(stub, f"bench-appends-{i}"), f"bench-appends-{i}")
                for i in range(1, 8)
            ]

            def scenario(
                label: str, threads: list[tuple[str, str]], c: int, batch: int, total: int
            ) -> Awaitable[Any]:
                return measure_appends(
                    args, stub, pid, f"{backend}_{label}", threads, c, batch, total, profiles
                )

            for c in args.concurrency:
                result["appends"][f"one_c{c}"] = await scenario(f"one_c{c}", one, c, 1, args.appends)
            top = max(args.concurrency)
            if top > 1:
                result["appends"][f"one_c{top}_{top}threads"] = await scenario(
                    f"one_c{top}_{top}threads", eight[:top] if top <= 8 else eight, top, 1, args.appends
                )
            for c in args.concurrency:
                result["appends"][f"batch{args.batch}_c{c}"] = await scenario(
                    f"batch{args.batch}_c{c}", one, c, args.batch, max(1, args.appends // args.batch)
                )
            result["chat"] = {
                f"c{c}": await measure_chat(args, stub, pid, f"{backend}_chat_c{c}", c, profiles)
                for c in args.concurrency
            }

            big_agent = "bench-big"
            big_thread = await new_agent_thread(stub, big_agent)
            print(f"  {backend}: seeding {args.entries} entries", file=sys.stderr, flush=True)
            started = time.perf_counter()
            analyze = 0.0
            if backend == "sqlite":
                await asyncio.to_thread(
                    seed_sqlite, Path(url.split("///", 1)[1]), big_thread, big_agent, args.entries
                )
            else:
                analyze = await seed_postgres(url, big_thread, big_agent, args.entries)
            elapsed = time.perf_counter() - started
            result["seed"] = {
                "entries": args.entries,
                "elapsed_s": round(elapsed, 1),
                "entries_per_s": round(args.entries / (elapsed - analyze), 0),
                "vacuum_analyze_s": round(analyze, 1) if backend == "postgres" else None,
                "database_bytes": await database_size(backend, url),
                "method": "sqlite3 executemany, one transaction"
                if backend == "sqlite"
                else "asyncpg copy_records_to_table, one transaction, then VACUUM (ANALYZE) entries",
            }
            result["reads"] = await measure_reads(
                args, stub, pid, backend, big_thread, big_agent, args.entries, profiles
            )
            result["appends"]["big_c1"] = await scenario(
                "big_c1", [(big_thread, big_agent)], 1, 1, max(1, args.appends // 4)
            )
    result["targets"] = targets(result, args)
    if not profiles:
        del result["profiles"]
    return result


@asynccontextmanager
async def _database(backend: str, folder: Path) -> AsyncIterator[str]:
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{folder / 'threads.db'}"
    else:
        async with postgres_database() as url:
            yield url


def targets(result: dict[str, Any], args: argparse.Namespace) -> list[dict[str, Any]]:
    top = max(args.concurrency)
    measured_by = {
        "appends_per_s": result["appends"].get(f"one_c{top}", {}).get("calls_per_s"),
        "page_p50_ms": max(r["p50_ms"] for r in result["reads"].values()) if result.get("reads") else None,
    }
    out = []
    for key, label, limit, kind in TARGETS:
        value = measured_by[key]
        met = None if value is None else (value <= limit if kind == "max" else value >= limit)
        off = None if value is None else round(value / limit if kind == "max" else limit / value, 2)
        out.append(
            {"key": key, "target": label, "limit": limit, "kind": kind}
            | {"measured": value, "met": met, "factor_off": off}
        )
    return out


# Report


def markdown(report: dict[str, Any]) -> str:
    lines: list[str] = []
    for backend, result in report["backends"].items():
        lines += [
            f"\n### {backend}\n",
            "| Appends | Concurrency | Threads | Entries/call | Calls | Calls/s | Entries/s "
            "| p50 (ms) | p99 (ms) | CPU ms/call (service + bench) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for key, s in result["appends"].items():
            cpu = s["cpu_ms_per_call"]
            lines.append(
                f"| {key} | {s['concurrency']} | {s['threads']} | {s['entries_per_call']} | {s['calls']} "
                f"| {s['calls_per_s']:.0f} | {s['entries_per_s']:.0f} | {s['latency']['p50_ms']:.2f} "
                f"| {s['latency']['p99_ms']:.2f} | {cpu['threads']:.2f} + {cpu['bench']:.2f} |"
            )
        if result.get("chat"):
            lines += [
                "",
                "| Chat turn (GetConversation, ListEntries, AppendEntries ×2) | Concurrency | Turns "
                "| Turns/s | p50 (ms) | p99 (ms) | CPU ms/turn (service + bench) |",
                "|---|---:|---:|---:|---:|---:|---:|",
            ]
            for key, t in result["chat"].items():
                cpu = t["cpu_ms_per_turn"]
                lines.append(
                    f"| {key} | {t['concurrency']} | {t['turns']} | {t['turns_per_s']:.0f} "
                    f"| {t['latency']['p50_ms']:.2f} | {t['latency']['p99_ms']:.2f} "
                    f"| {cpu['threads']:.2f} + {cpu['bench']:.2f} |"
                )
        seed = result["seed"]
        analyze = f", then VACUUM ANALYZE {seed['vacuum_analyze_s']} s" if seed["vacuum_analyze_s"] else ""
        lines += [
            "",
            f"Seeded {seed['entries']:,} entries in {seed['elapsed_s']} s "
            f"({seed['entries_per_s']:,.0f} entries/s{analyze}); "
            f"database {seed['database_bytes'] / 2**20:,.0f} MiB.",
            "",
            "| Page of 50 | Reads | p50 (ms) | p99 (ms) | mean (ms) | CPU ms/read (service) |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for r in result["reads"].values():
            lines.append(
                f"| {r['label']} | {r['reads']} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['mean_ms']:.2f} "
                f"| {r['cpu_ms_per_call']['threads']:.2f} |"
            )
        lines += ["", "| Target | Limit | Measured | Met |", "|---|---:|---:|---|"]
        for t in result["targets"]:
            sign = "≤" if t["kind"] == "max" else "≥"
            met = "n/a" if t["met"] is None else ("yes" if t["met"] else f"no ({t['factor_off']}× off)")
            lines.append(f"| {t['target']} | {sign} {t['limit']:g} | {t['measured']} | {met} |")
    return "\n".join(lines)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/bench.sh threads", description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default=",".join(BACKENDS), help="sqlite,postgres (default both)")
    parser.add_argument("--entries", type=int, default=1_000_000, help="entries of the big thread")
    parser.add_argument("--appends", type=int, default=2000, help="measured appends per level (default 2000)")
    parser.add_argument("--warmup", type=int, default=200, help="unmeasured calls before each level")
    parser.add_argument("--reads", type=int, default=200, help="measured reads per kind of page")
    parser.add_argument("--batch", type=int, default=10, help="entries per call of the batch levels")
    parser.add_argument("--concurrency", default="1,8", help="levels, comma-separated (default 1,8)")
    parser.add_argument("--smoke", action="store_true", help="2,000 entries, 100 appends: a quick check")
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where benchmarks.json goes")
    parser.add_argument("--profile", type=Path, help="py-spy the service during the measured phases")
    args = parser.parse_args(argv)
    if args.smoke:
        args.entries, args.appends, args.warmup, args.reads = 2_000, 100, 10, 20
    args.backends = [b for b in args.backends.split(",") if b]
    args.concurrency = [int(c) for c in args.concurrency.split(",") if c]
    if unknown := set(args.backends) - set(BACKENDS):
        parser.error(f"unknown backends: {', '.join(sorted(unknown))}")
    if not args.backends or not args.concurrency or min(args.concurrency) < 1:
        parser.error("--backends must name one, concurrency levels must be >= 1")
    if args.entries < 4 * PAGE * 10 or args.appends < 1 or args.reads < 1 or not 1 <= args.batch <= 100:
        parser.error("--entries >= 2000, --appends and --reads >= 1, 1 <= --batch <= 100")
    return args


async def bench(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    command = os.environ.get("SWITCHBOARD_BENCH_COMMAND") or shlex.join(
        ["python", "-m", "tests.bench.bench_threads", *argv]
    )
    report: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": command,
        "commit": git_commit(),
        "machine": machine(),
        "settings": {
            "backends": args.backends,
            "entries": args.entries,
            "appends": args.appends,
            "warmup": args.warmup,
            "reads": args.reads,
            "batch": args.batch,
            "concurrency": args.concurrency,
            "page_size": PAGE,
            "content_chars": len(CONTENT),
            "smoke": args.smoke,
            "tracing": "off (no OTLP endpoint)",
        },
        "backends": {},
    }
    folder = Path(tempfile.mkdtemp(prefix="switchboard-bench-threads-", dir="/tmp"))
    try:
        for backend in args.backends:
            report["backends"][backend] = await bench_backend(args, backend, folder / backend)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report["machine"]["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return report


def write(out: Path, report: dict[str, Any]) -> Path:
    """Merges the report as the "threads" key of out/benchmarks.json."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "benchmarks.json"
    existing = json.loads(path.read_text()) if path.exists() else {}
    existing["threads"] = report
    path.write_text(json.dumps(existing, indent=2) + "\n")
    return path


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    report = asyncio.run(bench(args, argv))
    path = write(args.out, report)
    m = report["machine"]
    print(
        f"\n{report['date']}  commit {report['commit']}  {m['cpu']}, {m['cores']} cores, "
        f"Python {m['python']}\n{report['command']}"
    )
    print(markdown(report))
    print(f"\nWrote the threads key of {path}")


if __name__ == "__main__":
    main()
