"""The answer cache (answer/cache.py) through `invoke_qa` on a real published data dir and the local Groq server:
a repeat costs no model call, a new build or changed settings are never answered from the old, and only what
another asking would get again is kept."""

from __future__ import annotations

import re
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from pydantic import SecretStr
from sqlalchemy import text

import rag_chain
from answer.records import Exchange
from config import Settings
from corpus.database import engine
from index.publish import publish, published
from ingest_adilet.cli import main as ingest_main
from tests.support.ingest import make_source_dir
from tests.support.llm_servers import GroqServer, closed_port_url, with_backends
from tests.support.retrieval import CONSUMER

QUESTION = "Могу ли я обменять купленный товар надлежащего качества?"
OTHER = "Какие права имеет потребитель?"


def echo_first_source(body: dict) -> str:
    """A grounded reply: the first sentence of source S1, cited (a follow-up read alone, to the condense prompt)."""
    user = "\n".join(m["content"] for m in body["messages"] if m["role"] == "user")
    if "[S1]" not in user:
        return "Можно ли обменять купленный товар надлежащего качества без чека?"
    text = user.split("[S1]", 1)[1].split("\n", 1)[1]
    sentence = re.split(r"(?<=[.;:])\s", text.strip(), maxsplit=1)[0]
    return f"{sentence} [S1]"


