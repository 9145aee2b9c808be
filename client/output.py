"""What a command shows, in one of three shapes: a terminal (rich: colour, a
spinner, the answer as it streams), plain lines when stdout is not a
terminal (progress on stderr, results on stdout, for pipes and logs), or
JSON (``--json``: one JSON document per result on stdout, for scripts)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from client.api import ApiRefusal
from client.messages import say

# The refusals of a quota (HTTP 429), which have a sentence of their own.
QUOTA_REASONS = frozenset(
    {"ERROR_REASON_RATE_LIMITED", "ERROR_REASON_TOO_MANY_RUNS", "ERROR_REASON_QUOTA_EXCEEDED"}
)


class Output:
    def __init__(self, *, as_json: bool = False, stdout: TextIO | None = None, stderr: TextIO | None = None):
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        self.json = as_json
        self.live = not as_json and self.stdout.isatty()
        # A terminal gets colours and a spinner; plain output never holds an escape sequence.
        self.console = Console(file=self.stdout, highlight=False, force_terminal=self.live or None)
        self.errors = Console(file=self.stderr, highlight=False, soft_wrap=True)
        if not self.live:
            self.console = Console(file=self.stdout, highlight=False, no_color=True, soft_wrap=True)

    def document(self, value: object) -> None:
        """One JSON document on stdout."""
        self.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")
        self.stdout.flush()

    def line(self, text: str, style: str = "") -> None:
        """A line of a result on stdout (markup-free: the text is shown as is)."""
        if self.live:
            self.console.print(escape(text), style=style or None)
        else:
            self.stdout.write(text + "\n")
            self.stdout.flush()

    def progress(self, text: str, style: str = "dim") -> None:
        """A line about what is happening: on the terminal, dimmed; else on stderr."""
        if self.json:
            return
        if self.live:
            self.console.print(escape(text), style=style, soft_wrap=True)
        else:
            self.stderr.write(text + "\n")
            self.stderr.flush()

    def table(self, columns: Sequence[str], rows: Sequence[Sequence[str]], title: str = "") -> None:
        """Rows under their column names: a rich table on a terminal, tab-separated lines otherwise."""
        if self.live:
            table = Table(*columns, title=title or None, title_justify="left")
            for row in rows:
                table.add_row(*(escape(cell) for cell in row))
            self.console.print(table)
            return
        for row in rows:
            self.stdout.write("\t".join(row) + "\n")
        self.stdout.flush()

    def refusal(self, refusal: ApiRefusal) -> None:
        """The API's error, as the API said it: its body with --json, else one line on stderr."""
        if self.json:
            self.stderr.write(json.dumps(refusal.as_dict(), ensure_ascii=False) + "\n")
        elif refusal.reason in QUOTA_REASONS:
            # A quota: what it is and when to retry in the user's language, then the API's words.
            wait = say("retry in", seconds=refusal.retry_after) if refusal.retry_after is not None else ""
            self.error(f"{say(refusal.reason, wait=wait)} ({refusal.message}; HTTP {refusal.status})")
        else:
            self.error(f"{refusal.code}: {refusal.message} (HTTP {refusal.status})")
            if refusal.status == 403:
                # The API's reason says what was refused; this says what to do about it.
                self.errors.print(escape(say("forbidden")))

    def error(self, text: str) -> None:
        if self.json:
            self.stderr.write(json.dumps({"error": {"message": text}}, ensure_ascii=False) + "\n")
        else:
            self.errors.print(f"[bold red]{say('error')}[/] {escape(text)}")


def short(value: Any, width: int = 60) -> str:
    """One line of at most ``width`` characters."""
    text = " ".join(str(value).split())
    return text if len(text) <= width else text[: width - 1] + "…"
