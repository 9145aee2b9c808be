"""The default skill catalog of a workspace assistant: 17 preset skills the
Skill Router may apply by itself, and 6 built-ins that are only ever used when
forced (by name or from the menu). Migration router_0002 seeds it; the
threshold fit (services/router/fit.py) and the labelled fixture
(tests/fixtures/router/skill_requests.json) are written against it.

Descriptions are what the router matches a request against, so they are
written the way people ask for the thing, in English and in French, not the
way an engineer would name it. Ids are fixed so that every database gets the
same ones. Changing this list after it shipped needs a new migration: the
seeding revision reads it once.
"""

from __future__ import annotations

from typing import TypedDict


class SeedSkill(TypedDict):
    id: str
    name: str
    description: str
    body: str
    builtin: bool
    auto_use: bool


def _id(n: int) -> str:
    return f"5f0c1a2e-8d4b-4c3a-9e71-0a6b2d9c4e{n:02d}"


PRESETS: list[SeedSkill] = [
    {
        "id": _id(1),
        "name": "meeting-notes-to-actions",
        "description": (
            "Turn meeting notes into a list of action items, each with an owner and a due date; "
            "extract the decisions and actions of a meeting. Transformer un compte rendu de réunion "
            "en actions avec responsables et échéances."
        ),
        "body": (
            "From the meeting notes, list every action item as: action, owner, due date. Put the "
            "decisions taken in a separate list. Never invent an owner or a date: write 'to be "
            "decided' when the notes do not say. Keep the language of the notes."
        ),
        "builtin": False,
        "auto_use": True,
    },
    {
        "id": _id(2),
        "name": "weekly-status-report",
        "description": (
            "Write the weekly status report of a project: progress this week, blockers, risks and "
            "next steps. Rédiger le point d'avancement hebdomadaire, le rapport de la semaine d'un projet."
        ),
        "body": (
            "Write a weekly status report with four headings: Done this week, In progress, Blockers "
            "and risks, Next week. One line per item, most important first; name the people "
            "involved; flag anything late since the previous report."
        ),
        "builtin": False,
        "auto_use": True,
    },
    {
        "id": _id(3),
        "name": "email-reply-draft",
        "description": (
            "Draft a reply to an email: answer the sender, address each of their questions, propose "
            "next steps. Rédiger une réponse à un mail ou un courriel reçu."
        ),
        "body": (
            "Draft a reply to the email: greet the sender by name, answer each question in the order "
            "asked, propose a concrete next step and close politely. Match the sender's tone and "
            "language. Do not send it: it is a draft for the user to review."
        ),
        "builtin": False,
        "auto_use": True,
    },
    {
        "id": _id(6),
        "name": "meeting-agenda",
        "description": (
            "Prepare the agenda of an upcoming meeting: topics, time per topic, who presents, the "
            "goal of the meeting. Préparer l'ordre du jour d'une réunion."
        ),
        "body": (
            "Write a meeting agenda: the goal in one sentence, then numbered topics with a time box "
            "and a presenter each, ending with 'Decisions needed'. Total time must fit the meeting "
            "length given; ask for it when it is missing."
        ),
        "builtin": False,
        "auto_use": True,
    },
    {
        "id": _id(7),
        "name": "project-brief",
        "description": (
            "Write a project brief or one-pager: context, objectives, scope, stakeholders, timeline "
            "and budget. Rédiger la note de cadrage, la fiche projet."
        ),
        "body": (
            "Write a one-page project brief with the headings Context, Objectives, In scope / Out of "
            "scope, Stakeholders, Timeline, Budget, Open questions. Mark every assumption as such."
        ),
        "builtin": False,
        "auto_use": True,
    },
    {
        "id": _id(8),
        "name": "sprint-retrospective",
        "description": (
            "Summarise a sprint retrospective: what went well, what went wrong, what to improve, "
            "with follow-up actions. Synthèse de la rétrospective d'équipe."
        ),
        "body": (
            "Group the retrospective input under What went well, What did not, What we will try. "
            "Merge duplicates, keep the team's words, and end with at most three improvement "
            "actions, each with an owner."
        ),
        "builtin": False,
        "auto_use": True,
    },
    {
        "id": _id(9),
        "name": "job-description",
        "description": (
            "Write a job description or job posting to hire someone: role, responsibilities, "
            "required skills, benefits. Rédiger une offre d'emploi, une fiche de poste pour recruter."
        ),
        "body": (
            "Write a job posting: a two-sentence pitch of the team, the role, 5 to 7 "
            "responsibilities, must-have and nice-to-have skills kept apart, what we offer, how to "
            "apply. Use inclusive wording; no age, gender or origin requirement."
        ),
        "builtin": False,
        "auto_use": True,
    },
    {
        "id": _id(10),
        "name": "interview-questions",
        "description": (
            "Prepare interview questions to assess a candidate for a role, with what a good answer "
            "looks like. Questions d'entretien d'embauche pour un candidat."
        ),
        "body": (
            "Propose 8 to 10 interview questions for the role, grouped by competency, each with the "
            "signals of a strong and of a weak answer. Avoid questions about private life."
        ),
        "builtin": False,
        "auto_use": True,
    },
    {
        "id": _id(11),
        "name": "okr-draft",
        "description": (
            "Define OKRs for a team or a quarter: objectives and measurable key results. Définir les "
            "objectifs et résultats clés du trimestre."
        ),
        "body": (
            "Propose 2 or 3 objectives, each qualitative and inspiring, with 2 to 4 key results that "
            "are measurable (a number, a baseline, a target, a date). Flag any key result that is "
            "an activity rather than an outcome."
        ),
        "builtin": False,
        "auto_use": True,
    },
    {
        "id": _id(12),
        "name": "release-notes",
        "description": (
            "Write release notes or a changelog for a new version from the list of changes, fixes "
            "and new features. Notes de version, nouveautés de la mise à jour."
        ),
        "body": (
            "Write release notes grouped under New, Improved, Fixed, written for users (benefit "
            "first, no ticket jargon). Put breaking changes at the top with what to do."
        ),
        "builtin": False,
        "auto_use": True,
    },
    {
        "id": _id(13),
        "name": "bug-report",
        "description": (
            "Write a clear bug report: steps to reproduce, expected versus actual behaviour, "
            "environment, severity. Rédiger un ticket de bug, signaler une anomalie."
        ),
        "body": (
            "Write a bug report with Title, Steps to reproduce (numbered), Expected, Actual, "
            "Environment, Severity, Attachments. One bug per report; ask for the missing steps."
        ),
        "builtin": False,
        "auto_use": True,
    },
    {
        "id": _id(14),
        "name": "customer-support-reply",
        "description": (
            "Answer a customer complaint or support ticket politely, apologise, and explain the "
            "solution. Répondre à la réclamation d'un client mécontent."
        ),
        "body": (
            "Answer the customer: thank them, acknowledge the problem in their own terms, apologise "
            "once without blaming, give the solution or the next step with a date, and close with a "
            "contact. Never promise a refund or a date the user did not give."
        ),
        "builtin": False,
        "auto_use": True,
    },
    {
        "id": _id(15),
        "name": "social-media-post",
        "description": (
            "Write a LinkedIn post or a social media announcement about news, a launch or an event. "
            "Rédiger un post LinkedIn, une publication pour les réseaux sociaux."
        ),
        "body": (
            "Write a social media post: a hook in the first line, three short paragraphs, one call "
            "to action, at most three hashtags. Match the platform's length (LinkedIn: 1,300 "
            "characters at most)."
        ),
        "builtin": False,
        "auto_use": True,
    },
    {
        "id": _id(16),
        "name": "decision-memo",
        "description": (
            "Compare options with pros and cons and write a decision memo with a recommendation. "
            "Comparer des options, avantages et inconvénients, aide à la décision."
        ),
        "body": (
            "Write a decision memo: the question, the options (2 to 4), a table of pros, cons, cost "
            "and risk for each, the recommendation and what would change it."
        ),
        "builtin": False,
        "auto_use": True,
    },
    {
        "id": _id(17),
        "name": "onboarding-plan",
        "description": (
            "Create an onboarding plan and checklist for a new hire's first weeks. Plan d'intégration, "
            "accueil d'un nouvel arrivant ou d'une nouvelle recrue."
        ),
        "body": (
            "Write an onboarding plan by week (first day, first week, first month): accounts and "
            "tools, people to meet, reading, a first small deliverable, and a buddy. End with a "
            "checklist the manager can tick."
        ),
        "builtin": False,
        "auto_use": True,
    },
    {
        "id": _id(18),
        "name": "user-stories",
        "description": (
            "Turn a feature idea or a specification into user stories with acceptance criteria. "
            "Écrire des user stories, des récits utilisateur pour le backlog."
        ),
        "body": (
            "Split the feature into user stories 'As a <role>, I want <goal>, so that <benefit>', "
            "each with Given/When/Then acceptance criteria. Keep each story small enough for one "
            "sprint."
        ),
        "builtin": False,
        "auto_use": True,
    },
    {
        "id": _id(19),
        "name": "blog-post-outline",
        "description": (
            "Outline a blog post or an article: title ideas, sections, key points for each. Plan "
            "d'un article de blog."
        ),
        "body": (
            "Propose three titles, then an outline of 4 to 6 sections with two or three key points "
            "each, an introduction hook and a conclusion with a call to action."
        ),
        "builtin": False,
        "auto_use": True,
    },
]

