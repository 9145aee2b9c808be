"""One closed question to a model, answered in one piece: how the services
other than the engine use a model (memory's summary model, the router's
grey-zone arbiter). No streaming, no tools, no retries: the caller has a
deterministic path to fall back on and a deadline to keep.

Configured as a JSON object (``{kind, base_url, model, api_key_env,
timeout, max_output_tokens}``), checked at start-up; empty means no model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class CompletionModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # "openai": any OpenAI-compatible chat completions server (".../v1");
    # "anthropic": the Messages API.
    kind: Literal["openai", "anthropic"]
    base_url: str = Field(min_length=1)
    model: str = Field(min_length=1)
    # The environment variable holding the key: keys never sit in settings.
    api_key_env: str = ""
    timeout: float = Field(default=20.0, gt=0, le=600)
    max_output_tokens: int = Field(default=800, gt=0, le=32_000)

    @property
    def name(self) -> str:
        return f"model:{self.kind}/{self.model}"


def parse_completion_model(text: str, setting: str) -> CompletionModel | None:
    """The configured model, None when ``text`` is empty; ValueError naming
    ``setting`` and the bad field otherwise."""
    if not text.strip():
        return None
    try:
        return CompletionModel.model_validate_json(text)
    except ValidationError as exc:
        raise ValueError(f"{setting} is not a valid model: {exc}") from exc


class Completer(Protocol):
    name: str

    async def complete(self, system: str, user: str) -> str: ...


class ModelCompleter:
    """A :class:`Completer` over the official SDK of the model's kind."""

    def __init__(self, config: CompletionModel, environment: Mapping[str, str]) -> None:
        self.name = config.name
        self._config = config
        self._key = environment.get(config.api_key_env, "") if config.api_key_env else ""

    async def complete(self, system: str, user: str) -> str:
        config = self._config
        # Imported on first use: a service without a model never loads an SDK.
        if config.kind == "openai":
            import openai

            async with openai.AsyncOpenAI(
                base_url=config.base_url, api_key=self._key or "unused", max_retries=0, timeout=config.timeout
            ) as client:
                response = await client.chat.completions.create(
                    model=config.model,
                    messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                    max_tokens=config.max_output_tokens,
                    temperature=0,
                )
            return response.choices[0].message.content or "" if response.choices else ""
        import anthropic

        async with anthropic.AsyncAnthropic(
            base_url=config.base_url, api_key=self._key or "unused", max_retries=0, timeout=config.timeout
        ) as anthropic_client:
            message = await anthropic_client.messages.create(
                model=config.model,
                system=system,
                messages=[{"role": "user", "content": user}],
                max_tokens=config.max_output_tokens,
            )
        return "".join(block.text for block in message.content if block.type == "text")
