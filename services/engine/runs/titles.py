"""Titles an untitled conversation after its first complete exchange
(threads never overwrites a manual title): at once with the cut of the
request, then, when a real model answered, with a short title a model
writes in the run's language, in the background so the run's final never
waits for it. Best effort: a run does not fail for want of a title."""

from __future__ import annotations

import asyncio
import logging

from services.engine import instructions
from services.engine.collaborators import Collaborators
from services.engine.providers.base import LLMProvider, TextChunk
from services.engine.runs.requests import RunLimits
from services.shared.errors import DomainError
from switchboard.router.v1 import router_pb2

log = logging.getLogger(__name__)


class Titles:
    def __init__(
        self, collaborators: Collaborators, providers: dict[str, LLMProvider], limits: RunLimits
    ) -> None:
        self._collab = collaborators
        self._providers = providers
        self._limits = limits
        # Titles a model is still writing: they outlive the run's final.
        self._background: set[asyncio.Task[None]] = set()

    async def after_first_exchange(
        self,
        user: str,
        conversation_id: str,
        text: str,
        needed: bool,
        answered: tuple[LLMProvider, router_pb2.ModelOption, str] | None = None,
        language: str = "en",
    ) -> None:
        """``language``: the run's; a model's title is asked for in it."""
        if not needed:
            return
        try:
            await self._collab.set_auto_title(user, conversation_id, text)
        except DomainError as exc:
            log.warning("could not title conversation %s: %s", conversation_id, exc.message)
            return
        if answered is None or answered[0].kind == "offline":
            return
        titler = self._titler(*answered[:2])
        task = asyncio.create_task(
            self._model_title(titler, user, conversation_id, text, answered[2], language)
        )
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _titler(
        self, provider: LLMProvider, model: router_pb2.ModelOption
    ) -> tuple[LLMProvider, router_pb2.ModelOption]:
        """The configured title model, else the run's own."""
        name, _, title_model = self._limits.title_model.partition("/")
        if title_model and name in self._providers:
            return self._providers[name], router_pb2.ModelOption(provider=name, model=title_model)
        return provider, model

    async def _model_title(
        self,
        titler: tuple[LLMProvider, router_pb2.ModelOption],
        user: str,
        conversation_id: str,
        request: str,
        answer: str,
        language: str,
    ) -> None:
        provider, model = titler
        messages = instructions.title_messages(request, answer, language)
        try:
            async with asyncio.timeout(self._limits.title_timeout_seconds):
                parts = [
                    chunk.text
                    async for chunk in provider.stream(model.model, messages)
                    if isinstance(chunk, TextChunk)
                ]
            title = instructions.clean_title("".join(parts))
            if title:
                await self._collab.set_auto_title(user, conversation_id, request, title=title)
        except (DomainError, TimeoutError) as exc:
            # The cut of the request stays the title; nothing else depends on it.
            log.warning("the title model did not title conversation %s: %s", conversation_id, exc)

    async def close(self) -> None:
        """Stops the titles still being written."""
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
