#!/usr/bin/env bash
# The run benchmark: distributed (launcher, gateway, gRPC services) against the
# in-process floor. Writes docs/benchmarks.json (or --out DIR) and prints a table.
#   scripts/bench.sh [--smoke] [--runs N] [--out DIR] [--profile DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
export SWITCHBOARD_BENCH_COMMAND="scripts/bench.sh${*:+ $*}"
exec .venv/bin/python -m tests.bench.bench_runs "$@"
