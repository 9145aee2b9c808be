"""The terminal client (``switchboard``, here ``python -m client``) against the
launched system, checked against what the HTTP API then holds: plain output
when stdout is a pipe, JSON with --json, the API's error messages and the
exit codes of client.exits; one chat driven in a pseudo-terminal shows its
live steps and streamed answer. The module keeps the default launch
settings, so it shares a system with others.

Each command runs the client's ``main`` with the environment, standard
streams and exit status of a process of its own (``run_client``), over real
sockets to the launched gateway: a Python process per command cost about a
second of CPU each, 158 of them per suite run. What only a process shows
(reading the config file under HOME and the environment, the exit status
through ``sys.exit``, a terminal) runs as real subprocesses of
``python -m client``."""

from __future__ import annotations

import functools
import io
import json
import os
import pty
import re
import select
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from client import cli
from tests.e2e.conftest import Launched

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = {
    "fr": "Quand est la fenêtre de déploiement ?",
    "en": "When is the deploy window?",
}


def environment(home: Path, url: str | None, token: str | None) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("SWITCHBOARD_") and key not in ("XDG_CONFIG_HOME", "LC_ALL", "LC_MESSAGES")
    }
    env.update(
        {
            "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'gen'}",
            "HOME": str(home),  # no config file of the machine's user
            "PYTHONIOENCODING": "utf-8",
            "LANG": "C.UTF-8",  # the client's own words in English; a test asks for French with LANG=fr_…
        }
    )
    if url is not None:
        env["SWITCHBOARD_URL"] = url
    if token is not None:
        env["SWITCHBOARD_TOKEN"] = token
    return env


