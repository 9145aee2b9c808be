"""A quota's 429 in the browser, against the real processes (the run rate of
tests/e2e/test_quotas.py, whose system this module shares): the run's block
says which quota and when to try again, in English and in French."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, expect

from tests.e2e import test_quotas, web
from tests.e2e.conftest import Launched
from tests.e2e.web import logged_in, send, shot

browser = web.browser
LAUNCH_ENV = test_quotas.LAUNCH_ENV

SAID = {
    "en": re.compile(r"You started too many requests in the last minute\. Try again in \d+ s\."),
    "fr": re.compile(r"Vous avez lancé trop de demandes dans la dernière minute\. Réessayez dans \d+ s\."),
}


@pytest.mark.parametrize(("language", "locale", "user"), [("en", "en-GB", "alice"), ("fr", "fr-FR", "bob")])
def test_the_page_says_the_quota_and_when_to_retry(
    browser: Browser, launched: Launched, language: str, locale: str, user: str
) -> None:
    with logged_in(browser, launched, user=user, locale=locale) as page:
        for index in range(test_quotas.PER_MINUTE):
            answered = send(page, f"Message {index}")
            expect(answered).to_have_attribute("data-status", "done")
        refused = send(page, "One too many")
        expect(refused).to_have_attribute("data-status", "failed")
        expect(refused.locator(".run-status .cause")).to_have_text(SAID[language])
        refused.scroll_into_view_if_needed()
        shot(page, launched, f"quota-{language}")
