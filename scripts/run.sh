#!/usr/bin/env bash
# Starts the whole system on embedded defaults (SQLite files under .data/,
# offline model) and prints where to open it. Ctrl-C stops everything.
# Flags go to the launcher: scripts/run.sh --help
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python -m services.launcher "$@"
