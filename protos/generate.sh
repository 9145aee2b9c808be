#!/usr/bin/env bash
# Regenerates the Python code of the contracts into gen/switchboard (import root
# `switchboard`, matching the proto packages), with mypy-protobuf stubs.
# CI runs it and fails if the committed code differs (`git diff --exit-code gen`).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
export PATH="$(cd "$(dirname "$python")" && pwd):$PATH"  # protoc-gen-mypy lives beside python
out=gen
rm -rf "$out/switchboard"
mkdir -p "$out"
mapfile -t files < <(cd protos && find switchboard -name '*.proto' | sort)
(cd protos && "../$python" -m grpc_tools.protoc -I . \
  --python_out="../$out" --grpc_python_out="../$out" \
  --mypy_out="../$out" --mypy_grpc_out="../$out" "${files[@]}")
# protoc writes modules, not packages: add the __init__.py files and py.typed.
find "$out/switchboard" -type d -exec touch {}/__init__.py \;
touch "$out/switchboard/py.typed"
