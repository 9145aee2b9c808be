"""What assembling a chat run's conversation context costs, for a 50-turn
conversation: reading the turns after the summary from threads and the
summary from memory (over real gRPC sockets, SQLite), grouping them into
turns, counting their tokens and splitting them against the model's window;
and, apart, folding the oldest turns into the summary when they do not fit.

    scripts/bench.sh context [--turns 50] [--iterations 200] [--smoke]

Counters: the offline model's words, OpenAI's o200k_base (exact, from the
bpe-openai wheel) and the estimate every other model gets. Prints a JSON
object and a markdown table (docs/benchmarks.md, "Conversation context")."""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from services.engine import history
from services.engine.collaborators import Collaborators, GrpcTransport
from services.engine.tokens import TokenCounters
from switchboard.threads.v1 import threads_pb2, threads_service_pb2
from tests.service.harness import as_user
from tests.service.system import System, system

USER = "bench"
WORDS = (
    "la facture du client Dupont doit partir mardi avec le détail des heures et le taux convenu "
    "the invoice for Dupont goes out on Tuesday with the hours and the agreed rate"
).split()


def message(n: int, words: int) -> str:
    return f"Turn {n}: " + " ".join(WORDS[(n + i) % len(WORDS)] for i in range(words))


@asynccontextmanager
async def sqlite_databases(folder: Path) -> AsyncIterator[Callable[[str], Any]]:
    @asynccontextmanager
    async def make(name: str) -> AsyncIterator[str]:
        yield f"sqlite+aiosqlite:///{folder / name}.db"

    yield make


async def conversation_of(sb: System, turns: int, words: int) -> str:
    user = as_user(USER)
    chat = (
        await sb.threads.CreateConversation(threads_service_pb2.CreateConversationRequest(), **user)
    ).conversation
    for n in range(1, turns + 1):
        run = f"run-{n}"
        entries = [
            threads_pb2.Entry(
                role=threads_pb2.ROLE_USER, content=message(n, words), run_id=run, source="user"
            ),
            threads_pb2.Entry(
                role=threads_pb2.ROLE_ASSISTANT, content=message(n + 1, words), run_id=run, source="engine"
            ),
        ]
        await sb.threads.AppendEntries(
            threads_service_pb2.AppendEntriesRequest(thread_id=chat.id, request_id=run, entries=entries),
            **user,
        )
    return str(chat.id)


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1] * 1000, 3),
    }


async def measure(turns: int, iterations: int, words: int) -> dict[str, Any]:
    counters = TokenCounters()
    kinds = {
        "words (offline)": counters.counter("offline", "switchboard-offline-fast"),
        "o200k_base (OpenAI)": counters.counter("openai", "gpt-4o"),
        "estimate (others)": counters.counter("anthropic", "claude"),
    }
    results: dict[str, Any] = {"turns": turns, "words_per_message": words, "iterations": iterations}
    with tempfile.TemporaryDirectory() as folder:
        async with sqlite_databases(Path(folder)) as make, system(make) as sb:  # type: ignore[arg-type]
            chat = await conversation_of(sb, turns, words)
            services = sb.services
            transport = GrpcTransport(
                f"127.0.0.1:{services['threads'].port}",
                f"127.0.0.1:{services['memory'].port}",
                f"127.0.0.1:{services['router'].port}",
                timeout=10,
            )
            collab = Collaborators(transport)
            try:
                for name, counter in kinds.items():
                    reads, pure, fits = [], [], []
                    for _ in range(iterations):
                        began = time.perf_counter()
                        summary, entries = await asyncio.gather(
                            collab.handoff_summary(USER, chat, checkpoint=False),
                            collab.entries_after(USER, chat, 0),
                        )
                        read = time.perf_counter()
                        grouped = history.turns(entries, counter)
                        folded, kept = history.split(grouped, 128_000 - 4096 - 500, 0, 1024)
                        done = time.perf_counter()
                        reads.append(read - began)
                        pure.append(done - read)
                        fits.append(done - began)
                    tokens = sum(t.tokens for t in grouped)
                    # As the engine does from its second run of a conversation
                    # on: the turns built by the run before are kept.
                    cache = history.TurnCache(32 * 1024 * 1024)
                    history.turns(entries, counter, cache)
                    kept_pure = []
                    for _ in range(iterations):
                        began = time.perf_counter()
                        grouped = history.turns(entries, counter, cache)
                        history.split(grouped, 128_000 - 4096 - 500, 0, 1024)
                        kept_pure.append(time.perf_counter() - began)
                    assert sum(t.tokens for t in grouped) == tokens
                    results[name] = {
                        "total": percentiles(fits),
                        "reads": percentiles(reads),
                        "turns_and_split": percentiles(pure),
                        "turns_and_split_kept": percentiles(kept_pure),
                        "history_tokens": tokens,
                        "kept_turns": len(kept),
                    }
                # Folding: a window that keeps a few turns, the rest folded once.
                counter = kinds["words (offline)"]
                entries = await collab.entries_after(USER, chat, 0)
                grouped = history.turns(entries, counter)
                folded, kept = history.split(grouped, 2048 - 512 - 200, 0, 600)
                began = time.perf_counter()
                summary = await collab.fold_into_summary(USER, chat, history.handoff_entries(folded))
                results["fold"] = {
                    "folded_turns": len(folded),
                    "kept_turns": len(kept),
                    "ms": round((time.perf_counter() - began) * 1000, 3),
                    "summary_chars": len(summary.text),
                }
            finally:
                await transport.close()
    return results


def table(results: dict[str, Any]) -> str:
    lines = [
        f"{results['turns']} turns of {results['words_per_message']} words a message, "
        f"{results['iterations']} assemblies per counter, SQLite, real gRPC sockets.",
        "",
        "| counter | history tokens | total p50 / p95 (ms) | reads p50 (ms) | turns + split p50 (ms) "
        "| the same, turns kept from the run before (ms) |",
        "|---|---|---|---|---|---|",
    ]
    for name in ("words (offline)", "o200k_base (OpenAI)", "estimate (others)"):
        row = results[name]
        lines.append(
            f"| {name} | {row['history_tokens']} | {row['total']['p50_ms']} / {row['total']['p95_ms']} "
            f"| {row['reads']['p50_ms']} | {row['turns_and_split']['p50_ms']} "
            f"| {row['turns_and_split_kept']['p50_ms']} |"
        )
    fold = results["fold"]
    lines += [
        "",
        f"Folding {fold['folded_turns']} turns into the summary (record + checkpoint, rules): "
        f"{fold['ms']} ms once; {fold['kept_turns']} turns kept, summary {fold['summary_chars']} characters.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--words", type=int, default=60)
    parser.add_argument("--smoke", action="store_true", help="a few iterations, to check the bench runs")
    args = parser.parse_args(argv)
    iterations = 3 if args.smoke else args.iterations
    results = asyncio.run(measure(args.turns, iterations, args.words))
    print(json.dumps(results, indent=2))
    print(table(results))
    return results


if __name__ == "__main__":
    main()
