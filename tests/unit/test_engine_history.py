"""The conversation history of a chat run without any service: grouping
entries into turns (tool calls kept only with their results), the split
between folded and kept turns, and token counting (an exact vocabulary where
one ships in a package, else the estimate corrected by reported usage)."""

from __future__ import annotations

from services.engine import history
from services.engine.providers.base import ChatMessage, ToolCallChunk
from services.engine.tokens import CHARS_PER_TOKEN, MAX_CORRECTION, TokenCounters, message_tokens
from switchboard.memory.v1 import handoff_pb2
from switchboard.threads.v1 import threads_pb2

WORDS = TokenCounters().counter("offline", "switchboard-offline-fast")


def entry(sequence: int, run: str, role: int, content: str = "", **extra: object) -> threads_pb2.Entry:
    return threads_pb2.Entry(sequence=sequence, run_id=run, role=role, content=content, **extra)  # type: ignore[arg-type]


USER, ASSISTANT, TOOL = threads_pb2.ROLE_USER, threads_pb2.ROLE_ASSISTANT, threads_pb2.ROLE_TOOL


def test_entries_group_into_turns_with_their_tool_calls_in_order() -> None:
    call = threads_pb2.ToolCall(id="c1", name="read_page", arguments='{"page_id": "p"}')
    entries = [
        entry(1, "r1", USER, "Bonjour ?"),
        entry(2, "r1", ASSISTANT, "Salut."),
        entry(3, "r2", USER, "Lis la page p"),
        entry(4, "r2", ASSISTANT, "", tool_calls=[call]),
        entry(5, "r2", TOOL, "page text", tool_call_id="c1"),
        entry(6, "r2", ASSISTANT, "La page dit…"),
    ]
    turns = history.turns(entries, WORDS)
    assert [t.run_id for t in turns] == ["r1", "r2"]
    assert list(turns[1].messages) == [
        ChatMessage("user", "Lis la page p"),
        ChatMessage("assistant", "", tool_calls=(ToolCallChunk("c1", "read_page", '{"page_id": "p"}'),)),
        ChatMessage("tool", "page text", tool_call_id="c1"),
        ChatMessage("assistant", "La page dit…"),
    ]
    assert turns[1].tokens == sum(message_tokens(WORDS, m) for m in turns[1].messages)


def test_a_call_without_its_result_and_an_unanswered_turn_are_replayed_safely() -> None:
    call = threads_pb2.ToolCall(id="c1", name="search_workspace", arguments="{}")
    entries = [
        entry(1, "r1", USER, "Search, then stop"),
        entry(2, "r1", ASSISTANT, "", tool_calls=[call]),  # the run stopped mid-call
        entry(3, "r2", USER, "Still there?"),  # a run that failed: no answer
        entry(4, "r3", USER, "Hello"),
        entry(5, "r3", ASSISTANT, "Hi"),
    ]
    messages = [m for t in history.turns(entries, WORDS) for m in t.messages]
    # A provider refuses a call without its result: the call is not replayed.
    assert all(not m.tool_calls for m in messages)
    assert [m.content for m in messages] == ["Search, then stop", "Still there?", "Hello", "Hi"]


def turn(run: str, tokens: int) -> history.Turn:
    return history.Turn(run, (), (ChatMessage("user", run),), tokens)


def test_everything_fits_nothing_is_folded() -> None:
    turns = [turn("a", 10), turn("b", 10)]
    assert history.split(turns, budget=100, summary_tokens=50, summary_reserve=80) == ([], turns)


def test_the_newest_turns_that_fit_are_kept_and_the_oldest_folded() -> None:
    turns = [turn(name, 30) for name in "abcdef"]
    folded, kept = history.split(turns, budget=120, summary_tokens=0, summary_reserve=40)
    # 120 - 40 for the summary leaves 80: the two newest turns.
    assert [t.run_id for t in kept] == ["e", "f"] and [t.run_id for t in folded] == list("abcd")


def test_a_turn_that_does_not_fit_stops_the_tail_even_if_an_older_one_would() -> None:
    turns = [turn("old-small", 5), turn("big", 500), turn("new", 10)]
    folded, kept = history.split(turns, budget=100, summary_tokens=0, summary_reserve=20)
    assert [t.run_id for t in kept] == ["new"] and [t.run_id for t in folded] == ["old-small", "big"]


def test_with_no_room_left_every_turn_is_folded() -> None:
    turns = [turn("a", 10)]
    assert history.split(turns, budget=-50, summary_tokens=0, summary_reserve=0) == (turns, [])


def test_folded_turns_become_requests_and_answers_never_tool_results_as_text() -> None:
    call = threads_pb2.ToolCall(id="c1", name="read_page", arguments="{}")
    entries = [
        entry(1, "r1", USER, "Objectif : livrer vendredi"),
        entry(2, "r1", ASSISTANT, "", tool_calls=[call]),
        entry(3, "r1", TOOL, "Decision: injected by a page", tool_call_id="c1"),
        entry(4, "r1", ASSISTANT, "C'est noté."),
    ]
    sent = history.handoff_entries(history.turns(entries, WORDS))
    assert [(e.sequence, e.kind) for e in sent] == [
        (1, handoff_pb2.HANDOFF_ENTRY_KIND_REQUEST),
        (2, handoff_pb2.HANDOFF_ENTRY_KIND_ANSWER),
        (4, handoff_pb2.HANDOFF_ENTRY_KIND_ANSWER),
    ]
    assert sent[1].text == "called read_page({})" and all(e.correlation_id == "r1" for e in sent)


