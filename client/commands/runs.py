"""``switchboard chat``, ``ask`` and ``runs show|tail``: the commands that
start or follow a run and show it as it happens."""

from __future__ import annotations

import argparse
import asyncio
import sys
from contextlib import aclosing
from pathlib import Path
from typing import Any

from client import exits
from client.api import ApiRefusal, segment
from client.commands import Context, UsageError
from client.live import RunView
from client.messages import field, say
from client.output import short
from services.shared.language import is_tag

# A tail that keeps losing its stream without news gives up after this many tries.
TAIL_RETRIES = 5


def add(commands: Any, common: argparse.ArgumentParser) -> None:
    chat = commands.add_parser(
        "chat",
        parents=[common],
        help="chat with your personal agent: interactive, or one message with -m",
        description="An interactive chat in a new conversation (or --conversation ID to resume one): "
        "type a message, see the run's steps and its answer as it streams. Ctrl-D or /quit leaves. "
        "With -m, sends one message, prints the answer and exits. The runs read the memory of "
        "--project (else SWITCHBOARD_PROJECT, else your personal project). --page and --selection "
        "send what you are working on with the (first) message, as its context.",
    )
    chat.add_argument("-m", "--message", help="send this one message and exit (for scripts)")
    chat.add_argument("--conversation", metavar="ID", help="resume this conversation")
    chat.add_argument("--model", default="", help="a model id of `models list` (default: Auto)")
    chat.add_argument(
        "--language",
        default="",
        type=language_tag,
        metavar="TAG",
        help="the language of the run's notices, proposals and title: en, fr "
        "(default: the language of each message)",
    )
    # What the user is working on, sent as the run's context (not pasted into
    # the message): the model gets it as a layer of its own, the selected
    # text as content, never as instructions.
    chat.add_argument(
        "--page", metavar="ID", help="the page you are working on, by its id (sent with the message)"
    )
    chat.add_argument("--page-title", metavar="TITLE", help="that page's title")
    chat.add_argument(
        "--page-type",
        metavar="TYPE",
        help="that page's type: page (default), meeting_notes, email…",
    )
    chat.add_argument(
        "--selection",
        action="append",
        default=[],
        metavar="TEXT",
        help="text you selected on the page, sent with the (first) message; repeat for several blocks",
    )
    chat.add_argument(
        "--selection-file",
        action="append",
        default=[],
        metavar="FILE",
        help="a file's text as one selected block (-: standard input, with -m)",
    )
    chat.set_defaults(handler=run_chat)

    ask = commands.add_parser(
        "ask",
        parents=[common],
        help="ask an agent, on its shared thread",
        description="A run of AGENT on its one shared thread; the question and the answer land there "
        "with the requester (--requester, else SWITCHBOARD_AGENT, else user).",
    )
    ask.add_argument("agent", metavar="AGENT")
    ask.add_argument("message", metavar="MESSAGE")
    ask.add_argument("--requester", default="", help="who asks: an agent id, or user")
    ask.add_argument("--correlation", default="", metavar="ID", help="ties the answer to this id")
    ask.set_defaults(handler=run_ask)

    runs = commands.add_parser("runs", help="a run's record, or its events").add_subparsers(
        dest="action", required=True, metavar="action"
    )
    show = runs.add_parser("show", parents=[common], help="a run's record: status, model, skills, usage")
    show.add_argument("run_id", metavar="RUN_ID")
    show.set_defaults(handler=run_show)
    tail = runs.add_parser(
        "tail",
        parents=[common],
        help="follow a run's events until it ends",
        description="Prints a run's events (live while it runs) until its last one. A dropped "
        "connection is resumed where it stopped, with Last-Event-ID.",
    )
    tail.add_argument("run_id", metavar="RUN_ID")
    tail.add_argument("--after", default="", metavar="N", help="start after event N (a sequence number)")
    tail.set_defaults(handler=run_tail)


