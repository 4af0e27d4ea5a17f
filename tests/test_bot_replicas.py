"""Several bot processes over one store, with the real application, the local Bot API server and a real PostgreSQL
cluster on 127.0.0.1 (and SQLite where one file can be shared): an update delivered twice is answered once, two
messages of a chat sent together are answered in order with the second reading the first, a follow-up keeps its
context on another replica, /new wins over an answer in flight, one rate limit, and the database going away while
the bot runs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import text
from telegram import Update
from telegram.ext import Application

from answer.records import Exchange, QAResult
from bot.app import build_application
from bot.texts import t
from config import Settings
from corpus import database
from tests.support.bot import ScriptedQA, SharedLookup
from tests.support.postgres import Cluster, remove_cluster, start_cluster
from tests.support.telegram_server import BotAPIServer, message_update, polling, settings_for

WAIT = 60.0  # seconds: a guard against hanging on a loaded machine, not a timing assertion


class HeldQA(ScriptedQA):
    """ScriptedQA whose answers to the questions in `held` wait until the test releases them."""

    def __init__(self, held: Sequence[str] = ()) -> None:
        super().__init__()
        self.held = set(held)
        self.release = threading.Event()
        self.started: list[str] = []  # questions whose answering began, held or not

    def __call__(
        self,
        question: str,
        settings: Settings,
        history: Sequence[Exchange] = (),
        on_token: Callable[[str], None] | None = None,
    ) -> QAResult:
        self.started.append(question)
        if question in self.held:
            assert self.release.wait(timeout=WAIT)
        return super().__call__(question, settings, history, on_token)


def replica_settings(settings: Settings, api: BotAPIServer, name: str, **overrides: Any) -> Settings:
    """A replica's settings: its own DATA_DIR, the same DATABASE_URL (or, unset, the same SQLite file)."""
    data_dir = settings.data_dir if settings.database_url is None else settings.data_dir.with_name(name)
    return settings_for(
        settings,
        api,
        **{"data_dir": data_dir, "telegram_rate_limit_per_minute": 0, "telegram_stream_interval": 0, **overrides},
    )


@contextlib.asynccontextmanager
async def started(app: Application) -> AsyncIterator[Application]:
    """The application running (its update processor takes what is put on `update_queue`), as a webhook replica."""
    async with app:
        await app.start()
        try:
            yield app
        finally:
            await app.stop()
    app.bot_data["services"].executor.shutdown()


async def deliver(app: Application, update: dict[str, Any]) -> None:
    await app.update_queue.put(Update.de_json(update, app.bot))


def answers(api: BotAPIServer, chat_id: int) -> list[str]:
    """The chat's answers so far (the messages carrying rating buttons), in the order they were sent."""
    return [
        r.params["text"]
        for r in api.calls("sendMessage", chat_id=chat_id)
        if "rate:" in json.dumps(r.params.get("reply_markup"))
    ]


async def wait_answers(api: BotAPIServer, chat_id: int, n: int) -> list[str]:
    await api.wait_for(lambda s: len(answers(s, chat_id)) >= n, timeout=WAIT)
    return answers(api, chat_id)


def questions_in(settings: Settings) -> list[str]:
    engine = database.engine(settings, settings.data_dir / "bot" / "feedback.sqlite")
    with engine.connect() as conn:
        return list(conn.execute(text("SELECT question FROM questions ORDER BY id")).scalars())


def over_postgres(settings: Settings, url: str) -> Settings:
    return settings.model_copy(update={"database_url": SecretStr(url)})


async def test_an_update_delivered_twice_is_answered_once(
    db_settings: Settings, api: BotAPIServer, shared_dir: Path
) -> None:
    qa = ScriptedQA(delay=0.2)
    one = build_application(replica_settings(db_settings, api, "one"), qa=qa, lookup=SharedLookup(shared_dir))
    two = build_application(replica_settings(db_settings, api, "two"), qa=qa, lookup=SharedLookup(shared_dir))
    update = {"update_id": 90001, **message_update(71, "Что будет за кражу?")}
    async with started(one), started(two):
        # Telegram retries it to the same replica, and a load balancer hands it to another as well.
        for app in (one, two, one):
            await deliver(app, update)
        for app in (one, two):
            await asyncio.wait_for(app.update_queue.join(), WAIT)  # every delivery handled or dropped
    assert qa.calls == ["Что будет за кражу?"]
    assert len(answers(api, 71)) == 1
    assert questions_in(one.bot_data["services"].settings) == ["Что будет за кражу?"]


