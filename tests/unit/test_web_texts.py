"""The page says every notice, run error and handoff heading in French and
English: each notice code the engine can emit has its sentence in
gateway/static/js/notices.js (whose French the translation check requires),
and the page knows memory's handoff section headings."""

from __future__ import annotations

import re
from pathlib import Path

from services.memory.handoff.domain import SECTION_TITLES

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "services/engine"
NOTICES_JS = (ROOT / "gateway/static/js/notices.js").read_text()
FR_JS = (ROOT / "gateway/static/js/fr.js").read_text()
# Upper-case literals of the engine that are not codes: environment variables.
NOT_CODES = re.compile(r"^(SWITCHBOARD_|OTEL_)|^(PATH|HOME|LANG|LC_ALL|TMPDIR|USER)$")


def _table(name: str) -> set[str]:
    body = re.search(rf"export const {name} = \{{(.*?)\n\}};", NOTICES_JS, re.S)
    assert body, f"{name} not found in notices.js"
    return set(re.findall(r"^  ([A-Z][A-Z_]+):", body.group(1), re.M))


def engine_codes() -> set[str]:
    # Every upper-case literal of the engine, but the names a module exports.
    sources = (re.sub(r"__all__ = \[.*?\]", "", p.read_text(), flags=re.S) for p in ENGINE.rglob("*.py"))
    literals = {code for text in sources for code in re.findall(r'"([A-Z][A-Z_]{4,})"', text)}
    return {code for code in literals if not NOT_CODES.search(code)}


def test_every_code_the_engine_emits_has_a_sentence_on_the_page() -> None:
    codes = engine_codes()
    assert {"MEMORY_UNAVAILABLE", "CANCELLED", "PROVIDER_SWITCHED"} <= codes  # the scan sees the engine
    missing = codes - _table("NOTICE_TEXT") - _table("ERROR_TEXT")
    assert not missing, f"notice or error codes with no sentence in notices.js: {sorted(missing)}"


def test_the_page_knows_every_handoff_heading_and_translates_it() -> None:
    listed = re.search(r"export const HANDOFF_HEADINGS = \[(.*?)\];", NOTICES_JS, re.S)
    assert listed
    assert tuple(re.findall(r'tLater\("([^"]+)"\)', listed.group(1))) == SECTION_TITLES
    french = {"Objectif courant", "Demandes actives par demandeur", "Décisions récentes", "Blocages"}
    assert all(f'"{heading}"' in FR_JS for heading in french)
