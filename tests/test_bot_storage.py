"""The bot's storage (bot/feedback.py, bot/private_files.py, bot/persistence.py) with the real application and a local
Bot API server: nothing is unpickled, damaged state never stops the bot, the files are private, retention, records
never lost. The tests that are not about the SQLite file run on both engines (SQLite, and PostgreSQL at DATABASE_URL:
tests/support/postgres.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import pickle
import re
import sqlite3
import stat
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from telegram.ext import Application

import bot.app
from bot.app import build_application
from bot.feedback import FeedbackStore, open_store
from bot.texts import t
from config import Settings
from corpus import database
from tests.support.bot import ScriptedQA, SharedLookup, make_source
from tests.support.telegram_server import BotAPIServer, message_update, settings_for
from tests.test_bot_handlers import Chat

DAY = 24 * 3600


@pytest.fixture
def bot_settings(settings: Settings, api: BotAPIServer) -> Settings:
    return settings_for(settings, api)


@pytest.fixture
def any_db_settings(db_settings: Settings, api: BotAPIServer) -> Settings:
    """The bot's settings with its store on SQLite or on PostgreSQL."""
    return settings_for(db_settings, api)


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The usual umask, under which SQLite and mkdir create world-readable files (644) and folders (755)."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def db_file(settings: Settings) -> Path:
    return settings.data_dir / "bot" / "feedback.sqlite"


def query(where: Path | Settings, sql: str, *args: object) -> list[tuple]:
    """Run `sql` ("?" marks its arguments) on a SQLite file, or on the store of `where` settings (either engine)."""
    if isinstance(where, Path):
        with contextlib.closing(sqlite3.connect(where)) as db, db:
            return db.execute(sql, args).fetchall()
    names = iter(range(len(args)))
    statement = re.sub(r"\?", lambda _: f":a{next(names)}", sql)
    with database.engine(where, db_file(where)).begin() as conn:
        result = conn.execute(text(statement), {f"a{i}": a for i, a in enumerate(args)})
        return [tuple(row) for row in result] if result.returns_rows else []


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@contextlib.asynccontextmanager
async def running(settings: Settings, api: BotAPIServer, shared_dir: Path) -> AsyncIterator[tuple[Application, Chat]]:
    app = build_application(settings, qa=ScriptedQA(), lookup=SharedLookup(shared_dir))
    try:
        async with app:
            yield app, Chat(app, api)
    finally:
        app.bot_data["services"].executor.shutdown()


