"""The table of personal settings (memory service)."""

from __future__ import annotations

from sqlmodel import Field, SQLModel

# ChatMode.CHAT_MODE_SIDEBAR of memory.proto; the default of a user without a row.
CHAT_MODE_SIDEBAR = 1


class PersonalSettings(SQLModel, table=True):
    """One row per user who changed something; the others get the defaults below."""

    __tablename__ = "personal_settings"

    user_id: str = Field(primary_key=True, max_length=128)
    display_name: str = ""
    avatar_json: str = "{}"
    instruction_page_ids_json: str = "[]"
    active_instruction_page_id: str = ""
    chat_mode: int = CHAT_MODE_SIDEBAR
    # "" = Auto.
    default_model: str = ""
