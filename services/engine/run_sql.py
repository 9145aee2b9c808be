"""The statements every run makes, on the driver (services.shared.driver):
its insert, its events, its end. Written once per shape, with the values
converted as SQLAlchemy converts them, so rows written here and through the
ORM read alike. The repository (services.engine.repository) decides when
each runs; this module only says what they are."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Table

from services.engine.models import AgentAction, AgentRun, RunEventRow, SkillRun
from services.engine.quotas import RunQuota
from services.engine.webhooks.models import WebhookOutbox
from services.engine.webhooks.outbox import outbox_row
from services.shared.driver import Driver, Statement
from services.shared.wakeups import RUN_EVENTS, WEBHOOKS, Channel, announcing

# The first key of the user's advisory lock (two-key form): apart from the
# threads' one-key locks, so a user id never shares a lock with a thread.
QUOTA_LOCK_CLASS = 19

THREAD_LOCK = "SELECT pg_advisory_xact_lock(hashtext($1))"
USER_LOCK = f"SELECT pg_advisory_xact_lock({QUOTA_LOCK_CLASS}, hashtext($1))"
RUNS_AHEAD = (
    "SELECT count(*) FROM agent_runs WHERE conversation_id = $1 AND status = 'running'"
    " AND (started_at < $2 OR (started_at = $2 AND id < $3))"
)
# SQLite stamps a run in Python, before its insert, so two runs of a thread
# can commit in the other order than their stamps (each would find the other
# behind it, and both would run). Its single writer gives every new row a
# rowid above all others: the rowid is the commit order.
RUNS_AHEAD_SQLITE = (
    "SELECT count(*) FROM agent_runs WHERE conversation_id = $1 AND status = 'running'"
    " AND rowid < (SELECT rowid FROM agent_runs WHERE id = $2)"
)
# The run's first event, written only with its run (the run's insert may
# have been refused); a retry meets the event its lost-reply attempt wrote.
# (A parameter is used once: PostgreSQL types each from its one place.)
FIRST_EVENT = (
    "INSERT INTO run_events (run_id, sequence, payload)"
    " SELECT $1, 1, $2 WHERE EXISTS (SELECT 1 FROM agent_runs WHERE id = $3)"
)
SKIP_EXISTING = " ON CONFLICT DO NOTHING"
# The outbox row of a run that ends, for the webhook its row names when it
# ends: one set or cleared while it ran (SetRunWebhook, any replica) counts.
# The SQL of a wake-up's key for a channel that has none.
EMPTY_KEY = "''"
RUN_OUTBOX = (
    "INSERT INTO webhook_outbox (run_id, url, webhook_id, state, attempts, created_at, next_attempt_at)"
    " SELECT id, webhook_url, $1, $2, 0, $3, $4 FROM agent_runs"
    " WHERE id = $5 AND webhook_url IS NOT NULL AND webhook_url <> ''"
)


def _table(model: Any) -> Table:
    table: Table = model.__table__
    return table


class Inserts:
    """INSERTs of rows into ``table``, with the columns ``names`` (every one
    by default); for a retry, one that skips the rows (fixed keys) its
    lost-reply attempt wrote. ``announce``: on PostgreSQL the INSERT itself
    announces the channel with the first column's value as key (a wake-up,
    services.shared.wakeups): no statement of its own, and PostgreSQL
    delivers one notification per transaction however many rows call it."""

    def __init__(
        self, driver: Driver, table: Table, names: Sequence[str] = (), announce: Channel | None = None
    ) -> None:
        self._names = list(names) or [c.name for c in table.columns]
        self._bind = driver.binder(*[table.c[name] for name in self._names])
        places = ", ".join(f"${n}" for n in range(1, len(self._names) + 1))
        into = f"INSERT INTO {table.name} ({', '.join(self._names)})"
        if announce is not None and not driver.sqlite:
            self._sql = f"{into} SELECT {places} FROM (SELECT {announcing(announce, '$1')}) AS announced"
        else:
            self._sql = f"{into} VALUES ({places})"

    def of(self, rows: Sequence[Sequence[Any]], retry: bool = False) -> Statement:
        """``rows``: values in the order of ``names``."""
        values = [self._bind(row) for row in rows]
        return Statement(self._sql + SKIP_EXISTING if retry else self._sql, values, many=True)

    def of_dicts(self, rows: Sequence[Mapping[str, Any]], retry: bool = False) -> Statement:
        return self.of([[row[name] for name in self._names] for row in rows], retry)


class RunStatements:
    def __init__(self, driver: Driver) -> None:
        self.postgres = not driver.sqlite
        self._driver = driver
        runs = _table(AgentRun)
        self._runs = runs
        self._run_names = [c.name for c in runs.columns]
        # On PostgreSQL a run's start is the database's clock, read after the
        # thread's lock: a thread's runs are stamped in commit order.
        self._stamped = [n for n in self._run_names if not (self.postgres and n == "started_at")]
        self._bind_run = driver.binder(*[runs.c[n] for n in self._stamped])
        self._bind_window = driver.binder(runs.c.created_at)
        self._bind_ahead = driver.binder(runs.c.conversation_id, runs.c.started_at, runs.c.id)
        self._insert_sql: dict[tuple[bool, bool, bool], str] = {}
        self._finish: dict[tuple[str, ...], tuple[str, Callable[[Sequence[Any]], tuple[Any, ...]]]] = {}
        self.events = Inserts(driver, _table(RunEventRow), ("run_id", "sequence", "payload"))
        # A run's event batches wake its followers on other replicas.
        self.announced_events = Inserts(
            driver, _table(RunEventRow), ("run_id", "sequence", "payload"), announce=RUN_EVENTS
        )
        self.actions = Inserts(driver, _table(AgentAction))
        self.skill_runs = Inserts(driver, _table(SkillRun))
        outbox = _table(WebhookOutbox)
        self._bind_outbox = driver.binder(
            outbox.c.webhook_id, outbox.c.state, outbox.c.created_at, outbox.c.next_attempt_at
        )

    def insert_run(
        self, run: AgentRun, first_event: bytes, busy: bool, quota: RunQuota | None, now: datetime
    ) -> list[Statement]:
        """The run and its first event, in one transaction: on PostgreSQL
        after the thread's and the user's locks; the run only when the
        thread is idle (``busy``: checked) and the user's quota has room —
        otherwise nothing is written (its insert changes no row)."""
        running = bool(quota and quota.max_concurrent)
        windowed = bool(quota and quota.per_window)
        dump = run.model_dump()
        args = list(self._bind_run([dump[n] for n in self._stamped]))
        busy = busy and bool(run.conversation_id)
        if busy:
            args.append(run.conversation_id)
        if running and quota is not None:
            args += [run.user_id, quota.max_concurrent]
        if windowed and quota is not None:
            args += [run.user_id, self._bind_window([quota.window_start(now)])[0], quota.per_window]
        statements = []
        if self.postgres and run.conversation_id:
            statements.append(Statement(THREAD_LOCK, (run.conversation_id,)))
        if self.postgres and (running or windowed):
            statements.append(Statement(USER_LOCK, (run.user_id,)))
        sql = self._insert_run_sql(busy, running, windowed)
        statements += [Statement(sql, args), Statement(FIRST_EVENT, (run.id, first_event, run.id))]
        return statements

    def _insert_run_sql(self, busy: bool, running: bool, windowed: bool) -> str:
        sql = self._insert_sql.get((busy, running, windowed))
        if sql is not None:
            return sql
        place = {name: f"${n}" for n, name in enumerate(self._stamped, 1)}
        values = [place.get(name, "clock_timestamp()") for name in self._run_names]
        n = len(self._stamped)  # the guards' parameters follow the row's
        guards = ["TRUE"]
        if busy:
            n += 1
            running_here = f"conversation_id = ${n} AND status = 'running'"
            guards.append(f"NOT EXISTS (SELECT 1 FROM agent_runs WHERE {running_here})")
        if running:
            n += 2
            guards.append(
                f"(SELECT count(*) FROM agent_runs WHERE user_id = ${n - 1} AND status = 'running') < ${n}"
            )
        if windowed:
            n += 3
            guards.append(
                f"(SELECT count(*) FROM agent_runs WHERE user_id = ${n - 2} AND created_at > ${n - 1}) < ${n}"
            )
        sql = (
            f"INSERT INTO agent_runs ({', '.join(self._run_names)}) SELECT {', '.join(values)}"
            f" WHERE {' AND '.join(guards)}"
        )
        if self.postgres:
            sql += " RETURNING started_at"
        self._insert_sql[(busy, running, windowed)] = sql
        return sql

    def runs_ahead(self, run: AgentRun) -> Statement:
        if not self.postgres:
            return Statement(RUNS_AHEAD_SQLITE, (run.conversation_id, run.id))
        return Statement(RUNS_AHEAD, self._bind_ahead([run.conversation_id, run.started_at, run.id]))

    def run_outbox(self, run_id: str, retry: bool = False) -> Statement:
        """The outbox row of the run that ends, when its row names a webhook.
        On PostgreSQL the INSERT announces the webhook workers itself, only
        when it queues a row: whichever replica set the webhook, the ending
        one need not know it. On SQLite (one process) the caller announces
        it when the statement's rowcount says a row was queued."""
        row = outbox_row(run_id, "")
        keys = ("webhook_id", "state", "created_at", "next_attempt_at")
        args = [*self._bind_outbox([row[key] for key in keys]), run_id]
        sql = RUN_OUTBOX + SKIP_EXISTING if retry else RUN_OUTBOX
        if self.postgres:
            announce = announcing(WEBHOOKS, EMPTY_KEY)
            sql = f"WITH queued AS ({sql} RETURNING run_id) SELECT {announce} FROM queued"
        return Statement(sql, args)

    def finish_run(self, run_id: str, values: Mapping[str, Any], finished_at: datetime) -> Statement:
        """The run's end: ``values`` (its status, error, outcome) and when."""
        names = ("finished_at", *values)
        shape = self._finish.get(names)
        if shape is None:
            sets = ", ".join(f"{name} = ${n}" for n, name in enumerate(names, 1))
            sql = f"UPDATE agent_runs SET {sets} WHERE id = ${len(names) + 1}"
            shape = self._finish[names] = (sql, self._driver.binder(*[self._runs.c[n] for n in names]))
        sql, bind = shape
        return Statement(sql, [*bind([finished_at, *values.values()]), run_id])
