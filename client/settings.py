"""The command-line client's settings, read once by the command that needs
them: the environment (SWITCHBOARD_URL, SWITCHBOARD_TOKEN...) over a config
file (``~/.config/switchboard/config.toml``, or the file SWITCHBOARD_CONFIG
or ``--config`` names) over the defaults."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from services.shared.projects import MAX_PROJECT_ID_CHARS, PROJECT_ID

CONFIG_VARIABLE = "SWITCHBOARD_CONFIG"
# A project's id as the client takes it: "" (the personal project) or 1 to
# 128 letters, digits, ".", "_" and "-".
PROJECT_PATTERN = f"^$|{PROJECT_ID.pattern}"


class ClientSettings(BaseSettings):
    """SWITCHBOARD_URL, SWITCHBOARD_TOKEN, SWITCHBOARD_AGENT, SWITCHBOARD_PROJECT... The config
    file holds the same names in lower case, without the prefix
    (``url = "http://…"``, ``token = "…"``)."""

    model_config = SettingsConfigDict(env_prefix="SWITCHBOARD_", frozen=True, extra="ignore")

    # The gateway's base URL (what the launcher prints).
    url: str = "http://127.0.0.1:8080"
    # A bearer token of SWITCHBOARD_GATEWAY_TOKENS or the tokens file; "" for an open dev gateway.
    token: str = ""
    # The agent this client speaks for: the requester of its asks ("" = "user").
    agent: str = Field(default="", max_length=64)
    # The project the project-scoped commands and tools work in (notes,
    # context, live state, a chat run's memory); "" = the user's personal project.
    project: str = Field(default="", max_length=MAX_PROJECT_ID_CHARS, pattern=PROJECT_PATTERN)
    # Seconds to wait for the API; an ask's stream may stay quiet between events this long.
    timeout: float = Field(default=300.0, gt=0)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Earlier sources win: arguments, then the environment, then the file
        # (read only when the class names one: see load_settings).
        return init_settings, env_settings, TomlConfigSettingsSource(settings_cls)


def config_path(explicit: Path | None = None) -> Path:
    """The config file: ``explicit`` (``--config``), else SWITCHBOARD_CONFIG,
    else ``$XDG_CONFIG_HOME/switchboard/config.toml`` (``~/.config`` by default)."""
    if explicit is not None:
        return explicit
    if named := os.environ.get(CONFIG_VARIABLE):
        return Path(named)
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "switchboard" / "config.toml"


def load_settings(explicit: Path | None = None) -> ClientSettings:
    """The settings with the config file under the environment. A missing
    default file is no error; a file named on purpose must exist."""
    path = config_path(explicit)
    if not path.is_file():
        if explicit is not None or os.environ.get(CONFIG_VARIABLE):
            raise FileNotFoundError(f"config file {path} not found")
        return ClientSettings()

    class FileSettings(ClientSettings):
        model_config = SettingsConfigDict(**{**ClientSettings.model_config, "toml_file": path})

    return FileSettings()
