"""Notes, personal settings, instruction pages, pages and their proposals, note proposals."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from gateway import enums
from gateway.responses.base import NEXT_PAGE, Body
from gateway.responses.views import (
    computed,
    nested,
    number,
    optional,
    printed_or,
    proto_model,
    required,
    short,
)
from switchboard.memory.v1 import memory_pb2, pages_pb2

# Notes.
Note = proto_model(
    memory_pb2.Note.DESCRIPTOR,
    "Note",
    kind=short(enums.NOTE_KINDS),
    score=optional(float, "with q only: the recall score, higher is closer"),
)


class NoteList(Body):
    """A page of the caller's notes, newest first; with q, the recalled notes, best first."""

    notes: list[Note] = Field(description="the notes of this page")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)


class NoteSaved(Body):
    """The saved note."""

    note: Note = Field(description="the note written, or the one it was merged into")  # type: ignore[valid-type]
    outcome: str = Field(description="created, or merged (into a note it repeated)")


# Personal settings and instruction pages.
PersonalSettings = proto_model(
    memory_pb2.PersonalSettings.DESCRIPTOR,
    "PersonalSettings",
    chat_mode=computed(
        str,
        "sidebar or floating (never saved: sidebar)",
        lambda settings: enums.CHAT_MODES.name(settings.chat_mode, "sidebar"),
    ),
    # A message: unset when the user has none.
    avatar=printed_or(dict[str, Any], "{} when unset", {}),
    default_model=computed(
        str, 'a configured model id, or "auto" for Auto', lambda settings: settings.default_model or "auto"
    ),
    # Not the settings': the shared-page reminder memory words.
    instruction_page_notice=required(str, "the warning the page shows next to the instruction page switch"),
)


class InstructionPageState(Body):
    """The caller's instruction pages and the active one."""

    instruction_page_ids: list[str] = Field(description="the caller's instruction pages, in order")
    active_instruction_page_id: str = Field(description='the one runs read; "" when none')


# Printed straight from the proto, unlike PageDetail: version is a string here.
ProtoPage = proto_model(pages_pb2.Page.DESCRIPTOR)


class InstructionPageAdded(InstructionPageState):
    """The page added to (or created in) the caller's instruction pages."""

    page: ProtoPage = Field(description="the page")  # type: ignore[valid-type]
    notice: str | None = Field(default=None, description="with a new page: the shared-page warning")


InstructionPage = proto_model(
    pages_pb2.InstructionPage.DESCRIPTOR,
    "InstructionPage",
    state=short(enums.INSTRUCTION_PAGE_STATES),
    version=number(),
)


class InstructionPageList(Body):
    """A page of the caller's instruction pages, each readable or not."""

    pages: list[InstructionPage] = Field(description="the instruction pages of this page of results")  # type: ignore[valid-type]
    active_instruction_page_id: str = Field(description='the one runs read; "" when none')
    next_page_token: str = Field(description=NEXT_PAGE)
    notice: str = Field(description="the shared-page warning")


InstructionTemplate = proto_model(pages_pb2.InstructionTemplate.DESCRIPTOR)


class InstructionTemplates(Body):
    """Templates for a new instruction page."""

    templates: list[InstructionTemplate] = Field(description="every template")  # type: ignore[valid-type]


# Pages and proposals.
# An int64 as a number; absent while the page or version has none.
Page = proto_model(
    pages_pb2.Page.DESCRIPTOR,
    "PageDetail",
    version=number(optional=True),
    restored_from_version=number(optional=True),
)
PageVersion = proto_model(
    pages_pb2.PageVersion.DESCRIPTOR,
    "PageVersionDetail",
    version=number(optional=True),
    restored_from_version=number(optional=True),
)


class PageList(Body):
    """A page of the pages the caller can read, most recently updated first."""

    pages: list[Page] = Field(description="the pages of this page of results")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)


class PageVersionList(Body):
    """A page of a page's versions, newest first."""

    versions: list[PageVersion] = Field(description="the versions of this page of results")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)


DiffLine = proto_model(
    pages_pb2.DiffLine.DESCRIPTOR,
    "DiffLine",
    kind=short(enums.DIFF_LINE_KINDS),
)
DiffHunk = proto_model(
    pages_pb2.DiffHunk.DESCRIPTOR,
    "DiffHunk",
    old_start=number(),
    old_lines=number(),
    new_start=number(),
    new_lines=number(),
    lines=nested(DiffLine),
)
TextDiff = proto_model(
    pages_pb2.TextDiff.DESCRIPTOR,
    "TextDiff",
    added_lines=number(),
    removed_lines=number(),
    hunks=nested(DiffHunk),
)
Proposal = proto_model(
    pages_pb2.Proposal.DESCRIPTOR,
    "Proposal",
    state=short(enums.PROPOSAL_STATES),
    base_version=number(),
    accepted_version=number(),
    diff=nested(TextDiff),
    current_version=optional(int, "only while pending on a page that moved on: its version now"),
    base_to_current=optional(TextDiff, "with current_version: what changed since the base"),
    current_to_proposed=optional(TextDiff, "with current_version: what accepting now would change"),
)


class ProposalList(Body):
    """A page of the proposals the caller can see, newest first."""

    proposals: list[Proposal] = Field(description="the proposals of this page of results")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)


class ProposalDecided(Body):
    """A proposal after its owner's decision."""

    proposal: Proposal = Field(description="the proposal, accepted or refused")  # type: ignore[valid-type]
    page: Page | None = Field(default=None, description="after accept: the page with its new version")  # type: ignore[valid-type]


# Note proposals: an agent's note for a project's memory, for a member to review.
NoteProposal = proto_model(
    memory_pb2.NoteProposal.DESCRIPTOR,
    "NoteProposal",
    note=nested(Note, "as the notes routes render a note; no id until accepted"),
    target_note=nested(Note, "null for a new note", null_when_unset=True),
    diff=nested(TextDiff),
    state=short(enums.NOTE_PROPOSAL_STATES),
)


class NoteProposalList(Body):
    """A page of a project's note proposals, newest first."""

    proposals: list[NoteProposal] = Field(description="the proposals of this page of results")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)


class NoteProposalDecided(Body):
    """A note proposal after a member's decision."""

    proposal: NoteProposal = Field(description="the proposal, accepted or refused")  # type: ignore[valid-type]
    note: Note | None = Field(  # type: ignore[valid-type]
        default=None, description="after accept: the note written, or the target note updated"
    )
