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

from services.shared.outbound_tls import sdk_context


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
    """A :class:`Completer` over the official SDK of the model's kind. The
    SDK is imported and its client built here, at start-up: the first
    question must not pay for them within its deadline."""

    def __init__(self, config: CompletionModel, environment: Mapping[str, str]) -> None:
        self.name = config.name
        self._config = config
        key = (environment.get(config.api_key_env, "") if config.api_key_env else "") or "unused"
        if config.kind == "openai":
            import openai

            self._openai = openai.AsyncOpenAI(
                base_url=config.base_url,
                api_key=key,
                max_retries=0,
                timeout=config.timeout,
                http_client=openai.DefaultAsyncHttpxClient(verify=sdk_context()),
            )
        else:
            import anthropic

            self._anthropic = anthropic.AsyncAnthropic(
                base_url=config.base_url,
                api_key=key,
                max_retries=0,
                timeout=config.timeout,
                http_client=anthropic.DefaultAsyncHttpxClient(verify=sdk_context()),
            )

    async def complete(self, system: str, user: str) -> str:
        config = self._config
        if config.kind == "openai":
            response = await self._openai.chat.completions.create(
                model=config.model,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                max_tokens=config.max_output_tokens,
                temperature=0,
            )
            return response.choices[0].message.content or "" if response.choices else ""
        message = await self._anthropic.messages.create(
            model=config.model,
            system=system,
            messages=[{"role": "user", "content": user}],
            max_tokens=config.max_output_tokens,
        )
        return "".join(block.text for block in message.content if block.type == "text")

    async def close(self) -> None:
        client = self._openai if self._config.kind == "openai" else self._anthropic
        await client.close()
