"""``python -m services.router export-feedback [--fixture PATH] [--since ISO]``:
appends the recorded "this skill was not relevant" feedback to the labelled
fixture as counter-examples (a rejected skill is a case of the test set),
so that ``fit-thresholds`` counts a false positive each time a rejected
skill would be applied to that request again.

Reads the router's own database (the service's settings: database URL or
SQLite file). Idempotent: an entry already in the fixture (same text and
rejected skill) is not added twice. Prints what it added."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from sqlmodel import col, select

from services.router.models import SkillFeedback
from services.router.settings import RouterSettings
from services.shared.db import create_engine, session_factory

DEFAULT_FIXTURE = Path("tests/fixtures/router/skill_requests.json")


def counter_entries(rows: Sequence[SkillFeedback]) -> list[dict[str, object]]:
    """Fixture entries for feedback rows, oldest first, one per (text, skill)."""
    entries: dict[tuple[str, str], dict[str, object]] = {}
    for row in sorted(rows, key=lambda r: r.create_time):
        text = row.request_text.strip()
        if text:
            entries.setdefault(
                (text, row.skill_name),
                {"kind": "counter", "lang": "", "text": text, "expected": None, "rejected": row.skill_name},
            )
    return list(entries.values())


def merge(fixture: dict[str, object], entries: Sequence[dict[str, object]]) -> list[dict[str, object]]:
    """Adds to ``fixture["requests"]`` the entries it lacks; returns those."""
    requests = fixture["requests"]
    assert isinstance(requests, list)
    known = {(r.get("text"), r.get("rejected")) for r in requests if r.get("kind") == "counter"}
    added = [e for e in entries if (e["text"], e["rejected"]) not in known]
    requests.extend(added)
    return added


async def feedback_rows(settings: RouterSettings, since: datetime | None) -> list[SkillFeedback]:
    engine = create_engine(
        settings.effective_database_url, prepared_statements=settings.database_prepared_statements
    )
    try:
        async with session_factory(engine)() as session:
            query = select(SkillFeedback)
            if since is not None:
                query = query.where(col(SkillFeedback.create_time) >= since)
            return list((await session.exec(query)).all())
    finally:
        await engine.dispose()


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m services.router export-feedback", description=__doc__)
    parser.add_argument("--fixture", type=Path, default=DEFAULT_FIXTURE)
    parser.add_argument("--since", type=datetime.fromisoformat, help="only feedback recorded from then on")
    args = parser.parse_args(argv)
    rows = asyncio.run(feedback_rows(RouterSettings(), args.since))
    fixture = json.loads(args.fixture.read_text(encoding="utf-8"))
    added = merge(fixture, counter_entries(rows))
    args.fixture.write_text(json.dumps(fixture, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(f"{len(rows)} feedback rows, {len(added)} new counter-examples in {args.fixture}")
    for entry in added:
        print(f"  + {entry['rejected']}: {entry['text']}")