class RunsCode:
    """Unpickling this creates `path`: proof that loading the pickle ran code."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple:
        return (open, (str(self.path), "w"))


@pytest.mark.parametrize("kind", ["runs-code", "truncated"])
async def test_an_old_state_pickle_is_never_loaded(
    kind: str, bot_settings: Settings, api: BotAPIServer, shared_dir: Path, tmp_path: Path, caplog
) -> None:
    marker = tmp_path / "created-by-the-pickle"
    state = {"user_data": {61: {"lang": "kk", "x": RunsCode(marker)}}, "chat_data": {}, "conversations": {}}
    payload = pickle.dumps(state)
    legacy = bot_settings.data_dir / "bot" / "state.pickle"
    legacy.parent.mkdir(parents=True)
    legacy.write_bytes(payload[: len(payload) // 2] if kind == "truncated" else payload)
    caplog.set_level(logging.INFO)

    async with running(bot_settings, api, shared_dir) as (app, chat):
        assert await chat.texts(message_update(61, "/start")) == [t("start", "ru")]  # started, the pickle unread
        [answer] = await chat.texts(message_update(61, "Что будет за кражу?"))
        assert answer.startswith("Ответ на вопрос")
    assert not marker.exists()
    [warning] = [r.getMessage() for r in caplog.records if "state.pickle" in r.getMessage()]
    assert "is no longer read" in warning and "can be deleted" in warning
    assert legacy.read_bytes()[:2] == payload[:2]  # left in place for the operator to delete


async def test_damaged_user_state_rows_start_fresh(
    any_db_settings: Settings, api: BotAPIServer, shared_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bot_settings = any_db_settings
    store = open_store(bot_settings)
    store.save_user_state(71, {"lang": "kk"})
    now = time.time()
    # PostgreSQL's text refuses bytes that are not UTF-8: there the third damage is a JSON string
    garbage = b"\x80\x04garbage" if bot_settings.database_url is None else '"kk"'
    for user_id, data in [(72, '{"lang": "kk"'), (73, '["kk"]'), (74, garbage)]:
        query(bot_settings, "INSERT INTO user_state (user_id, data, updated_at) VALUES (?, ?, ?)", user_id, data, now)
    store.close()
    caplog.set_level(logging.WARNING)

    async with running(bot_settings, api, shared_dir) as (_, chat):
        assert await chat.texts(message_update(71, "/start")) == [t("start", "kk")]  # kept across the restart
        for user_id in (72, 73, 74):  # their app speaks Russian: they start from that
            assert await chat.texts(message_update(user_id, "/start")) == [t("start", "ru")]
    assert "stored state of 3 user(s)" in caplog.text and "[72, 73, 74]" in caplog.text
    assert "lang" not in caplog.text  # no user data in the log, only ids


def real_database(path: Path, rows: int = 300) -> bytes:
    """The bytes of a database the bot wrote, with `rows` questions (many pages)."""
    store = FeedbackStore(path)
    store.record_answer(ScriptedQA()("Вопрос про кражу", None), user_id=1, chat_id=1, latency=0.1)
    store.close()  # its pooled connections: the last one closing checkpoints the WAL
    with contextlib.closing(sqlite3.connect(path)) as db, db:  # copies of it, in one transaction
        db.executemany(
            "INSERT INTO questions (created_at, user_id, chat_id, question, answer, sources, latency)"
            " SELECT created_at, ?, chat_id, question || ?, answer, sources, latency FROM questions WHERE id = 1",
            [(i, f" номер {i}") for i in range(2, rows + 1)],
        )
    assert not path.with_name(path.name + "-wal").exists()  # checkpointed when the last connection closed
    assert len(query(path, "SELECT id FROM questions")) == rows
    return path.read_bytes()


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
async def test_a_damaged_database_is_moved_aside_and_the_bot_starts(
    damage: str, bot_settings: Settings, api: BotAPIServer, shared_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = db_file(bot_settings)
    path.parent.mkdir(parents=True)
    if damage == "garbage":
        content = b"this is not an SQLite database\n" * 200
    else:
        content = real_database(path)
        content = content[: len(content) // 2]
    path.write_bytes(content)
    caplog.set_level(logging.WARNING)

    async with running(bot_settings, api, shared_dir) as (_, chat):
        [answer] = await chat.texts(message_update(81, "Что будет за кражу?"))
        assert answer.startswith("Ответ на вопрос")
    [moved] = list(path.parent.glob("feedback.sqlite.corrupt-*"))
    assert moved.read_bytes() == content and mode(moved) == 0o600
    [warning] = [r for r in caplog.records if r.name == "bot.feedback"]
    text = warning.getMessage()
    assert warning.levelno == logging.WARNING and f"{path} is damaged" in text
    assert f"moved it to {moved}" in text and f"sqlite3 {moved} .recover" in text
    assert query(path, "SELECT user_id, question FROM questions") == [(81, "Что будет за кражу?")]


@pytest.mark.parametrize("install", ["fresh", "old"])
async def test_the_bot_folder_and_database_are_private_whatever_the_umask(
    install: str, umask_022: None, bot_settings: Settings, api: BotAPIServer, shared_dir: Path
) -> None:
    folder = bot_settings.data_dir / "bot"
    path = folder / "feedback.sqlite"
    reader = None
    if install == "old":  # as the previous version left it: 755 and 644, a WAL in use by another connection
        folder.mkdir(parents=True)
        reader = sqlite3.connect(path)
        reader.execute("PRAGMA journal_mode=WAL")
        reader.execute("CREATE TABLE t (x)")
        assert mode(folder) == 0o755 and mode(path) == 0o644
    try:
        async with running(bot_settings, api, shared_dir) as (_, chat):
            await chat.texts(message_update(91, "Что будет за кражу?"))
            if reader is None:  # keep a connection open so that the -wal and -shm files stay to be checked
                reader = sqlite3.connect(path)
                reader.execute("SELECT COUNT(*) FROM questions").fetchone()
            await chat.texts(message_update(91, "/lang kk"))
            await chat.app.update_persistence()
        files = sorted(p.name for p in folder.iterdir())
        assert files == ["feedback.sqlite", "feedback.sqlite-shm", "feedback.sqlite-wal"]
        assert mode(folder) == 0o700
        assert {name: mode(folder / name) for name in files} == dict.fromkeys(files, 0o600)
    finally:
        if reader is not None:
            reader.close()
    assert query(path, "SELECT user_id, data FROM user_state") == [(91, '{"lang": "kk"}')]


def age(path: Path | Settings, *, questions: tuple[int, ...] = (), users: tuple[int, ...] = (), days: float) -> None:
    """Make rows look `days` old."""
    then = time.time() - days * DAY
    for question_id in questions:
        query(path, "UPDATE questions SET created_at = ? WHERE id = ?", then, question_id)
    for user_id in users:
        query(path, "UPDATE user_state SET updated_at = ? WHERE user_id = ?", then, user_id)


async def test_retention_at_start_deletes_old_questions_ratings_and_state(
    any_db_settings: Settings, api: BotAPIServer, shared_dir: Path
) -> None:
    bot_settings = path = any_db_settings
    store = open_store(bot_settings)
    qa = ScriptedQA()
    old = store.record_answer(qa("старый вопрос", None), user_id=41, chat_id=41, latency=1.0)
    old_failed = store.record_failure("старый сбой", ValueError("x"), user_id=41, chat_id=41, latency=1.0)
    recent = store.record_answer(qa("недавний вопрос", None), user_id=42, chat_id=42, latency=1.0)
    new = store.record_answer(qa("новый вопрос", None), user_id=42, chat_id=42, latency=1.0)
    assert store.rate(old, 41, 1) == "rated" and store.rate(recent, 42, -1) == "rated"
    store.save_user_state(41, {"lang": "kk"})
    store.save_user_state(42, {"lang": "kk"})
    age(path, questions=(old, old_failed), users=(41,), days=181)
    age(path, questions=(recent,), users=(42,), days=179)

    # 0 keeps everything.
    async with running(bot_settings.model_copy(update={"telegram_retention_days": 0}), api, shared_dir):
        pass
    assert query(path, "SELECT COUNT(*) FROM questions") == [(4,)]

    async with running(bot_settings, api, shared_dir) as (_, chat):  # the default: 180 days
        assert query(path, "SELECT id FROM questions ORDER BY id") == [(recent,), (new,)]
        assert query(path, "SELECT question_id, user_id FROM ratings") == [(recent, 42)]
        assert query(path, "SELECT user_id FROM user_state") == [(42,)]
        assert await chat.texts(message_update(41, "/start")) == [t("start", "ru")]  # the old choice is gone
        assert await chat.texts(message_update(42, "/start")) == [t("start", "kk")]


async def test_retention_runs_daily_while_the_bot_runs(
    any_db_settings: Settings, api: BotAPIServer, shared_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bot.app, "RETENTION_EVERY", 0.1)  # "daily", shortened
    bot_settings = path = any_db_settings
    app = build_application(bot_settings, qa=ScriptedQA(), lookup=SharedLookup(shared_dir))
    async with app:
        chat = Chat(app, api)
        for user_id in (51, 52):
            await chat.texts(message_update(user_id, "/lang kk"))
            await chat.texts(message_update(user_id, f"Вопрос пользователя {user_id}"))
        await app.update_persistence()
        [(old,)] = query(path, "SELECT id FROM questions WHERE user_id = 51")
        age(path, questions=(old,), users=(51,), days=200)  # asked and last seen 200 days ago

        await app.post_init(app)  # what run_polling / run_webhook call: starts the daily pass
        for _ in range(300):  # a guard against hanging, not a timing assertion
            if 51 not in app.user_data:  # forgotten in memory too (after the rows), so it is not written back
                break
            await asyncio.sleep(0.1)
        assert 51 not in app.user_data
        assert query(path, "SELECT user_id FROM questions") == [(52,)]
        await app.update_persistence()
        assert query(path, "SELECT user_id FROM user_state") == [(52,)]
        assert await chat.texts(message_update(51, "/start")) == [t("start", "ru")]
        await app.bot_data["warm_up"]
        await app.post_shutdown(app)
    assert app.bot_data["retention"].cancelled()


def test_store_never_loses_a_record_to_unpaired_surrogates(db_settings: Settings) -> None:
    store = open_store(db_settings)
    raw, clean = "кража \udcff\udcfe телефона", "кража \ufffd\ufffd телефона"
    try:
        raw.encode("utf-8")  # what the embedder did with it
    except UnicodeEncodeError as err:
        error = err
    failed = store.record_failure(raw, error, user_id=1, chat_id=1, latency=0.5)
    qa = ScriptedQA({raw: f"Ответ про «{raw}»"}, sources=(make_source(1, "K1400000226", "188", f"Кража {raw}"),))
    answered = store.record_answer(qa(raw, None), user_id=1, chat_id=1, latency=0.5)
    store.save_user_state(1, {"lang": "kk", "last": raw})
    rows = query(db_settings, "SELECT id, question, answer, sources, error FROM questions ORDER BY id")
    assert [r[:3] for r in rows] == [(failed, clean, None), (answered, clean, f"Ответ про «{clean}»")]
    assert json.loads(rows[1][3])[0]["citation"] == f"УК РК, Статья 188. Кража {clean}"
    assert rows[0][4].startswith("UnicodeEncodeError: 'utf-8' codec can't encode characters in position 6-7")
    assert store.user_states() == {1: {"lang": "kk", "last": clean}}
