#!/usr/bin/env bash
# Regenerates the Python code of the contracts into gen/switchboard (import root
# `switchboard`, matching the proto packages), with mypy-protobuf stubs, and
# switchboard/comments.py (the protos' comments by full name).
# `protos/generate.sh OUT` writes into OUT instead: the test script does that
# and fails if the committed code differs.
set -euo pipefail
out=$(realpath -m "${1:-$(dirname "$0")/../gen}")
cd "$(dirname "$0")/.."
venv_bin=$(cd "$(dirname "${PYTHON:-.venv/bin/python}")" && pwd)
python="$venv_bin/$(basename "${PYTHON:-.venv/bin/python}")"
export PATH="$venv_bin:$PATH"  # protoc-gen-mypy lives beside python
rm -rf "$out/switchboard"
mkdir -p "$out"
mapfile -t files < <(cd protos && find switchboard -name '*.proto' | sort)
(cd protos && "$python" -m grpc_tools.protoc -I . \
  --python_out="$out" --grpc_python_out="$out" \
  --mypy_out="$out" --mypy_grpc_out="$out" "${files[@]}")
# The comments, which the _pb2 modules do not carry, as switchboard/comments.py.
descriptors=$(mktemp)
trap 'rm -f "$descriptors"' EXIT
(cd protos && "$python" -m grpc_tools.protoc -I . --include_source_info \
  --descriptor_set_out="$descriptors" "${files[@]}")
"$python" protos/comments.py "$descriptors" "$out/switchboard/comments.py"
# protoc writes modules, not packages: add the __init__.py files and py.typed.
find "$out/switchboard" -type d -exec touch {}/__init__.py \;
touch "$out/switchboard/py.typed"
# The reference page of the contracts (docs/grpc.md), when gen/ itself was written.
if [ -z "${1:-}" ]; then
  PYTHONPATH="$out" "$python" protos/reference.py > /dev/null
fi
