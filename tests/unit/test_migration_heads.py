"""A start-up tells a database already at the newest revision without
Alembic: from the version table and the revision files' own lines. Those
heads are the ones Alembic finds, for every service and for branched and
merged histories, and a start that finds nothing to do never loads Alembic."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

from services.shared.migrations import heads

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("service", ["engine", "threads", "memory", "router"])
def test_each_services_heads_are_alembics(service: str) -> None:
    folder = ROOT / "services" / service / "migrations"
    assert heads(folder) == frozenset(ScriptDirectory(str(folder)).get_heads())
    assert len(heads(folder)) == 1


def _revision(folder: Path, name: str, down: str, annotated: bool = False) -> None:
    revision = f'revision: str = "{name}"' if annotated else f'revision = "{name}"'
    (folder / "versions" / f"{name}.py").write_text(
        f'"""{name}."""\n\n{revision}\ndown_revision = {down}\nbranch_labels = None\ndepends_on = None\n\n'
        "def upgrade() -> None:\n    pass\n\n\ndef downgrade() -> None:\n    pass\n",
        encoding="utf-8",
    )


def _folder(tmp_path: Path) -> Path:
    (tmp_path / "versions").mkdir(parents=True)
    (tmp_path / "script.py.mako").write_text("")
    return tmp_path


def test_a_branched_then_merged_history_has_alembics_heads(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "branched")
    _revision(folder, "base", "None")
    _revision(folder, "left", '"base"')
    _revision(folder, "right", '"base"', annotated=True)
    assert heads(folder) == frozenset(ScriptDirectory(str(folder)).get_heads()) == {"left", "right"}
    merged = _folder(tmp_path / "merged")
    for path in (folder / "versions").glob("*.py"):
        (merged / "versions" / path.name).write_text(path.read_text())
    _revision(merged, "merge", '("left", "right")')
    assert heads(merged) == frozenset(ScriptDirectory(str(merged)).get_heads()) == {"merge"}


def test_a_start_at_the_newest_revision_does_not_load_alembic(tmp_path: Path) -> None:
    database = tmp_path / "threads.db"
    code = (
        "import asyncio, sys; from pathlib import Path; "
        "from services.shared.db import create_engine; "
        "from services.shared.migrations import upgrade_to_head; "
        f"engine = create_engine('sqlite+aiosqlite:///{database}'); "
        f"asyncio.run(upgrade_to_head(engine, Path('{ROOT}/services/threads/migrations'), 'threads')); "
        "print('alembic' in sys.modules)"
    )
    run = [sys.executable, "-c", code]
    first = subprocess.run(run, capture_output=True, text=True, cwd=ROOT, check=True)
    assert first.stdout.strip() == "True"  # a new database: Alembic builds it
    again = subprocess.run(run, capture_output=True, text=True, cwd=ROOT, check=True)
    assert again.stdout.strip() == "False"  # at head: the version table tells
