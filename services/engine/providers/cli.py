"""A headless agent CLI (Claude Code / Codex style) as an LLM provider.

Each call runs the configured command once, as a subprocess, in a fresh run
directory that is removed afterwards. The fully composed context (the
system message with every instruction layer, then any earlier turns) reaches
the CLI by one of four injection strategies, always the same bytes:

* ``convention_file``: written as ``<run dir>/<convention_file_name>``
  (``AGENTS.md``, ``CLAUDE.md``...), where the CLI looks by itself;
* ``flag``: written to a file *outside* the run directory and passed by its
  absolute path (``context_flag PATH``, or ``{context_file}`` in the command)
  — a relative path would not resolve from the run directory;
* ``stdin``: written to the CLI's standard input;
* ``env``: the value of the ``context_env`` variable.

The last user message is the prompt (``{prompt}`` in the command). The CLI's
stdout is streamed as text as it comes: JSON-lines events read through
``events`` (text deltas, the native session id, usage), or plain text. The
native session id is kept in a :class:`SessionStore` under the caller's
``session_key`` and resumed on the next call with ``resume_args``. Tools
offered by the engine are not passed: an agent CLI runs its own.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import logging
import os
import re
import shutil
import signal
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from services.engine.providers.base import (
    ChatMessage,
    Chunk,
    ProviderError,
    TextChunk,
    ToolSpec,
    UsageChunk,
    count_tokens,
)
from services.engine.providers.config import PLACEHOLDER, ProviderConfig, check_cli_config

log = logging.getLogger(__name__)

# The threads service keeps native ids of at most this many characters.
MAX_SESSION_ID_CHARS = 256
# A JSON line longer than this is refused rather than buffered without end.
MAX_LINE_BYTES = 16 * 1024 * 1024
_STDERR_KEPT = 64 * 1024
_STDERR_SHOWN = 2000


class SessionStore(Protocol):
    """Native session ids by (key, provider): the key is the agent thread
    and the provider this provider's name, so the threads service's provider
    sessions back it directly (GetProviderSession; BindProviderSession with
    ``replace``)."""

    async def get(self, key: str, provider: str) -> str | None: ...

    async def put(self, key: str, provider: str, session_id: str) -> None: ...


class InMemorySessionStore:
    """Sessions in this process only, for tests and for a provider built
    without a store (the engine passes services.engine.sessions.ThreadsSessionStore)."""

    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], str] = {}

    async def get(self, key: str, provider: str) -> str | None:
        return self._sessions.get((key, provider))

    async def put(self, key: str, provider: str, session_id: str) -> None:
        self._sessions[(key, provider)] = session_id


def compose_context(messages: Sequence[ChatMessage]) -> tuple[str, str]:
    """The context document and the prompt: the system messages (every
    instruction layer), then the earlier turns, if any, as a transcript; the
    prompt is the last user message."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    turns = [m for m in messages if m.role != "system"]
    prompt = turns.pop().content if turns and turns[-1].role == "user" else ""
    if not turns:
        return system, prompt
    lines = ["# Conversation so far"]
    for turn in turns:
        heading = f"tool result ({turn.tool_call_id})" if turn.role == "tool" else turn.role
        body = [turn.content] if turn.content else []
        body += [f"[tool call {c.name} {c.arguments}]" for c in turn.tool_calls]
        lines.append(f"## {heading}\n" + "\n".join(body))
    history = "\n\n".join(lines)
    return (f"{system}\n\n{history}" if system else history), prompt


def _at(event: object, path: str) -> object:
    """The value at a dotted path (an integer step indexes a list), or None."""
    value = event
    for step in path.split("."):
        if isinstance(value, dict):
            value = value.get(step)
        elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            return None
    return value


def _expand(arg: str, values: Mapping[str, str]) -> str:
    # One pass: a placeholder inside a substituted value (a prompt that says
    # "{model}") stays as written.
    return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), arg)


@dataclass
class _Outcome:
    """What one execution of the CLI produced, beyond its text."""

    session_id: str = ""
    tokens_in: int | None = None
    tokens_out: int | None = None
    text: list[str] = field(default_factory=list)
    exit_status: int | None = None
    failure: str = ""