async def test_two_messages_sent_together_are_answered_in_order_the_second_reading_the_first(
    db_settings: Settings, api: BotAPIServer, shared_dir: Path
) -> None:
    qa = ScriptedQA(delay=0.3)
    settings = replica_settings(db_settings, api, "one")
    async with polling(build_application(settings, qa=qa, lookup=SharedLookup(shared_dir))):
        api.push(message_update(72, "Что будет за кражу?"))
        api.push(message_update(72, "А если повторно?"))  # both in the same getUpdates answer
        first, second = await wait_answers(api, 72, 2)
    assert qa.calls == ["Что будет за кражу?", "А если повторно?"]
    assert qa.histories[0] == () and [e.question for e in qa.histories[1]] == ["Что будет за кражу?"]
    assert first.startswith("Ответ на вопрос «Что будет за кражу?»") and "«А если повторно?»" in second
    assert qa.max_in_flight == 1  # one chat's questions one at a time


async def test_a_follow_up_on_another_replica_keeps_its_context(
    settings: Settings, pg_url: str, api: BotAPIServer, shared_dir: Path
) -> None:
    shared = over_postgres(settings, pg_url)
    qa = HeldQA(held=["Что будет за кражу?"])
    one = build_application(replica_settings(shared, api, "one"), qa=qa, lookup=SharedLookup(shared_dir))
    two = build_application(replica_settings(shared, api, "two"), qa=qa, lookup=SharedLookup(shared_dir))
    async with started(one), started(two):
        await deliver(one, {"update_id": 501, **message_update(73, "/lang kk")})
        await api.wait_for(lambda s: bool(s.calls("sendMessage", chat_id=73)), timeout=WAIT)

        # Sent together, each to another replica: the second waits for the first and reads its exchange.
        await deliver(one, {"update_id": 502, **message_update(73, "Что будет за кражу?")})
        await api.wait_for(lambda s: bool(s.calls("sendChatAction", chat_id=73)), timeout=WAIT)
        await deliver(two, {"update_id": 503, **message_update(73, "А если повторно?")})
        await asyncio.sleep(0.5)
        assert qa.started == ["Что будет за кражу?"]  # the second is held until the first is answered
        qa.release.set()
        await wait_answers(api, 73, 2)
        assert [e.question for e in qa.histories[1]] == ["Что будет за кражу?"]

        # A reply to the first answer, on the other replica, continues from it; /lang chosen on one holds on two.
        first_answer = next(m for m in api.sent.values() if "rate:" in json.dumps(m.get("reply_markup")))
        reply = message_update(73, "А группой лиц?", reply_to_message=first_answer)
        await deliver(two, {"update_id": 504, **reply})
        await wait_answers(api, 73, 3)
        assert [e.question for e in qa.histories[2]] == ["Что будет за кражу?"]
        since = len(api.requests)
        await deliver(two, {"update_id": 505, **message_update(73, "/start")})
        await api.wait_for(lambda s: bool(s.calls("sendMessage", chat_id=73, since=since)), timeout=WAIT)
        assert api.calls("sendMessage", chat_id=73, since=since)[0].params["text"] == t("start", "kk")


