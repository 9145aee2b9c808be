"""Instruction layers of a run, in the fixed order of seed 002 §7.1: product
system → active instruction page → memory → skills of the run → working
context. Each layer is logged (present, size) in the run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from services.engine.providers import ChatMessage
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

    @property
    def present(self) -> bool:
        return bool(self.text)


def instruction_page_layer(title: str, body: str, budget: int) -> tuple[str, bool]:
    """The page as a layer, cut at the last line break within ``budget``
    characters (at ``budget`` if there is none); whether it was cut."""
    text = body.strip()
    truncated = len(text) > budget
    if truncated:
        cut = text.rfind("\n", 0, budget)
        text = text[: cut if cut > 0 else budget].rstrip()
    return f'# Instructions from the user\'s page "{title}"\n{text}', truncated


def assemble(
    instruction_page: str,
    memory: Sequence[memory_pb2.RecalledNote],
    skills: Sequence[router_pb2.ChosenSkill],
    working_context: str,
) -> list[Layer]:
    memory_text = "\n".join(f"- [memory] {n.note.title}: {n.note.body}" for n in memory)
    skills_text = "\n\n".join(f"## Skill: {s.name}\n{s.body}" for s in skills)
    return [
        Layer("product_system", PRODUCT_SYSTEM),
        Layer("instruction_page", instruction_page),
        Layer("memory", f"# Memory\n{memory_text}" if memory_text else ""),
        Layer("skills", skills_text),
        Layer("working_context", working_context),
    ]


def to_messages(layers: Sequence[Layer], user_message: str) -> list[ChatMessage]:
    system = "\n\n".join(layer.text for layer in layers if layer.present)
    return [ChatMessage("system", system), ChatMessage("user", user_message)]
