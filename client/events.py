"""What a client says of a run's progress events, in one place for the MCP
tools' progress notifications and the terminal client's progress lines."""

from __future__ import annotations

from collections.abc import Callable

from client.api import SseEvent


def plain_step(label: str, status: str) -> str:
    return f"{label}: {status}"


def describe(event: SseEvent, step: Callable[[str, str], str] = plain_step) -> str | None:
    """A line for a progress event (``step`` words a step from its label and
    status); None for the answer and for events that say nothing new."""
    data = event.data
    if event.kind == "run_started":
        return "run started"
    if event.kind == "step":
        return step(str(data.get("label") or data.get("key", "")), str(data.get("status", "")))
    if event.kind == "action":
        return f"tool {data.get('tool', '')}: {data.get('status', '')}"
    if event.kind == "skill_used":
        return f"skill {data.get('name', '')}"
    if event.kind == "notice":
        return str(data.get("message", ""))
    return None
