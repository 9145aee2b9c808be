"""The language a run writes its texts in (notices, proposals, titles,
refusals): the product has its texts in English and French.

A client names the language (a BCP 47 tag: the page sends its interface's
language, the HTTP route falls back to Accept-Language); without one, the
language of the user's message decides, by :func:`detect`.

:func:`detect` weighs words that only one of the two languages uses
(articles, pronouns, common verbs of requests, greetings), elisions ("l'",
"qu'" against "n't", "'s"), accented letters and French typography (« »,
a space before ? ! : ;). The message's first clause is where the request
usually is: when it leans clearly one way it decides ("Translate this into
French: Le déploiement est mardi." is English), else it counts double. A
message with no such sign, or as many of each, is English, the product's
default. Words both languages use ("a", "on", "me", "plus", "comment"…)
count for neither.
"""

from __future__ import annotations

import re

from services.shared.text import fold

ENGLISH = "en"
FRENCH = "fr"
SUPPORTED = (ENGLISH, FRENCH)
DEFAULT = ENGLISH
MAX_TAG_CHARS = 35

# The shape of a BCP 47 tag ("fr", "fr-CA", "en-US", "zh-Hant-TW"); its
# primary subtag names the language.
TAG = re.compile(r"^[A-Za-z]{2,8}(?:-[A-Za-z0-9]{1,8})*$")

# Folded (lower case, no accents) words only French uses, in requests.
_FRENCH_WORDS = frozenset(
    """
    le la les un une des du de au aux et est sont etait ou mais donc ni que qui quoi dont
    je tu il elle ils elles nous vous moi toi lui leur leurs mon ma mes ton ta tes sa ses
    notre nos votre vos ce cet cette ces cela ca ici y en dans sur sous avec sans chez pour
    vers entre apres avant pendant depuis tres aussi tout tous toute toutes toujours jamais
    deja rien ne pas suis es sommes etes avons avez ont etre avoir fait faire peux peut
    pouvez veux veut voudrais dois doit faut merci bonjour bonsoir salut oui pourquoi quand
    quel quelle quels quelles combien voici voila retiens retenez souviens souvenez rappelle
    rappelez oublie oubliez stp svp traduis traduisez redige redigez ecris ecrivez explique
    expliquez donne donnez fais faites montre montrez trouve trouvez prefere preferes
    aujourd hui demain hier semaine prochaine reunion equipe
    """.split()
)
# Lower-case words only English uses, in requests.
_ENGLISH_WORDS = frozenset(
    """
    the is are was were be been being am i you he she it we they my your his her its our
    their this that these those to of in for with at from by about into onto over what which
    who whom how when where why can could would should will shall do does did not and but if
    then than there here have has had just some any all every each please thanks thank hello
    hi hey yes no remember write translate draft summarize summarise explain tell give make
    show find help keep forget today tomorrow yesterday week next meeting team prefer
    """.split()
)
# Elisions: "l'équipe", "qu'il", "j'ai" (French); "don't", "it's", "I'm" (English).
_FRENCH_ELISION = re.compile(r"(?<![^\W\d_])(?:l|d|j|qu|n|c|s|m|t|jusqu|lorsqu|puisqu)['’](?=[^\W\d_])", re.I)
_ENGLISH_CONTRACTION = re.compile(r"[^\W\d_]['’](?:s|t|re|ll|ve|m|d)(?![^\W\d_])", re.I)
# French typography: guillemets, and a (narrow) space before ? ! : ;
_FRENCH_TYPOGRAPHY = re.compile(r"[«»]|[ \u00a0\u202f][?!:;](?:\s|$)")
_ACCENTED = re.compile(r"[àâæçéèêëîïôœùûüÿ]")
_WORD = re.compile(r"[^\W\d_]+")
# Where the first clause ends: the request usually comes first. A first
# clause this many signs ahead decides alone; else it counts double.
_CLAUSE_END = re.compile(r"[.:!?;\n]")
DECISIVE = 2


def primary(tag: str) -> str:
    """The language of a BCP 47 tag, lower case ("fr-CA" -> "fr"); "" for
    an empty or malformed tag."""
    tag = tag.strip()
    if not tag or len(tag) > MAX_TAG_CHARS or not TAG.match(tag):
        return ""
    return tag.split("-", 1)[0].lower()


def is_tag(tag: str) -> bool:
    """Whether ``tag`` is empty or shaped like a BCP 47 tag."""
    return not tag.strip() or bool(primary(tag))


def supported(tag: str) -> str:
    """The product language a tag names ("en", "fr"), or "" when the tag is
    empty, malformed or names a language the product has no texts in."""
    language = primary(tag)
    return language if language in SUPPORTED else ""


def _score(text: str, weight: int) -> tuple[int, int]:
    french = weight * (
        len(_FRENCH_ELISION.findall(text))
        + len(_FRENCH_TYPOGRAPHY.findall(text))
        + sum(1 for word in _WORD.findall(text.lower()) if _ACCENTED.search(word))
    )
    english = weight * len(_ENGLISH_CONTRACTION.findall(text))
    # Elided letters and contraction endings are not words of their own.
    bare = _ENGLISH_CONTRACTION.sub(" ", _FRENCH_ELISION.sub(" ", text))
    for word in _WORD.findall(fold(bare)):
        if word in _FRENCH_WORDS:
            french += weight
        elif word in _ENGLISH_WORDS:
            english += weight
    return french, english


def detect(text: str) -> str:
    """ "fr" or "en": the language of ``text`` (see the module's docstring).
    "Retiens que je suis PM" -> "fr"; "" -> "en"."""
    text = text.strip()
    if not text:
        return DEFAULT
    end = _CLAUSE_END.search(text)
    cut = end.end() if end else len(text)
    first_fr, first_en = _score(text[:cut], 1)
    if abs(first_fr - first_en) >= DECISIVE:
        return FRENCH if first_fr > first_en else ENGLISH
    rest_fr, rest_en = _score(text[cut:], 1)
    french, english = 2 * first_fr + rest_fr, 2 * first_en + rest_en
    return FRENCH if french > english else ENGLISH


def resolve(asked: str, text: str) -> str:
    """The run's language: the one asked for when the product has its texts,
    else the language of the user's message."""
    return supported(asked) or detect(text)


def from_accept_language(header: str) -> str:
    """The product language an Accept-Language header prefers most ("" when
    it names none of them): "fr-CH, fr;q=0.9, en;q=0.8" -> "fr";
    "de-DE, en;q=0.5" -> "en"; "de" or "*" -> "". Of equal weights, the
    first listed wins."""
    best, best_quality = "", 0.0
    for item in header.split(",")[:50]:
        tag, _, params = item.strip().partition(";")
        quality = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        language = supported(tag)
        if language and best_quality < quality <= 1:
            best, best_quality = language, quality
    return best
