#!/usr/bin/env bash
# Creates .venv and installs Switchboard with its development tools. Cheap to
# re-run: it reinstalls only when pyproject.toml, constraints.txt or this script changed.
# The install goes through uv (installed into .venv by pip first), which
# resolves and links the same packages from PyPI in about a third of pip's
# time; pip does it alone when uv cannot be had. Both install the exact
# versions of constraints.txt (scripts/lock.sh writes it), so what CI and a
# developer install is what was tested, not whatever was released last night.
#
# Both write the bytecode of what they install, and the project's own modules
# are compiled here too: Python only reads .pyc files where PYTHONDONTWRITEBYTECODE
# is set (as on CI's machines), so without them every process compiled
# SQLAlchemy, gRPC and the rest from source at each start (a launched system
# of five processes took 25 s of CPU to start instead of 9; docs/operations.md).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Switchboard needs Python 3.11 or newer")'
  echo "Creating .venv with $("$python" --version)…"
  "$python" -m venv .venv
fi
stamp=.venv/.installed-pyproject
wanted=$(cat pyproject.toml constraints.txt scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  echo "Installing Switchboard and its dependencies into .venv…"
  pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
  if [ -x .venv/bin/uv ] || "${pip[@]}" uv 2> /dev/null; then
    .venv/bin/uv pip install --quiet --compile-bytecode --python .venv/bin/python -c constraints.txt -e '.[dev]'
  else
    echo "uv could not be installed; installing with pip"
    "${pip[@]}" --upgrade pip
    "${pip[@]}" -c constraints.txt -e '.[dev]'
  fi
  echo "$wanted" > "$stamp"
fi
# The project's own modules (an editable install is not compiled by the
# installer); only what changed since the last time is compiled again.
.venv/bin/python -m compileall -q -j 0 services gateway client gen tests > /dev/null
