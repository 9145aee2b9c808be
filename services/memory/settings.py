from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from services.shared.settings import ServiceSettings


class MemorySettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="SWITCHBOARD_MEMORY_", frozen=True, extra="ignore")

    service_name: str = "memory"
    port: int = 50054
    # Longest note body accepted, in characters.
    max_note_chars: int = 8000
