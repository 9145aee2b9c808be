"""Rules of personal settings: defaults for users who never saved any, and
the checks of each field an update's mask names. No gRPC here."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from services.memory.personal.models import PersonalSettings
from services.memory.personal.repository import PersonalSettingsRepository
from services.shared.errors import InvalidArgument, TooLarge
from services.shared.masks import masked_fields

# ChatMode values of memory.proto other than UNSPECIFIED
# (tests/unit/test_memory_domain.py keeps them in step with the contract).
CHAT_MODES = frozenset({1, 2})
MAX_DISPLAY_NAME_CHARS = 100
MAX_AVATAR_JSON_CHARS = 16_384  # the avatar as compact JSON, as stored
# Also the bound PagesService keeps when it adds an instruction page.
MAX_INSTRUCTION_PAGES = 100
SETTINGS_PATHS = frozenset(
    {
        "display_name",
        "avatar",
        "instruction_page_ids",
        "active_instruction_page_id",
        "chat_mode",
        "default_model",
    }
)


def instruction_page_ids_of(settings: PersonalSettings) -> list[str]:
    return [str(page) for page in json.loads(settings.instruction_page_ids_json or "[]")]


@dataclass(frozen=True)
class SettingsValues:
    """Candidate values of an update; only the fields named by the mask are written."""

    display_name: str = ""
    avatar: Mapping[str, Any] = field(default_factory=dict)
    instruction_page_ids: Sequence[str] = ()
    active_instruction_page_id: str = ""
    chat_mode: int = 0
    default_model: str = ""


class PersonalSettingsDomain:
    """A user's personal settings: read with defaults, written field by field."""

    def __init__(self, repository: PersonalSettingsRepository) -> None:
        self._repo = repository

    async def get_personal_settings(self, user_id: str) -> PersonalSettings:
        """The user's row, or the defaults (not written) when there is none."""
        return await self._repo.get_settings(user_id) or PersonalSettings(user_id=user_id)

    async def update_personal_settings(
        self, user_id: str, values: SettingsValues, paths: Sequence[str]
    ) -> PersonalSettings:
        """Writes the fields named by ``paths`` (a FieldMask) and only those."""
        fields = masked_fields(paths, SETTINGS_PATHS)
        return await self._repo.upsert_settings(user_id, settings_changes(values, set(fields)))


def settings_changes(values: SettingsValues, paths: set[str]) -> dict[str, object]:
    """Validates the masked fields of ``values``; returns column -> value."""
    changes: dict[str, object] = {}
    if "display_name" in paths:
        display_name = values.display_name.strip()
        if len(display_name) > MAX_DISPLAY_NAME_CHARS:
            raise TooLarge(
                f"display_name is longer than {MAX_DISPLAY_NAME_CHARS} characters",
                field="settings.display_name",
            )
        changes["display_name"] = display_name
    if "avatar" in paths:
        # Stored as compact JSON; an empty avatar in the mask clears it ("{}").
        avatar_json = json.dumps(dict(values.avatar), ensure_ascii=False, separators=(",", ":"))
        if len(avatar_json) > MAX_AVATAR_JSON_CHARS:
            raise TooLarge(
                f"avatar is longer than {MAX_AVATAR_JSON_CHARS} characters as JSON", field="settings.avatar"
            )
        changes["avatar_json"] = avatar_json
    if "instruction_page_ids" in paths:
        pages = list(dict.fromkeys(page.strip() for page in values.instruction_page_ids))
        if any(not page for page in pages):
            raise InvalidArgument(
                "instruction_page_ids must not contain empty ids", field="settings.instruction_page_ids"
            )
        if len(pages) > MAX_INSTRUCTION_PAGES:
            raise TooLarge(
                f"at most {MAX_INSTRUCTION_PAGES} instruction pages", field="settings.instruction_page_ids"
            )
        changes["instruction_page_ids_json"] = json.dumps(pages, ensure_ascii=False)
    if "active_instruction_page_id" in paths:
        changes["active_instruction_page_id"] = values.active_instruction_page_id.strip()
    if "chat_mode" in paths:
        if values.chat_mode not in CHAT_MODES:
            raise InvalidArgument(
                "chat_mode must be CHAT_MODE_SIDEBAR or CHAT_MODE_FLOATING", field="settings.chat_mode"
            )
        changes["chat_mode"] = values.chat_mode
    if "default_model" in paths:
        changes["default_model"] = values.default_model.strip()
    return changes
