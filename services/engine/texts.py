"""Every text the engine writes into a run for a person to read, in English
and French: notices (keyed by their stable code), run errors, step labels,
the "remember that…" proposal and answer, refusals, and the title prompt.
A run says them in its language (Run.language, services.shared.language);
the codes never change with it (the page and clients localise by code too).

Details inside a text (a model's id, a page's title, another service's
error) stay as they came. Tool results are not here: the model reads
them, in English, whatever the user's language.
"""

from __future__ import annotations

from services.shared.language import FRENCH

# key -> (English, French). Notice codes are upper case; other texts are
# lower-case ids. The English and French of a key name the same fields
# (such as {cause} or {model}), filled by say().
TEXTS: dict[str, tuple[str, str]] = {
    # Notices, by code.
    "MEMORY_UNAVAILABLE": (
        "memory is unavailable, so this answer uses no recalled notes, personal settings, "
        "instruction page or mentioned pages ({cause})",
        "la mémoire est indisponible : cette réponse n'utilise ni notes rappelées, ni réglages "
        "personnels, ni page d'instructions, ni pages mentionnées ({cause})",
    ),
    "ROUTER_UNAVAILABLE": (
        "routing is unavailable, so no skill was applied automatically and the engine's "
        "fallback model answers ({cause})",
        "le routage est indisponible : aucune compétence n'a été appliquée automatiquement et le "
        "modèle de repli du moteur répond ({cause})",
    ),
    "ARBITER_FAILED": (
        "{error}; the skills were chosen without it",
        "le modèle qui choisit les compétences n'a pas répondu ({error}) : elles ont été choisies sans lui",
    ),
    "WEB_ONLY_MODEL": (
        "web-only model: the workspace context (pages, memory, connectors) is not sent to it",
        "modèle limité au web : le contexte de l'espace de travail (pages, mémoire, connecteurs) ne lui "
        "est pas envoyé",
    ),
    "MODEL_CHOICE": (
        "expensive model {model}: chosen because the request is classed strong",
        "modèle coûteux {model} : choisi parce que la demande est classée complexe",
    ),
    "INSTRUCTION_PAGE_UNREADABLE": (
        "The active instruction page '{page_id}' is no longer readable (deleted or access removed); "
        "it was skipped.",
        "La page d'instructions active « {page_id} » ne peut plus être lue (supprimée ou accès retiré) : "
        "elle a été ignorée.",
    ),
    "INSTRUCTION_PAGE_TRUNCATED": (
        "the instruction page '{title}' was cut to its first {budget} characters",
        "la page d'instructions « {title} » a été tronquée à ses {budget} premiers caractères",
    ),
    "SUMMARY_MODEL_FAILED": (
        "the conversation summary was written by the rules: {reason}",
        "le résumé de la conversation a été écrit par les règles : {reason}",
    ),
    "SOURCES_WITHHELD": (
        "This model is web-only: {withheld} will not be read in this run.",
        "Ce modèle est limité au web : il ne lira pas {withheld} pendant cette exécution.",
    ),
    "MENTION_NOT_ALLOWED": (
        "@{kind}:{name} is not among this conversation's allowed sources; it will not be read.",
        "@{kind}:{name} ne fait pas partie des sources autorisées de cette conversation : "
        "cette source ne sera pas lue.",
    ),
    "TOOLS_UNAVAILABLE": (
        "{cause}; its tools are not available in this run.",
        "{cause} : ses outils ne sont pas disponibles pendant cette exécution.",
    ),
    "NOTE_PROPOSED": (
        "note proposal {proposal_id} awaits review: {title}",
        "la proposition de note {proposal_id} attend une relecture : {title}",
    ),
    "PROJECT_MEMORY_UNREADABLE": (
        "{user} is not a member of {agent}'s project '{project}', so this answer uses none of its "
        "notes, project context or live state",
        "{user} n'est pas membre du projet « {project} » de {agent} : cette réponse n'utilise aucune "
        "de ses notes, ni son contexte de projet, ni son état en direct",
    ),
    "INJECTION_STRATEGY_UNAVAILABLE": (
        "{agent}'s injection strategy {strategy} cannot be used ({why}); the provider's own "
        "strategy delivers the same context",
        "la stratégie d'injection {strategy} de {agent} ne peut pas servir ({why}) : la stratégie "
        "propre au fournisseur transmet le même contexte",
    ),
    "REMOTE_AGENT_FAILED": (
        "the remote agent {agent} gave no answer: {cause}",
        "l'agent distant {agent} n'a pas répondu : {cause}",
    ),
    "PROVIDER_SWITCHED": (
        "switched from {old} to {new}: it starts from the handoff summary and the recent entries",
        "passage de {old} à {new} : il repart du résumé de passation et des entrées récentes",
    ),
    # Variants and parts of notices.
    "sources_withheld.all": (
        "This model is web-only: it reads no workspace content in this run.",
        "Ce modèle est limité au web : il ne lit aucun contenu de l'espace de travail pendant "
        "cette exécution.",
    ),
    "withheld.workspace": ("the workspace", "l'espace de travail"),
    "withheld.connectors": ("connectors ({names})", "les connecteurs ({names})"),
    "withheld.mcp": ("MCP servers ({names})", "les serveurs MCP ({names})"),
    "mention_not_allowed.web_only": (
        "@{kind}:{name} is not among this conversation's sources a web-only model reads; "
        "it will not be read.",
        "@{kind}:{name} ne fait pas partie des sources de cette conversation qu'un modèle limité au "
        "web lit : cette source ne sera pas lue.",
    ),
    # Refusals: a write the user did not ask for (WRITE_REFUSED), a quota.
    "write_refused.not_asked": (
        "{tool} was refused: your message did not ask to {what}.",
        "{tool} a été refusé : votre message ne demandait pas {what}.",
    ),
    "write_refused.not_your_words": (
        "{tool} was refused: what it would have written was not in the words of your message "
        "(content read in this run is never written to memory).",
        "{tool} a été refusé : ce qu'il aurait écrit n'était pas dans les mots de votre message "
        "(un contenu lu pendant l'exécution n'est jamais écrit en mémoire).",
    ),
    "write_refused.unavailable": (
        "{tool} was refused: the tool '{tool}' is not available in this conversation.",
        "{tool} a été refusé : l'outil « {tool} » n'est pas disponible dans cette conversation.",
    ),
    "write.save_note": ("save anything to memory", "d'enregistrer quoi que ce soit en mémoire"),
    "write.propose_instruction_update": (
        "remember anything or change the instructions",
        "de retenir quoi que ce soit ni de modifier les instructions",
    ),
    "write.ask_agent": ("ask another agent", "d'interroger un autre agent"),
    "tool_refused": ("{tool} was refused: {cause}", "{tool} a été refusé : {cause}"),
    "proposal_refused": (
        "memory refused the proposal: {cause}",
        "la mémoire a refusé la proposition : {cause}",
    ),
    # "Remember that…": the proposal to the instruction page, and the answer.
    "remember.reason": (
        "The user asked me to remember: {fact}",
        "L'utilisateur m'a demandé de retenir : {fact}",
    ),
    "remember.answer": (
        'I would add this to your instruction page "{title}": {fact}. '
        "Nothing changes until you accept the proposal.",
        "J'ajouterais ceci à votre page d'instructions « {title} » : {fact}. "
        "Rien ne change tant que vous n'acceptez pas la proposition.",
    ),
    "remember.refused": (
        'I could not propose remembering "{fact}": {cause}. Nothing was changed.',
        "Je n'ai pas pu proposer de retenir « {fact} » : {cause}. Rien n'a été modifié.",
    ),
    # The instruction page's section the line goes in (memory's templates
    # have it, in their language).
    "remember.section": ("## What the agent should remember", "## Ce que l'agent doit retenir"),
    "remember.unreadable": (
        "your active instruction page cannot be read; choose another one before asking me to remember",
        "votre page d'instructions active ne peut pas être lue : choisissez-en une autre avant de me "
        "demander de retenir quelque chose",
    ),
    # How a run ended, when not done (RunError messages and the run's error).
    "error.cancelled": ("cancelled by the user", "annulée par l'utilisateur"),
    "error.stopped": ("the engine stopped", "le moteur s'est arrêté"),
    "error.orphaned": (
        "the engine running this run stopped",
        "le moteur qui menait cette exécution s'est arrêté",
    ),
    "error.unrecorded": (
        "the database was unavailable when the run ended; its end could not be recorded",
        "la base de données était indisponible à la fin de l'exécution : sa fin n'a pas pu être enregistrée",
    ),
    "budget.seconds": ("time budget of {limit} s exceeded", "budget de temps ({limit} s) dépassé"),
    "budget.steps": ("step budget of {limit} exceeded", "budget d'étapes ({limit}) dépassé"),
    "budget.tokens": ("token budget of {limit} exceeded", "budget de jetons ({limit}) dépassé"),
    "budget.tokens_prompt": (
        "token budget of {limit} exceeded by the prompt alone",
        "budget de jetons ({limit}) dépassé par la seule invite",
    ),
    # Step labels (Step.label), by step.
    "step.queued": (
        "Waiting for the previous request on this thread",
        "Attente de la demande précédente sur ce fil",
    ),
    "step.context": ("Reading context", "Lecture du contexte"),
    "step.routing": ("Choosing skills and model", "Choix des compétences et du modèle"),
    "step.generate": ("Writing with {model}", "Rédaction avec {model}"),
    "step.proposal": (
        "Preparing a change to your instructions",
        "Préparation d'une modification de vos instructions",
    ),
    "step.ask_context": ("Reading {agent}'s thread and memory", "Lecture du fil et de la mémoire de {agent}"),
    "step.ask_remote": ("Asking the remote agent {agent}", "Question à l'agent distant {agent}"),
    "step.ask_routing": ("Choosing the model", "Choix du modèle"),
    "step.ask_generate": ("{agent} answers with {model}", "{agent} répond avec {model}"),
    "step.tools.workspace": ("Searching the workspace", "Recherche dans l'espace de travail"),
    "step.tools.connectors": ("Querying connectors", "Interrogation des connecteurs"),
    "step.tools.mcp": ("Calling MCP tools", "Appel des outils MCP"),
    "step.tools.agents": ("Asking another agent", "Question à un autre agent"),
    "step.tools.memory": ("Saving to memory", "Enregistrement en mémoire"),
    "step.tools.live_state": ("Using the live state", "Utilisation de l'état en direct"),
    "step.tools.instructions": (
        "Preparing a change to your instructions",
        "Préparation d'une modification de vos instructions",
    ),
    "step.tools.tools": ("Using tools", "Utilisation d'outils"),
    # The title model's prompt: the title comes in the run's language.
    "title.system": (
        "Write a short title for the conversation below: at most six words, in English, no quotes, "
        "no final period. Answer with the title only.",
        "Écris un titre court pour la conversation ci-dessous : six mots au plus, en français, sans "
        "guillemets ni point final. Réponds uniquement par le titre.",
    ),
    "title.exchange": (
        "User: {request}\n\nAssistant: {answer}",
        "Utilisateur : {request}\n\nAssistant : {answer}",
    ),
}


def has(key: str) -> bool:
    return key in TEXTS


def say(language: str, key: str, **values: object) -> str:
    """The text ``key`` in ``language`` ("fr"; anything else: English), its
    named fields filled from ``values``."""
    english, french = TEXTS[key]
    return (french if language == FRENCH else english).format(**values)
