"""save_note: durable memory of the run's project. A note the user's
message asked to save, in its words, is saved; otherwise the agent's note
is a proposal the project's members review (or, in a project that accepts
its agents' notes at once, saved)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from services.engine.tools.backend import ProposedNote
from services.engine.tools.builtin import Args, Builtin, ToolServices
from services.engine.tools.context import ToolContext
from services.engine.tools.policy import authorise
from services.shared.write_guard import asks_to_save

# What an agent is told of durable memory, with the tool that writes it.
SAVE_NOTE_RULE = (
    "Saves stable, high-value knowledge into the project's durable memory, shared by every member and "
    "agent of the project: decisions, feature summaries, lasting preferences and project facts. Never "
    "live state (who is doing what now, work in progress) and never transient details. When the user's "
    "message asks to save or remember it, the note is saved; otherwise it is a proposal that a member of "
    "the project reviews, so promote what the project should keep, with a reason. In the words of the "
    "request: anything else is refused."
)


class SaveNoteArgs(Args):
    kind: Literal["decision", "feature_summary", "preference", "fact"] = Field(
        description="decision, feature_summary, preference or fact."
    )
    title: str = Field(min_length=1, max_length=200)
    body: str = Field(min_length=1, max_length=4000)
    tags: list[str] = Field(default_factory=list, max_length=10)
    reason: str = Field(
        default="", max_length=500, description="Why it is worth keeping, for the member who reviews it."
    )


async def save_note(
    tools: ToolServices, args: SaveNoteArgs, context: ToolContext, call_id: str
) -> tuple[str, ProposedNote | None]:
    # Whatever it becomes, a note holds only the words of the run's
    # request: content read in the run never reaches memory, not even
    # as a proposal.
    authorise(
        "save_note",
        context,
        asked=True,
        texts=[args.title, args.body, *args.tags],
        what="save anything to memory",
    )
    # The personal project ("") is every backend's default, so it is not
    # named: backends written before projects keep working.
    project = {"project_id": context.project_id} if context.project_id else {}
    request_id = f"{context.run_id}:{call_id}"
    kind = args.kind.replace("_", " ")
    if asks_to_save(context.request):  # the user asked in so many words: saved
        note = await tools.backend.save_note(
            context.user, request_id, args.kind, args.title, args.body, args.tags, **project
        )
        verb = "merged into the existing note" if note.outcome == "merged" else "saved as"
        return f"The {kind} was {verb} {note.note_id}: {note.title}", None
    # The agent promotes it on its own: the project's members review it.
    proposed = await tools.backend.propose_note(
        context.user,
        request_id,
        args.kind,
        args.title,
        args.body,
        args.tags,
        reason=args.reason,
        run_id=context.run_id,
        agent=context.agent,
        **project,
    )
    if proposed.state == "accepted":
        return (
            f"The {kind} was saved as {proposed.note_id} (this project accepts its agents' notes).",
            None,
        )
    updates = f", as an update of note {proposed.target_note_id}" if proposed.target_note_id else ""
    return (
        f"The {kind} was proposed for the project's memory{updates} (proposal {proposed.proposal_id}); "
        "a member of the project accepts or refuses it. Nothing is saved before.",
        proposed,
    )


TOOL = Builtin(
    "save_note",
    "memory",
    SAVE_NOTE_RULE,
    SaveNoteArgs,
    save_note,
    lambda context, _: True,  # writes only: nothing is read, even for a web-only model
    writes=True,
)