class CliProvider:
    # It keeps sessions of its own (resumed by id): the engine does not bind
    # a stand-in session for it.
    native_sessions = True

    def __init__(
        self, config: ProviderConfig, environment: Mapping[str, str], sessions: SessionStore
    ) -> None:
        self.name = config.name
        self.kind = "cli"
        self.max_output_tokens = config.max_output_tokens
        self._config = config
        self._sessions = sessions
        # Only the named variables: the engine's own secrets stay out of an
        # agent that runs tools of its own.
        names = [*config.pass_env, *([config.api_key_env] if config.api_key_env else [])]
        self._environment = {n: environment[n] for n in names if n in environment}

    async def close(self) -> None:
        """Holds nothing between calls: each call's process ends with it."""

    async def stream(
        self,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        *,
        session_key: str = "",
        context_strategy: str = "",
    ) -> AsyncIterator[Chunk]:
        context, prompt = compose_context(messages)
        config = self._config
        if context_strategy and context_strategy != config.context_strategy:
            config = config.model_copy(update={"context_strategy": context_strategy})
        resume = await self._sessions.get(session_key, self.name) if session_key else None
        outcome = _Outcome()
        async with contextlib.aclosing(
            self._execute(config, model, context, prompt, resume, outcome)
        ) as chunks:
            async for chunk in chunks:
                yield chunk
        if resume and outcome.exit_status and not outcome.text:
            # The stored session could not be resumed (expired, or made on
            # another machine): the composed context carries the work state,
            # so a fresh session continues it.
            log.warning("%s: resuming session %s failed; starting a fresh one", self.name, resume)
            outcome = _Outcome()
            async with contextlib.aclosing(
                self._execute(config, model, context, prompt, None, outcome)
            ) as chunks:
                async for chunk in chunks:
                    yield chunk
        if outcome.exit_status:
            raise ProviderError(self.name, outcome.failure, retryable=False)
        if session_key and outcome.session_id and outcome.session_id != resume:
            await self._sessions.put(session_key, self.name, outcome.session_id)
        text = "".join(outcome.text)
        yield UsageChunk(
            tokens_in=outcome.tokens_in
            if outcome.tokens_in is not None
            else count_tokens(context) + count_tokens(prompt),
            tokens_out=outcome.tokens_out if outcome.tokens_out is not None else count_tokens(text),
        )

    def strategy_problem(self, strategy: str) -> str:
        """Why this CLI cannot take its context by ``strategy`` ("" when it can)."""
        try:
            check_cli_config(self._config.model_copy(update={"context_strategy": strategy}))
        except ValueError as exc:
            return str(exc)
        return ""

    @staticmethod
    def _argv(
        config: ProviderConfig, model: str, prompt: str, context_file: str, run_dir: str, resume: str | None
    ) -> list[str]:
        values = {"model": model, "prompt": prompt, "context_file": context_file, "run_dir": run_dir}
        argv = [_expand(arg, values) for arg in config.command]
        extra: list[str] = []
        if config.context_strategy == "flag" and config.context_flag:
            extra += [config.context_flag, context_file]
        if resume:
            extra += [_expand(arg, {**values, "session_id": resume}) for arg in config.resume_args]
        # Options go just before the prompt argument (the last positional of
        # these CLIs), or at the end when the prompt is not in the command.
        at = next((i for i, arg in enumerate(config.command) if "{prompt}" in arg), len(argv))
        return argv[:at] + extra + argv[at:]

    async def _execute(
        self,
        config: ProviderConfig,
        model: str,
        context: str,
        prompt: str,
        resume: str | None,
        outcome: _Outcome,
    ) -> AsyncGenerator[TextChunk, None]:
        """Runs the CLI once, yielding its text; a non-zero exit is left in
        ``outcome.exit_status`` (with ``outcome.failure``) for the caller to
        decide; a timeout, a crash or a failure to start raise."""
        base = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="switchboard-cli-"))
        process: asyncio.subprocess.Process | None = None
        try:
            run_dir = base / "run"
            context_file = ""
            if config.context_strategy == "convention_file":
                context_file = str(run_dir / config.convention_file_name)
            elif config.context_strategy == "flag":
                context_file = str(base / "context.md")
            await asyncio.to_thread(_prepare, run_dir, context_file, context)
            environment = dict(self._environment)
            if config.context_strategy == "env":
                environment[config.context_env] = context
            argv = self._argv(config, model, prompt, context_file, str(run_dir), resume)
            stdin = config.context_strategy == "stdin"
            try:
                process = await asyncio.create_subprocess_exec(
                    *argv,
                    cwd=run_dir,
                    env=environment,
                    stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    start_new_session=True,  # its own process group: a kill reaches its children
                    limit=MAX_LINE_BYTES,
                )
            except (OSError, ValueError) as exc:  # missing executable, no permission, E2BIG, NUL
                raise ProviderError(self.name, f"cannot start {argv[0]!r}: {exc}", retryable=False) from exc
            assert process.stdout is not None and process.stderr is not None
            stderr = asyncio.create_task(_read_capped(process.stderr))
            feeding = asyncio.create_task(_feed(process.stdin, context.encode())) if stdin else None
            try:
                async for chunk in self._read_output(process.stdout, outcome):
                    yield chunk
                async with asyncio.timeout(config.timeout):
                    status = await process.wait()
            except TimeoutError as exc:
                raise ProviderError(
                    self.name, f"no output for {config.timeout:g} s; the CLI was stopped", retryable=True
                ) from exc
            finally:
                _kill(process)
                await process.wait()
                errors = (await stderr).decode(errors="replace")
                if feeding is not None:
                    await feeding
            if status < 0:
                # A crash (killed by a signal): another attempt may succeed,
                # unless text reached the caller already.
                message = f"the CLI was killed by signal {-status}"
                raise ProviderError(self.name, message, retryable=not outcome.text)
            if config.output == "text" and config.session_pattern:
                found = re.search(config.session_pattern, errors)
                if found and 0 < len(found.group(1)) <= MAX_SESSION_ID_CHARS:
                    outcome.session_id = found.group(1)
            if status > 0:
                outcome.exit_status = status
                outcome.failure = f"the CLI exited with status {status}: {errors.strip()[-_STDERR_SHOWN:]}"
        finally:
            if process is not None and process.returncode is None:
                _kill(process)  # the consumer stopped early: no orphan keeps running
                await process.wait()
            await asyncio.to_thread(shutil.rmtree, base, True)

    async def _read_output(self, stdout: asyncio.StreamReader, outcome: _Outcome) -> AsyncIterator[TextChunk]:
        # Each read within the timeout. asyncio.timeout, not wait_for: on
        # Python 3.11 wait_for loses a cancellation (the user's Stop) that
        # lands as a read completes.
        timeout = self._config.timeout

        async def within(read: Awaitable[bytes]) -> bytes:
            async with asyncio.timeout(timeout):
                return await read

        if self._config.output == "text":
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            while data := await within(stdout.read(65536)):
                if text := decoder.decode(data):
                    outcome.text.append(text)
                    yield TextChunk(text)
            if text := decoder.decode(b"", final=True):
                outcome.text.append(text)
                yield TextChunk(text)
            return
        events = self._config.events
        while True:
            try:
                line = await within(stdout.readline())
            except ValueError as exc:  # a line beyond MAX_LINE_BYTES
                raise ProviderError(self.name, f"an output line is too long: {exc}", retryable=False) from exc
            if not line:
                return
            try:
                event = json.loads(line)
            except ValueError:
                continue  # CLIs print the odd banner or warning between events
            if not isinstance(event, dict):
                continue
            session = _at(event, events.session_id)
            if isinstance(session, str) and 0 < len(session) <= MAX_SESSION_ID_CHARS:
                outcome.session_id = session
            for path, slot in ((events.tokens_in, "tokens_in"), (events.tokens_out, "tokens_out")):
                tokens = _at(event, path)
                if isinstance(tokens, int) and not isinstance(tokens, bool):
                    setattr(outcome, slot, tokens)
            text_path = events.text.get(str(event.get(events.type_field)))
            delta = _at(event, text_path) if text_path else None
            if isinstance(delta, str) and delta:
                outcome.text.append(delta)
                yield TextChunk(delta)


def _prepare(run_dir: Path, context_file: str, context: str) -> None:
    run_dir.mkdir()
    if context_file:
        # Bytes as composed: no newline translation, UTF-8 whatever the locale.
        Path(context_file).write_bytes(context.encode())


async def _read_capped(stream: asyncio.StreamReader) -> bytes:
    """The stream's first bytes up to a cap; the rest is read and dropped
    so the CLI never blocks on a full pipe."""
    kept = bytearray()
    while data := await stream.read(65536):
        kept += data[: max(0, _STDERR_KEPT - len(kept))]
    return bytes(kept)


async def _feed(stdin: asyncio.StreamWriter | None, data: bytes) -> None:
    assert stdin is not None
    # A CLI that exits without reading all of its input is not our failure.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.write(data)
        await stdin.drain()
        stdin.close()
        await stdin.wait_closed()


def _kill(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
