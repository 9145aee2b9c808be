"""Pure rules of the threads domain."""

from __future__ import annotations

from services.threads.domain import MAX_AUTO_TITLE_CHARS, auto_title


def test_auto_title_keeps_a_short_request_on_one_line() -> None:
    assert auto_title("  Write the\n weekly   status report ") == "Write the weekly status report"


def test_auto_title_cuts_a_long_request_at_a_word_boundary() -> None:
    text = "Summarize the meeting notes from Tuesday and turn them into a list of actions for the team"
    title = auto_title(text)
    assert len(title) <= MAX_AUTO_TITLE_CHARS and title.endswith("…")
    assert text.startswith(title[:-1]) and text[len(title) - 1] == " "


def test_auto_title_hard_cuts_one_endless_word() -> None:
    title = auto_title("x" * 500)
    assert title == "x" * (MAX_AUTO_TITLE_CHARS - 1) + "…"


def test_auto_title_of_blank_text_is_empty() -> None:
    assert auto_title(" \n ") == ""
