"""The interface in French and English, and the in-app help, in the browser
against the real processes: the browser's language is the default; the
personalisation switch overrides it (and back); every view reads in the
chosen language, with a screenshot of each in both and no serious or
critical axe-core violation; the "?" beside a feature gives its short help
and leads to its Help section."""

from __future__ import annotations

import re

from playwright.sync_api import Browser, Page, expect

from tests.e2e import web
from tests.e2e.conftest import Launched
from tests.e2e.web import assert_accessible, logged_in, send, shot

browser = web.browser
page = web.page

VIEWS = {
    "en": {
        "chat": "Chat",
        "agents": "Agents",
        "instructions": "Instructions",
        "memory": "Memory",
        "help": "Help",
    },
    "fr": {
        "chat": "Discussion",
        "agents": "Agents",
        "instructions": "Instructions",
        "memory": "Mémoire",
        "help": "Aide",
    },
}
HEADINGS = {
    "en": {"agents": "Agents", "instructions": "Instructions", "memory": "Memory", "help": "Help"},
    "fr": {"agents": "Agents", "instructions": "Instructions", "memory": "Mémoire", "help": "Aide"},
}


def visit_every_view(page: Page, launched: Launched, language: str) -> None:
    for view, label in VIEWS[language].items():
        page.get_by_role("link", name=label, exact=True).click()
        expect(page.locator(f"#view-{view}")).to_be_visible()
        if view in HEADINGS[language]:
            expect(page.locator(f"#view-{view} h1")).to_contain_text(HEADINGS[language][view])
        shot(page, launched, f"{language}-{view}")
        assert_accessible(page, f"the {view} view in {language}")


def test_a_french_browser_gets_the_french_interface(browser: Browser, launched: Launched) -> None:
    with logged_in(browser, launched, locale="fr-FR") as page:
        expect(page.locator("html")).to_have_attribute("lang", "fr")
        expect(page.locator("#send")).to_have_text("Envoyer")
        expect(page.locator("#new")).to_have_text("Nouvelle conversation")
        expect(page.locator("#message")).to_have_attribute(
            "placeholder", re.compile("^Demandez à votre agent…")
        )
        expect(page.get_by_role("button", name="Toutes les sources")).to_be_visible()
        expect(page.locator("#chips button")).to_have_text(["Résumer la conversation", "Proposer la suite"])
        page.locator("#chips button").first.click()
        expect(page.locator("#message")).to_have_value("Résume notre conversation jusqu'ici.")
        page.fill("#message", "")
        run = send(page, "Bonjour, qui es-tu ?")
        expect(run.locator(".meta")).to_have_text(re.compile(r"^Modèle : switchboard-offline-\w+$"))
        expect(run.locator(".sources strong")).to_have_text("Sources")
        # The engine's step labels, shown in French.
        expect(run.locator(".steps li")).to_have_text(
            [
                "Lecture du contexte",
                "Choix des compétences et du modèle",
                re.compile("^Rédaction avec switchboard-"),
            ]
        )
        # The page asks for its language: the engine's notice comes in French,
        # shown as it is.
        with page.expect_request(lambda r: r.url.endswith("/messages") and r.method == "POST") as sent:
            run = send(page, "Lis @connector:inconnu, s'il te plaît.")
        assert sent.value.post_data_json["language"] == "fr"
        notice = run.locator('.notice[data-code="MENTION_NOT_ALLOWED"]')
        expect(notice).to_have_text(
            "@connector:inconnu ne fait pas partie des sources autorisées de cette conversation : "
            "cette source ne sera pas lue."
        )
        # "Retiens que…" by a user without an instruction page: the proposal,
        # on a page made from the French template, and the answer in French.
        run = send(page, "Retiens que je préfère les réponses courtes")
        proposal = run.locator(".proposal")
        expect(proposal.locator("strong")).to_have_text("Modification proposée de « Mon IA Switchboard »")
        expect(proposal.locator("p").first).to_have_text("Je préfère les réponses courtes")
        expect(proposal.locator(".diff")).to_contain_text("Je préfère les réponses courtes")
        expect(run.locator(".answer")).to_have_text(
            "J'ajouterais ceci à votre page d'instructions « Mon IA Switchboard » : Je préfère les réponses "
            "courtes. Rien ne change tant que vous n'acceptez pas la proposition."
        )
        # The instruction templates of the interface's language come first.
        page.click("#personalise")
        expect(page.locator("#template option").first).to_have_text("Mon IA Switchboard")
        page.click("#close-personal")
        visit_every_view(page, launched, "fr")
        expect(page.locator("#help-sources-title")).to_have_text("Toutes les sources")
        expect(page.locator("#help-threads")).to_contain_text("vues partielles du même fil")


