#!/usr/bin/env bash
# The client suite: real client packages (OpenAI's SDK, Cohere's, LangChain, LlamaIndex, LiteLLM,
# schemathesis…) against the real gateway binary and fake providers on 127.0.0.1. Makes its own
# virtualenv under target/ from the pinned requirements-*.txt, then runs pytest.
# Usage: bash tests/clients/run.sh [pytest args]   (SWITCHYARD_BIN: the binary; default target/debug/switchyard)
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=target/clients-venv
python=${PYTHON:-python3}
reqs=(tests/clients/requirements-*.txt)
stamp="$venv/.requirements.sha256"
want=$(cat "${reqs[@]}" | sha256sum | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "client suite: installing $(cat "${reqs[@]}" | grep -cv '^\s*\(#\|$\)') pinned packages into $venv"
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
  for r in "${reqs[@]}"; do
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$r"
  done
  echo "$want" > "$stamp"
fi

export SWITCHYARD_BIN="${SWITCHYARD_BIN:-$PWD/target/debug/switchyard}"
if [ ! -x "$SWITCHYARD_BIN" ]; then
  cargo build --bin switchyard
fi
exec "$venv/bin/python" -m pytest tests/clients -q -p no:cacheprovider "$@"
