"""MemoryService's personal settings RPCs: proto <-> PersonalSettingsDomain, nothing else."""

from __future__ import annotations

import json
from typing import Any

import grpc
from google.protobuf import json_format
from google.protobuf.struct_pb2 import Struct

from services.memory.pages.templates import shared_page_notice
from services.memory.personal.domain import PersonalSettingsDomain, SettingsValues, instruction_page_ids_of
from services.memory.personal.models import PersonalSettings
from services.shared.errors import InvalidArgument
from services.shared.identity import caller_user
from switchboard.memory.v1 import memory_pb2, memory_service_pb2

pb = memory_service_pb2


def settings_to_proto(settings: PersonalSettings) -> memory_pb2.PersonalSettings:
    proto = memory_pb2.PersonalSettings(
        user_id=settings.user_id,
        display_name=settings.display_name,
        instruction_page_ids=instruction_page_ids_of(settings),
        active_instruction_page_id=settings.active_instruction_page_id,
        chat_mode=settings.chat_mode,  # type: ignore[arg-type]
        default_model=settings.default_model,
    )
    avatar = json.loads(settings.avatar_json or "{}")
    if avatar:  # no avatar: the field stays unset
        proto.avatar.update(avatar)
    return proto


def avatar_of(avatar: Struct) -> dict[str, Any]:
    """The avatar as JSON; a NaN or an infinity (which JSON cannot carry) is
    INVALID_ARGUMENT."""
    try:
        return json_format.MessageToDict(avatar)
    except ValueError as exc:
        raise InvalidArgument(
            "avatar numbers must be finite (no NaN or infinity)", field="settings.avatar"
        ) from exc


class PersonalSettingsRpcs:
    """GetPersonalSettings, UpdatePersonalSettings."""

    _settings: PersonalSettingsDomain

    async def GetPersonalSettings(
        self, request: pb.GetPersonalSettingsRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetPersonalSettingsResponse:
        settings = await self._settings.get_personal_settings(caller_user(context))
        return pb.GetPersonalSettingsResponse(
            settings=settings_to_proto(settings), shared_page_notice=shared_page_notice()
        )

    async def UpdatePersonalSettings(
        self, request: pb.UpdatePersonalSettingsRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdatePersonalSettingsResponse:
        s = request.settings
        values = SettingsValues(
            display_name=s.display_name,
            avatar=avatar_of(s.avatar),
            instruction_page_ids=list(s.instruction_page_ids),
            active_instruction_page_id=s.active_instruction_page_id,
            chat_mode=s.chat_mode,
            default_model=s.default_model,
        )
        settings = await self._settings.update_personal_settings(
            caller_user(context), values, list(request.update_mask.paths)
        )
        return pb.UpdatePersonalSettingsResponse(
            settings=settings_to_proto(settings), shared_page_notice=shared_page_notice()
        )
