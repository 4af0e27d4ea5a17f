#!/usr/bin/env bash
# Creates .venv and installs the project with its test tools. Idempotent: a second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.installed-$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # torch first, CPU build: a local wheel when the machine has one (pip's find-links), else PyTorch's CPU index;
  # otherwise sentence-transformers would pull several GB of CUDA packages.
  .venv/bin/python -m pip install -q "torch==2.13.0" 2>/dev/null \
    || .venv/bin/python -m pip install -q torch --index-url https://download.pytorch.org/whl/cpu
  .venv/bin/python -m pip install -q -e ".[dev]"
  rm -f .venv/.installed-* && touch "$stamp"
fi
