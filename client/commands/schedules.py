"""``switchboard schedules list|create|show|pause|resume|delete``: the
user's scheduled runs (the API's /api/schedules)."""

from __future__ import annotations

import argparse
from typing import Any

from client import exits
from client.api import segment
from client.commands import Context, all_pages, listing
from client.messages import say
from client.output import short

PATH = "/api/schedules"


def add(commands: Any, common: argparse.ArgumentParser) -> None:
    schedules = commands.add_parser("schedules", help="scheduled runs").add_subparsers(
        dest="action", required=True, metavar="action"
    )
    schedules.add_parser("list", parents=[common], help="your schedules").set_defaults(handler=list_schedules)
    create = schedules.add_parser(
        "create",
        parents=[common],
        help="run a message on a cron schedule",
        description="At each tick of CRON (five fields: minute hour day month weekday, or six with "
        "seconds last, or @hourly, @daily…), read in --tz, a run answers MESSAGE on the conversation "
        "or on the agent's shared thread.",
    )
    create.add_argument("cron", metavar="CRON")
    create.add_argument("message", metavar="MESSAGE")
    create.add_argument(
        "--tz", default="", metavar="ZONE", help="IANA time zone, e.g. Europe/Paris (default UTC)"
    )
    target = create.add_mutually_exclusive_group(required=True)
    target.add_argument("--conversation", default="", metavar="ID", help="one of your conversations")
    target.add_argument("--agent", default="", metavar="AGENT", help="an agent (its shared thread)")
    create.set_defaults(handler=create_schedule)
    for action, handler, text in (
        ("show", show_schedule, "one schedule, with its run and missed counts"),
        ("pause", pause_schedule, "no run until resumed"),
        ("resume", resume_schedule, "run again from the next tick"),
        ("delete", delete_schedule, "delete it (its runs stay)"),
    ):
        command = schedules.add_parser(action, parents=[common], help=text)
        command.add_argument("schedule", metavar="SCHEDULE_ID")
        command.set_defaults(handler=handler)


def target(schedule: dict[str, Any]) -> str:
    if schedule.get("agent_id"):
        return f"agent {schedule['agent_id']}"
    return str(schedule.get("conversation_id", ""))


def described(ctx: Context, schedule: dict[str, Any]) -> int:
    """One schedule: its JSON with --json, else what it does and what it did."""
    if ctx.out.json:
        ctx.out.document(schedule)
        return exits.OK
    zone = schedule.get("time_zone") or "UTC"
    state = (
        say("paused") if schedule.get("paused") else say("next tick", time=schedule.get("next_run_time", ""))
    )
    ctx.out.line(
        say("schedule", id=schedule["id"], cron=schedule["cron"], zone=zone, target=target(schedule))
    )
    ctx.out.line(f"  {short(schedule.get('message', ''))}")
    ctx.out.line(f"  {state}")
    ctx.out.line(
        "  "
        + say(
            "schedule counts",
            runs=schedule.get("run_count", 0),
            missed=schedule.get("missed_count", 0),
            last=schedule.get("last_run_id") or "-",
        )
    )
    if schedule.get("last_error"):
        ctx.out.progress(say("schedule error", error=schedule["last_error"]), "yellow")
    return exits.OK


async def list_schedules(ctx: Context) -> int:
    page = await all_pages(ctx, PATH, "schedules")

    def row(s: dict[str, Any]) -> list[str]:
        state = say("paused") if s.get("paused") else s.get("next_run_time", "")
        runs = f"{s.get('run_count', 0)}/{s.get('missed_count', 0)}"
        return [s["id"], s["cron"], s.get("time_zone") or "UTC", target(s), state, runs]

    columns = ["id", "cron", say("zone"), say("target"), say("next"), say("runs/missed")]
    return listing(ctx, page["schedules"], columns, row)


async def create_schedule(ctx: Context) -> int:
    args = ctx.args
    body = {"cron": args.cron, "time_zone": args.tz, "message": args.message}
    body |= {"conversation_id": args.conversation} if args.conversation else {"agent_id": args.agent}
    return described(ctx, await ctx.api.call("POST", PATH, body=body))


async def show_schedule(ctx: Context) -> int:
    return described(ctx, await ctx.api.call("GET", f"{PATH}/{segment(ctx.args.schedule)}"))


async def pause_schedule(ctx: Context) -> int:
    return described(ctx, await ctx.api.call("POST", f"{PATH}/{segment(ctx.args.schedule)}/pause"))


async def resume_schedule(ctx: Context) -> int:
    return described(ctx, await ctx.api.call("POST", f"{PATH}/{segment(ctx.args.schedule)}/resume"))


async def delete_schedule(ctx: Context) -> int:
    await ctx.api.call("DELETE", f"{PATH}/{segment(ctx.args.schedule)}")
    if ctx.out.json:
        ctx.out.document({"deleted": ctx.args.schedule})
    else:
        ctx.out.progress(say("schedule deleted", id=ctx.args.schedule))
    return exits.OK
