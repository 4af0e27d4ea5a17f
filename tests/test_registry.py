"""corpus.legal.registry: it covers every document of the corpus, names each one in both languages, and stays a
leaf that config (the base of every package) never imports."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import corpus.legal.registry as registry
from corpus.legal.registry import (
    ADILET_SOURCES,
    CRIMINAL_CODE_ID,
    REGISTRY_FILE,
    SOURCES_BY_ID,
    RegistryError,
    load_sources,
    source,
)

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("corpus", "index", "retrieval", "answer", "bot", "ingest_adilet", "rag_chain")


def test_registry_covers_manifest_and_tax_code(shared_dir):
    manifest = json.loads((shared_dir / "corpus" / "manifest.json").read_text())
    ids = {d["doc_id"] for d in manifest["documents"]}
    assert ids <= set(SOURCES_BY_ID) and "K1700000120" in SOURCES_BY_ID
    assert len(ADILET_SOURCES) == len(SOURCES_BY_ID) == len(ids) + 1
    for d in manifest["documents"]:
        assert source(d["doc_id"]).kind == d["kind"]


def test_each_title_names_what_its_text_is_about(shared_dir):
    # The corpus manifest calls Z030000461_ «О рекламе», but adilet's text under that id is the Securities Market Law
    # (2 July 2003 No. 461; «реклама» occurs 8 times in it): a title's own subject words run through its text.
    for s in ADILET_SOURCES:
        path = shared_dir / "corpus" / "rus" / f"{s.doc_id}.txt"
        if not path.exists():  # the Tax Code is not in the shared corpus
            continue
        text = path.read_text(encoding="utf-8").lower()
        subject = re.search(r"«(.+)»", s.title_ru)
        words = re.findall(r"\w{5,}", (subject.group(1) if subject else s.title_ru).lower())
        stems = [w[:6] for w in words if w not in ("республики", "казахстан", "кодекс")]
        assert max(text.count(stem) for stem in stems) >= 20, (s.doc_id, s.title_ru)


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
    assert ROOT / named == REGISTRY_FILE.resolve() == Path(registry.__file__).with_name("registry.json").resolve()


def test_the_table_is_read_from_its_file_into_the_records(tmp_path):
    copy = tmp_path / "registry.json"
    copy.write_bytes(REGISTRY_FILE.read_bytes())
    assert load_sources(copy) == ADILET_SOURCES


@pytest.mark.parametrize(
    "edit,problem",
    [
        (lambda text: text[: len(text) // 2], "line "),  # cut short: where the JSON breaks
        (lambda text: text.replace('"kind": "law"', '"kind": "decree"', 1), "documents.15.kind"),
        (lambda text: text.replace('"short_ru"', '"short_name"', 1), "documents.0.short_name"),
        (lambda text: text.replace('"ук рк"', '"УК РК"', 1), "lowercase"),
        (lambda text: text.replace("K950001000_", "K940001000_", 1), "listed twice: K940001000_"),
        (lambda text: text.replace('"criminal": true', '"criminal": false', 1), "exactly one document"),
    ],
    ids=["truncated", "unknown kind", "unknown field", "uppercase alias", "repeated id", "no criminal code"],
)
def test_a_malformed_table_is_an_error_naming_the_file(tmp_path, edit, problem):
    bad = tmp_path / "registry.json"
    text = REGISTRY_FILE.read_text(encoding="utf-8")
    assert edit(text) != text
    bad.write_text(edit(text), encoding="utf-8")
    with pytest.raises(RegistryError) as caught:
        load_sources(bad)
    message = str(caught.value)
    assert message.startswith(f"{bad} is not a valid registry of documents") and problem in message, message
    assert "git checkout -- corpus/legal/registry.json" in message
    with pytest.raises(RegistryError, match="No such file"):
        load_sources(tmp_path / "missing.json")


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