async def follow(ctx: Context, path: str, body: dict[str, Any], view: RunView) -> None:
    """Streams one run into ``view``; the view is closed whatever happens."""
    try:
        async with aclosing(ctx.api.stream(path, body)) as events:
            async for event in events:
                view.show(event)
    finally:
        view.close()


def ended(ctx: Context, view: RunView) -> int:
    if ctx.out.json:
        ctx.out.document(view.result())
    if view.final:
        return exits.OK
    if not view.failure:  # the stream stopped before the run's last event
        ctx.out.error(say("stream ended", run=view.run_id))
        return exits.SERVER
    return exits.RUN_FAILED


async def run_ask(ctx: Context) -> int:
    args = ctx.args
    body = {
        "message": args.message,
        "requester": args.requester or ctx.settings.agent or "user",
        "correlation_id": args.correlation,
    }
    view = RunView(ctx.out)
    await follow(ctx, f"/agents/{segment(args.agent)}/asks", body, view)
    return ended(ctx, view)


async def send(
    ctx: Context, conversation: str, message: str, context: dict[str, Any] | None = None
) -> RunView:
    view = RunView(ctx.out)
    body: dict[str, Any] = {"message": message, "model": ctx.args.model}
    if ctx.project:  # the project whose memory the run reads; none: the personal project
        body["project_id"] = ctx.project
    if ctx.args.language:  # none: the engine reads the message's language
        body["language"] = ctx.args.language
    if context:
        body["context"] = context
    await follow(ctx, f"/conversations/{segment(conversation)}/messages", body, view)
    return view


def language_tag(value: str) -> str:
    """``--language``: a BCP 47 tag ("en", "fr", "fr-CA")."""
    if not is_tag(value):
        raise argparse.ArgumentTypeError(say("bad language", value=value))
    return value


def run_context(args: argparse.Namespace) -> dict[str, Any] | None:
    """The page and selections of the command line as a message's
    ``context``; None when it gives neither. The gateway checks the limits."""
    if args.page is None and (args.page_title is not None or args.page_type is not None):
        raise UsageError(say("page needs id"))
    if "-" in args.selection_file and args.message is None:
        raise UsageError(say("selection stdin"))
    selections = [{"text": text} for text in args.selection]
    for name in args.selection_file:
        selections.append({"text": sys.stdin.read() if name == "-" else read_text(name)})
    context: dict[str, Any] = {"selections": selections} if selections else {}
    if args.page is not None:
        context["page"] = {"id": args.page, "title": args.page_title or "", "type": args.page_type or "page"}
    return context or None


