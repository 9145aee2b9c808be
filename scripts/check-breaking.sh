#!/usr/bin/env bash
# `buf breaking`: the contracts in the work tree against the last contracts of
# main. On main itself (HEAD is main's last commit, as in CI's fresh clone of
# main) the base is the commit before HEAD; on a branch it is the commit the
# branch forked from main (its merge base), so that what main gained since is
# not reported as this branch's deletion. SWITCHBOARD_BUF_AGAINST=<commit>
# chooses the base. The rules are in buf.yaml (`breaking:`).
set -euo pipefail
cd "$(dirname "$0")/.."

base=${SWITCHBOARD_BUF_AGAINST:-}
if [ -z "$base" ]; then
  main=""
  for ref in main origin/main; do
    if git rev-parse -q --verify "$ref^{commit}" > /dev/null; then main=$ref; break; fi
  done
  if [ -z "$main" ]; then
    echo "buf breaking: no main or origin/main branch to compare with" >&2
    exit 1
  fi
  if [ "$(git rev-parse HEAD)" = "$(git rev-parse "$main")" ]; then
    if ! git rev-parse -q --verify "HEAD~1^{commit}" > /dev/null; then
      if [ "$(git rev-parse --is-shallow-repository)" = true ]; then
        echo "buf breaking: a shallow clone has no commit before HEAD; clone with history" >&2
        exit 1
      fi
      echo "buf breaking: HEAD is the first commit, nothing to compare with"
      exit 0
    fi
    base=$(git rev-parse HEAD~1)
  else
    base=$(git merge-base HEAD "$main")
  fi
fi

against=$(mktemp -d)
trap 'rm -rf "$against"' EXIT
git archive "$base" buf.yaml protos | tar -x -C "$against"
echo "buf breaking against $(git log -1 --format='%h %s' "$base")"
node_modules/.bin/buf breaking --against "$against"
