"""``switchboard projects list|create|show|update|members|add-member|remove-member``:
the user's projects, the unit of sharing, and who may read or write them.
A project the user is not a member of is "not found" (exit 3), exactly like
a missing one; a change the user's role does not allow is "not allowed"
(exit 4)."""

from __future__ import annotations

import argparse
from typing import Any

from client import exits
from client.api import segment
from client.commands import Context, UsageError, all_pages, listing
from client.messages import field, say

ROLES = ("viewer", "editor", "owner")
NOTE_POLICIES = ("review", "auto")
# What `show` and `update` print when the user names no project.
PERSONAL = "personal"


def add(commands: Any, common: argparse.ArgumentParser) -> None:
    projects = commands.add_parser("projects", help="projects and their members").add_subparsers(
        dest="action", required=True, metavar="action"
    )
    projects.add_parser(
        "list", parents=[common], help="your projects (the personal one first) with your role"
    ).set_defaults(handler=list_projects)

    create = projects.add_parser(
        "create",
        parents=[common],
        help="create a project you own",
        description="Creates the project ID (1-128 letters, digits, '.', '_', '-'), owned by you.",
    )
    create.add_argument("id", metavar="ID")
    create.add_argument("--name", help="what to show (default: the id)")
    create.add_argument(
        "--note-policy",
        choices=NOTE_POLICIES,
        help="an agent's note nobody asked for: a proposal to review (the default), or saved at once",
    )
    create.set_defaults(handler=create_project)

    update = projects.add_parser(
        "update", parents=[common], help="rename a project or change its note policy (owners)"
    )
    update.add_argument("id", metavar="ID")
    update.add_argument("--name", help="the new name")
    update.add_argument("--note-policy", choices=NOTE_POLICIES)
    update.set_defaults(handler=update_project)

    current = "default: --project, else SWITCHBOARD_PROJECT, else your personal project"
    show = projects.add_parser("show", parents=[common], help="one project, with your role")
    show.add_argument("id", metavar="ID", nargs="?", help=current)
    show.set_defaults(handler=show_project)
    members = projects.add_parser("members", parents=[common], help="a project's members and their roles")
    members.add_argument("id", metavar="ID", nargs="?", help=current)
    members.set_defaults(handler=list_members)

    add_member = projects.add_parser(
        "add-member",
        parents=[common],
        help="add a member, or change a member's role (owners)",
        description="viewer: reads the project's memory, context and live state; editor: also "
        "writes them and asks the project's agents; owner: also manages members and settings.",
    )
    add_member.add_argument("id", metavar="ID")
    add_member.add_argument("user", metavar="USER")
    add_member.add_argument("--role", choices=ROLES, required=True)
    add_member.set_defaults(handler=set_member)
    remove = projects.add_parser(
        "remove-member",
        parents=[common],
        help="remove a member (owners), or leave a project (yourself)",
    )
    remove.add_argument("id", metavar="ID")
    remove.add_argument("user", metavar="USER")
    remove.set_defaults(handler=remove_member)


def named(ctx: Context) -> str:
    """The project a command names: its ID, else the current project, else the personal one."""
    return str(ctx.args.id or ctx.project or PERSONAL)


def project_row(project: dict[str, Any]) -> list[str]:
    name = str(project.get("display_name", ""))
    if project.get("personal"):
        name = f"{name} ({say('personal')})".lstrip()
    return [
        str(project.get("id", "")),
        name,
        str(project.get("role", "")),
        str(project.get("note_policy", "")),
        str(project.get("owner_user_id", "")),
    ]


def show_one(ctx: Context, project: dict[str, Any]) -> int:
    if ctx.out.json:
        ctx.out.document(project)
        return exits.OK
    id_, name, role, policy, owner = project_row(project)
    for label, value in (
        (field("project"), id_),
        (field("name"), name),
        (field("role"), role),
        (field("note policy"), policy),
        (field("owner"), owner),
        (field("created"), str(project.get("create_time", ""))),
    ):
        if value:
            ctx.out.line(f"{label + ':':<14}{value}")
    return exits.OK


async def list_projects(ctx: Context) -> int:
    projects = (await all_pages(ctx, "/projects", "projects"))["projects"]
    return listing(ctx, projects, ["id", "name", "role", "notes", "owner"], project_row)


async def create_project(ctx: Context) -> int:
    args = ctx.args
    body: dict[str, str] = {"id": args.id, "display_name": args.name or args.id}
    if args.note_policy:
        body["note_policy"] = args.note_policy
    project = await ctx.api.call("POST", "/projects", body=body)
    if ctx.out.json:
        ctx.out.document(project)
    else:
        ctx.out.line(say("project created", id=project.get("id"), name=project.get("display_name")))
    return exits.OK


async def update_project(ctx: Context) -> int:
    args = ctx.args
    body = {
        key: value
        for key, value in (("display_name", args.name), ("note_policy", args.note_policy))
        if value is not None
    }
    if not body:
        raise UsageError(say("nothing to change in project"))
    project = await ctx.api.call("PATCH", f"/projects/{segment(args.id)}", body=body)
    return show_one(ctx, project)


async def show_project(ctx: Context) -> int:
    return show_one(ctx, await ctx.api.call("GET", f"/projects/{segment(named(ctx))}"))


def member_row(member: dict[str, Any]) -> list[str]:
    return [str(member.get(key, "")) for key in ("user_id", "role", "update_time")]


async def list_members(ctx: Context) -> int:
    members = (await all_pages(ctx, f"/projects/{segment(named(ctx))}/members", "members"))["members"]
    return listing(ctx, members, ["user", "role", "since"], member_row)


async def set_member(ctx: Context) -> int:
    args = ctx.args
    path = f"/projects/{segment(args.id)}/members/{segment(args.user)}"
    member = await ctx.api.call("PUT", path, body={"role": args.role})
    if ctx.out.json:
        ctx.out.document(member)
    else:
        ctx.out.line(say("member set", user=member.get("user_id"), role=member.get("role"), project=args.id))
    return exits.OK


async def remove_member(ctx: Context) -> int:
    args = ctx.args
    await ctx.api.call("DELETE", f"/projects/{segment(args.id)}/members/{segment(args.user)}")
    if ctx.out.json:
        ctx.out.document({"project_id": args.id, "user_id": args.user, "removed": True})
    else:
        ctx.out.line(say("member removed", user=args.user, project=args.id))
    return exits.OK
