"""The settings are documented and read from the environment."""

import re
from pathlib import Path

from config import Settings

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
