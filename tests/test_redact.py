"""No configured secret in the logs of any entry point (corpus/redact.py): python -m rag_chain and python -m
ingest_adilet run at -v as processes, with every secret set, and their output is searched for each one."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from config import Settings
from corpus.redact import RedactSecrets
from ingest_adilet.pipeline import ingest
from tests.support.llm_servers import GroqServer

REPO = Path(__file__).resolve().parents[1]
DIGITAL_ASSETS = "Z2300000193"  # 14 articles: the smallest law of the registry
SECRETS = {
    "GROQ_API_KEY": "gsk_groq-secret-77aa",
    "PINECONE_API_KEY": "pc-secret-31bd",
    "TELEGRAM_BOT_TOKEN": "123456:tg-token-secret-c0ffee",
    "TELEGRAM_WEBHOOK_SECRET": "wh-secret-5f1c9e",
    "DATABASE_URL": "postgresql://kzlaw:db-pass-9a9a7e@127.0.0.1:1/kzlaw",
}
PASSWORD = "db-pass-9a9a7e"


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("TELEGRAM_", "GROQ_", "PINECONE_", "DATABASE_"))}
    return {**keep, **SECRETS, "PYTHONPATH": str(REPO), "DATA_DIR": str(tmp_path / "data"), **more}


def _run(args: list[str], tmp_path: Path, **env: str) -> str:
    proc = subprocess.run(
        [sys.executable, *args], cwd=tmp_path, env=_env(tmp_path, **env), capture_output=True, text=True, timeout=300
    )
    return proc.stdout + proc.stderr


def _assert_no_secret(output: str) -> None:
    for name, value in {**SECRETS, "the database password": PASSWORD}.items():
        assert value not in output, name


def test_ask_at_verbose_never_logs_a_secret_a_model_server_echoes(
    tmp_path: Path, shared_dir: Path, groq_server: GroqServer
) -> None:
    # An OpenAI-compatible gateway's 401 that repeats the key it received (LiteLLM's does): the chat model's
    # failure is logged with the server's text.
    groq_server.fail(401, {"error": {"message": f"Invalid API key: received {SECRETS['GROQ_API_KEY']}"}})
    settings = Settings(data_dir=tmp_path / "data", _env_file=None)
    ingest(settings, source_dir=shared_dir / "corpus", doc_ids=[DIGITAL_ASSETS], langs=["ru"], progress=False)
    output = _run(
        ["-m", "rag_chain", "ask", "-v", "Что такое цифровые активы?"], tmp_path, GROQ_BASE_URL=groq_server.url
    )
    assert "Invalid API key: received [REDACTED]" in output  # the record was written, redacted
    assert groq_server.received  # the key was sent to the server
    _assert_no_secret(output)


def test_ingest_and_index_at_verbose_log_no_secret(tmp_path: Path, shared_dir: Path) -> None:
    source = str(shared_dir / "corpus")
    output = _run(
        ["-m", "ingest_adilet", "-v", "--from-dir", source, "--docs", DIGITAL_ASSETS, "--lang", "ru"], tmp_path
    )
    assert "corpus written" in output
    _assert_no_secret(output)


def test_the_filter_redacts_message_arguments_and_tracebacks() -> None:
    handler = logging.StreamHandler()
    handler.addFilter(RedactSecrets([PASSWORD, SECRETS["DATABASE_URL"]]))
    try:
        raise RuntimeError(f"cannot connect to {SECRETS['DATABASE_URL']}")
    except RuntimeError:
        exc_info = sys.exc_info()
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "password %s", (PASSWORD,), exc_info)
    assert handler.filter(record)
    text = logging.Formatter("%(message)s").format(record)
    assert PASSWORD not in text and SECRETS["DATABASE_URL"] not in text
    assert "password [REDACTED]" in text and "cannot connect to [REDACTED]" in text


@pytest.mark.parametrize("secrets", [[], [""]])
def test_no_secret_set_leaves_records_alone(secrets: list[str]) -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "%d chunks", (20,), None)
    assert RedactSecrets(secrets).filter(record) and record.getMessage() == "20 chunks"
