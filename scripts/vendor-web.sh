#!/usr/bin/env bash
# Copies the web page's third-party modules from node_modules (npm, pinned in
# package-lock.json) into gateway/static/vendor: the page loads them from the
# gateway itself, never from a CDN, and needs no build step. The copies are
# committed so the gateway runs without Node; `--check` fails when they differ
# from the installed packages (a version bump not re-vendored).
set -euo pipefail
cd "$(dirname "$0")/.."
out=gateway/static/vendor
files=(
  "node_modules/marked/lib/marked.esm.js:marked.esm.js"
  "node_modules/marked/lib/marked.esm.js.map:marked.esm.js.map"
  "node_modules/marked/LICENSE:marked.LICENSE"
  "node_modules/dompurify/dist/purify.es.mjs:purify.es.mjs"
  "node_modules/dompurify/dist/purify.es.mjs.map:purify.es.mjs.map"
  "node_modules/dompurify/LICENSE:dompurify.LICENSE"
)
status=0
for pair in "${files[@]}"; do
  from=${pair%%:*}
  to=$out/${pair#*:}
  if [ "${1:-}" = "--check" ]; then
    cmp -s "$from" "$to" || { echo "$to differs from $from: run scripts/vendor-web.sh and commit" >&2; status=1; }
  else
    mkdir -p "$out"
    cp "$from" "$to"
  fi
done
exit $status