def read_text(name: str) -> str:
    try:
        return Path(name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(say("cannot read", file=name, reason=exc)) from exc


async def run_chat(ctx: Context) -> int:
    args = ctx.args
    if args.message is not None and not args.message.strip():
        raise UsageError(say("empty message"))
    context = run_context(args)
    if args.conversation:
        conversation = await ctx.api.call("GET", f"/conversations/{segment(args.conversation)}")
        ctx.out.progress(
            f"{say('conversation', id=conversation['id'])} {conversation.get('title', '')}".rstrip()
        )
    else:
        conversation = await ctx.api.call("POST", "/conversations", body={})
        ctx.out.progress(say("conversation", id=conversation["id"]))
    conversation_id = str(conversation["id"])
    if ctx.project:
        ctx.out.progress(say("in project", project=ctx.project))
    if args.message is not None:
        return ended(ctx, await send(ctx, conversation_id, args.message, context))
    if ctx.out.json:
        raise UsageError(say("json needs message"))
    ctx.out.progress(say("leave"))
    while True:
        try:
            message = await asyncio.to_thread(prompt, ctx)
        except EOFError:
            ctx.out.line("")
            return exits.OK
        if message.strip() in ("/quit", "/exit"):
            return exits.OK
        if not message.strip():
            continue
        try:
            # The page and selections go with the first message only: what
            # the user selected is what that message is about.
            await send(ctx, conversation_id, message, context)
            context = None
        except ApiRefusal as refusal:  # one refused message does not end the chat
            ctx.out.refusal(refusal)


def prompt(ctx: Context) -> str:
    if ctx.out.live:
        return ctx.out.console.input(f"[bold cyan]{say('prompt')}[/] ")
    return input()


async def run_show(ctx: Context) -> int:
    run = await ctx.api.call("GET", f"/runs/{segment(ctx.args.run_id)}")
    if ctx.out.json:
        ctx.out.document(run)
        return exits.OK
    fields = [
        (field("run"), run.get("id", "")),
        (field("status"), run.get("status", "")),
        (field("conversation"), run.get("conversation_id", "")),
        (field("agent"), run.get("agent_id", "")),
        (field("model"), f"{run.get('model', '')} ({run.get('provider', '')})" if run.get("model") else ""),
        (field("requested"), run.get("requested_model", "")),
        (
            field("tokens"),
            say("token counts", tokens_in=run.get("tokens_in", 0), tokens_out=run.get("tokens_out", 0)),
        ),
        (
            field("skills"),
            ", ".join(f"{s.get('name')} ({s.get('invocation')})" for s in run.get("skills", [])),
        ),
        (field("sources"), ", ".join(f"{s.get('kind')}: {s.get('title')}" for s in run.get("sources", []))),
        (field("started"), run.get("start_time", "")),
        (field("finished"), run.get("finish_time", "")),
        (field("error"), run.get("error", "")),
        *context_fields(run.get("context") or {}),
    ]
    for name, value in fields:
        if value:
            ctx.out.line(f"{name + ':':<14}{value}")
    layers = [
        [str(layer.get("key", "")), "present" if layer.get("present") else "absent",
         str(layer.get("size_chars", 0)), short(layer.get("note", ""))]
        for layer in run.get("layers", [])
    ]  # fmt: skip
    if layers:
        ctx.out.table(["layer", "", "chars", "note"], layers, title=say("model received"))
    return exits.OK


def context_fields(context: dict[str, Any]) -> list[tuple[str, str]]:
    """Who started the run, and the page and selections it was sent with."""
    page = context.get("page") or {}
    where = f"{page.get('title') or page.get('id', '')} ({page.get('type', '')}, {page.get('id', '')})"
    selections = context.get("selections") or []
    return [
        (field("regime"), context.get("regime", "")),
        (field("page"), where if page else ""),
        (field("selection"), say("selected blocks", count=len(selections)) if selections else ""),
    ]


async def run_tail(ctx: Context) -> int:
    run_path = f"/runs/{segment(ctx.args.run_id)}"
    if ctx.args.after and not ctx.args.after.isdigit():
        raise UsageError(say("after number"))
    view = RunView(ctx.out, json_lines=ctx.out.json)
    view.last_id = ctx.args.after
    failures = 0
    try:
        while not view.ended:
            before = view.last_id
            try:
                async with aclosing(
                    ctx.api.stream(f"{run_path}/events", method="GET", last_event_id=view.last_id)
                ) as events:
                    async for event in events:
                        view.show(event)
            except ApiRefusal as refusal:
                if refusal.status not in (502, 503, 504):
                    raise
                ctx.out.progress(say("connection lost", message=refusal.message, after=view.last_id or 0))
            else:
                if not view.ended and view.last_id == before:
                    # Nothing new (a 204: the run ended before the events asked for): its record says how.
                    run = await ctx.api.call("GET", run_path)
                    if run.get("status") != "running":
                        return (
                            exits.OK
                            if run.get("status") in ("done", "waiting_approval")
                            else exits.RUN_FAILED
                        )
            failures = 0 if view.last_id != before else failures + 1
            if failures >= TAIL_RETRIES:
                ctx.out.error(say("gave up", tries=TAIL_RETRIES))
                return exits.SERVER
            if not view.ended:
                await asyncio.sleep(min(0.2 * 2**failures, 5.0))
    finally:
        view.close()
    return exits.OK if view.final else exits.RUN_FAILED
