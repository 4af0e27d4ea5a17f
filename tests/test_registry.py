"""corpus.legal.registry: it covers every document of the corpus, names each one in both languages, and stays a
leaf that config (the base of every package) never imports."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import corpus.legal.registry as registry
from corpus.legal.registry import ADILET_SOURCES, CRIMINAL_CODE_ID, SOURCES_BY_ID, source

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("corpus", "index", "retrieval", "answer", "bot", "ingest_adilet", "rag_chain")


def test_registry_covers_manifest_and_tax_code(shared_dir):
    manifest = json.loads((shared_dir / "corpus" / "manifest.json").read_text())
    ids = {d["doc_id"] for d in manifest["documents"]}
    assert ids <= set(SOURCES_BY_ID) and "K1700000120" in SOURCES_BY_ID
    assert len(ADILET_SOURCES) == len(SOURCES_BY_ID) == len(ids) + 1
    for d in manifest["documents"]:
        assert source(d["doc_id"]).kind == d["kind"]


def test_registry_names():
    uk = source(CRIMINAL_CODE_ID)
    assert (uk.short("ru"), uk.short("kk")) == ("УК РК", "ҚР ҚК")
    assert uk.url("kk") == "https://adilet.zan.kz/kaz/docs/K1400000226"
    assert [s.doc_id for s in ADILET_SOURCES if s.criminal] == ["K1400000226"]
    for s in ADILET_SOURCES:
        assert s.title_ru and s.title_kk and s.short_ru and s.short_kk, s.doc_id
        assert all(a == a.lower() for a in s.aliases), s.doc_id


def test_unknown_id_names_the_file_that_holds_the_registry():
    with pytest.raises(KeyError) as caught:
        source("Z0000000000")
    message = caught.value.args[0]
    assert message.startswith("Z0000000000 is not in ADILET_SOURCES")
    named = message.split("(", 1)[1].split(")", 1)[0]
    assert ROOT / named == Path(registry.__file__).resolve()


def _fresh_import(module: str) -> list[str]:
    """The project's packages loaded by importing `module` first in a new interpreter."""
    code = (
        f"import sys, {module}; print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}} & set({PACKAGES!r}))))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_config_imports_no_package_of_the_project():
    assert _fresh_import("config") == []


@pytest.mark.parametrize("module", ["corpus.legal.registry", "corpus.legal.names", "corpus.chunking"])
def test_registry_imports_first_without_a_cycle(module):
    assert _fresh_import(module) == ["corpus"]
