"""The bot's store on both engines (SQLite, and a real PostgreSQL cluster on 127.0.0.1): the schema migrated from the
previous release's SQLite file with its rows intact, a newer schema refused, PostgreSQL unreachable at start, and the
shared state replicas rely on (update claims, a chat's turn, the rate limit, user state)."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import SecretStr
from sqlalchemy import text

from bot.app import build_application
from bot.feedback import UPDATE_LEASE, FeedbackStore, StoreUnavailable, open_store
from bot.schema import SCHEMA_VERSION, SchemaTooNew
from config import PROJECT_DIR, Settings
from corpus import database
from tests.support.bot import ScriptedQA, SharedLookup
from tests.support.postgres import free_port
from tests.support.telegram_server import BotAPIServer, settings_for

# The previous release's schema (bot/feedback.py up to 2026-11), as its SQLite files hold it.
PREVIOUS_SCHEMA = """
CREATE TABLE IF NOT EXISTS questions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at REAL NOT NULL,
    user_id INTEGER,
    chat_id INTEGER,
    lang TEXT,
    question TEXT NOT NULL,
    answer TEXT,
    sources TEXT,          -- JSON list of {citation, url}
    backend TEXT,
    template TEXT,
    grounded INTEGER,
    latency REAL,          -- seconds from the question to the answer, chain only
    error TEXT             -- set when no answer was given
);
CREATE TABLE IF NOT EXISTS ratings (
    question_id INTEGER NOT NULL REFERENCES questions(id),
    user_id INTEGER NOT NULL,
    rating INTEGER NOT NULL CHECK (rating IN (-1, 1)),
    created_at REAL NOT NULL,
    PRIMARY KEY (question_id, user_id)
);
CREATE TABLE IF NOT EXISTS exchanges (
    question_id INTEGER PRIMARY KEY REFERENCES questions(id),  -- its question and answer
    chat_id INTEGER NOT NULL,
    parent_id INTEGER,         -- the exchange whose conversation this one continued; NULL: it began one
    search_question TEXT NOT NULL,
    sources TEXT NOT NULL,     -- JSON list of the answer's Source records
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS exchanges_by_chat ON exchanges (chat_id, created_at);
CREATE TABLE IF NOT EXISTS answer_messages (  -- the bot's messages carrying each answer: a reply to one
    chat_id INTEGER NOT NULL,                 -- continues from its exchange
    message_id INTEGER NOT NULL,
    question_id INTEGER NOT NULL REFERENCES exchanges(question_id),
    PRIMARY KEY (chat_id, message_id)
);
CREATE TABLE IF NOT EXISTS conversation_resets (  -- /new: earlier exchanges are not continued by themselves
    chat_id INTEGER PRIMARY KEY,
    reset_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS user_state (
    user_id INTEGER PRIMARY KEY,
    data TEXT NOT NULL,        -- JSON object: the user's PTB user_data ({"lang": "kk"})
    updated_at REAL NOT NULL   -- the user's last activity; retention deletes older rows
);
"""
SOURCES = json.dumps(
    [
        {
            "source_id": "S1",
            "doc_id": "K1400000226",
            "article": "188",
            "code": "УК РК",
            "title": "Кража",
            "url": "https://adilet.zan.kz/rus/docs/K1400000226#z188",
            "snippet": "Кража, то есть тайное хищение чужого имущества",
            "score": 1.0,
            "lang": "ru",
            "status": "in_force",
        }
    ],
    ensure_ascii=False,
)


def previous_release_database(path: Path, now: float) -> dict[str, list[tuple]]:
    """A SQLite file as the previous release left it, with rows in every table; returns them by table."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows: dict[str, list[tuple]] = {
        "questions": [
            (1, now - 60, 7, 7, "ru", "Что будет за кражу?", "Штраф [S1].", "[]", "groq", "criminal", 1, 1.5, None),
            (
                2,
                now - 30,
                7,
                7,
                "ru",
                "А если повторно?",
                "Лишение свободы [S1].",
                "[]",
                "groq",
                "criminal",
                1,
                2.0,
                None,
            ),
            (3, now - 10, 8, 8, None, "сломайся", None, None, None, None, None, 0.1, "RuntimeError: boom"),
        ],
        "ratings": [(1, 7, 1, now - 50), (2, 7, -1, now - 20)],
        "exchanges": [
            (1, 7, None, "Что будет за кражу?", SOURCES, now - 59),
            (2, 7, 1, "кража повторно", SOURCES, now - 29),
        ],
        "answer_messages": [(7, 1001, 1), (7, 1002, 2)],
        "conversation_resets": [(9, now - 100)],
        "user_state": [(7, '{"lang": "kk"}', now - 5)],
    }
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.executescript(PREVIOUS_SCHEMA)
        for table, values in rows.items():
            marks = ", ".join("?" * len(values[0]))
            db.executemany(f"INSERT INTO {table} VALUES ({marks})", values)
    return rows


def test_the_previous_releases_sqlite_store_upgrades_in_place_with_its_rows(settings: Settings) -> None:
    path = settings.data_dir / "bot" / "feedback.sqlite"
    now = time.time()
    rows = previous_release_database(path, now)

    store = open_store(settings)
    with contextlib.closing(sqlite3.connect(path)) as db:
        for table, values in rows.items():
            assert db.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall() == sorted(values), table
        assert db.execute("SELECT component, version FROM schema_version").fetchall() == [("bot", SCHEMA_VERSION)]
    assert path.stat().st_mode & 0o777 == 0o600
    # The old rows work with the new code: the conversation, ratings, stats, user state, the new tables.
    conversation = store.conversation(7, turns=3, idle_seconds=1800, now=now)
    assert [e.question for e in conversation.history] == ["Что будет за кражу?", "А если повторно?"]
    assert conversation.history[0].sources[0].title == "Кража" and conversation.parent_id == 2
    assert store.conversation(7, turns=3, idle_seconds=1800, reply_to=1001, now=now).parent_id == 1
    stats = store.stats()
    assert (stats.questions, stats.answered, stats.failed, stats.up, stats.down) == (3, 2, 1, 1, 1)
    assert store.rate(1, 7, -1) == "rated" and store.rate(3, 8, 1) == "gone"
    assert store.user_states() == {7: {"lang": "kk"}}
    assert store.claim_update(100, chat_id=7) and not store.claim_update(100)
    next_id = store.record_answer(ScriptedQA()("Ещё вопрос", None), user_id=7, chat_id=7, latency=0.2)
    assert next_id == 4
    store.close()

    FeedbackStore(path).close()  # opened again: already at the current version, nothing changes
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT COUNT(*) FROM questions").fetchone() == (4,)


def set_version(store: FeedbackStore, version: int) -> None:
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE schema_version SET version = :v WHERE component = 'bot'"), {"v": version})


def test_a_schema_newer_than_the_code_refuses_to_start(db_settings: Settings, api: BotAPIServer) -> None:
    store = open_store(db_settings)
    store.record_answer(ScriptedQA()("вопрос", None), user_id=1, chat_id=1, latency=0.1)
    set_version(store, SCHEMA_VERSION + 1)
    store.close()
    with pytest.raises(SchemaTooNew) as err:
        build_application(settings_for(db_settings, api), qa=ScriptedQA(), lookup=SharedLookup(Path()))
    message = str(err.value)
    assert f"schema version {SCHEMA_VERSION + 1}" in message and f"reads version {SCHEMA_VERSION} at most" in message
    assert "\n" not in message
    with contextlib.closing(
        database.engine(db_settings, db_settings.data_dir / "bot" / "feedback.sqlite").connect()
    ) as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM questions")).scalar_one() == 1  # untouched


def bot_process(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`python -m bot` as an operator starts it, from the project folder, with the environment given."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TELEGRAM_", "DATABASE_", "DATA_DIR"))}
    return subprocess.run(
        [sys.executable, "-m", "bot", "--data-dir", str(tmp_path / "data")],
        cwd=PROJECT_DIR,
        env={**clean, "TELEGRAM_BOT_TOKEN": "123:abc", "TELEGRAM_API_URL": "http://127.0.0.1:9/bot", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_postgresql_unreachable_at_start_exits_with_one_line(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    url = f"postgresql://kzlaw:s3cret-pw@127.0.0.1:{port}/kzlaw"
    try:
        done = bot_process({"DATABASE_URL": url}, tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail("python -m bot did not stop although its DATABASE_URL cannot be reached")
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"error: DATABASE_URL (postgresql+psycopg://kzlaw:***@127.0.0.1:{port}/kzlaw): cannot")
    assert "refused" in line or "failed" in line
    assert "s3cret-pw" not in done.stderr + done.stdout


def test_the_store_unreachable_is_a_user_error(settings: Settings) -> None:
    url = f"postgresql://kzlaw:pw@127.0.0.1:{free_port()}/kzlaw"
    with pytest.raises(StoreUnavailable, match=r"^DATABASE_URL \(postgresql\+psycopg://kzlaw:\*\*\*@"):
        open_store(settings.model_copy(update={"database_url": SecretStr(url)}))


# --- what replicas share, on both engines --------------------------------------------------------------------


def test_an_update_is_claimed_once_and_a_dead_holders_claim_lapses(db_settings: Settings) -> None:
    one, two = open_store(db_settings), open_store(db_settings)  # two replicas
    now = time.time()
    assert one.claim_update(11, chat_id=5, now=now)
    assert not two.claim_update(11, chat_id=5, now=now) and not one.claim_update(11, now=now)
    # A replica that died holding it stops renewing: after the lease another one takes it over.
    assert two.claim_update(11, chat_id=5, now=now + UPDATE_LEASE + 1)
    two.finish_update(11)
    assert not one.claim_update(11, now=now + 10 * UPDATE_LEASE)  # handled: never again
    one.close(), two.close()


def test_a_chats_questions_take_turns_across_replicas(db_settings: Settings) -> None:
    one, two = open_store(db_settings), open_store(db_settings)
    assert one.claim_update(21, chat_id=5) and two.claim_update(22, chat_id=5) and two.claim_update(23, chat_id=6)
    assert one.chat_turn(21, 5) and not two.chat_turn(22, 5)  # 22 waits for 21, held by the other replica
    assert two.chat_turn(23, 6)  # another chat does not wait
    one.finish_update(21)
    assert two.chat_turn(22, 5)
    # A holder that died: its claim lapses and the chat moves on.
    assert one.claim_update(24, chat_id=7) and two.claim_update(25, chat_id=7)
    assert not two.chat_turn(25, 7) and two.chat_turn(25, 7, now=time.time() + UPDATE_LEASE + 1)
    one.close(), two.close()


def test_the_rate_limit_is_one_window_for_every_replica(db_settings: Settings) -> None:
    one, two = open_store(db_settings), open_store(db_settings)
    now = 1_000_000.0
    assert one.rate_hit(31, 2, 60, now=now) == (None, False)
    assert two.rate_hit(31, 2, 60, now=now + 10) == (None, False)
    assert one.rate_hit(32, 2, 60, now=now + 10) == (None, False)  # per user
    wait, tell = two.rate_hit(31, 2, 60, now=now + 30)
    assert wait == pytest.approx(30.0) and tell
    assert one.rate_hit(31, 2, 60, now=now + 31) == (pytest.approx(29.0), False)  # told once per window
    assert one.rate_hit(31, 2, 60, now=now + 61) == (None, False)  # the first left the window
    one.close(), two.close()


def test_user_state_and_conversations_are_shared(db_settings: Settings) -> None:
    one, two = open_store(db_settings), open_store(db_settings)
    one.save_user_state(41, {"lang": "kk"})
    assert two.user_state(41) == {"lang": "kk"} and two.user_state(42) is None
    qa = ScriptedQA()
    first = one.record_answered(
        qa("Вопрос", None), user_id=41, chat_id=41, latency=0.1, parent_id=None, asked_at=time.time()
    )
    two.record_answer_messages(first, chat_id=41, message_ids=[5001, 5002])
    assert [e.question for e in two.conversation(41, turns=3, idle_seconds=60).history] == ["Вопрос"]
    assert two.conversation(41, turns=3, idle_seconds=60, reply_to=5002).parent_id == first
    assert two.rate(first, 41, 1) == "rated" and one.stats().up == 1
    one.close(), two.close()