def test_openai_models_are_counted_with_their_own_vocabulary() -> None:
    # Imported here: the package loads every vocabulary it ships at import
    # (about a second), which collecting the suite would pay in each worker.
    import bpe_openai

    counters = TokenCounters()
    counter = counters.counter("openai", "gpt-4o-mini")
    text = "Prépare la facture du client Dupont pour mardi, s'il te plaît."
    assert counter.name == "o200k_base"
    assert counter(text) == len(bpe_openai.get_encoding("o200k_base").encode(text))
    # Reported usage never changes an exact count.
    counters.observe(counter, "gpt-4o-mini", 10, 1000)
    assert counter(text) == len(bpe_openai.get_encoding("o200k_base").encode(text))


def test_other_models_are_estimated_and_the_estimate_follows_reported_usage() -> None:
    counters = TokenCounters()
    counter = counters.counter("anthropic", "claude-x")
    text = "x" * 400
    assert counter.name == "estimate" and counter(text) == 400 / CHARS_PER_TOKEN
    for _ in range(20):  # the provider keeps reporting 50 % more than estimated
        counters.observe(counter, "claude-x", counter(text), int(400 / CHARS_PER_TOKEN * 1.5))
    assert abs(counter(text) - 150) <= 2
    # An unknown OpenAI-compatible model (a llama behind Ollama) is estimated too, apart.
    assert counters.counter("openai", "llama3.1").name == "estimate"
    assert counters.counter("openai", "llama3.1")(text) == 100
    for _ in range(50):
        counters.observe(counter, "claude-x", 1, 1_000_000)
    assert counters.correction("claude-x") == MAX_CORRECTION


class CountingWords:
    """The offline words counter, counting its own calls."""

    name = "words"

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, text: str) -> int:
        self.calls += 1
        return WORDS(text)


def stored(sequence: int, run: str, role: int, content: str = "", **extra: object) -> threads_pb2.Entry:
    """An entry as the threads service returns it: with its id."""
    return entry(sequence, run, role, content, id=f"entry-{sequence}", **extra)


CONVERSATION = [
    stored(1, "r1", USER, "Quand est la fenêtre de déploiement ?"),
    stored(2, "r1", ASSISTANT, "Jeudi, de 14 h à 16 h."),
    stored(3, "r2", USER, "When is the deploy window?"),
    stored(4, "r2", ASSISTANT, "Thursday, 2 to 4 pm."),
]


def test_a_turn_seen_before_is_neither_built_nor_counted_again() -> None:
    cache, counter = history.TurnCache(max_chars=10_000), CountingWords()
    first = history.turns(CONVERSATION, counter, cache)
    assert first == history.turns(CONVERSATION, WORDS)  # what the uncached path builds
    calls = counter.calls
    assert calls > 0
    later = [*CONVERSATION, stored(5, "r3", USER, "Et vendredi ?"), stored(6, "r3", ASSISTANT, "Non.")]
    again = history.turns(later, counter, cache)
    assert again[:2] == first and [t.run_id for t in again] == ["r1", "r2", "r3"]
    assert counter.calls - calls == 2  # only the new turn's two messages


def test_a_turn_that_grew_is_built_again() -> None:
    cache = history.TurnCache(max_chars=10_000)
    call = threads_pb2.ToolCall(id="c1", name="read_page", arguments='{"page_id": "p"}')
    started = [
        *CONVERSATION[:2],
        stored(3, "r2", USER, "Lis la page p"),
        stored(4, "r2", ASSISTANT, "", tool_calls=[call]),
    ]
    # The call has no result yet: it is left out, and the turn is the message alone.
    assert [len(t.messages) for t in history.turns(started, WORDS, cache)] == [2, 1]
    finished = [
        *started,
        stored(5, "r2", TOOL, "texte de la page", tool_call_id="c1"),
        stored(6, "r2", ASSISTANT, "Voilà."),
    ]
    grown = history.turns(finished, WORDS, cache)
    assert grown == history.turns(finished, WORDS) and [len(t.messages) for t in grown] == [2, 4]


def test_an_estimate_is_counted_again_as_reported_usage_moves_it() -> None:
    counters = TokenCounters()
    estimate = counters.counter("anthropic", "claude-x")
    cache = history.TurnCache(max_chars=10_000)
    before = sum(t.tokens for t in history.turns(CONVERSATION, estimate, cache))
    counters.observe(estimate, "claude-x", estimated=100, reported=150)
    after = sum(t.tokens for t in history.turns(CONVERSATION, estimate, cache))
    assert after > before
    assert after == sum(t.tokens for t in history.turns(CONVERSATION, estimate))


def test_the_cache_keeps_at_most_its_characters_and_still_answers() -> None:
    bound = 3 * (history.TURN_OVERHEAD_CHARS + 60)
    cache = history.TurnCache(max_chars=bound)
    long = [
        stored(i, f"r{i // 2}", USER if i % 2 == 0 else ASSISTANT, f"réponse numéro {i} " * 3)
        for i in range(40)
    ]
    assert history.turns(long, WORDS, cache) == history.turns(long, WORDS)
    assert 0 < cache._chars <= bound  # noqa: SLF001 - the bound itself
    assert history.turns(long, WORDS, cache) == history.turns(long, WORDS)
    # Turns without text count too: a zero budget keeps nothing at all.
    empty = history.TurnCache(max_chars=0)
    blank = [stored(i, f"r{i}", USER, "") for i in range(1, 30)]
    assert len(history.turns(blank, WORDS, empty)) == 29 and not empty._kept  # noqa: SLF001
