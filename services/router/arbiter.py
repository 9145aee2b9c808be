"""The grey-zone arbiter over a configured model: one closed question, the
grey candidates' names and descriptions in, one name or "none" out, then one
short sentence saying why. The router parses the first line strictly
(``parse_arbiter_answer``) and keeps the prompt, the raw answer and the
reason in the decision record; an error, a timeout or an answer that names
no candidate falls back as the Skill Router says. Never asked in offline
mode (the router does not allow arbitration for an offline request)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from services.router.skill_router import ArbiterPrompt
from services.shared.completion import ModelCompleter

SYSTEM = (
    "You route a user's request to at most one skill. You get the request and the candidate skills, "
    "each with its description; the request may be in any language. On the first line, answer with "
    "the name of the one skill that fits the request, exactly as written, or with none if no skill "
    "fits: the name or none only. On a second line, say why in one short sentence."
)


def question(request: str, candidates: Sequence[tuple[str, str]]) -> str:
    skills = "\n".join(f"- {name}: {' '.join(description.split())}" for name, description in candidates)
    names = ", ".join(name for name, _ in candidates)
    return f"Request:\n{request}\n\nSkills:\n{skills}\n\nAnswer with one of: {names}, none."


class ModelArbiter:
    def __init__(self, completer: ModelCompleter, timeout: float) -> None:
        self._completer = completer
        self._timeout = timeout
        self.name = completer.name

    def prompt(self, request: str, candidates: Sequence[tuple[str, str]]) -> ArbiterPrompt:
        return ArbiterPrompt(SYSTEM, question(request, candidates))

    async def arbitrate(self, prompt: ArbiterPrompt) -> str:
        async with asyncio.timeout(self._timeout):
            return await self._completer.complete(prompt.instructions, prompt.question)

    async def close(self) -> None:
        await self._completer.close()
