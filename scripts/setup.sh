#!/usr/bin/env bash
# Creates .venv and installs Switchboard with its development tools. Cheap to
# re-run: it reinstalls only when pyproject.toml has changed.
# The install goes through uv (installed into .venv by pip first), which
# resolves and links the same packages from PyPI in about a third of pip's
# time; pip does it alone when uv cannot be had.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Switchboard needs Python 3.11 or newer")'
  echo "Creating .venv with $("$python" --version)…"
  "$python" -m venv .venv
fi
stamp=.venv/.installed-pyproject
wanted=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  echo "Installing Switchboard and its dependencies into .venv…"
  pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
  if [ -x .venv/bin/uv ] || "${pip[@]}" uv 2> /dev/null; then
    .venv/bin/uv pip install --quiet --python .venv/bin/python -e '.[dev]'
  else
    echo "uv could not be installed; installing with pip"
    "${pip[@]}" --upgrade pip
    "${pip[@]}" -e '.[dev]'
  fi
  echo "$wanted" > "$stamp"
fi
