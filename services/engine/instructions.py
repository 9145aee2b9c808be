"""Instruction layers of a run, in their fixed order: product
system → active instruction page → memory → skills of the run → working
context (the project context, the live state, then what the run adds: pages
the user mentions, or an asked agent's persona, handoff and thread; last, the
run's context: the page the user is on and what they selected, see
services.engine.runs.run_context). Each layer is logged (present, size, why
it is absent or cut) in the run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from services.engine import texts
from services.engine.providers.base import ChatMessage
from services.shared.language import SUPPORTED
from switchboard.memory.v1 import memory_pb2
from switchboard.router.v1 import router_pb2

PRODUCT_SYSTEM = (
    "You are the user's personal agent in Switchboard. Answer helpfully and concisely.\n"
    "Precedence: these product rules always win. A skill's instructions win over the "
    "instruction page for the skill's own task."
)


@dataclass(frozen=True)
class Layer:
    key: str
    text: str
    # Items it holds (recalled notes, live state entries), and why it is
    # absent or cut, for the run record.
    items: int = 0
    note: str = ""

    @property
    def present(self) -> bool:
        return bool(self.text)

    def record(self, count: Callable[[str], int]) -> dict[str, Any]:
        """The layer as logged in the run's ``layers``."""
        return {
            "key": self.key,
            "present": self.present,
            "size_chars": len(self.text),
            "size_tokens": count(self.text),
            "item_count": self.items,
            "note": self.note,
        }


def bounded(key: str, heading: str, body: str, budget: int, items: int = 0) -> Layer:
    """A working-context layer cut at a line break within ``budget``
    characters; the record says when it was cut."""
    text, cut = cut_at_line(body, budget)
    if not text:
        return Layer(key, "", items)
    note = f"cut to its budget of {budget} characters" if cut else ""
    return Layer(key, f"{heading}\n{text}", items, note)


def live_state_text(entries: Sequence[memory_pb2.LiveStateEntry]) -> str:
    lines = []
    for entry in entries:
        until = entry.expire_time.ToDatetime().strftime("%H:%M UTC") if entry.HasField("expire_time") else ""
        detail = f" ({entry.detail})" if entry.detail else ""
        lines.append(f"- {entry.agent_id}: {entry.activity}{detail}" + (f" until {until}" if until else ""))
    return "\n".join(lines)


def cut_at_line(text: str, budget: int) -> tuple[str, bool]:
    """``text`` cut at the last line break within ``budget`` characters (at
    ``budget`` if there is none); whether it was cut."""
    text = text.strip()
    truncated = len(text) > budget
    if truncated:
        cut = text.rfind("\n", 0, budget)
        text = text[: cut if cut > 0 else budget].rstrip()
    return text, truncated


def instruction_page_layer(title: str, body: str, budget: int) -> tuple[str, bool]:
    """The page as a layer, cut to ``budget``; whether it was cut."""
    text, truncated = cut_at_line(body, budget)
    return f'# Instructions from the user\'s page "{title}"\n{text}', truncated


def assemble(
    instruction_page: str,
    memory: Sequence[memory_pb2.RecalledNote],
    skills: Sequence[router_pb2.ChosenSkill],
    working_context: str,
    context: Sequence[Layer] = (),
    memory_note: str = "",
    product_system: str = PRODUCT_SYSTEM,
    client: Sequence[Layer] = (),
) -> list[Layer]:
    """The layers in their fixed order; ``context`` holds the working
    context's own layers (project context, live state) that come before
    ``working_context``; ``client`` the client application's instructions,
    right after the user's instruction page (a run whose request has none
    has no such layer)."""
    memory_text = "\n".join(f"- [memory] {n.note.title}: {n.note.body}" for n in memory)
    skills_text = "\n\n".join(f"## Skill: {s.name}\n{s.body}" for s in skills)
    return [
        Layer("product_system", product_system),
        Layer("instruction_page", instruction_page),
        *client,
        Layer("memory", f"# Memory\n{memory_text}" if memory_text else "", len(memory), memory_note),
        Layer("skills", skills_text, len(skills)),
        *context,
        Layer("working_context", working_context),
    ]


CLIENT_HEADING = "# Instructions from the user's client application"


def client_layer(text: str, budget: int) -> list[Layer]:
    """The system messages of an OpenAI-compatible request as a layer, cut
    at a line break within ``budget`` characters; none when empty."""
    return [bounded("client_instructions", CLIENT_HEADING, text, budget)] if text.strip() else []


def system_text(layers: Sequence[Layer], *extra: str) -> str:
    return "\n\n".join([*(layer.text for layer in layers if layer.present), *(e for e in extra if e)])


def to_messages(
    layers: Sequence[Layer],
    user_message: str,
    history: Sequence[ChatMessage] = (),
    summary: str = "",
) -> list[ChatMessage]:
    """The prompt: the layers (and the conversation's summary) as the system
    message, the earlier turns, then the current message."""
    return [ChatMessage("system", system_text(layers, summary)), *history, ChatMessage("user", user_message)]


# The title model's instructions, by language: the title comes in the run's
# language (services.engine.texts).
TITLE_SYSTEMS = {language: texts.say(language, "title.system") for language in SUPPORTED}
TITLE_SYSTEM = TITLE_SYSTEMS["en"]
# The most of the first answer a title model reads.
TITLE_ANSWER_CHARS = 1500


def title_messages(request: str, answer: str, language: str = "en") -> list[ChatMessage]:
    """What the title model gets, in the run's ``language``."""
    exchange = texts.say(
        language, "title.exchange", request=request.strip(), answer=answer.strip()[:TITLE_ANSWER_CHARS]
    )
    return [ChatMessage("system", texts.say(language, "title.system")), ChatMessage("user", exchange)]


def clean_title(text: str) -> str:
    """The model's title on one line, without the quotes or the "Title:"
    models like to add; threads bounds its length."""
    line = " ".join(text.split())
    if line.lower().startswith(("title:", "titre :", "titre:")):
        line = line.split(":", 1)[1].strip()
    return line.strip("\"'«»“”*# ").rstrip(".").strip()
