"""The settings are documented and the registry covers every document of the corpus."""

import json
import re
from pathlib import Path

from config import ADILET_SOURCES, CRIMINAL_CODE_ID, SOURCES_BY_ID, Settings, source

ROOT = Path(__file__).resolve().parents[1]


def test_env_example_documents_every_setting():
    documented = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M))
    missing = {name.upper() for name in Settings.model_fields} - documented
    assert not missing, f".env.example lacks {sorted(missing)}"


def test_settings_read_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    monkeypatch.setenv("LLM_BACKENDS", '["ollama"]')
    monkeypatch.setenv("GROQ_API_KEY", "gsk_test")
    s = Settings(_env_file=None)
    assert s.data_dir == tmp_path and s.corpus_dir == tmp_path / "corpus"
    assert s.llm_backends == ["ollama"]
    assert s.groq_api_key.get_secret_value() == "gsk_test" and "gsk_test" not in repr(s)


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