def run_client(args: list[str], env: dict[str, str], stdin: str) -> subprocess.CompletedProcess[str]:
    """``client.cli.main(args)`` (what ``python -m client`` runs) as a process
    would: ``env`` as its whole environment, ``stdin`` on its standard input,
    its output captured from pipes (no terminal), its status from its return
    or ``sys.exit`` (argparse's usage errors)."""
    saved_env, saved_streams = dict(os.environ), (sys.stdin, sys.stdout, sys.stderr)
    out, err = io.StringIO(), io.StringIO()
    os.environ.clear()
    os.environ.update(env)
    sys.stdin, sys.stdout, sys.stderr = io.StringIO(stdin), out, err
    try:
        code = cli.main(args)
    except SystemExit as exited:
        code = exited.code if isinstance(exited.code, int) else 1
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        sys.stdin, sys.stdout, sys.stderr = saved_streams
    return subprocess.CompletedProcess(["switchboard", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture
def switchboard(launched: Launched, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Runs the client with ARGS as alice (or ``token=``), returning the
    finished command; ``process=True`` runs ``python -m client`` itself."""

    def run(
        *args: str,
        token: str | None = launched.token("alice"),
        url: str | None = launched.url,
        stdin: str | None = None,
        env: dict[str, str] | None = None,
        process: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        environ = {**environment(tmp_path, url, token), **(env or {})}
        if not process:
            return run_client(list(args), environ, stdin or "")
        return subprocess.run(
            [sys.executable, "-m", "client", *args],
            cwd=ROOT,
            env=environ,
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=60,
        )

    return run


def api(launched: Launched) -> httpx.Client:
    return httpx.Client(base_url=launched.url + "/api/agent", headers=launched.headers(), timeout=60)


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_models_and_skills_are_listed_as_lines_and_as_json(switchboard) -> None:  # type: ignore[no-untyped-def]
    models = switchboard("models", "list")
    assert models.returncode == 0, models.stderr
    lines = [line.split("\t") for line in models.stdout.splitlines()]
    assert (
        lines[0][0] == "auto" and ["offline-fast", "offline", "switchboard-offline-fast", "fast", ""] in lines
    )
    assert "\x1b[" not in models.stdout  # a pipe gets no escape sequences
    as_json = switchboard("models", "list", "--json")
    assert [m["id"] for m in json.loads(as_json.stdout)][:2] == ["auto", "offline-fast"]

    skills = switchboard("--json", "skills", "list")
    assert skills.returncode == 0, skills.stderr
    translate = next(s for s in json.loads(skills.stdout) if s["name"] == "translate")
    assert translate["enabled"] is True
    plain = switchboard("skills", "list").stdout
    assert any(line.startswith("translate\ton\t") for line in plain.splitlines())


def test_agents_are_registered_updated_and_listed(switchboard, launched: Launched) -> None:  # type: ignore[no-untyped-def]
    agent = new_id("architecte")
    registered = switchboard(
        "agents", "register", agent, "--name", "Architecte", "--persona", "Conçoit les services."
    )
    assert registered.returncode == 0, registered.stderr
    assert registered.stdout == f"registered {agent} (Architecte, default model)\n"
    updated = switchboard(
        "agents", "update", agent, "--model", "offline-strong", "--injection", "stdin", "--json"
    )
    assert updated.returncode == 0, updated.stderr
    assert json.loads(updated.stdout)["model"] == "offline-strong"
    with api(launched) as http:
        stored = http.get(f"/agents/{agent}").json()
    assert (stored["display_name"], stored["persona"], stored["model"], stored["injection_strategy"]) == (
        "Architecte",
        "Conçoit les services.",
        "offline-strong",
        "stdin",
    )
    listed = switchboard("agents", "list").stdout.splitlines()
    assert f"{agent}\tArchitecte\t\toffline-strong\tstdin\tConçoit les services." in listed

    # Pinned to the provider of its model; a provider no model is served by,
    # and a strategy that does not exist, are refused naming what would do.
    pinned = switchboard("agents", "update", agent, "--provider", "offline")
    assert (
        pinned.returncode == 0 and pinned.stdout == f"updated {agent} (Architecte, offline/offline-strong)\n"
    )
    nowhere = switchboard("agents", "update", agent, "--provider", "nowhere")
    assert nowhere.returncode == 2 and "'nowhere' serves none of the configured models" in nowhere.stderr
    assert "the providers are: offline" in nowhere.stderr
    pipe = switchboard("agents", "update", agent, "--injection", "pipe")
    assert pipe.returncode == 2 and "injection_strategy" in pipe.stderr, pipe.stderr
    assert "'convention_file'" in pipe.stderr and "'env'" in pipe.stderr
    back = switchboard("agents", "update", agent, "--provider", "", "--injection", "unspecified", "--json")
    assert back.returncode == 0, back.stderr
    assert (json.loads(back.stdout)["provider_id"], json.loads(back.stdout)["injection_strategy"]) == (
        "",
        "unspecified",
    )

    nothing = switchboard("agents", "update", agent)  # no field to change: refused before any call
    assert nothing.returncode == 2 and "nothing to change" in nothing.stderr
    unknown = switchboard("agents", "update", new_id("nobody"), "--name", "X")
    assert unknown.returncode == 3 and "not found" in unknown.stderr
    bad = switchboard("agents", "register", "Pas un slug !")
    assert bad.returncode == 2 and "INVALID_ARGUMENT" in bad.stderr, bad.stderr


@pytest.mark.parametrize("language", ["fr", "en"])
def test_ask_streams_the_answer_onto_the_agents_thread_and_threads_show_reads_it(  # type: ignore[no-untyped-def]
    switchboard, launched: Launched, language: str
) -> None:
    agent, correlation = new_id("qa"), new_id("corr")
    question = QUESTIONS[language]
    assert switchboard("agents", "register", agent).returncode == 0
    asked = switchboard("ask", agent, question, "--requester", "dev", "--correlation", correlation)
    assert asked.returncode == 0, asked.stderr
    # Stdout is the answer alone; the steps and the run went to stderr.
    assert asked.stdout.startswith("You asked: dev asks: " + question), asked.stdout
    assert asked.stdout.count("\n") == 1
    assert "✓" in asked.stderr and "tokens · run " in asked.stderr
    other = switchboard("ask", agent, "Et la revue ?" if language == "fr" else "And the review?", "--json")
    assert other.returncode == 0, other.stderr
    other_run = json.loads(other.stdout)
    assert other_run["status"] == "done" and other_run["answer"].startswith("You asked: user asks: ")

    shown = switchboard("threads", "show", agent, "--correlation", correlation)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == f"#1 user dev [{correlation}]" and lines[1] == f"  {question}"
    assert lines[2] == f"#2 assistant {agent} [{correlation}]"
    assert "partial view" in shown.stderr  # the thread also holds the other question
    pair = json.loads(switchboard("threads", "show", agent, "--requester", "dev", "--json").stdout)
    assert pair["view"] == "pair" and pair["partial_view"] is True
    assert [(e["role"], e["requester"]) for e in pair["entries"]] == [("user", "dev"), ("assistant", "dev")]
    full = json.loads(switchboard("threads", "show", agent, "--json").stdout)
    assert full["view"] == "full" and full["partial_view"] is False and len(full["entries"]) == 4
    whole = switchboard("threads", "show", agent)
    assert "partial view" not in whole.stderr
    en_francais = switchboard("threads", "show", agent, "--requester", "dev", env={"LANG": "fr_FR.UTF-8"})
    assert f"vue partielle : le fil de {agent} contient des entrées" in en_francais.stderr
    with api(launched) as http:
        view = http.get(f"/agents/{agent}/entries", params={"correlation_id": correlation}).json()
    assert view["entries"][1]["content"] == asked.stdout.strip()

    missing = switchboard("ask", new_id("personne"), question, env={"LANG": f"{language}_FR.UTF-8"})
    assert missing.returncode == 3, missing.stderr
    assert "NOT_FOUND" in missing.stderr and "not found (HTTP 404)" in missing.stderr  # the API's words
    assert missing.stderr.startswith("erreur :" if language == "fr" else "error:")


@pytest.mark.parametrize("language", ["fr", "en"])
def test_chat_one_shot_resumes_a_conversation_and_reads_stdin_without_a_terminal(  # type: ignore[no-untyped-def]
    switchboard, launched: Launched, language: str
) -> None:
    question = QUESTIONS[language]
    first = switchboard("chat", "-m", question, "--json")
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout)
    assert result["status"] == "done" and result["model"] == "switchboard-offline-fast"
    # The offline model echoes the question (and any note it recalled) and names itself.
    assert result["answer"].startswith(f"You asked: {question}.")
    assert result["answer"].endswith("This answer comes from switchboard-offline-fast.")
    assert result["usage"]["tokens_in"] > 0 and result["error"] is None
    conversation = result["conversation_id"]

    follow_up = "Et la revue ?" if language == "fr" else "And the review?"
    second = switchboard("chat", "--conversation", conversation, "-m", follow_up)
    assert second.returncode == 0, second.stderr
    assert second.stdout.startswith(f"You asked: {follow_up}.") and second.stdout.count("\n") == 1
    # Interactive without a terminal: one message a line, then /quit.
    third = switchboard("chat", "--conversation", conversation, stdin="Merci\n\n/quit\n")
    assert third.returncode == 0, third.stderr
    assert "You asked: Merci." in third.stdout
    with api(launched) as http:
        entries = http.get(f"/conversations/{conversation}/entries").json()["entries"]
    assert [e["content"] for e in entries if e["role"] == "user"] == [question, follow_up, "Merci"]
    assert len(entries) == 6

    unknown = switchboard("chat", "--conversation", "nope", "-m", question)
    assert unknown.returncode == 3 and "conversation 'nope' not found" in unknown.stderr
    blank = switchboard("chat", "-m", "   ")
    assert blank.returncode == 2
    # A run that starts, then fails (a model nobody configured): its error event, exit 1.
    failed = switchboard("chat", "-m", question, "--model", "gpt-9", "--json")
    assert failed.returncode == 1, failed.stderr
    assert json.loads(failed.stdout)["error"]["code"] == "ERROR_REASON_INVALID_ARGUMENT"
    assert "model 'gpt-9' is not configured" in failed.stderr


CONTEXTS = {
    "fr": (
        "Résume la sélection.",
        "Compte rendu « produit »",
        "Livraison mardi, sans faute.",
        "Équipe : Zoé.\n",
    ),
    "en": ("Summarise the selection.", "Q3 roadmap", "The deploy moves to Tuesday.", "Team: Zoe.\n"),
}


@pytest.mark.parametrize("language", ["fr", "en"])
def test_chat_sends_the_page_and_selections_as_the_runs_context(  # type: ignore[no-untyped-def]
    switchboard, launched: Launched, language: str, tmp_path: Path
) -> None:
    message, title, selected, in_file = CONTEXTS[language]
    block = tmp_path / "block.txt"
    block.write_text(in_file, encoding="utf-8")
    env = {"LANG": f"{language}_FR.UTF-8"}
    options = ["--page", "p-7", "--page-title", title, "--page-type", "meeting_notes"]
    sent = switchboard(
        "chat",
        "-m",
        message,
        *options,
        "--selection",
        selected,
        "--selection-file",
        str(block),
        "--json",
        env=env,
    )
    assert sent.returncode == 0, sent.stderr
    run_id = json.loads(sent.stdout)["run_id"]
    with api(launched) as http:
        run = http.get(f"/runs/{run_id}").json()
        entries = http.get(f"/conversations/{run['conversation_id']}/entries").json()["entries"]
    assert run["context"] == {
        "regime": "user",
        "page": {"id": "p-7", "title": title, "type": "meeting_notes"},
        "selections": [{"text": selected, "block_id": ""}, {"text": in_file, "block_id": ""}],
    }
    assert {layer["key"]: layer for layer in run["layers"]}["run_context"]["item_count"] == 2
    assert [e["content"] for e in entries if e["role"] == "user"] == [message]  # nothing pasted in

    shown = switchboard("runs", "show", run_id, env=env).stdout.splitlines()
    words = {
        "fr": ("régime:", "sélection:", "2 bloc(s) sélectionné(s)"),
        "en": ("regime:", "selected:", "2 selected block(s)"),
    }
    regime, selection, count = words[language]
    assert f"{regime:<14}user" in shown and f"{selection:<14}{count}" in shown
    assert f"{'page:':<14}{title} (meeting_notes, p-7)" in shown

    # A selection from standard input, with -m.
    piped = switchboard("chat", "-m", message, "--selection-file", "-", "--json", stdin=selected)
    with api(launched) as http:
        context = http.get(f"/runs/{json.loads(piped.stdout)['run_id']}").json()["context"]
    assert context == {"regime": "user", "selections": [{"text": selected, "block_id": ""}]}

    # Refused before any run: a page's details without its id, standard
    # input for a chat that reads its messages there, a selection too long.
    alone = switchboard("chat", "-m", message, "--page-title", title, env=env)
    assert alone.returncode == 2 and ("--page-title" in alone.stderr and "--page" in alone.stderr)
    assert switchboard("chat", "--selection-file", "-").returncode == 2
    long = switchboard("chat", "-m", message, "--selection", "x" * 4001)
    assert long.returncode == 2 and "context.selections.0.text" in long.stderr, long.stderr


class DroppingProxy:
    """A TCP proxy to the gateway that cuts the first run-events response
    it relays just before the event ``cut_before`` (a dropped connection),
    then relays every later connection whole. ``requests`` keeps each
    request's head, to see the ``Last-Event-ID`` a resuming client sent."""

    def __init__(self, upstream: str, cut_before: bytes) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.cut_before = cut_before
        self.requests: list[str] = []
        self.cut = False
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        with client, socket.create_connection(self.upstream) as upstream:
            head = client.recv(65536)
            self.requests.append(head.decode("latin-1"))
            upstream.sendall(head)
            cutting = b"/events" in head.split(b"\r\n", 1)[0] and not self.cut
            received = b""
            while data := upstream.recv(65536):
                received += data
                if cutting and self.cut_before in received:
                    self.cut = True
                    keep = len(data) - (len(received) - received.index(self.cut_before))
                    client.sendall(data[: max(keep, 0)])
                    return
                client.sendall(data)

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def proxy(launched: Launched) -> Iterator[DroppingProxy]:
    relay = DroppingProxy(launched.url, b"id: 3\r\n")
    yield relay
    relay.close()


def test_runs_show_and_tail_resume_after_a_dropped_connection(  # type: ignore[no-untyped-def]
    switchboard, proxy: DroppingProxy
) -> None:
    question = QUESTIONS["fr"]
    result = json.loads(switchboard("chat", "-m", question, "--json").stdout)
    run_id = result["run_id"]

    shown = switchboard("runs", "show", run_id)
    assert shown.returncode == 0, shown.stderr
    assert f"run:          {run_id}" in shown.stdout and "status:       done" in shown.stdout
    assert "model:        switchboard-offline-fast (offline)" in shown.stdout
    assert json.loads(switchboard("runs", "show", run_id, "--json").stdout)["status"] == "done"

    # Through a proxy that drops the first stream after event 2: tail reconnects with Last-Event-ID.
    tailed = switchboard("runs", "tail", run_id, url=proxy.url)
    assert tailed.returncode == 0, tailed.stderr
    assert proxy.cut, "the proxy never cut the stream"
    assert tailed.stdout == result["answer"] + "\n"  # each event once, the answer whole
    assert "connection lost" in tailed.stderr and "resuming after event 2" in tailed.stderr
    resumed = [head for head in proxy.requests if "/events" in head.splitlines()[0]]
    assert len(resumed) == 2
    assert "last-event-id" not in resumed[0].lower()
    assert "last-event-id: 2\r\n" in resumed[1].lower()

    lines = switchboard("runs", "tail", run_id, "--after", "2", "--json").stdout.splitlines()
    events = [json.loads(line) for line in lines]
    assert events[0]["id"] == "3" and events[-1]["event"] == "final"
    assert [int(e["id"]) for e in events] == list(range(3, 3 + len(events)))
    over = switchboard("runs", "tail", run_id, "--after", "999")  # nothing left: the run's record decides
    assert over.returncode == 0 and over.stdout == ""
    assert switchboard("runs", "tail", run_id, "--after", "x").returncode == 2
    assert switchboard("runs", "show", str(uuid.uuid4())).returncode == 3


def test_a_thread_is_exported_to_a_file_and_imported_back(  # type: ignore[no-untyped-def]
    switchboard, launched: Launched, tmp_path: Path
) -> None:
    source, copy = new_id("source"), new_id("copie")
    assert switchboard("agents", "register", source).returncode == 0
    assert switchboard("ask", source, QUESTIONS["fr"]).returncode == 0
    saved = tmp_path / "thread.json"
    exported = switchboard("threads", "export", source, "-o", str(saved))
    assert exported.returncode == 0, exported.stderr
    files = json.loads(saved.read_text(encoding="utf-8"))["files"]
    assert f"agents/{source}/log.jsonl" in {f["path"] for f in files}
    # The same thread under another agent and thread id (this system already has the original).
    thread_id = json.loads(files[0]["content"].splitlines()[0])["thread_id"]
    for file in files:
        file["path"] = file["path"].replace(source, copy)
        file["content"] = file["content"].replace(source, copy).replace(thread_id, str(uuid.uuid4()))
    moved = tmp_path / "moved.json"
    moved.write_text(json.dumps({"agent_id": copy, "files": files}, ensure_ascii=False), encoding="utf-8")

    imported = switchboard("threads", "import", str(moved))
    assert imported.returncode == 0, imported.stderr
    assert re.fullmatch(rf"imported {copy}'s thread [0-9a-f-]+ \(2 entries\)\n", imported.stdout)
    with api(launched) as http:
        entries = http.get(f"/agents/{copy}/entries").json()["entries"]
    assert [e["content"] for e in entries][0] == QUESTIONS["fr"]
    again = switchboard("threads", "import", str(moved))  # the thread has entries now
    assert again.returncode == 5 and "FAILED_PRECONDITION" in again.stderr
    to_stdout = switchboard("threads", "export", copy)
    assert json.loads(to_stdout.stdout)["agent_id"] == copy

    not_an_export = tmp_path / "notes.json"
    not_an_export.write_text("[1, 2]", encoding="utf-8")
    refused = switchboard("threads", "import", str(not_an_export))
    assert refused.returncode == 2 and "not what `threads export` writes" in refused.stderr
    assert switchboard("threads", "export", new_id("vide")).returncode == 3


def test_context_import_sends_a_project_folders_ideai_files(  # type: ignore[no-untyped-def]
    switchboard, launched: Launched, tmp_path: Path
) -> None:
    folder = tmp_path / "projet"
    (folder / ".ideai" / "memory").mkdir(parents=True)
    context = f"# Projet {uuid.uuid4().hex[:6]}\n\nLes déploiements ont lieu le mardi.\n"
    (folder / ".ideai" / "CONTEXT.md").write_text(context, encoding="utf-8")
    note = (
        "---\nname: base\ndescription: La base de données\nmetadata:\n  type: decision\n---\n"
        "Nous utilisons PostgreSQL.\n"
    )
    (folder / ".ideai" / "memory" / "base.md").write_text(note, encoding="utf-8")
    (folder / ".ideai" / "memory" / "brouillon.md").write_text("sans en-tête\n", encoding="utf-8")
    imported = switchboard("context", "import", str(folder))
    assert imported.returncode == 0, imported.stderr
    rows = [line.split("\t") for line in imported.stdout.splitlines()]
    assert rows[0][:2] == [".ideai/CONTEXT.md", "created"] or rows[0][:2] == [".ideai/CONTEXT.md", "updated"]
    assert [r[0] for r in rows] == [
        ".ideai/CONTEXT.md",
        ".ideai/memory/base.md",
        ".ideai/memory/brouillon.md",
    ]
    assert rows[2][1] == "skipped" and rows[2][2]  # with its reason
    with api(launched) as http:
        assert http.get("/project-context").json()["body"] == context.strip()
    again = json.loads(switchboard("context", "import", str(folder), "--json").stdout)
    assert [i["outcome"] for i in again][:2] == ["unchanged", "unchanged"]
    empty = switchboard("context", "import", str(tmp_path / "ailleurs"))
    assert empty.returncode == 2 and "has no .ideai folder" in empty.stderr


def test_settings_come_from_a_config_file_under_the_environment_and_errors_have_exit_codes(  # type: ignore[no-untyped-def]
    switchboard, launched: Launched, tmp_path: Path
) -> None:
    # Real processes: the config file under HOME, the environment over it,
    # and each failure's exit status through sys.exit.
    client = functools.partial(switchboard, process=True)
    config = tmp_path / ".config" / "switchboard" / "config.toml"  # the default place, under HOME
    config.parent.mkdir(parents=True)
    config.write_text(f'url = "{launched.url}"\ntoken = "{launched.token("bob")}"\n', encoding="utf-8")
    from_file = client("models", "list", "--json", url=None, token=None)
    assert from_file.returncode == 0, from_file.stderr
    # The environment wins over the file: a wrong token there is refused (401: exit 4).
    refused = client("models", "list", url=None, token="pas-un-jeton")
    assert refused.returncode == 4 and "UNAUTHENTICATED" in refused.stderr, refused.stderr
    as_json = client("models", "list", "--json", url=None, token="pas-un-jeton")
    assert json.loads(as_json.stderr)["error"]["status"] == 401
    other = tmp_path / "other.toml"
    other.write_text(f'url = "{launched.url}"\ntoken = "{launched.token("alice")}"\n', encoding="utf-8")
    assert client("--config", str(other), "models", "list", url=None, token=None).returncode == 0
    assert (
        client("models", "list", url=None, token=None, env={"SWITCHBOARD_CONFIG": str(other)}).returncode == 0
    )
    broken = tmp_path / "broken.toml"
    broken.write_text("url = \n", encoding="utf-8")
    assert client("models", "list", "--config", str(broken)).returncode == 2
    assert client("models", "list", "--config", str(tmp_path / "absent.toml")).returncode == 2

    unreachable = client("models", "list", url="http://127.0.0.1:9")
    assert unreachable.returncode == 6 and "did not answer" in unreachable.stderr
    usage = client("runs", "frobnicate")
    assert usage.returncode == 2 and "invalid choice" in usage.stderr


def read_until(fd: int, wanted: list[str], seconds: float = 60) -> tuple[str, str]:
    """What the terminal received until every ``wanted`` text appeared: as
    text (escape sequences removed) and raw."""
    raw = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                raw += os.read(fd, 65536)
            except OSError:
                break
        text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw.decode("utf-8", "replace"))
        if all(w in text for w in wanted):
            return text, raw.decode("utf-8", "replace")
    raise AssertionError(f"the terminal never showed {wanted}: {raw.decode('utf-8', 'replace')!r}")


def test_an_interactive_chat_in_a_terminal_shows_live_steps_and_the_streamed_answer(
    launched: Launched, tmp_path: Path
) -> None:
    controller, terminal = pty.openpty()
    # A French locale: the client's own words (prompt, footer) in French.
    env = {
        **environment(tmp_path, launched.url, launched.token("alice")),
        "TERM": "xterm-256color",
        "LANG": "fr_FR.UTF-8",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "client", "chat"],
        cwd=ROOT,
        env=env,
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        close_fds=True,
    )
    os.close(terminal)
    try:
        read_until(controller, ["conversation ", "Ctrl-D ou /quit pour quitter.", "vous>"])
        os.write(controller, (QUESTIONS["fr"] + "\r").encode())
        shown, raw = read_until(controller, ["comes from switchboard-offline-fast.", "jetons · run"])
        # A terminal gets styles and a spinner (a braille frame), which a pipe never does.
        assert "\x1b[1m" in raw and re.search("[\u2800-\u28ff]", raw), raw
        # A French question: the run's steps are French (the offline model's answer is not).
        for step in (
            "✓ Lecture du contexte",
            "✓ Choix des compétences et du modèle",
            "✓ Rédaction avec switchboard-offline-fast",
        ):
            assert step in shown, shown
        assert f"You asked: {QUESTIONS['fr']}." in shown
        os.write(controller, b"Et la revue ?\r")
        read_until(controller, ["You asked: Et la revue ?."])
        os.write(controller, b"/quit\r")
        assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(controller)
