"""``switchboard proposals list|show|accept|refuse``: the notes agents
propose for a project's durable memory, waiting for a member's review.
``list`` reads the current project's (``--project``, else
SWITCHBOARD_PROJECT, else the personal one); a proposal is named by its id
in the others. Every member reads them; editors and owners accept (the note
is written, or the note it targets updated) or refuse (nothing is written):
a viewer is "not allowed" (exit 4), a proposal of a project the user is not
a member of "not found" (exit 3), and one decided already, or whose target
note changed since, a conflict (exit 5)."""

from __future__ import annotations

import argparse
from typing import Any

from client import exits
from client.api import segment
from client.commands import Context, all_pages, listing
from client.messages import field, say
from client.output import short

STATES = ("pending", "accepted", "refused")
PATH = "/note-proposals"


def add(commands: Any, common: argparse.ArgumentParser) -> None:
    proposals = commands.add_parser(
        "proposals", help="notes agents propose for the project's memory"
    ).add_subparsers(dest="action", required=True, metavar="action")
    listed = proposals.add_parser("list", parents=[common], help="the project's note proposals, newest first")
    listed.add_argument("--state", choices=STATES, help="only those in this state (default: every state)")
    listed.set_defaults(handler=list_proposals)
    for action, handler, text in (
        ("show", show_proposal, "one proposal, with its diff"),
        ("accept", accept_proposal, "write the proposed note, or the update of its target (editors, owners)"),
        ("refuse", refuse_proposal, "refuse it: nothing is written (editors, owners)"),
    ):
        command = proposals.add_parser(action, parents=[common], help=text, description=text)
        command.add_argument("id", metavar="ID", help="the proposal's id, as `proposals list` shows it")
        command.set_defaults(handler=handler)


def proposal_row(proposal: dict[str, Any]) -> list[str]:
    note = proposal.get("note") or {}
    target = proposal.get("target_note") or {}
    return [
        str(proposal.get("id", "")),
        str(proposal.get("state", "")),
        str(note.get("kind", "")),
        short(note.get("title", ""), 40),
        str(note.get("author_agent_id", "")),
        str(target.get("id", "")) or "-",
        str(proposal.get("create_time", "")),
    ]


async def list_proposals(ctx: Context) -> int:
    params = {**ctx.project_params(), **({"state": ctx.args.state} if ctx.args.state else {})}
    proposals = (await all_pages(ctx, PATH, "proposals", params))["proposals"]
    return listing(
        ctx, proposals, ["id", "state", "kind", "title", "agent", "updates", "created"], proposal_row
    )


def diff_text(diff: dict[str, Any]) -> list[str]:
    """The diff's lines marked "+", "-" or " ", as `diff -u` prints them."""
    marks = {"added": "+", "removed": "-", "context": " "}
    lines = []
    for hunk in diff.get("hunks", []):
        lines.append(
            f"@@ -{hunk.get('old_start', 0)},{hunk.get('old_lines', 0)} "
            f"+{hunk.get('new_start', 0)},{hunk.get('new_lines', 0)} @@"
        )
        lines += [marks.get(str(line.get("kind")), " ") + str(line.get("text", "")) for line in hunk["lines"]]
    return lines


async def show_proposal(ctx: Context) -> int:
    proposal = await ctx.api.call("GET", f"{PATH}/{segment(ctx.args.id)}")
    if ctx.out.json:
        ctx.out.document(proposal)
        return exits.OK
    note = proposal.get("note") or {}
    target = proposal.get("target_note")
    updates = f"{target.get('id', '')} ({target.get('title', '')})" if target else say("new note")
    for label, value in (
        (field("proposal"), str(proposal.get("id", ""))),
        (field("project"), str(proposal.get("project_id", ""))),
        (field("state"), str(proposal.get("state", ""))),
        (field("kind"), str(note.get("kind", ""))),
        (field("title"), str(note.get("title", ""))),
        (field("agent"), str(note.get("author_agent_id", ""))),
        (field("proposed by"), str(proposal.get("proposer_user_id", ""))),
        (field("run"), str(proposal.get("run_id", ""))),
        (field("reason"), str(proposal.get("reason", ""))),
        (field("updates"), updates),
        (field("matched"), str(proposal.get("match_reason", ""))),
        (field("decided by"), str(proposal.get("decided_by_user_id", ""))),
        (field("note written"), str(proposal.get("result_note_id", ""))),
        (field("created"), str(proposal.get("create_time", ""))),
    ):
        if value:
            ctx.out.line(f"{label + ':':<16}{value}")
    ctx.out.line("")
    diff = proposal.get("diff") or {}
    lines = diff_text(diff)
    if not lines:
        ctx.out.line(say("no change"))
    for line in lines:
        style = "green" if line.startswith("+") else "red" if line.startswith("-") else ""
        ctx.out.line(line, style="cyan" if line.startswith("@@") else style)
    return exits.OK


async def accept_proposal(ctx: Context) -> int:
    decided = await ctx.api.call("POST", f"{PATH}/{segment(ctx.args.id)}/accept")
    if ctx.out.json:
        ctx.out.document(decided)
        return exits.OK
    note = decided.get("note") or {}
    ctx.out.line(
        say("proposal accepted", id=ctx.args.id, note=note.get("id", ""), title=note.get("title", ""))
    )
    return exits.OK


async def refuse_proposal(ctx: Context) -> int:
    decided = await ctx.api.call("POST", f"{PATH}/{segment(ctx.args.id)}/refuse")
    if ctx.out.json:
        ctx.out.document(decided)
    else:
        ctx.out.line(say("proposal refused", id=ctx.args.id))
    return exits.OK
