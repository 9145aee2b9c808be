"""Instruction layers and the offline model, without any service."""

from __future__ import annotations

from services.engine import instructions
from services.engine.providers.base import TextChunk, UsageChunk
from services.engine.providers.offline import OfflineProvider
from switchboard.memory.v1 import memory_pb2
from switchboard.router.v1 import router_pb2


def test_layers_come_in_the_fixed_order_with_presence_and_size() -> None:
    note = memory_pb2.RecalledNote(note=memory_pb2.Note(title="Reports", body="Fridays"))
    skill = router_pb2.ChosenSkill(name="weekly-status-report", body="Use three sections.")
    layers = instructions.assemble("", [note], [skill], "")
    assert [layer.key for layer in layers] == [
        "product_system",
        "instruction_page",
        "memory",
        "skills",
        "working_context",
    ]
    assert [layer.present for layer in layers] == [True, False, True, True, False]
    system = instructions.to_messages(layers, "hi")[0].content
    # The product system comes first and states the precedence rules.
    assert system.startswith(instructions.PRODUCT_SYSTEM) and "always win" in system
    assert system.index("# Memory") < system.index("## Skill: weekly-status-report")


async def test_the_offline_model_is_deterministic_and_counts_tokens() -> None:
    provider = OfflineProvider()
    layers = instructions.assemble(
        "", [memory_pb2.RecalledNote(note=memory_pb2.Note(title="Reports", body="Fridays"))], [], ""
    )
    messages = instructions.to_messages(layers, "When are reports due?")

    async def answer() -> tuple[str, UsageChunk]:
        chunks = [chunk async for chunk in provider.stream("m1", messages)]
        usage = chunks[-1]
        assert isinstance(usage, UsageChunk)
        return "".join(c.text for c in chunks if isinstance(c, TextChunk)), usage

    first, usage = await answer()
    second, _ = await answer()
    assert first == second
    assert "When are reports due?" in first and "Reports: Fridays" in first and "m1" in first
    assert usage.tokens_in > 0 and usage.tokens_out == len(first.split(" "))
