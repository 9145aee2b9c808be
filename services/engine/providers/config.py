"""The configured providers' settings (``SWITCHBOARD_ENGINE_PROVIDERS_JSON``),
validated: a leaf module, so each provider reads its entry without importing
the registry that builds them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from services.shared.outbound_tls import sdk_context


class CliEvents(BaseModel):
    """Where a CLI's JSON-lines events keep what the provider needs: dotted
    paths into an event (an integer step indexes a list)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type_field: str = "type"
    # Event type -> path of the text delta it carries.
    text: dict[str, str] = Field(default_factory=lambda: {"text": "text"})
    # Looked for in every event; the last one seen is the session.
    session_id: str = "session_id"
    tokens_in: str = "usage.input_tokens"
    tokens_out: str = "usage.output_tokens"


class ProviderConfig(BaseModel):
    """One configured provider endpoint (``SWITCHBOARD_ENGINE_PROVIDERS_JSON``).
    A model of the router's catalog names its provider by ``name``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64)
    kind: Literal["openai", "anthropic", "cli"]
    # OpenAI-compatible: ".../v1" (OpenAI, Ollama, vLLM, llama.cpp server...).
    base_url: str = ""
    # The environment variable holding the key: keys never sit in config files.
    api_key_env: str = ""
    # Seconds without a byte from the provider before the attempt fails.
    timeout: float = Field(default=60.0, gt=0)
    max_output_tokens: int = Field(default=4096, gt=0)

    # CLI (kind "cli"): the argv template; see services/engine/providers/cli.py.
    command: list[str] = Field(default_factory=list)
    context_strategy: Literal["convention_file", "flag", "stdin", "env"] = "convention_file"
    convention_file_name: str = "AGENTS.md"
    context_flag: str = ""
    context_env: str = ""
    resume_args: list[str] = Field(default_factory=list)
    output: Literal["jsonl", "text"] = "jsonl"
    events: CliEvents = Field(default_factory=CliEvents)
    # Text output: a regex whose first group is the session id, on stderr.
    session_pattern: str = ""
    # The only environment variables the CLI inherits (its own key among them).
    pass_env: list[str] = Field(default_factory=lambda: ["PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER"])

    @model_validator(mode="after")
    def _check_kind(self) -> Self:
        if self.kind != "cli":
            if not self.base_url:
                raise ValueError(f"provider {self.name!r}: base_url is required")
            return self
        check_cli_config(self)
        return self


_CONFIGS = TypeAdapter(list[ProviderConfig])


def parse_provider_configs(text: str) -> list[ProviderConfig]:
    """Parses and checks the configured providers; ValueError when they cannot work."""
    configs = _CONFIGS.validate_json(text or "[]")
    names = [config.name for config in configs]
    if "offline" in names or len(set(names)) != len(names):
        raise ValueError(f"provider names must be unique and not 'offline': {names}")
    return configs


# The placeholders a CLI provider's command and resume arguments may hold.
PLACEHOLDER = re.compile(r"\{(\w+)\}")
_COMMAND_NAMES = {"model", "prompt", "context_file", "run_dir"}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_cli_config(config: ProviderConfig) -> None:
    """ValueError when a ``cli`` provider's configuration cannot work."""
    name = config.name
    if not config.command or not config.command[0]:
        raise ValueError(f"provider {name!r}: command must name an executable")
    strategy = config.context_strategy
    allowed = set(_COMMAND_NAMES)
    if strategy not in ("convention_file", "flag"):
        allowed.discard("context_file")
    for part, names in ((config.command, allowed), (config.resume_args, allowed | {"session_id"})):
        for arg in part:
            unknown = set(PLACEHOLDER.findall(arg)) - names
            if unknown:
                raise ValueError(f"provider {name!r}: unknown placeholder(s) {sorted(unknown)} in {arg!r}")
    if config.resume_args and not any("{session_id}" in arg for arg in config.resume_args):
        raise ValueError(f"provider {name!r}: resume_args must contain {{session_id}}")
    file_name = config.convention_file_name
    if strategy == "convention_file" and (not file_name or "/" in file_name or file_name in (".", "..")):
        raise ValueError(f"provider {name!r}: convention_file_name must be a plain file name")
    if (
        strategy == "flag"
        and not config.context_flag
        and not any("{context_file}" in a for a in config.command)
    ):
        raise ValueError(f"provider {name!r}: the flag strategy needs context_flag or {{context_file}}")
    if strategy == "env" and not _ENV_NAME.match(config.context_env):
        raise ValueError(f"provider {name!r}: the env strategy needs a variable name in context_env")
    if config.session_pattern:
        try:
            groups = re.compile(config.session_pattern).groups
        except re.error as exc:
            raise ValueError(f"provider {name!r}: session_pattern: {exc}") from exc
        if groups < 1:
            raise ValueError(f"provider {name!r}: session_pattern needs a group for the session id")


def sdk_client_options(
    config: ProviderConfig, api_key: str, http_client: Callable[..., Any]
) -> dict[str, Any]:
    """What an API provider's SDK client is built with: the endpoint, no
    retries of its own (the engine retries and reports attempts), the
    provider's timeout, and the outbound TLS trust. Local servers (Ollama...)
    accept any key; the SDKs insist on one."""
    return {
        "base_url": config.base_url,
        "api_key": api_key or "unused",
        "max_retries": 0,
        "timeout": config.timeout,
        "http_client": http_client(verify=sdk_context()),
    }
