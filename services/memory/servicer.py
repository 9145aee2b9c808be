"""MemoryService: the RPCs of notes, of project context and live state, of
personal settings, and the chat run's one-call context read, each written in
its concept's package and gathered here into the one gRPC service the
contract defines."""

from __future__ import annotations

from services.memory.chat.domain import ChatContextDomain
from services.memory.chat.servicer import ChatContextRpcs
from services.memory.context.domain import ContextDomain
from services.memory.context.live_state import LiveStateDomain
from services.memory.context.servicer import ContextRpcs
from services.memory.notes.domain import NotesDomain
from services.memory.notes.proposals import NoteProposalsDomain
from services.memory.notes.proposals_servicer import NoteProposalRpcs
from services.memory.notes.servicer import NotesRpcs
from services.memory.personal.domain import PersonalSettingsDomain
from services.memory.personal.servicer import PersonalSettingsRpcs
from switchboard.memory.v1 import memory_service_pb2_grpc


class MemoryServicer(
    NotesRpcs,
    NoteProposalRpcs,
    ContextRpcs,
    PersonalSettingsRpcs,
    ChatContextRpcs,
    memory_service_pb2_grpc.MemoryServiceServicer,
):
    def __init__(
        self,
        settings: PersonalSettingsDomain,
        notes: NotesDomain,
        contexts: ContextDomain,
        live: LiveStateDomain,
        chat: ChatContextDomain,
        proposals: NoteProposalsDomain,
    ) -> None:
        self._settings = settings
        self._notes = notes
        self._contexts = contexts
        self._live = live
        self._chat = chat
        self._proposals = proposals
