"""The instruction page templates, and the reminder each one carries: a page
shared with others steers the agent of everyone who made it theirs. Memory
owns the reminder; the gateway shows the one PagesService and MemoryService
return rather than a copy of its own."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from services.shared.errors import NotFound
from services.shared.language import primary
from services.shared.pagination import by_offset, offset_token, page_request


@dataclass(frozen=True)
class InstructionTemplate:
    id: str
    title: str
    description: str
    body: str
    # The language the template is written in (BCP 47: "en", "fr"): the page
    # offers the templates of its interface's language first.
    language: str = "en"


# By primary language; any other language reads the English one.
_SHARED_PAGE_NOTICES = {
    "en": (
        "Anyone who can edit this page changes how your agent behaves. "
        "To share an example, duplicate the page instead of sharing it."
    ),
    "fr": (
        "Quiconque peut modifier cette page change le comportement de votre agent. "
        "Pour partager un exemple, dupliquez la page au lieu de la partager."
    ),
}


def shared_page_notice(language: str = "") -> str:
    """The reminder in ``language`` (a BCP 47 tag; English when "" or a
    language it is not written in)."""
    return _SHARED_PAGE_NOTICES.get(primary(language), _SHARED_PAGE_NOTICES["en"])


_REMINDER = f"> {shared_page_notice('en')}"
_REMINDER_FR = f"> {shared_page_notice('fr')}"

DEFAULT_TEMPLATE_ID = "my-switchboard-ai"
TEMPLATES = (
    InstructionTemplate(
        id=DEFAULT_TEMPLATE_ID,
        title="My Switchboard AI",
        description="Your private instruction page: tone, what to remember, where to look first.",
        body=(
            "# My Switchboard AI\n\n"
            f"{_REMINDER}\n\n"
            "## Desired tone\n\n"
            "- e.g. concise, friendly, answers in the language of the question\n\n"
            "## What the agent should remember\n\n"
            "### My role\n\n"
            "- e.g. product manager of the mobile team\n\n"
            "### My habits\n\n"
            "- e.g. I review pull requests in the morning; summaries as bullet points\n\n"
            "## Pages and channels to consult first\n\n"
            "- e.g. the roadmap page, the #mobile channel\n"
        ),
    ),
    InstructionTemplate(
        id="team-lead",
        title="Team lead assistant",
        description="For someone who coordinates a team: decisions, follow-ups, status.",
        body=(
            "# Team lead assistant\n\n"
            f"{_REMINDER}\n\n"
            "## Desired tone\n\n"
            "- Direct and brief; lead with the decision or the question to settle\n\n"
            "## What the agent should remember\n\n"
            "### My role\n\n"
            "- I lead a team and track its decisions and blockers\n\n"
            "### My habits\n\n"
            "- Weekly status on Mondays; I want owners and dates on every action\n\n"
            "## Pages and channels to consult first\n\n"
            "- The team's decision log page, the team channel\n"
        ),
    ),
    InstructionTemplate(
        id="mon-ia-switchboard",
        title="Mon IA Switchboard",
        description="Votre page d'instructions privée : le ton, ce qu'il faut retenir, où chercher d'abord.",
        body=(
            "# Mon IA Switchboard\n\n"
            f"{_REMINDER_FR}\n\n"
            "## Ton souhaité\n\n"
            "- p. ex. concis, cordial, répond dans la langue de la question\n\n"
            "## Ce que l'agent doit retenir\n\n"
            "### Mon rôle\n\n"
            "- p. ex. responsable produit de l'équipe mobile\n\n"
            "### Mes habitudes\n\n"
            "- p. ex. je relis les pull requests le matin ; des résumés en puces\n\n"
            "## Pages et canaux à consulter d'abord\n\n"
            "- p. ex. la page de la feuille de route, le canal #mobile\n"
        ),
        language="fr",
    ),
    InstructionTemplate(
        id="chef-equipe",
        title="Assistant de chef d'équipe",
        description="Pour qui coordonne une équipe : décisions, suivis, points d'avancement.",
        body=(
            "# Assistant de chef d'équipe\n\n"
            f"{_REMINDER_FR}\n\n"
            "## Ton souhaité\n\n"
            "- Direct et bref ; commencer par la décision ou la question à trancher\n\n"
            "## Ce que l'agent doit retenir\n\n"
            "### Mon rôle\n\n"
            "- Je dirige une équipe et je suis ses décisions et ses blocages\n\n"
            "### Mes habitudes\n\n"
            "- Point d'avancement le lundi ; un responsable et une date pour chaque action\n\n"
            "## Pages et canaux à consulter d'abord\n\n"
            "- La page du journal des décisions de l'équipe, le canal de l'équipe\n"
        ),
        language="fr",
    ),
)


def default_template_id(language: str) -> str:
    """The first template written in ``language`` (a BCP 47 tag: "fr",
    "fr-CA"), else the English default: a user who speaks French and has no
    page yet gets "Mon IA Switchboard", not its English twin."""
    wanted = primary(language)
    if wanted and wanted != "en":
        for found in TEMPLATES:
            if found.language == wanted:
                return found.id
    return DEFAULT_TEMPLATE_ID


def template(template_id: str, language: str = "") -> InstructionTemplate:
    """The template ``template_id``; "" is the default one of ``language``
    (a BCP 47 tag; English when no template is written in it)."""
    wanted = template_id.strip() or default_template_id(language)
    for found in TEMPLATES:
        if found.id == wanted:
            return found
    raise NotFound(f"instruction template {wanted!r} not found", template_id=wanted)


def list_templates(requested_size: int, token: str) -> tuple[Sequence[InstructionTemplate], str]:
    size, start = page_request(requested_size, token, by_offset)
    start = start or 0
    return TEMPLATES[start : start + size], offset_token(start + size, len(TEMPLATES))
