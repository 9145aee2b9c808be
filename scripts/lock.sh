#!/usr/bin/env bash
# Writes constraints.txt: the exact version of every Python package
# Switchboard and its development tools install, for every platform
# (uv's universal resolution), from pyproject.toml's ranges. scripts/setup.sh
# and the image (deploy/Dockerfile) install under it, so a package released
# upstream reaches CI and deployments only when this file moves.
#
#   scripts/lock.sh                      keep every pin that still fits pyproject.toml
#   scripts/lock.sh --upgrade            move every package to its newest fitting release
#   scripts/lock.sh --upgrade-package X  move X alone
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/uv ] || scripts/setup.sh
.venv/bin/uv pip compile pyproject.toml --extra dev --universal --python-version 3.11 \
  --quiet --custom-compile-command scripts/lock.sh -o constraints.txt "$@"