def count(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


@pytest.fixture
def published_dir(settings: Settings, shared_dir: Path, tmp_path: Path, groq_server: GroqServer) -> Settings:
    """A data dir holding the consumer protection law, ingested and published (no index), Groq answering."""
    source = make_source_dir(tmp_path / "src", shared_dir, [CONSUMER])
    argv = ["--from-dir", str(source), "--data-dir", str(settings.data_dir), "--docs", CONSUMER, "--no-progress"]
    assert ingest_main(argv) == 0
    groq_server.reply = echo_first_source
    return with_backends(settings, groq=groq_server.url, reload_check_seconds=0.0)


def test_a_repeated_question_costs_no_model_call(published_dir: Settings, groq_server: GroqServer):
    hits, misses = count("kzlaw_answer_cache_hits_total"), count("kzlaw_answer_cache_misses_total")
    first = rag_chain.invoke_qa(QUESTION, published_dir)
    assert (first.backend, first.grounded, first.cached) == ("groq", True, False)
    assert len(groq_server.received) == 1

    again = rag_chain.invoke_qa(f"  {QUESTION.upper()} ", published_dir)  # the same question, typed otherwise
    assert len(groq_server.received) == 1  # no model call
    assert again.cached and again.answer == first.answer and again.sources == first.sources
    assert again.question == QUESTION.upper() and again.search_question == QUESTION.upper()
    assert (again.backend, again.template, again.lang, again.grounded) == ("groq", first.template, "ru", True)
    assert set(again.timings) == {"total_ms"}
    assert count("kzlaw_answer_cache_hits_total") == hits + 1
    assert count("kzlaw_answer_cache_misses_total") == misses + 1

    rag_chain.invoke_qa(OTHER, published_dir)
    assert len(groq_server.received) == 2  # another question is answered afresh


def test_the_conversation_is_part_of_the_question(published_dir: Settings, groq_server: GroqServer):
    first = rag_chain.invoke_qa(QUESTION, published_dir)
    followup = "А если чека нет?"
    after_first = [Exchange.of(first)]
    assert rag_chain.invoke_qa(followup, published_dir, history=after_first).used_history
    assert len(groq_server.received) == 3  # the follow-up read with the conversation (condensed), then answered
    again = rag_chain.invoke_qa(followup, published_dir, history=after_first)
    assert again.cached and again.used_history and again.search_question
    assert len(groq_server.received) == 3  # neither call again
    after_other = [Exchange.of(rag_chain.invoke_qa(OTHER, published_dir))]
    assert not rag_chain.invoke_qa(followup, published_dir, history=after_other).cached
    assert len(groq_server.received) == 6


def test_a_new_published_build_is_never_answered_from_the_old(published_dir: Settings, groq_server: GroqServer):
    first = rag_chain.invoke_qa(QUESTION, published_dir)
    assert rag_chain.invoke_qa(QUESTION, published_dir).cached
    publish(published_dir, "test")  # a refresh published a new build (the same files: it still must not count)
    generation = published(published_dir).generation
    deadline = time.monotonic() + 120
    while rag_chain.get_chain(published_dir).generation != generation:
        assert time.monotonic() < deadline, "the new build was not swapped in"
        time.sleep(0.05)
    again = rag_chain.invoke_qa(QUESTION, published_dir)
    assert not again.cached and again.answer == first.answer
    assert len(groq_server.received) == 2
    assert rag_chain.invoke_qa(QUESTION, published_dir).cached  # and the new build's answer is kept in turn
    assert len(groq_server.received) == 2


def test_changed_answer_settings_are_never_answered_from_the_old(
    published_dir: Settings, groq_server: GroqServer, tmp_path: Path
):
    rag_chain.invoke_qa(QUESTION, published_dir)
    assert rag_chain.invoke_qa(QUESTION, published_dir).cached
    # what the bot's settings add (Telegram, the budget, a key's value) shapes no answer: shared
    same = published_dir.model_copy(update={"telegram_rate_limit_per_minute": 9, "groq_requests_per_day": 500})
    assert rag_chain.invoke_qa(QUESTION, same).cached
    assert len(groq_server.received) == 1
    for changed in (
        {"groq_model": "llama-3.1-8b-instant"},
        {"prompt_source_chars": 600},
        {"llm_backends": ["ollama", "groq"], "ollama_enabled": True, "ollama_base_url": groq_server.url},
    ):
        assert not rag_chain.invoke_qa(QUESTION, published_dir.model_copy(update=changed)).cached, changed
    # an edited prompt file
    prompts = tmp_path / "prompts"
    shutil.copytree(published_dir.prompts_dir, prompts)
    path = prompts / "universal.ru.txt"
    path.write_text(path.read_text(encoding="utf-8") + "\nОтвечай кратко.\n", encoding="utf-8")
    assert not rag_chain.invoke_qa(QUESTION, published_dir.model_copy(update={"prompts_dir": prompts})).cached


def test_quotes_that_stand_in_for_a_failed_model_are_not_kept(published_dir: Settings, groq_server: GroqServer):
    groq_server.fail(503, {"error": {"message": "over capacity", "type": "internal_server_error"}})
    assert rag_chain.invoke_qa(QUESTION, published_dir).backend == "extractive"
    groq_server.failure = None
    answer = rag_chain.invoke_qa(QUESTION, published_dir)
    assert (answer.backend, answer.cached) == ("groq", False)
    assert len(groq_server.received) == 2
    # nor short replies to what cannot be answered
    assert rag_chain.invoke_qa("привет всем", published_dir).status != "answered"
    assert not rag_chain.invoke_qa("привет всем", published_dir).cached


def test_quotes_are_kept_when_no_model_is_configured(published_dir: Settings):
    offline = published_dir.model_copy(update={"groq_api_key": None})
    first = rag_chain.invoke_qa(QUESTION, offline)
    assert first.backend == "extractive" and not first.cached
    assert rag_chain.invoke_qa(QUESTION, offline).cached


def test_the_stored_rows_hold_no_question_and_are_owner_only(published_dir: Settings):
    rag_chain.invoke_qa(QUESTION, published_dir)
    path = published_dir.cache_dir / "answers.sqlite"
    assert path.stat().st_mode & 0o777 == 0o600
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT key, generation, response FROM answer_cache").fetchall()
    assert len(rows) == 1 and rows[0][1] == published(published_dir).generation
    assert QUESTION not in rows[0][2] and '"question":""' in rows[0][2] and '"search_question":""' in rows[0][2]


def test_answers_older_than_the_retention_are_deleted(published_dir: Settings):
    rag_chain.invoke_qa(QUESTION, published_dir)
    path = published_dir.cache_dir / "answers.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("UPDATE answer_cache SET created_at = created_at - 8 * 86400")
    fresh = published_dir.model_copy(update={"answer_cache_days": 7.0, "history_turns": 2})  # another chain: prunes
    rag_chain.invoke_qa(OTHER, fresh)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM answer_cache").fetchone() == (1,)


def test_replicas_share_the_cache_on_postgresql(
    published_dir: Settings, groq_server: GroqServer, request: pytest.FixtureRequest
):
    """Two replicas (two chains, one data dir's build, one PostgreSQL): what one answered the other serves."""
    url = request.getfixturevalue("pg_url")
    shared = published_dir.model_copy(update={"database_url": SecretStr(url), "metrics_port": 9464})
    # another process's settings, with its own ports as replicas on one host have: a chain of its own
    other = shared.model_copy(update={"telegram_admin_ids": [7], "metrics_port": 9465, "telegram_webhook_port": 8444})
    assert not rag_chain.invoke_qa(QUESTION, shared).cached
    assert rag_chain.get_chain(other) is not rag_chain.get_chain(shared)
    assert rag_chain.invoke_qa(QUESTION, other).cached
    assert len(groq_server.received) == 1
    assert not (published_dir.cache_dir / "answers.sqlite").exists()  # the rows are in PostgreSQL
    with engine(shared, published_dir.cache_dir / "unused.sqlite").connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM answer_cache")).scalar() == 1


def test_a_database_that_does_not_answer_stops_no_answer(
    published_dir: Settings, groq_server: GroqServer, caplog: pytest.LogCaptureFixture
):
    port = closed_port_url().rsplit(":", 1)[1]
    away = published_dir.model_copy(update={"database_url": SecretStr(f"postgresql://kzlaw@127.0.0.1:{port}/kzlaw")})
    for _ in range(2):
        result = rag_chain.invoke_qa(QUESTION, away)
        assert (result.backend, result.grounded, result.cached) == ("groq", True, False)
    assert len(groq_server.received) == 2  # answered each time, unbudgeted and uncached
    assert "answer cache unavailable" in caplog.text and "LLM budget of groq unavailable" in caplog.text