def test_personalisation_switches_the_language_and_back(page: Page, launched: Launched) -> None:
    expect(page.locator("html")).to_have_attribute("lang", "en")
    # In English the engine's own notice is shown as it is, with no detail line.
    run = send(page, "Read @connector:unknown, please.")
    notice = run.locator('.notice[data-code="MENTION_NOT_ALLOWED"]')
    expect(notice).to_have_text(
        "@connector:unknown is not among this conversation's allowed sources; it will not be read."
    )
    page.click("#personalise")
    expect(page.locator("#template option").first).to_have_text("My Switchboard AI")
    page.click("#close-personal")
    visit_every_view(page, launched, "en")
    page.get_by_role("link", name="Chat").click()
    page.click("#personalise")
    page.select_option("#language", "fr")
    page.click("#save-personal")
    web.ready(page)  # the page is drawn anew in French
    expect(page.locator("html")).to_have_attribute("lang", "fr")
    expect(page.locator("#send")).to_have_text("Envoyer")
    page.get_by_role("link", name="Agents").click()
    expect(page.get_by_role("button", name="Enregistrer l'agent")).to_be_visible()
    page.click("#nav a[href='#chat']")
    page.click("#personalise")
    expect(page.locator("#personal-title")).to_contain_text("Personnalisation")
    page.select_option("#language", "")
    page.click("#save-personal")
    web.ready(page)
    expect(page.locator("html")).to_have_attribute("lang", "en")  # the browser's language again
    expect(page.locator("#send")).to_have_text("Send")


def test_the_question_mark_beside_a_feature_gives_its_help_and_leads_to_the_help_view(page: Page) -> None:
    page.locator('details.help[data-topic="sources"] > summary[aria-label="Help: All sources"]').click()
    short = page.locator('details.help[data-topic="sources"]')
    expect(short).to_contain_text("What this conversation's runs may read")
    short.get_by_role("link", name="More in Help").click()
    expect(page.locator("#view-help")).to_be_visible()
    expect(page.locator("#help-sources")).to_contain_text("@ mentions only reach the sources ticked here")
    for topic, title in {
        "personalisation": "Personalisation",
        "auto": "Auto (model choice)",
        "skills": "Automatic skills",
        "threads": "Agent threads",
        "memory": "Memory",
    }.items():
        expect(page.locator(f"#help-{topic}-title")).to_have_text(title)

    page.get_by_role("link", name="Chat").click()
    page.locator('details.help[data-topic="auto"] > summary').click()
    expect(page.locator('details.help[data-topic="auto"]')).to_contain_text("Auto picks a configured model")
    page.click("#personalise")
    page.locator('#personal details.help[data-topic="personalisation"] > summary').click()
    expect(page.locator('#personal details.help[data-topic="personalisation"]')).to_contain_text(
        "instruction page it follows"
    )
    page.click("#close-personal")
    page.get_by_role("link", name="Agents").click()
    expect(page.locator('details.help[data-topic="threads"] > summary')).to_have_attribute(
        "aria-label", "Help: Agent threads"
    )
