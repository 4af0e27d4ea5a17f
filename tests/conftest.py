"""Fixtures every test file may use: the shared data beside the repo, and settings rooted in tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from config import Settings

# Fixtures shared by several files (a real corpus slice and its indexes; logger levels) are registered here,
# once: imported into each test module instead, pytest would build the session ones once per module.
pytest_plugins = ["tests.support.retrieval", "tests.support.bot", "tests.support.llm_servers", "tests.support.postgres"]

SHARED_DIR = Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """../shared: real adilet texts and pages, and the gold questions (read-only)."""
    if not (SHARED_DIR / "corpus" / "manifest.json").exists():
        pytest.fail(f"{SHARED_DIR} is missing: tests read the real corpus from ../shared beside the repo")
    return SHARED_DIR


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings with a fresh data directory and no keys, whatever the developer's .env says."""
    monkeypatch.chdir(tmp_path)  # no .env is read from the repo
    for var in ("GROQ_API_KEY", "PINECONE_API_KEY", "TELEGRAM_BOT_TOKEN", "OLLAMA_ENABLED", "DATA_DIR", "DATABASE_URL"):
        monkeypatch.delenv(var, raising=False)
    return Settings(data_dir=tmp_path / "data", _env_file=None)
