"""The limits of a run's context (switchboard.engine.v1.RunContext): the page
the user is on and the blocks they selected. The gateway checks a body
against them before any call, the engine checks every StartRun against them
again; one table so the two always agree."""

from __future__ import annotations

import re

MAX_PAGE_ID_CHARS = 200
MAX_PAGE_TITLE_CHARS = 200
# A page's type: lower case, as the page names it ("chat", "meeting_notes").
PAGE_TYPE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
MAX_SELECTIONS = 10
MAX_SELECTION_CHARS = 4000
MAX_SELECTIONS_TOTAL_CHARS = 12_000
MAX_BLOCK_ID_CHARS = 200
