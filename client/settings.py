"""The command-line client's settings, from the environment, read once by
the command that needs them."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ClientSettings(BaseSettings):
    """SWITCHBOARD_URL, SWITCHBOARD_TOKEN, SWITCHBOARD_AGENT..."""

    model_config = SettingsConfigDict(env_prefix="SWITCHBOARD_", frozen=True, extra="ignore")

    # The gateway's base URL (what the launcher prints).
    url: str = "http://127.0.0.1:8080"
    # A bearer token of SWITCHBOARD_GATEWAY_TOKENS or the tokens file; "" for an open dev gateway.
    token: str = ""
    # The agent this client speaks for: the requester of its asks ("" = "user").
    agent: str = Field(default="", max_length=64)
    # Seconds to wait for the API; an ask's stream may stay quiet between events this long.
    timeout: float = Field(default=300.0, gt=0)
