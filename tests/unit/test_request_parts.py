"""What a request asks apart from what it carries (services/router/request_parts.py),
in English and in French: the instruction before a colon, a line break or a
quotation is what skills are matched on; a request for a built-in task
(translate, summarise, correct, rephrase, shorten, explain) is told apart by
its opening words, after a polite opener."""

from __future__ import annotations

import pytest

from services.router.request_parts import builtin_task, split_request


@pytest.mark.parametrize(
    ("text", "instruction", "material"),
    [
        (
            "Translate this paragraph into French: The deploy is on Tuesday.",
            "Translate this paragraph into French",
            "The deploy is on Tuesday.",
        ),
        (
            "Traduis ce paragraphe en anglais : le déploiement est mardi.",
            "Traduis ce paragraphe en anglais",
            "le déploiement est mardi.",
        ),
        (
            "Draft a reply to this email\nHi, the weekly report is late.",
            "Draft a reply to this email",
            "Hi, the weekly report is late.",
        ),
        (
            "Rédige une réponse à ce courriel « le rapport hebdomadaire est en retard »",
            "Rédige une réponse à ce courriel",
            "le rapport hebdomadaire est en retard »",
        ),
        ('Please summarize "the release notes of 2.4"', "Please summarize", 'the release notes of 2.4"'),
        ("Peux-tu corriger l'orthographe : on livre", "Peux-tu corriger l'orthographe", "on livre"),
    ],
)
def test_an_instruction_followed_by_material_is_split(text: str, instruction: str, material: str) -> None:
    parts = split_request(text)
    assert (parts.instruction, parts.material) == (instruction, material)
    assert parts.split


@pytest.mark.parametrize(
    "text",
    [
        # A head that is no instruction: the request is matched whole.
        "Here are my notes from today's sync: Paul ships, Anna tests. What should each of us do?",
        "Projet Atlas : rédige le point d'avancement hebdomadaire",
        "Voici mes notes de la réunion d'hier : qui doit faire quoi ?",
        # A time, a link: no material starts there.
        "Prepare the agenda for the 10:30 meeting",
        "Prépare l'ordre du jour de la réunion de 10:30",
        "Summarize https://example.com/notes",
        # Nothing after the colon.
        "Write the weekly status report:",
        # A head too long to be an instruction.
        "Write a long and careful message to every member of the team who joined after the spring "
        "reorganisation about the new rules: be kind",
    ],
)
def test_a_request_without_an_instruction_head_is_matched_whole(text: str) -> None:
    parts = split_request(text)
    assert parts.instruction == text.strip() and parts.material == "" and not parts.split


@pytest.mark.parametrize(
    ("text", "task"),
    [
        ("Translate this paragraph into French: The deploy is on Tuesday.", "translate"),
        ("Can you translate the meeting agenda into Spanish?", "translate"),
        ("Traduis en anglais : prépare l'ordre du jour de la réunion de lundi.", "translate"),
        ("Peux-tu traduire ce message en allemand ?", "translate"),
        ("Summarize the weekly status report of the Atlas project", "summarize"),
        ("Please sum up this thread", "summarize"),
        ("Résume ce courriel : le fournisseur demande une réponse.", "summarize"),
        ("Fais-moi un résumé de la réunion", "summarize"),
        ("Fix the spelling: we need to write the weekly status report by Friday.", "fix-spelling-grammar"),
        ("Proofread my cover letter", "fix-spelling-grammar"),
        ("Corrige les fautes d'orthographe de cette phrase", "fix-spelling-grammar"),
        ("Rephrase this message for the client", "improve-writing"),
        ("Reformule ce message : le point hebdomadaire est reporté.", "improve-writing"),
        ("Shorten this paragraph", "make-shorter"),
        ("Raccourcis ce texte de moitié", "make-shorter"),
        ("Explain this bug report to me", "explain"),
        ("Explique-moi ce ticket de bug", "explain"),
        # The instruction after presented material: its last sentence.
        ("Here is a paragraph: the release notes are ready. Translate it into French.", "translate"),
        ("Voici un texte : la réunion est lundi. Résume-le en une phrase.", "summarize"),
    ],
)
def test_a_request_for_a_built_in_task_is_told_apart(text: str, task: str) -> None:
    assert split_request(text).builtin_task == task


@pytest.mark.parametrize(
    "text",
    [
        "Write the weekly status report for the Atlas project",
        "Rédige le point d'avancement hebdomadaire du projet Atlas",
        "Fix the export bug before Friday",
        "Explain to the customer why the delivery is late",
        "Explique au client pourquoi la livraison a du retard",
        "Draft a reply to this email: please translate the contract by Monday.",
        "Écris un ticket de bug : l'application plante quand on exporte en PDF",
        "I translated the notes yesterday; now write the release notes",
        "Transforme ces notes de réunion en liste d'actions",
    ],
)
def test_other_requests_ask_for_no_built_in_task(text: str) -> None:
    assert split_request(text).builtin_task == ""
    assert builtin_task(text) == ""
