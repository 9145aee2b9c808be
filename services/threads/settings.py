from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from services.shared.settings import ServiceSettings


class ThreadsSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="SWITCHBOARD_THREADS_", frozen=True, extra="ignore")

    service_name: str = "threads"
    port: int = 50053
    # Longest entry content accepted, in characters.
    max_entry_chars: int = 200_000
