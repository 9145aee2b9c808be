"""A run's events as the terminal client shows them: the steps, skills,
tool calls and notices as progress (under a spinner on a terminal), the
answer as it streams, then the model and tokens. One view serves ``chat``,
``ask`` and ``runs tail``; it also keeps what a ``--json`` result needs."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.status import Status

from client.api import SseEvent
from client.events import describe
from client.messages import say
from client.output import Output

# A failed run's status, by its error event's code (as the run record says it).
ENDINGS = {"CANCELLED": "cancelled", "BUDGET_EXCEEDED": "budget_exceeded"}
STEP_MARKS = {"started": "…", "completed": "✓", "failed": "✗"}


def marked_step(label: str, status: str) -> str:
    return f"{STEP_MARKS.get(status, status)} {label}"


class RunView:
    """Feed it a run's events in order (``show``); ``close`` once the stream ends."""

    def __init__(self, out: Output, *, json_lines: bool = False) -> None:
        self.out = out
        self.json_lines = json_lines  # --json of `runs tail`: each event as it comes
        self.run_id = ""
        self.conversation_id = ""
        self.last_id = ""
        self.answer = ""
        self.final: dict[str, Any] = {}
        self.failure: dict[str, Any] = {}
        self._written = False  # some of the answer is on stdout
        self._line_open = False  # the answer's current line has no newline yet
        self._status: Status | None = None

    @property
    def ended(self) -> bool:
        return bool(self.final or self.failure)

    def show(self, event: SseEvent) -> None:
        data = event.data
        if event.id:
            self.last_id = event.id
        self.run_id = self.run_id or str(data.get("run_id", ""))
        if event.kind == "run_started":
            self.conversation_id = str(data.get("conversation_id", ""))
        if self.json_lines:
            self.out.document({"id": event.id, "event": event.kind, "data": data})
        if event.kind == "delta":
            self._answer(str(data.get("text", "")))
        elif event.kind == "reasoning" and self.out.live:
            self._progress(str(data.get("text", "")), style="italic dim")
        elif event.kind == "final":
            self.final = data
            text = str(data.get("text", ""))
            if not self._written and text:  # a provider that sent no deltas
                self._answer(text)
            self.answer = text or self.answer
            self._finish_answer()
            usage = data.get("usage") or {}
            tokens = {"tokens_in": usage.get("tokens_in", 0), "tokens_out": usage.get("tokens_out", 0)}
            self._progress(say("footer", model=data.get("model", ""), run=self.run_id, **tokens))
        elif event.kind == "error" and not event.id:
            # The gateway lost the run's stream; the run may go on (``runs tail`` resumes).
            self._progress(f"! {data.get('message', '')}", style="yellow")
        elif event.kind == "error":
            self._finish_answer()
            self._stop_spinner()
            self.failure = data
            self.out.error(f"{data.get('code', '')}: {data.get('message', '')}")
        elif event.kind == "step" and data.get("status") == "started":
            # A step under way is the spinner's label; the line comes when it ends.
            if not self._written:
                self._spin(str(data.get("label") or data.get("key", "")))
        elif event.kind == "run_started":
            self._progress(say("run", id=self.run_id))
        elif event.kind == "proposal":
            self._progress(say("proposal", page=data.get("page_title", ""), summary=data.get("summary", "")))
        else:
            line = describe(event, marked_step)
            if event.kind == "notice" and line is not None:
                line = f"! {line or data.get('code', '')}"
            if line is not None:
                self._progress(line, style="red" if data.get("status") == "failed" else "dim")
            if event.kind == "notice" and data.get("code") == "NOTE_PROPOSED":
                # The proposed note waits for a member's review.
                self._progress(f"  {say('review proposals')}")

    def close(self) -> None:
        self._finish_answer()
        self._stop_spinner()

    def result(self) -> dict[str, Any]:
        """What --json prints for an ask or a chat message."""
        usage = self.final.get("usage") or {}
        code = str(self.failure.get("code", ""))
        return {
            "run_id": self.run_id,
            "conversation_id": self.conversation_id,
            "status": self.final.get("status", "done") if self.final else ENDINGS.get(code, "failed"),
            "answer": self.answer,
            "model": self.final.get("model", ""),
            "provider": self.final.get("provider", ""),
            "usage": {"tokens_in": usage.get("tokens_in", 0), "tokens_out": usage.get("tokens_out", 0)},
            "error": self.failure or None,
        }

    def _answer(self, text: str) -> None:
        self.answer += text
        if self.out.json or not text:
            return
        self._stop_spinner()
        if self.out.live:
            # soft_wrap: the terminal wraps the answer; no line break is added to it.
            self.out.console.print(escape(text), end="", style="bold", soft_wrap=True)
        else:
            self.out.stdout.write(text)
            self.out.stdout.flush()
        self._written = True
        self._line_open = not text.endswith("\n")

    def _finish_answer(self) -> None:
        if self._line_open and not self.out.json:
            if self.out.live:
                self.out.console.print()
            else:
                self.out.stdout.write("\n")
                self.out.stdout.flush()
        self._line_open = False

    def _progress(self, text: str, style: str = "dim") -> None:
        if self._line_open and self.out.live:  # progress in the middle of the answer: a line of its own
            self.out.console.print()
            self._line_open = False
        self.out.progress(text, style)

    def _spin(self, label: str) -> None:
        if not self.out.live:
            return
        if self._status is None:
            self._status = self.out.console.status(escape(label), spinner="dots")
            self._status.start()
        else:
            self._status.update(escape(label))

    def _stop_spinner(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
