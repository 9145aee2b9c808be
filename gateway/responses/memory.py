"""Notes, personal settings, instruction pages, pages and their proposals, note proposals."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from gateway import enums
from gateway.responses.base import NEXT_PAGE, Body
from gateway.responses.views import (
    ProtoView,
    computed,
    nested,
    number,
    optional,
    printed_or,
    required,
    short,
)
from switchboard.memory.v1 import memory_pb2, pages_pb2


# Notes.
class Note(ProtoView, proto=memory_pb2.Note):
    kind: str = short(enums.NOTE_KINDS)
    score: float = optional("with q only: the recall score, higher is closer")


class NoteList(Body):
    """A page of the caller's notes, newest first; with q, the recalled notes, best first."""

    notes: list[Note] = Field(description="the notes of this page")
    next_page_token: str = Field(description=NEXT_PAGE)


class NoteSaved(Body):
    """The saved note."""

    note: Note = Field(description="the note written, or the one it was merged into")
    outcome: str = Field(description="created, or merged (into a note it repeated)")


# Personal settings and instruction pages.
class PersonalSettings(ProtoView, proto=memory_pb2.PersonalSettings):
    chat_mode: str = computed(
        "sidebar or floating (never saved: sidebar)",
        lambda settings: enums.CHAT_MODES.name(settings.chat_mode, "sidebar"),
    )
    # A message: unset when the user has none.
    avatar: dict[str, Any] = printed_or("{} when unset", {})
    default_model: str = computed(
        'a configured model id, or "auto" for Auto', lambda settings: settings.default_model or "auto"
    )
    # Not the settings': the shared-page reminder memory words.
    instruction_page_notice: str = required("the warning the page shows next to the instruction page switch")


class InstructionPageState(Body):
    """The caller's instruction pages and the active one."""

    instruction_page_ids: list[str] = Field(description="the caller's instruction pages, in order")
    active_instruction_page_id: str = Field(description='the one runs read; "" when none')


# Printed straight from the proto, unlike PageDetail: version is a string here.
class ProtoPage(ProtoView, proto=pages_pb2.Page, name="Page"):
    pass


class InstructionPageAdded(InstructionPageState):
    """The page added to (or created in) the caller's instruction pages."""

    page: ProtoPage = Field(description="the page")
    notice: str | None = Field(default=None, description="with a new page: the shared-page warning")


class InstructionPage(ProtoView, proto=pages_pb2.InstructionPage):
    state: str = short(enums.INSTRUCTION_PAGE_STATES)
    version: int = number()


class InstructionPageList(Body):
    """A page of the caller's instruction pages, each readable or not."""

    pages: list[InstructionPage] = Field(description="the instruction pages of this page of results")
    active_instruction_page_id: str = Field(description='the one runs read; "" when none')
    next_page_token: str = Field(description=NEXT_PAGE)
    notice: str = Field(description="the shared-page warning")


class InstructionTemplate(ProtoView, proto=pages_pb2.InstructionTemplate):
    pass


class InstructionTemplates(Body):
    """Templates for a new instruction page."""

    templates: list[InstructionTemplate] = Field(description="every template")


# Pages and proposals.
# An int64 as a number; absent while the page or version has none.
class Page(ProtoView, proto=pages_pb2.Page, name="PageDetail"):
    version: int = number(optional=True)
    restored_from_version: int = number(optional=True)


class PageVersion(ProtoView, proto=pages_pb2.PageVersion, name="PageVersionDetail"):
    version: int = number(optional=True)
    restored_from_version: int = number(optional=True)


class PageList(Body):
    """A page of the pages the caller can read, most recently updated first."""

    pages: list[Page] = Field(description="the pages of this page of results")
    next_page_token: str = Field(description=NEXT_PAGE)


class PageVersionList(Body):
    """A page of a page's versions, newest first."""

    versions: list[PageVersion] = Field(description="the versions of this page of results")
    next_page_token: str = Field(description=NEXT_PAGE)


class DiffLine(ProtoView, proto=pages_pb2.DiffLine):
    kind: str = short(enums.DIFF_LINE_KINDS)


class DiffHunk(ProtoView, proto=pages_pb2.DiffHunk):
    old_start: int = number()
    old_lines: int = number()
    new_start: int = number()
    new_lines: int = number()
    lines: list[DiffLine] = nested(DiffLine)


class TextDiff(ProtoView, proto=pages_pb2.TextDiff):
    added_lines: int = number()
    removed_lines: int = number()
    hunks: list[DiffHunk] = nested(DiffHunk)


class Proposal(ProtoView, proto=pages_pb2.Proposal):
    state: str = short(enums.PROPOSAL_STATES)
    base_version: int = number()
    accepted_version: int = number()
    diff: TextDiff = nested(TextDiff)
    current_version: int = optional("only while pending on a page that moved on: its version now")
    base_to_current: TextDiff = optional("with current_version: what changed since the base")
    current_to_proposed: TextDiff = optional("with current_version: what accepting now would change")


class ProposalList(Body):
    """A page of the proposals the caller can see, newest first."""

    proposals: list[Proposal] = Field(description="the proposals of this page of results")
    next_page_token: str = Field(description=NEXT_PAGE)


class ProposalDecided(Body):
    """A proposal after its owner's decision."""

    proposal: Proposal = Field(description="the proposal, accepted or refused")
    page: Page | None = Field(default=None, description="after accept: the page with its new version")


# Note proposals: an agent's note for a project's memory, for a member to review.
class NoteProposal(ProtoView, proto=memory_pb2.NoteProposal):
    note: Note = nested(Note, "as the notes routes render a note; no id until accepted")
    target_note: Note | None = nested(Note, "null for a new note", null_when_unset=True)
    diff: TextDiff = nested(TextDiff)
    state: str = short(enums.NOTE_PROPOSAL_STATES)


class NoteProposalList(Body):
    """A page of a project's note proposals, newest first."""

    proposals: list[NoteProposal] = Field(description="the proposals of this page of results")
    next_page_token: str = Field(description=NEXT_PAGE)


class NoteProposalDecided(Body):
    """A note proposal after a member's decision."""

    proposal: NoteProposal = Field(description="the proposal, accepted or refused")
    note: Note | None = Field(
        default=None, description="after accept: the note written, or the target note updated"
    )
