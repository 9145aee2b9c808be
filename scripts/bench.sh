#!/usr/bin/env bash
# The benchmark suite (docs/benchmarks.md). Not part of the default test run;
# tests/e2e/test_bench_smoke.py runs the --smoke variants.
#
# Everything, one command: the run matrix, threads, router, memory and growth, one
# after the other; writes docs/benchmarks.json (every key) and the results
# section of docs/benchmarks.md, and prints the tables. Run it on an idle machine.
#   scripts/bench.sh all [--smoke] [--out DIR] [--steps runs,threads,router,memory,growth] [--backends sqlite,postgres]
# The tables of a benchmarks.json (--write-docs: into docs/benchmarks.md too).
#   scripts/bench.sh report [--json FILE] [--write-docs]
# The run benchmark: the distributed path (launcher, gateway, gRPC services) on
# SQLite and PostgreSQL, tracing off and on, at concurrency 1, 8 and 32, against
# the in-process floor; and the SSE fan-out (1,000 idle clients). Writes its
# keys of docs/benchmarks.json (or --out DIR) and prints its tables.
#   scripts/bench.sh [--smoke] [--runs N] [--concurrency 1,8,32] [--backends sqlite,postgres]
#                    [--tracing off,on] [--sse-clients 1000] [--paths distributed,floor] [--out DIR] [--profile DIR]
# The threads benchmark: appends/s and pages of 50 from a 1,000,000-entry
# thread, on SQLite and PostgreSQL. Merges a "threads" key into benchmarks.json.
#   scripts/bench.sh threads [--smoke] [--backends sqlite,postgres] [--entries N] [--out DIR] [--profile DIR]
# The router benchmark: Skill Router decisions over 1,000 skills (hashing in
# process, MiniLM through the RPC).
#   scripts/bench.sh router [--smoke] [--json FILE]
# The memory benchmark: recall latency over 10,000 notes (MiniLM and hashing).
#   scripts/bench.sh memory [--smoke] [--out DIR]
# Assembling a chat run's conversation context (50 turns: reads, tokens, split, fold).
#   scripts/bench.sh context [--turns 50] [--iterations 200] [--smoke]
# Side by side with LangGraph's server (its pinned versions installed once with
# pip into .bench/peer-venv): the same runs through the same client, one table
# with the ratios. Merges a "peer" key into benchmarks.json.
#   scripts/bench.sh peer [--smoke] [--runs N] [--concurrency 1,8,32] [--jobs-per-worker 1,10,32]
#                         [--backends sqlite,postgres] [--hops-calls 2000] [--out DIR]
# The CPU of a whole system's start, per process, for one or more checkouts
# started alternately (e.g. --code /tmp/before --code .).
#   scripts/bench.sh start [--code DIR]... [--starts 3]
# Cost that does not grow with the work: CPU per run of every server process
# with little data around the run and with a lot (turn 1 / turn 500 of a
# conversation, 10 / 100,000 notes, 23 / 10,000 skills, an empty / a
# 200,000-entry agent thread: an ask and a page of its view), small and big
# measured back to back on one launched system; the ratios against their
# targets. Merges a "growth" key into benchmarks.json.
#   scripts/bench.sh growth [--smoke] [--runs N] [--cases chat,notes,skills,ask,page] [--out DIR] [--profile DIR]
# What a gRPC call, a streamed message, an HTTP request, an SSE event and a
# SQLite statement and commit cost alone, and one run's fixed pieces together.
#   scripts/bench.sh hops [--calls 2000] [--smoke]
# What a stream following another engine's run adds to each event's latency
# (two engines on PostgreSQL; wake-ups or polling).
#   scripts/bench.sh wakeups [--runs 20] [--token-delay 0.05]
# Where a run's CPU goes: py-spy on the five processes under c=8 load, self
# time by library and by Switchboard's functions, as shares of a run.
# Merges a "profile" key into benchmarks.json.
#   scripts/bench.sh profile [--runs 400] [--concurrency 8] [--smoke] [--out DIR]
# Many replicas on one PostgreSQL: 1, 2, 4 and 8 gateways and engines (two of
# each other service); the latency a cross-replica stream and a cancellation
# add, idle CPU and transactions per replica with open SSE streams, database
# connections per process; on PostgreSQL directly, then through PgBouncer.
# Merges a "scale" key into benchmarks.json.
#   scripts/bench.sh scale [--replicas 1,2,4,8] [--streams 1000] [--window 10]
#                          [--poolers none,pgbouncer] [--smoke] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
export SWITCHBOARD_BENCH_COMMAND="scripts/bench.sh${*:+ $*}"
case "${1:-}" in
  all) shift; exec .venv/bin/python -m tests.bench.bench_all "$@" ;;
  report) exec .venv/bin/python -m tests.bench.bench_all "$@" ;;
  threads) shift; exec .venv/bin/python -m tests.bench.bench_threads "$@" ;;
  router) shift; exec .venv/bin/python -m tests.bench.bench_router "$@" ;;
  memory) shift; exec .venv/bin/python -m tests.bench.bench_memory "$@" ;;
  context) shift; exec .venv/bin/python -m tests.bench.bench_context "$@" ;;
  peer) shift; exec .venv/bin/python -m tests.bench.bench_peer "$@" ;;
  start) shift; exec .venv/bin/python -m tests.bench.bench_system_start "$@" ;;
  hops) shift; exec .venv/bin/python -m tests.bench.bench_hops "$@" ;;
  wakeups) shift; exec .venv/bin/python -m tests.bench.bench_wakeups "$@" ;;
  profile) shift; exec .venv/bin/python -m tests.bench.bench_profile "$@" ;;
  growth) shift; exec .venv/bin/python -m tests.bench.bench_growth "$@" ;;
  scale) shift; exec .venv/bin/python -m tests.bench.bench_scale "$@" ;;
esac
exec .venv/bin/python -m tests.bench.bench_runs "$@"
