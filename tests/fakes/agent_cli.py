"""A fake headless agent CLI (Claude Code / Codex style) for the CLI provider's
tests. It reads its context the way it is told, prints JSON-lines events (a
session with a native id, text deltas, a result) or plain text, and answers
deterministically from what it received:

    Context N bytes, first line: <first line of the context>. You asked: <prompt>.

prefixed by "resumed <ID>. " when it resumed a session. Each run appends a
JSON line to ``--report`` with what it saw (context, cwd, argv, environment).

Options: ``--context-from convention_file:NAME | flag | stdin | env:VAR``,
``--context-file PATH`` (flag), ``--resume ID``, ``--state DIR`` (known
sessions; resuming an unknown one fails like a real CLI), ``--format
jsonl|text``, ``--usage IN,OUT``, ``--fail STATUS``, ``--hang``,
``--crash-after N`` (SIGKILL itself after N deltas), ``--wait-for PATH``
(after the first delta, wait until PATH exists), ``--mcp-config PATH`` (MCP
servers in Claude Code's ``.mcp.json`` shape), then the prompt.

With ``--mcp-config``, a prompt holding ``ask <agent> (<correlation id>):
<question>`` makes the CLI start the configured ``switchboard`` MCP server
with the official SDK's client, as a real agent CLI does, call its
``ask_agent`` tool, and answer ``<agent> answered: <answer>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import sys
import time
import uuid
from pathlib import Path


def _context(args: argparse.Namespace) -> bytes:
    source = args.context_from
    if source.startswith("convention_file:"):
        return Path(source.split(":", 1)[1]).read_bytes()  # relative: from the cwd
    if source == "flag":
        return Path(args.context_file).read_bytes()
    if source == "stdin":
        return sys.stdin.buffer.read()
    if source.startswith("env:"):
        return os.environ[source.split(":", 1)[1]].encode()
    raise SystemExit(f"unknown context source {source!r}")


_ASK = re.compile(r"ask ([a-z0-9][a-z0-9-]*) \(([^)]+)\): (.+)")


async def _ask_over_mcp(config_path: str, target: str, correlation: str, question: str) -> str:
    from mcp import Client, StdioServerParameters

    server = json.loads(Path(config_path).read_text(encoding="utf-8"))["mcpServers"]["switchboard"]
    params = StdioServerParameters(
        command=server["command"], args=server.get("args", []), env=server.get("env"), cwd=os.getcwd()
    )
    async with Client(params, read_timeout_seconds=60) as client:
        result = await client.call_tool(
            "ask_agent", {"target": target, "message": question, "correlation_id": correlation}
        )
    if result.is_error or result.structured_content is None:
        return f"the ask failed: {result.content}"
    return f"{target} answered: {result.structured_content['answer']}"


def _emit(event: dict[str, object]) -> None:
    print(json.dumps(event), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--context-from", required=True)
    parser.add_argument("--context-file", default="")
    parser.add_argument("--resume", default="")
    parser.add_argument("--state", default="")
    parser.add_argument("--format", default="jsonl", choices=["jsonl", "text"])
    parser.add_argument("--usage", default="")
    parser.add_argument("--fail", type=int, default=0)
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--crash-after", type=int, default=-1)
    parser.add_argument("--wait-for", default="")
    parser.add_argument("--report", default="")
    parser.add_argument("--model", default="")
    parser.add_argument("--mcp-config", default="")
    parser.add_argument("prompt", nargs="?", default="")
    args = parser.parse_args()

    context = _context(args)
    if args.report:
        seen = {
            "context": context.decode(),
            "cwd": os.getcwd(),
            "argv": sys.argv[1:],
            "context_file": args.context_file,
            "context_file_exists": bool(args.context_file) and Path(args.context_file).is_file(),
            "env": sorted(os.environ),
            "pid": os.getpid(),
        }
        with open(args.report, "a", encoding="utf-8") as report:
            report.write(json.dumps(seen) + "\n")
    if args.fail:
        print("fatal: invalid API key", file=sys.stderr, flush=True)
        sys.exit(args.fail)
    state = Path(args.state) if args.state else None
    if args.resume and state is not None and not (state / args.resume).exists():
        print(f"No conversation found with session ID: {args.resume}", file=sys.stderr, flush=True)
        sys.exit(1)
    session = args.resume or f"sess-{uuid.uuid4().hex[:12]}"
    if state is not None:
        (state / session).touch()

    first_line = context.decode().split("\n", 1)[0]
    answer = f"Context {len(context)} bytes, first line: {first_line}. You asked: {args.prompt}."
    if args.resume:
        answer = f"resumed {args.resume}. {answer}"
    ask = _ASK.search(args.prompt) if args.mcp_config else None
    if ask is not None:
        answer = asyncio.run(_ask_over_mcp(args.mcp_config, *ask.groups()))
    words = answer.split(" ")
    pieces = [w if i == 0 else " " + w for i, w in enumerate(words)]

    if args.format == "text":
        print(f"session id: {session}", file=sys.stderr, flush=True)
        for piece in pieces:
            sys.stdout.write(piece)
            sys.stdout.flush()
        return
    print("Warming up the agent...", flush=True)  # not JSON: skipped
    _emit({"type": "session", "session_id": session})
    if args.hang:
        time.sleep(60)
    for index, piece in enumerate(pieces):
        if index == args.crash_after:
            os.kill(os.getpid(), signal.SIGKILL)
        _emit({"type": "text", "text": piece, "session_id": session})
        if index == 0 and args.wait_for:
            deadline = time.monotonic() + 10
            while not Path(args.wait_for).exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        if index == 0:
            _emit({"type": "tool_use", "name": "read_file", "input": {"path": "README.md"}})
    result: dict[str, object] = {"type": "result", "session_id": session, "result": answer}
    if args.usage:
        tokens_in, tokens_out = (int(n) for n in args.usage.split(","))
        result["usage"] = {"input_tokens": tokens_in, "output_tokens": tokens_out}
    _emit(result)


if __name__ == "__main__":
    main()
