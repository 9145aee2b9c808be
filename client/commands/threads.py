"""``switchboard threads show|export|import`` and ``context import``: an
agent's shared thread, read, saved as files and loaded back, and a project
folder's context."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from client import exits
from client.api import segment
from client.commands import Context, UsageError, all_pages
from client.messages import say


def add(commands: Any, common: argparse.ArgumentParser) -> None:
    threads = commands.add_parser("threads", help="an agent's shared thread").add_subparsers(
        dest="action", required=True, metavar="action"
    )
    show = threads.add_parser(
        "show",
        parents=[common],
        help="an agent's thread, or one requester's or one question's part of it",
        description="The agent's whole thread; with --requester, that requester's exchanges with it; "
        "with --correlation, one question and its answers. A filtered view says so when the thread "
        "holds more than it shows.",
    )
    show.add_argument("agent", metavar="AGENT")
    group = show.add_mutually_exclusive_group()
    group.add_argument("--requester", default="", metavar="R", help="only this requester's exchanges")
    group.add_argument("--correlation", default="", metavar="ID", help="only this question and its answers")
    show.set_defaults(handler=show_thread)
    export = threads.add_parser("export", parents=[common], help="save an agent's thread as files (JSON)")
    export.add_argument("agent", metavar="AGENT")
    export.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    export.set_defaults(handler=export_thread)
    load = threads.add_parser("import", parents=[common], help="load a thread saved by export")
    load.add_argument("file", metavar="FILE", help="what export wrote ('-': stdin)")
    load.set_defaults(handler=import_thread)

    context = commands.add_parser("context", help="the project context").add_subparsers(
        dest="action", required=True, metavar="action"
    )
    imported = context.add_parser(
        "import",
        parents=[common],
        help="import a project folder's .ideai files",
        description="Sends FOLDER/.ideai/CONTEXT.md (the project context every run receives) and "
        "FOLDER/.ideai/memory/*.md (durable notes) to --project (else SWITCHBOARD_PROJECT, else "
        "your personal project); says what became of each file.",
    )
    imported.add_argument("folder", metavar="FOLDER")
    imported.set_defaults(handler=import_context)


async def show_thread(ctx: Context) -> int:
    args = ctx.args
    params = {"requester": args.requester, "correlation_id": args.correlation}
    view = "pair" if args.requester else "correlation" if args.correlation else "full"
    page = await all_pages(ctx, f"/agents/{segment(args.agent)}/entries", "entries", params)
    if ctx.out.json:
        ctx.out.document({"view": view, **page})
        return exits.OK
    if not page["entries"]:
        ctx.out.progress(say("no entries", agent=args.agent))
    for entry in page["entries"]:
        who = entry.get("requester", "") if entry.get("role") == "user" else args.agent
        ctx.out.line(
            f"#{entry.get('sequence')} {entry.get('role')} {who} [{entry.get('correlation_id', '')}]"
        )
        ctx.out.line(f"  {entry.get('content', '')}")
    if page.get("partial_view"):
        ctx.out.progress(say("partial view", agent=args.agent), "yellow")
    return exits.OK


async def export_thread(ctx: Context) -> int:
    exported = await ctx.api.call("GET", f"/agents/{segment(ctx.args.agent)}/export")
    text = json.dumps(exported, ensure_ascii=False, indent=2) + "\n"
    if ctx.args.output and ctx.args.output != "-":
        Path(ctx.args.output).write_text(text, encoding="utf-8")
        count = len(exported.get("files", []))
        ctx.out.progress(say("exported", count=count, agent=ctx.args.agent, file=ctx.args.output))
    else:
        ctx.out.stdout.write(text)
    return exits.OK


async def import_thread(ctx: Context) -> int:
    source = ctx.args.file
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        exported = json.loads(text)
        files = exported["files"]
    except OSError as error:
        raise UsageError(say("cannot read", file=source, reason=error.strerror)) from None
    except (ValueError, KeyError, TypeError):
        raise UsageError(say("not an export", file=source)) from None
    imported = await ctx.api.call("POST", "/agents/import", body={"files": files})
    thread = imported.get("thread", {})
    if ctx.out.json:
        ctx.out.document(imported)
    else:
        count = thread.get("last_sequence")
        ctx.out.line(say("imported", agent=thread.get("agent_id"), thread=thread.get("id"), count=count))
    return exits.OK


def ideai_files(folder: Path) -> list[dict[str, str]]:
    """The folder's .ideai/CONTEXT.md and .ideai/memory/*.md, with paths relative to it."""
    root = folder / ".ideai"
    if not root.is_dir():
        raise UsageError(say("no ideai", folder=folder))
    paths = [root / "CONTEXT.md", *sorted((root / "memory").glob("*.md"))]
    return [
        {"path": path.relative_to(folder).as_posix(), "content": path.read_text(encoding="utf-8")}
        for path in paths
        if path.is_file()
    ]


async def import_context(ctx: Context) -> int:
    files = ideai_files(Path(ctx.args.folder))
    if not files:
        raise UsageError(say("no ideai files", folder=ctx.args.folder))
    imported = await ctx.api.call(
        "POST", "/project-context/import", body={"files": files}, params=ctx.project_params()
    )
    items = imported.get("items", [])
    if ctx.out.json:
        ctx.out.document(items)
        return exits.OK
    rows = [[i.get("path", ""), i.get("outcome", ""), i.get("reason", "")] for i in items]
    ctx.out.table(["file", "outcome", "reason"], rows)
    return exits.OK
