"""The terminal client's own words, in English and French. The language is
the user's locale (LC_ALL, LC_MESSAGES or LANG starting with "fr": French),
chosen once by the command line (``use``). What the API says (its error
messages, a step's label, an answer) is shown as the API said it."""

from __future__ import annotations

from collections.abc import Mapping

TEXTS: dict[str, tuple[str, str]] = {
    # key: (English, French)
    "error": ("error:", "erreur :"),
    "conversation": ("conversation {id}", "conversation {id}"),
    "leave": ("Ctrl-D or /quit to leave.", "Ctrl-D ou /quit pour quitter."),
    "prompt": ("you>", "vous>"),
    "run": ("run {id}", "run {id}"),
    "footer": (
        "{model} · {tokens_in} → {tokens_out} tokens · run {run}",
        "{model} · {tokens_in} → {tokens_out} jetons · run {run}",
    ),
    "token counts": ("{tokens_in} in, {tokens_out} out", "{tokens_in} en entrée, {tokens_out} en sortie"),
    "proposal": ("proposal for page {page}: {summary}", "proposition pour la page {page} : {summary}"),
    "stream ended": (
        "the stream ended before the run did; follow it with: switchboard runs tail {run}",
        "le flux s'est arrêté avant la fin du run ; suivez-le avec : switchboard runs tail {run}",
    ),
    "connection lost": (
        "connection lost ({message}); resuming after event {after}",
        "connexion perdue ({message}) ; reprise après l'événement {after}",
    ),
    "gave up": (
        "gave up after {tries} tries without news of the run",
        "abandon après {tries} essais sans nouvelles du run",
    ),
    "empty message": ("the message is empty", "le message est vide"),
    "members": ("members of {agent} (owner {owner}):", "membres de {agent} (propriétaire {owner}) :"),
    "forbidden": (
        "not allowed: changing the skill catalog or another user's agent needs an admin token, "
        "and asking an agent or reading its thread needs its owner to add you as a member "
        "(switchboard agents add-member AGENT USER); writing a project's memory needs the editor "
        "role, and managing its members or settings the owner role, which an owner gives "
        "(switchboard projects add-member PROJECT USER --role editor)",
        "non autorisé : modifier le catalogue de skills ou l'agent d'un autre utilisateur demande "
        "un jeton admin, et interroger un agent ou lire son fil demande que son propriétaire vous "
        "ajoute comme membre (switchboard agents add-member AGENT USER) ; écrire dans la mémoire "
        "d'un projet demande le rôle editor, et gérer ses membres ou ses réglages le rôle owner, "
        "que donne un propriétaire (switchboard projects add-member PROJET UTILISATEUR --role editor)",
    ),
    "json needs message": (
        "--json needs a message (-m): an interactive chat is for people",
        "--json demande un message (-m) : le chat interactif est fait pour les personnes",
    ),
    "after number": ("--after takes an event's sequence number", "--after prend le numéro d'un événement"),
    "registered": ("registered {id} ({name}, {model})", "{id} enregistré ({name}, {model})"),
    "updated": ("updated {id} ({name}, {model})", "{id} modifié ({name}, {model})"),
    "default model": ("default model", "modèle par défaut"),
    "nothing to change": (
        "nothing to change: give --name, --persona, --provider, --model or --injection",
        "rien à changer : donnez --name, --persona, --provider, --model ou --injection",
    ),
    "no entries": ("{agent} has no entries in this view", "{agent} n'a aucune entrée dans cette vue"),
    "partial view": (
        "partial view: {agent}'s thread holds entries this view does not show",
        "vue partielle : le fil de {agent} contient des entrées que cette vue ne montre pas",
    ),
    "exported": ("{count} files of {agent}'s thread → {file}", "{count} fichiers du fil de {agent} → {file}"),
    "imported": (
        "imported {agent}'s thread {thread} ({count} entries)",
        "fil de {agent} importé : {thread} ({count} entrées)",
    ),
    "cannot read": ("cannot read {file}: {reason}", "impossible de lire {file} : {reason}"),
    "not an export": (
        "{file} is not what `threads export` writes",
        "{file} n'est pas ce qu'écrit `threads export`",
    ),
    "no ideai": ("{folder} has no .ideai folder", "{folder} n'a pas de dossier .ideai"),
    "no ideai files": (
        "{folder}/.ideai holds neither CONTEXT.md nor memory/*.md",
        "{folder}/.ideai ne contient ni CONTEXT.md ni memory/*.md",
    ),
    "settings": ("settings: {error}", "réglages : {error}"),
    "interrupted": ("interrupted", "interrompu"),
    # A quota's refusal (HTTP 429), by its reason; {wait}: "retry in N s" or "".
    "ERROR_REASON_RATE_LIMITED": (
        "too many runs started in the last minute{wait}",
        "trop de runs lancés dans la dernière minute{wait}",
    ),
    "ERROR_REASON_TOO_MANY_RUNS": (
        "too many runs in progress at once; wait for one to end or cancel one{wait}",
        "trop de runs en cours à la fois ; attendez qu'un run se termine ou annulez-en un{wait}",
    ),
    "ERROR_REASON_QUOTA_EXCEEDED": (
        "a memory quota is full; delete or decide something first{wait}",
        "un quota de la mémoire est plein ; supprimez ou décidez quelque chose d'abord{wait}",
    ),
    "retry in": ("; retry in {seconds} s", " ; réessayez dans {seconds} s"),
    "model received": ("What the model received", "Ce que le modèle a reçu"),
    "schedule": (
        "schedule {id}: {cron} ({zone}) on {target}",
        "planification {id} : {cron} ({zone}) sur {target}",
    ),
    "paused": ("paused", "en pause"),
    "next tick": ("next run {time}", "prochain run {time}"),
    "schedule counts": (
        "{runs} runs, {missed} missed, last run {last}",
        "{runs} runs, {missed} manqués, dernier run {last}",
    ),
    "schedule error": (
        "the last tick could not run: {error}",
        "le dernier déclenchement n'a pas pu s'exécuter : {error}",
    ),
    "schedule deleted": ("deleted schedule {id}", "planification {id} supprimée"),
    "zone": ("zone", "fuseau"),
    "target": ("target", "cible"),
    "next": ("next", "prochain"),
    "runs/missed": ("runs/missed", "runs/manqués"),
    "bad project": (
        "{value!r} is not a project id: 1 to 128 letters, digits, '.', '_' or '-'",
        "{value!r} n'est pas un identifiant de projet : 1 à 128 lettres, chiffres, '.', '_' ou '-'",
    ),
    "in project": ("project {project}", "projet {project}"),
    "bad language": (
        "{value!r} is not a language tag: en, fr, fr-CA…",
        "{value!r} n'est pas une étiquette de langue : en, fr, fr-CA…",
    ),
    "personal": ("personal", "personnel"),
    "project created": ("created project {id} ({name})", "projet {id} créé ({name})"),
    "nothing to change in project": (
        "nothing to change: give --name or --note-policy",
        "rien à changer : donnez --name ou --note-policy",
    ),
    "member set": ("{user} is {role} of {project}", "{user} est {role} de {project}"),
    "member removed": ("{user} is no longer a member of {project}", "{user} n'est plus membre de {project}"),
    # `proposals …`: notes agents propose for a project's memory.
    "new note": ("a new note", "une nouvelle note"),
    "no change": ("(no change)", "(aucun changement)"),
    "proposal accepted": (
        "accepted proposal {id}: note {note} ({title}) is in the project's memory",
        "proposition {id} acceptée : la note {note} ({title}) est dans la mémoire du projet",
    ),
    "proposal refused": (
        "refused proposal {id}: nothing was written",
        "proposition {id} refusée : rien n'a été écrit",
    ),
    # `chat --page … --selection …`: the run's context.
    "page needs id": (
        "--page-title and --page-type describe the page given with --page",
        "--page-title et --page-type décrivent la page donnée avec --page",
    ),
    "selection stdin": (
        "--selection-file - reads standard input: give the message with -m",
        "--selection-file - lit l'entrée standard : donnez le message avec -m",
    ),
    "selected blocks": ("{count} selected block(s)", "{count} bloc(s) sélectionné(s)"),
    "review proposals": (
        "review it: switchboard proposals list --state pending",
        "à examiner : switchboard proposals list --state pending",
    ),
}
# `runs show`, `projects show` and `proposals show`: the fields of a run's
# record, of a project and of a note proposal.
FIELDS: dict[str, tuple[str, str]] = {
    "run": ("run", "run"),
    "status": ("status", "statut"),
    "conversation": ("conversation", "conversation"),
    "agent": ("agent", "agent"),
    "model": ("model", "modèle"),
    "requested": ("requested", "demandé"),
    "tokens": ("tokens", "jetons"),
    "skills": ("skills", "compétences"),
    "sources": ("sources", "sources"),
    "started": ("started", "début"),
    "finished": ("finished", "fin"),
    "error": ("error", "erreur"),
    "regime": ("regime", "régime"),
    "page": ("page", "page"),
    "selection": ("selected", "sélection"),
    # `projects show`: a project's fields.
    "project": ("project", "projet"),
    "name": ("name", "nom"),
    "role": ("your role", "votre rôle"),
    "note policy": ("agents' notes", "notes des agents"),
    "owner": ("owner", "propriétaire"),
    "created": ("created", "création"),
    # `proposals show`: a note proposal's fields.
    "proposal": ("proposal", "proposition"),
    "state": ("state", "état"),
    "kind": ("kind", "type"),
    "title": ("title", "titre"),
    "proposed by": ("proposed by", "proposée par"),
    "reason": ("reason", "raison"),
    "updates": ("updates", "met à jour"),
    "matched": ("matched", "rapprochement"),
    "decided by": ("decided by", "décidée par"),
    "note written": ("note written", "note écrite"),
}

_french = False


def language(environment: Mapping[str, str]) -> str:
    """ "fr" or "en", from the locale variables as gettext reads them (the first one set wins)."""
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        if value := environment.get(name, ""):
            return "fr" if value.lower().startswith("fr") else "en"
    return "en"


def use(language_code: str) -> None:
    global _french
    _french = language_code == "fr"


def say(key: str, **values: object) -> str:
    english, french = TEXTS[key]
    return (french if _french else english).format(**values)


def field(key: str) -> str:
    english, french = FIELDS[key]
    return french if _french else english
