"""``switchboard chat --language``: the language the run's notices,
proposals and title are written in reaches the API; without it, none is
sent (the engine reads the message's); a malformed tag is a usage error, in
the user's language, before anything is sent."""

from __future__ import annotations

import pytest

from tests.unit.test_client_projects import Gateway, gateway, run

__all__ = ["gateway"]  # the fixture, shared with the projects tests


@pytest.mark.parametrize(
    ("argv", "sent"),
    [
        (["chat", "-m", "Remember that I am PM", "--language", "fr"], "fr"),
        (["chat", "--language", "en-GB", "-m", "Retiens que je suis PM"], "en-GB"),
        (["chat", "-m", "Retiens que je suis PM"], None),
    ],
)
def test_a_chat_message_carries_the_language_asked_for(
    gateway: Gateway, argv: list[str], sent: str | None
) -> None:
    assert run(*argv) == 0
    (_, path, message) = gateway.sent()[-1]
    assert path.endswith("/messages") and message.get("language") == sent


@pytest.mark.parametrize(
    ("locale", "words"),
    [("en_GB.UTF-8", "is not a language tag"), ("fr_FR.UTF-8", "n'est pas une étiquette de langue")],
)
def test_a_malformed_language_is_a_usage_error_before_any_request(
    gateway: Gateway,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    locale: str,
    words: str,
) -> None:
    monkeypatch.setenv("LANG", locale)
    assert run("chat", "-m", "hi", "--language", "français") == 2
    assert words in capsys.readouterr().err
    assert gateway.requests == []