# Built-ins: general writing tools, used only when forced (/name or the menu)
# whatever auto_use says.
BUILTINS: list[SeedSkill] = [
    {
        "id": _id(4),
        "name": "translate",
        "description": (
            "Translate a text into another language, keeping its tone and formatting. Traduire un "
            "texte dans une autre langue."
        ),
        "body": (
            "Translate the text into the language asked for (English when none is given, French when "
            "the text is English). Keep the formatting, names and figures; translate meaning, not word "
            "by word. Output only the translation."
        ),
        "builtin": True,
        "auto_use": True,
    },
    {
        "id": _id(5),
        "name": "summarize",
        "description": (
            "Summarize a document, a page or a long text into its key points. Résumer un texte en "
            "points clés."
        ),
        "body": (
            "Summarize the text in at most five bullet points, most important first, then one "
            "sentence of conclusion. Keep figures and names exact; add nothing the text does not say."
        ),
        "builtin": True,
        "auto_use": True,
    },
    {
        "id": _id(20),
        "name": "improve-writing",
        "description": (
            "Improve the writing of a text: clearer, better structured, more professional. "
            "Améliorer la rédaction, reformuler un texte."
        ),
        "body": (
            "Rewrite the text to be clearer and better structured, keeping its meaning, facts and "
            "language. Prefer short sentences and active voice. Output only the new text."
        ),
        "builtin": True,
        "auto_use": True,
    },
    {
        "id": _id(21),
        "name": "fix-spelling-grammar",
        "description": (
            "Fix spelling and grammar mistakes in a text without changing its style. Corriger "
            "l'orthographe et la grammaire."
        ),
        "body": (
            "Correct spelling, grammar and punctuation only; do not rephrase. Output the corrected "
            "text, then the list of changes."
        ),
        "builtin": True,
        "auto_use": True,
    },
    {
        "id": _id(22),
        "name": "make-shorter",
        "description": (
            "Make a text shorter and more concise, keeping the essential. Raccourcir un texte, le "
            "rendre plus concis."
        ),
        "body": (
            "Cut the text to about half its length: remove repetition and filler, keep every fact "
            "and decision. Output only the shorter text."
        ),
        "builtin": True,
        "auto_use": True,
    },
    {
        "id": _id(23),
        "name": "explain",
        "description": (
            "Explain a text, a concept or a piece of jargon in simple words. Expliquer simplement un "
            "passage ou un terme."
        ),
        "body": (
            "Explain the selection in plain words for a newcomer: what it means, one example, and "
            "why it matters. At most 150 words."
        ),
        "builtin": True,
        "auto_use": True,
    },
]

CATALOG: list[SeedSkill] = PRESETS + BUILTINS