async def test_an_update_a_killed_replica_had_taken_is_handled_by_another(
    settings: Settings, pg_url: str, api: BotAPIServer, shared_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("bot.feedback.UPDATE_LEASE", 1.0)  # seconds, not a minute
    shared = over_postgres(settings, pg_url)
    hung = HeldQA(held=["Что будет за кражу?"])
    qa = ScriptedQA()
    one = build_application(replica_settings(shared, api, "one"), qa=hung, lookup=SharedLookup(shared_dir))
    two = build_application(replica_settings(shared, api, "two"), qa=qa, lookup=SharedLookup(shared_dir))
    one.bot_data["services"].store.renew_update = lambda update_id: None  # it stops, as a killed replica does
    update = {"update_id": 801, **message_update(78, "Что будет за кражу?")}
    async with started(one), started(two):
        await deliver(one, update)
        await api.wait_for(lambda s: bool(s.calls("sendChatAction", chat_id=78)), timeout=WAIT)
        await deliver(two, update)  # Telegram posts it again (one never answered), the load balancer picks two
        [answer] = await wait_answers(api, 78, 1)
        assert qa.calls == ["Что будет за кражу?"] and answer.startswith("Ответ на вопрос «Что будет за кражу?»")
        hung.release.set()


async def test_an_update_whose_replica_was_killed_after_answering_is_not_answered_again(
    settings: Settings, pg_url: str, api: BotAPIServer, shared_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("bot.feedback.UPDATE_LEASE", 1.0)
    shared = over_postgres(settings, pg_url)
    qa = ScriptedQA()
    one = build_application(replica_settings(shared, api, "one"), qa=qa, lookup=SharedLookup(shared_dir))
    two = build_application(replica_settings(shared, api, "two"), qa=qa, lookup=SharedLookup(shared_dir))
    # one sends its answer and is killed before it marks the update handled
    one.bot_data["services"].store.renew_update = lambda update_id: None
    one.bot_data["services"].store.finish_update = lambda update_id: None
    update = {"update_id": 802, **message_update(79, "Что будет за кражу?")}
    async with started(one), started(two):
        await deliver(one, update)
        await wait_answers(api, 79, 1)
        await deliver(two, update)  # Telegram posts it again: one never answered the webhook
        await asyncio.wait_for(two.update_queue.join(), WAIT)
    assert qa.calls == ["Что будет за кражу?"]
    assert len(answers(api, 79)) == 1


async def test_new_wins_over_an_answer_in_flight(db_settings: Settings, api: BotAPIServer, shared_dir: Path) -> None:
    qa = HeldQA(held=["Что будет за кражу?"])
    settings = replica_settings(db_settings, api, "one")
    async with polling(build_application(settings, qa=qa, lookup=SharedLookup(shared_dir))):
        api.push(message_update(74, "Что будет за кражу?"))
        await api.wait_for(lambda s: bool(s.calls("sendChatAction", chat_id=74)), timeout=WAIT)
        api.push(message_update(74, "/new"))  # while the answer is being written
        await api.wait_for(
            lambda s: any(r.params["text"] == t("new_conversation", "ru") for r in s.calls("sendMessage", chat_id=74)),
            timeout=WAIT,
        )
        assert answers(api, 74) == []  # /new was answered first
        qa.release.set()
        await wait_answers(api, 74, 1)
        api.push(message_update(74, "А если повторно?"))
        await wait_answers(api, 74, 2)
    assert qa.histories[1] == ()  # begun anew: the answer that finished after /new is not continued


async def test_the_rate_limit_is_shared_by_the_replicas(
    settings: Settings, pg_url: str, api: BotAPIServer, shared_dir: Path
) -> None:
    shared = over_postgres(settings, pg_url)
    qa = ScriptedQA()
    one = build_application(
        replica_settings(shared, api, "one", telegram_rate_limit_per_minute=2), qa=qa, lookup=SharedLookup(shared_dir)
    )
    two = build_application(
        replica_settings(shared, api, "two", telegram_rate_limit_per_minute=2), qa=qa, lookup=SharedLookup(shared_dir)
    )
    async with started(one), started(two):
        for n, app in enumerate((one, two, one, two), start=1):
            await deliver(app, {"update_id": 600 + n, **message_update(75, f"Вопрос {n}")})
            await asyncio.wait_for(app.update_queue.join(), WAIT)
    assert qa.calls == ["Вопрос 1", "Вопрос 2"]
    texts = [r.params["text"] for r in api.calls("sendMessage", chat_id=75)]
    assert len(texts) == 3 and texts[2].startswith(t("rate_limited", "ru", per_minute=2, seconds=60)[:20])


@pytest.fixture
def own_cluster() -> Any:
    """A PostgreSQL cluster of this test's own, which it stops and starts."""
    cluster = start_cluster()
    yield cluster
    remove_cluster(cluster)


async def test_the_database_going_away_while_running_loses_no_answer(
    settings: Settings,
    own_cluster: Cluster,
    api: BotAPIServer,
    shared_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    monkeypatch.setattr("bot.records.RETRY_AFTER", (1.0, 2.0, 4.0, 8.0))
    bot_settings = replica_settings(over_postgres(settings, own_cluster.url()), api, "one")
    async with polling(build_application(bot_settings, qa=ScriptedQA(), lookup=SharedLookup(shared_dir))):
        own_cluster.stop()
        api.push(message_update(76, "Вопрос без базы"))
        await api.wait_for(lambda s: bool(s.calls("sendMessage", chat_id=76)), timeout=WAIT)
        [sent] = api.calls("sendMessage", chat_id=76)
        assert sent.params["text"].startswith("Ответ на вопрос «Вопрос без базы»")  # answered all the same
        assert "rate:" not in json.dumps(sent.params.get("reply_markup"))  # nothing to rate until stored
        assert "the answer could not be stored now; trying again" in caplog.text

        own_cluster.start()  # back: the retry stores it
        for _ in range(int(WAIT * 10)):
            if "the answer is stored now" in caplog.text:
                break
            await asyncio.sleep(0.1)
        assert questions_in(bot_settings) == ["Вопрос без базы"]

        monkeypatch.setattr("bot.records.RETRY_AFTER", (0.1, 0.1))
        own_cluster.stop()
        since = len(api.requests)
        update_id = api.push(message_update(76, "Второй вопрос без базы"))
        await api.wait_for(lambda s: bool(s.calls("sendMessage", chat_id=76, since=since)), timeout=WAIT)
        for _ in range(int(WAIT * 10)):
            if "is lost" in caplog.text:
                break
            await asyncio.sleep(0.1)
        [lost] = [r for r in caplog.records if "is lost" in r.getMessage()]
        assert lost.levelno == logging.ERROR and f"update {update_id}: the answer is lost" in lost.getMessage()
        assert "Второй вопрос" not in caplog.text  # ids in the log, never the user's text

        own_cluster.start()  # and the bot kept serving
        api.push(message_update(76, "Третий вопрос"))
        await wait_answers(api, 76, 1)
    assert questions_in(bot_settings) == ["Вопрос без базы", "Третий вопрос"]
