#!/usr/bin/env bash
# The run benchmark: distributed (launcher, gateway, gRPC services) against the
# in-process floor. Writes docs/benchmarks.json (or --out DIR) and prints a table.
#   scripts/bench.sh [--smoke] [--runs N] [--out DIR] [--profile DIR]
# The threads benchmark: appends/s and pages of 50 from a 1,000,000-entry
# thread, on SQLite and PostgreSQL. Merges a "threads" key into benchmarks.json.
#   scripts/bench.sh threads [--smoke] [--backends sqlite,postgres] [--entries N] [--out DIR] [--profile DIR]
# The router benchmark: Skill Router decisions over 1,000 skills (hashing in
# process, MiniLM through the RPC).
#   scripts/bench.sh router [--smoke] [--json FILE]
# The memory benchmark: recall latency over 10,000 notes (MiniLM and hashing).
#   scripts/bench.sh memory [--smoke] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
export SWITCHBOARD_BENCH_COMMAND="scripts/bench.sh${*:+ $*}"
if [[ "${1:-}" == "threads" ]]; then
  shift
  exec .venv/bin/python -m tests.bench.bench_threads "$@"
fi
if [[ "${1:-}" == "router" ]]; then
  shift
  exec .venv/bin/python -m tests.bench.bench_router "$@"
fi
if [[ "${1:-}" == "memory" ]]; then
  shift
  exec .venv/bin/python -m tests.bench.bench_memory "$@"
fi
exec .venv/bin/python -m tests.bench.bench_runs "$@"
