"""What a request asks, apart from what it carries: the Skill Router matches
skills on the first, never on the second. Pure functions, English and
French, accent-insensitive; no model.

A request often carries the text it is about: "Translate this paragraph
into French: The deploy is on Tuesday." asks for a translation, and the
deploy date it carries says nothing about which skill to apply; matched
whole, it reached weekly-status-report. Two deterministic rules, in this
order:

1. **The instruction and its material.** When the request opens with an
   instruction (its first word, after a polite opener such as "please",
   "can you", "peux-tu", is a verb of ``INSTRUCTION_VERBS``) of at most
   ``HEAD_MAX_WORDS`` words, followed by a colon, a line break or an opening
   quotation mark, and something follows, the instruction is that head and
   the rest is its material: skills are matched on the instruction alone
   ("Réponds à ce courriel : le rapport hebdomadaire est en retard" is a
   reply, not a status report). A head that is not an instruction ("Here
   are my notes:", "Projet Atlas :") leaves the whole request matched.
2. **A built-in task.** When the instruction asks for one of the built-in
   tasks (translate, summarise, fix the spelling, rephrase, shorten,
   explain: ``BUILTIN_TASKS``, by its opening words after a polite opener),
   the request is that task applied to a text. Built-ins are applied only
   when forced, and what the text is about is not a request: no skill is
   applied automatically, whatever the scores ("Summarize the weekly status
   report" wants a summary, not a new report). A request that presents its
   material first ("Here is a paragraph: … Translate it into French.")
   is judged on its last sentence.

The decision record says which rule applied (``builtin_task`` and
``matched_text`` of the SkillDecision).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.shared.text import fold

# An instruction head longer than this is prose, not an instruction.
HEAD_MAX_WORDS = 15
# Where the material starts: a colon (French " :" too; not a time's "10:30"
# nor a link's "https://"), a line break, or an opening quotation mark (the
# apostrophe is a letter of French words).
_DELIMITER = re.compile(r"\s*(?<!\d):(?!\d|//)\s*|\s*\n\s*|\s*[\"“«]\s*")
_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")

# Polite openers skipped before the first verb (folded, lower case).
_OPENER = re.compile(
    r"^(?:(?:please|pls|kindly|can you|could you|would you|will you|i need you to|i want you to|"
    r"i would like you to|i'd like you to|help me|peux[- ]tu|pourrais[- ]tu|pouvez[- ]vous|"
    r"pourriez[- ]vous|tu peux|tu pourrais|vous pouvez|merci de|stp|svp|s'il te plait|"
    r"s'il vous plait|j'aimerais que tu|je voudrais que tu|aide[- ]moi a|aidez[- ]moi a)[\s,]+)+"
)

# The request presents its material first: its instruction is its last sentence.
_PRESENTATION = re.compile(r"^(?:here is|here are|here's|below is|below are|voici|voila|ci-dessous)\b")

# Verbs an instruction opens with (folded; English imperative, French
# imperative and infinitive).
INSTRUCTION_VERBS = frozenset(
    """
    add analyse analyze answer build change check collect compare condense convert correct create define
    describe draft explain extract find fix format generate give improve list make organise organize plan
    polish prepare proofread rephrase reply respond review rewrite reword send shorten sum summarise
    summarize tell translate turn update write
    ajoute ajoutez ajouter analyse analysez analyser abrege abregez cherche cherchez compare comparez
    comparer convertis corrige corrigez corriger cree creez creer decris decrivez definis definissez
    donne donnez ecris ecrivez ecrire envoie envoyez explique expliquez expliquer extrais fais faites
    faire liste listez lister mets organise organisez prepare preparez preparer raccourcis raccourcissez
    redige redigez rediger reformule reformulez reformuler relis relisez reponds repondez repondre
    resume resumez resumer synthetise synthetisez traduis traduisez traduire transforme transformez
    trouve trouvez verifie verifiez
    """.split()
)

# Each built-in task by the words its instruction opens with (folded, after
# a polite opener). The names are the built-in skills' (services/router/catalog.py).
BUILTIN_TASKS: dict[str, re.Pattern[str]] = {
    "translate": re.compile(r"^(?:translate|traduis|traduisez|traduire|traduction)\b"),
    "summarize": re.compile(
        r"^(?:summari[sz]e|sum up|give me a summary|make a summary|write a summary|resume|resumez|resumer|"
        r"fais(?:[- ]moi)? un resume|donne(?:[- ]moi)? un resume|synthetise|synthetisez)\b"
    ),
    "fix-spelling-grammar": re.compile(
        r"^(?:proofread\b|(?:correct|fix|check|corrige|corrigez|corriger|verifie|verifiez)\b"
        r"[^.!?:\n]{0,40}?\b(?:spelling|grammar|typos?|orthographe|grammaire|fautes?|coquilles?)\b)"
    ),
    "improve-writing": re.compile(
        r"^(?:rephrase|reword|reformulate|paraphrase|reformule|reformulez|reformuler|"
        r"improve the (?:writing|wording|style)|ameliore (?:la redaction|le style|la formulation))\b"
    ),
    "make-shorter": re.compile(
        r"^(?:shorten|condense|make (?:it|this|that|the text) shorter|raccourcis|raccourcissez|raccourcir|"
        r"abrege|abregez)\b"
    ),
    "explain": re.compile(
        r"^(?:explain (?:this|that|these|what|how|why|the meaning|to me|me)|"
        r"expliquez?[- ]moi|explique (?:ce|cet|cette|ces|ceci|cela|pourquoi|comment))\b"
    ),
}


@dataclass(frozen=True)
class RequestParts:
    """A request split into what it asks and what it carries."""

    # What skills are matched on: the instruction, or the whole request.
    instruction: str
    # The text the instruction applies to; "" when none was told apart.
    material: str = ""
    # The built-in task the request asks for ("translate"...); "" otherwise.
    builtin_task: str = ""

    @property
    def split(self) -> bool:
        return bool(self.material)


def _without_opener(folded: str) -> str:
    return _OPENER.sub("", folded.strip(" \t\"'“”«»*-.,;!?")).strip()


def _opens_with_instruction(folded: str) -> bool:
    words = _WORD.findall(_without_opener(folded))
    return bool(words) and words[0] in INSTRUCTION_VERBS


def builtin_task(clause: str) -> str:
    """The built-in task ``clause`` opens with ("translate"...), or ""."""
    opening = _without_opener(fold(clause))
    for name, pattern in BUILTIN_TASKS.items():
        if pattern.match(opening):
            return name
    return ""


def split_request(text: str) -> RequestParts:
    """The instruction of ``text``, its material and the built-in task it asks for."""
    stripped = text.strip()
    instruction, material = stripped, ""
    found = _DELIMITER.search(stripped)
    if found and found.start() > 0:
        head, rest = stripped[: found.start()].strip(), stripped[found.end() :].strip()
        folded_head = fold(head)
        short = len(_WORD.findall(folded_head)) <= HEAD_MAX_WORDS
        if rest and short and _opens_with_instruction(folded_head):
            instruction, material = head, rest
    task = builtin_task(instruction)
    if not task and _PRESENTATION.match(_without_opener(fold(stripped))):
        sentences = [s.strip() for s in _SENTENCE.findall(stripped) if _WORD.search(fold(s))]
        if len(sentences) > 1:
            task = builtin_task(sentences[-1])
    return RequestParts(instruction, material, task)
