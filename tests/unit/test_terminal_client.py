"""The terminal client's rules without a system: the exit code of each API
refusal, settings from the config file under the environment, and how a
run's events are shown when stdout is not a terminal."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from client import exits, messages
from client.api import ApiRefusal, SseEvent
from client.live import RunView
from client.output import Output
from client.settings import load_settings


@pytest.mark.parametrize(
    ("status", "code"),
    [(400, 2), (413, 2), (404, 3), (401, 4), (403, 4), (409, 5), (429, 5), (500, 6), (502, 6), (503, 6)],
)
def test_each_refusal_has_its_exit_code(status: int, code: int) -> None:
    assert exits.for_refusal(ApiRefusal(status, "X", "message")) == code


def test_the_environment_wins_over_the_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SWITCHBOARD_URL", "SWITCHBOARD_TOKEN", "SWITCHBOARD_CONFIG", "SWITCHBOARD_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    assert load_settings().url == "http://127.0.0.1:8080"  # no file: the defaults
    config = tmp_path / ".config" / "switchboard" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('url = "http://gateway:9000"\ntoken = "from-file"\ntimeout = 5\n', encoding="utf-8")
    settings = load_settings()
    assert (settings.url, settings.token, settings.timeout) == ("http://gateway:9000", "from-file", 5.0)
    monkeypatch.setenv("SWITCHBOARD_TOKEN", "from-env")
    assert load_settings().token == "from-env" and load_settings().url == "http://gateway:9000"
    with pytest.raises(FileNotFoundError):
        load_settings(tmp_path / "absent.toml")
    config.write_text("timeout = -1\n", encoding="utf-8")
    with pytest.raises(ValueError):
        load_settings()


def events(*items: tuple[str, dict[str, object]]) -> list[SseEvent]:
    return [SseEvent(kind, {"run_id": "r1", **data}, str(n)) for n, (kind, data) in enumerate(items, 1)]


def test_without_a_terminal_the_answer_goes_to_stdout_and_the_steps_to_stderr() -> None:
    stdout, stderr = io.StringIO(), io.StringIO()
    view = RunView(Output(stdout=stdout, stderr=stderr))
    for event in events(
        ("run_started", {"conversation_id": "c1"}),
        ("step", {"label": "Lecture du contexte", "status": "started"}),
        ("step", {"label": "Lecture du contexte", "status": "completed"}),
        ("delta", {"text": "Bonjour, "}),
        ("delta", {"text": "mardi."}),
        ("final", {"text": "Bonjour, mardi.", "model": "m", "usage": {"tokens_in": 3, "tokens_out": 2}}),
    ):
        view.show(event)
    view.close()
    assert stdout.getvalue() == "Bonjour, mardi.\n"
    assert stderr.getvalue().splitlines() == ["run r1", "✓ Lecture du contexte", "m · 3 → 2 tokens · run r1"]
    assert view.result()["answer"] == "Bonjour, mardi." and view.result()["conversation_id"] == "c1"
    assert view.last_id == "6" and view.ended


def test_an_interrupted_stream_is_no_failure_and_a_run_error_is() -> None:
    stdout, stderr = io.StringIO(), io.StringIO()
    view = RunView(Output(stdout=stdout, stderr=stderr))
    view.show(SseEvent("error", {"code": "UNAVAILABLE", "message": "stream interrupted"}))  # no id
    assert not view.ended and "stream interrupted" in stderr.getvalue()
    view.show(SseEvent("error", {"code": "CANCELLED", "message": "the run was cancelled"}, "7"))
    assert view.ended and view.failure["code"] == "CANCELLED" and view.result()["status"] == "cancelled"
    assert "CANCELLED: the run was cancelled" in stderr.getvalue() and stdout.getvalue() == ""


@pytest.mark.parametrize(
    ("language", "words"), [("en", "needs an admin token"), ("fr", "demande un jeton admin")]
)
def test_a_403_says_what_to_do_in_the_users_language(language: str, words: str) -> None:
    messages.use(language)
    try:
        stdout, stderr = io.StringIO(), io.StringIO()
        refusal = ApiRefusal(
            403, "PERMISSION_DENIED", "adding a skill is for admins", "ERROR_REASON_PERMISSION_DENIED"
        )
        Output(stdout=stdout, stderr=stderr).refusal(refusal)
        text = " ".join(stderr.getvalue().split())
        assert "adding a skill is for admins (HTTP 403)" in text and words in text
        # Other refusals say only what the API said.
        stderr = io.StringIO()
        Output(stdout=stdout, stderr=stderr).refusal(ApiRefusal(404, "NOT_FOUND", "agent 'zz' not found"))
        assert words not in stderr.getvalue()
    finally:
        messages.use("en")
