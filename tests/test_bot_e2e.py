"""The real bot (PTB `Application`, long polling or webhook) against a local Bot API server, end to end."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import socket
import sqlite3
import sys
import threading
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from pydantic import SecretStr
from telegram.ext import Application

from answer.records import QAResult
from bot.app import build_application, webhook_kwargs
from bot.logsetup import quiet_noisy_loggers
from bot.texts import t
from config import Settings
from corpus.errors import IndexNotReady
from corpus.redact import RedactSecrets
from tests.support.bot import (
    ScriptedQA,
    SharedLookup,
    long_answer,
)
from tests.support.telegram_server import (
    STICKER,
    TOKEN,
    BotAPIServer,
    BotRequest,
    callback_update,
    message_update,
    polling,
    settings_for,
)

HTML = {"parse_mode": "HTML", "link_preview_options": {"is_disabled": True}}
S1 = "https://adilet.zan.kz/rus/docs/K1400000226#z188"
S2 = "https://adilet.zan.kz/rus/docs/K1400000235#z136"
SOURCES_HTML = (
    "<b>Источники:</b>\n"
    f'<b>[S1]</b> <a href="{S1}">УК РК, Статья 188. Кража</a>\n'
    f'<b>[S2]</b> <a href="{S2}">КоАП РК, Статья 136. Мелкое хищение</a>'
)
ARTICLE_BUTTONS = [[{"text": "УК РК, ст. 188", "url": S1}, {"text": "КоАП РК, ст. 136", "url": S2}]]
LONG_Q = "Расскажите подробно про кражу"


def keyboard(question_id: int, chosen: str = "") -> dict[str, Any]:
    up = ("✅ " if chosen == "up" else "") + "👍"
    down = ("✅ " if chosen == "down" else "") + "👎"
    return {
        "inline_keyboard": [
            *ARTICLE_BUTTONS,
            [
                {"text": up, "callback_data": f"rate:{question_id}:up"},
                {"text": down, "callback_data": f"rate:{question_id}:down"},
            ],
        ]
    }


async def step(api: BotAPIServer, update: dict[str, Any], until: str, count: int = 1) -> list[BotRequest]:
    """Push one update and return every request the bot made for it, once `count` `until` calls arrived."""
    since = len(api.requests)
    api.push(update)
    await api.wait_for(lambda s: len(s.calls(until, since=since)) >= count)
    return api.calls(since=since)


def simple(requests: list[BotRequest]) -> list[tuple[str, dict[str, Any]]]:
    return [(r.method, r.params) for r in requests]


async def test_conversation_end_to_end(api: BotAPIServer, settings: Settings, shared_dir) -> None:
    paragraphs = long_answer(paragraphs=12)
    qa = ScriptedQA({LONG_Q: paragraphs, "сломайся": RuntimeError("chain exploded")})
    bot_settings = settings_for(settings, api, telegram_rate_limit_per_minute=2)
    app = build_application(bot_settings, qa=qa, lookup=SharedLookup(shared_dir))
    expected: list[tuple[str, dict[str, Any]]] = []

    async with polling(app):
        assert [r.method for r in api.calls()] == ["getMe", "deleteWebhook"]

        # /start
        got = simple(await step(api, message_update(101, "/start"), "sendMessage"))
        want = [("sendMessage", {"chat_id": 101, "text": t("start", "ru"), **HTML})]
        assert got == want
        expected += want

        # A question: typing…, then the answer with its sources, article buttons and 👍/👎.
        question = "Какое наказание за кражу?"
        got = simple(await step(api, message_update(101, question), "sendMessage"))
        answer = f"Ответ на вопрос «{question}»: см. статью 188 УК РК [S1]."
        want = [
            ("sendChatAction", {"chat_id": 101, "action": "typing"}),
            (
                "sendMessage",
                {"chat_id": 101, "text": f"{answer}\n\n{SOURCES_HTML}", **HTML, "reply_markup": keyboard(1)},
            ),
        ]
        assert got == want
        expected += want
        answered_id = max(api.sent)

        # A long answer comes in two messages cut between paragraphs; the buttons go under the last.
        got = simple(await step(api, message_update(101, LONG_Q), "sendMessage", 2))
        assert [m for m, _ in got] == ["sendChatAction", "sendMessage", "sendMessage"]
        first, second = got[1][1]["text"], got[2][1]["text"]
        assert len(first) <= 4096 and len(second) <= 4096
        assert f"{first}\n\n{second}" == f"{paragraphs}\n\n{SOURCES_HTML}"
        assert first.endswith("свободы.") and second[0].isdigit()  # whole paragraphs on both sides of the cut
        want = [
            ("sendChatAction", {"chat_id": 101, "action": "typing"}),
            ("sendMessage", {"chat_id": 101, "text": first, **HTML}),
            ("sendMessage", {"chat_id": 101, "text": second, **HTML, "reply_markup": keyboard(2)}),
        ]
        assert got == want
        expected += want

        # 👍 under the first answer: the rating is stored and the button ticked.
        press = callback_update(101, "rate:1:up", api.sent[answered_id])
        got = simple(await step(api, press, "editMessageReplyMarkup"))
        want = [
            (
                "answerCallbackQuery",
                {"callback_query_id": press["callback_query"]["id"], "text": "Спасибо за оценку!"},
            ),
            (
                "editMessageReplyMarkup",
                {
                    "chat_id": 101,
                    "message_id": answered_id,
                    "parse_mode": "HTML",
                    "reply_markup": keyboard(1, "up"),
                },
            ),
        ]
        assert got == want
        expected += want
        with sqlite3.connect(bot_settings.data_dir / "bot" / "feedback.sqlite") as db:
            assert db.execute("SELECT question_id, user_id, rating FROM ratings").fetchall() == [(1, 101, 1)]
            assert db.execute("SELECT question, answer FROM questions WHERE id = 1").fetchone() == (
                question,
                answer,
            )

        # A user over the limit (2 a minute) is told when to come back, and the chain is not called.
        for i in range(2):
            expected += simple(await step(api, message_update(102, f"Вопрос {i}"), "sendMessage"))
        got = simple(await step(api, message_update(102, "Вопрос 3"), "sendMessage"))
        assert len(got) == 1 and got[0][0] == "sendMessage"
        assert re.fullmatch(
            r"Слишком много вопросов: не больше 2 в минуту\. Пожалуйста, повторите через (59|60) с\.",
            got[0][1]["text"],
        )
        expected += got
        assert "Вопрос 3" not in qa.calls

        # A sticker.
        got = simple(await step(api, message_update(101, sticker=STICKER), "sendMessage"))
        want = [("sendMessage", {"chat_id": 101, "text": t("sticker", "ru"), **HTML})]
        assert got == want
        expected += want

        # The chain raises: the user gets the apology, and the next question is answered as usual.
        got = simple(await step(api, message_update(103, "сломайся"), "sendMessage"))
        want = [
            ("sendChatAction", {"chat_id": 103, "action": "typing"}),
            ("sendMessage", {"chat_id": 103, "text": t("error", "ru"), **HTML}),
        ]
        assert got == want
        expected += want
        got = simple(await step(api, message_update(103, "А теперь?"), "sendMessage"))
        assert got[1][1]["text"].startswith("Ответ на вопрос «А теперь?»")
        assert got[1][1]["reply_markup"] == keyboard(6)  # question ids: 1, 2, 3-4 (user 102), 5 (failed), 6
        expected += got

    # Nothing else was sent, before or after the steps.
    assert simple(api.calls())[2:] == expected
    assert qa.calls == [question, LONG_Q, "Вопрос 0", "Вопрос 1", "сломайся", "А теперь?"]


async def test_ten_users_at_once_all_get_answers(api: BotAPIServer, settings: Settings, shared_dir) -> None:
    qa = ScriptedQA(delay=0.5)  # the chain blocks its thread for half a second
    app = build_application(settings_for(settings, api), qa=qa, lookup=SharedLookup(shared_dir))
    users = range(201, 211)
    async with polling(app):
        since = len(api.requests)
        for user in users:
            api.push(message_update(user, f"Вопрос пользователя {user}"))
        await api.wait_for(lambda s: len(s.calls("sendMessage", since=since)) >= len(users), timeout=30)
    for user in users:
        [answer] = api.calls("sendMessage", chat_id=user)
        assert answer.params["text"].startswith(f"Ответ на вопрос «Вопрос пользователя {user}»")
    assert sorted(qa.calls) == sorted(f"Вопрос пользователя {u}" for u in users)
    assert qa.max_in_flight > 1  # questions were answered side by side, not one after another


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_webhook_mode(api: BotAPIServer, settings: Settings, shared_dir) -> None:
    port = free_port()
    bot_settings = settings_for(
        settings,
        api,
        telegram_mode="webhook",
        telegram_webhook_url="https://bot.example.kz/tg/hook",
        telegram_webhook_listen="127.0.0.1",
        telegram_webhook_port=port,
        telegram_webhook_secret=SecretStr("s3cret-path-token"),
    )
    app = build_application(bot_settings, qa=ScriptedQA(), lookup=SharedLookup(shared_dir))
    update = {"update_id": 1, **message_update(301, "/start", language_code="kk")}
    async with app:
        await app.start()
        await app.updater.start_webhook(**webhook_kwargs(bot_settings))
        try:
            [set_webhook] = api.calls("setWebhook")
            assert set_webhook.params["url"] == "https://bot.example.kz/tg/hook"
            assert set_webhook.params["secret_token"] == "s3cret-path-token"
            async with aiohttp.ClientSession() as http:
                url = f"http://127.0.0.1:{port}/tg/hook"
                async with http.post(url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "wrong"}) as r:
                    assert r.status == 403
                async with http.post(
                    url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "s3cret-path-token"}
                ) as r:
                    assert r.status == 200
            await api.wait_for(lambda s: bool(s.calls("sendMessage")))
        finally:
            await app.updater.stop()
            await app.stop()
    app.bot_data["services"].executor.shutdown()
    assert [r.params["text"] for r in api.calls("sendMessage")] == [t("start", "kk")]


async def test_an_update_is_posted_again_until_the_webhook_has_handled_it(
    api: BotAPIServer, settings: Settings, shared_dir
) -> None:
    # What bench/replicas.py relies on: Telegram posts to the webhook and retries an update until it gets a 200.
    port = free_port()
    bot_settings = settings_for(
        settings,
        api,
        telegram_mode="webhook",
        telegram_webhook_url=f"http://127.0.0.1:{port}/tg/hook",
        telegram_webhook_listen="127.0.0.1",
        telegram_webhook_port=port,
        telegram_webhook_secret=SecretStr("s3cret-path-token"),
    )
    api.retry_after = 0.2
    qa = ScriptedQA(delay=0.3)
    app = build_application(bot_settings, qa=qa, lookup=SharedLookup(shared_dir))
    async with app:
        await app.start()
        await app.updater.start_webhook(**webhook_kwargs(bot_settings))
        await app.updater.stop()  # the webhook is set, nothing listens: posts are refused
        update_id = api.push(message_update(302, "Что будет за кражу?"))
        await api.wait_for(lambda s: len(s.posts) >= 2)
        await app.updater.start_webhook(**webhook_kwargs(bot_settings))
        try:
            await api.wait_for(lambda s: any(p.status == 200 for p in s.posts))
        finally:
            await app.updater.stop()
            await app.stop()
    app.bot_data["services"].executor.shutdown()
    assert qa.calls == ["Что будет за кражу?"] and len(api.calls("sendMessage", chat_id=302)) == 1
    assert {p.update_id for p in api.posts} == {update_id}
    assert [p.status for p in api.posts][-1] == 200 and all(p.status == 0 for p in api.posts[:-1])
    # and the 200 came once the update was handled: had the bot died before, Telegram would post it again
    [answer] = api.calls("sendMessage", chat_id=302)
    assert api.posts[-1].at >= answer.at


async def test_post_init_sets_command_menus_and_loads_the_chain(
    api: BotAPIServer, settings: Settings, shared_dir, caplog: pytest.LogCaptureFixture
) -> None:
    lookup = SharedLookup(shared_dir)
    app = build_application(settings_for(settings, api), qa=ScriptedQA(), lookup=lookup)
    caplog.set_level(logging.INFO)
    async with app:
        await app.post_init(app)
        await app.bot_data["warm_up"]
    app.bot_data["services"].executor.shutdown()
    calls = api.calls("setMyCommands")
    assert [c.params.get("language_code") for c in calls] == [None, "kk"]
    assert [c["command"] for c in calls[0].params["commands"]] == ["help", "article", "new", "lang", "about"]
    assert calls[1].params["commands"][2]["description"] == "Жаңа әңгіме: алдыңғы сұрақтарды ұмыту"
    assert calls[1].params["commands"][1]["description"] == "Баптың мәтіні: /article ҚК 188"
    assert lookup.calls == [("УК", "1", "ru")]  # the chain is loaded before the first question
    assert "chain ready" in caplog.text


async def test_warm_up_reports_a_missing_index(api: BotAPIServer, settings: Settings, caplog) -> None:
    def lookup(code: str, number: str, settings: Settings, lang: str = "ru") -> None:
        raise IndexNotReady("the index is not built: run python -m ingest_adilet index")

    app = build_application(settings_for(settings, api), qa=ScriptedQA(), lookup=lookup)
    async with app:
        await app.post_init(app)
        await app.bot_data["warm_up"]
    app.bot_data["services"].executor.shutdown()
    [record] = [r for r in caplog.records if r.name == "bot.app"]
    assert record.levelno == logging.WARNING and "run python -m ingest_adilet index" in record.getMessage()


async def converse(api: BotAPIServer, app: Application, user: int, question: str) -> None:
    async with polling(app):
        await step(api, message_update(user, "/start"), "sendMessage")
        await step(api, message_update(user, question), "sendMessage")
        await step(api, message_update(user, "сломайся"), "sendMessage")


async def test_no_token_or_user_text_in_logs_at_info(
    api: BotAPIServer, settings: Settings, shared_dir, caplog: pytest.LogCaptureFixture, restore_loggers: None
) -> None:
    secret_question = "Меня зовут Айгерим Жумабаева, ИИН 900101400123, что грозит за кражу?"
    qa = ScriptedQA({"сломайся": RuntimeError("chain exploded")})
    caplog.set_level(logging.INFO)

    # Without the entry point's setup httpx logs each request URL, token included: the check can fail.
    logging.getLogger("httpx").setLevel(logging.INFO)
    await converse(
        api,
        build_application(settings_for(settings, api), qa=qa, lookup=SharedLookup(shared_dir)),
        401,
        "первый вопрос",
    )
    assert TOKEN in caplog.text
    caplog.clear()

    quiet_noisy_loggers()  # what `python -m bot` does
    app = build_application(settings_for(settings, api), qa=qa, lookup=SharedLookup(shared_dir))
    await converse(api, app, 402, secret_question)
    assert any(r.name == "bot.handlers" and "answered" in r.getMessage() for r in caplog.records)  # INFO is on
    assert any(r.levelno == logging.ERROR and r.exc_info for r in caplog.records)  # the failure's traceback
    assert TOKEN not in caplog.text
    assert "Айгерим" not in caplog.text and "900101400123" not in caplog.text and "сломайся" not in caplog.text


def test_redaction_hides_the_token_in_messages_and_tracebacks() -> None:
    handler = logging.StreamHandler()
    handler.addFilter(RedactSecrets([TOKEN]))
    try:
        raise RuntimeError(f"POST https://api.telegram.org/bot{TOKEN}/getUpdates failed")
    except RuntimeError:
        exc_info = sys.exc_info()
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "url %s", (f"/bot{TOKEN}/sendMessage",), exc_info)
    assert handler.filter(record)
    text = logging.Formatter("%(levelname)s %(message)s").format(record)
    assert TOKEN not in text
    assert "url /bot[REDACTED]/sendMessage" in text and "bot[REDACTED]/getUpdates failed" in text


async def test_a_slow_chain_does_not_hold_up_other_users(api: BotAPIServer, settings: Settings, shared_dir) -> None:
    release = threading.Event()

    def chain(question: str, settings: Settings, **kw: object) -> QAResult:
        assert release.wait(timeout=30)  # blocks its thread until the test has seen the other user answered
        return ScriptedQA()(question, settings)

    app = build_application(settings_for(settings, api), qa=chain, lookup=SharedLookup(shared_dir))
    async with polling(app):
        api.push(message_update(501, "Долгий вопрос"))
        await api.wait_for(lambda s: bool(s.calls("sendChatAction", chat_id=501)))
        api.push(message_update(502, "/start"))
        await api.wait_for(lambda s: bool(s.calls("sendMessage", chat_id=502)))  # answered while 501 waits
        assert not api.calls("sendMessage", chat_id=501)
        release.set()
        await api.wait_for(lambda s: bool(s.calls("sendMessage", chat_id=501)))


async def test_no_secret_in_the_logs_of_a_verbose_webhook_run(api: BotAPIServer, tmp_path) -> None:
    # python-telegram-bot logs setWebhook's parameters at DEBUG, the webhook secret among them.
    secrets = {
        "TELEGRAM_BOT_TOKEN": api.token,
        "TELEGRAM_WEBHOOK_SECRET": "wh-secret-5f1c9e",
        "GROQ_API_KEY": "gsk_groq-secret-77aa",
        "PINECONE_API_KEY": "pc-secret-31bd",
    }
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TELEGRAM_", "GROQ_", "PINECONE_"))},
        **secrets,
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
        "DATA_DIR": str(tmp_path / "data"),
        "TELEGRAM_API_URL": api.base_url,
        "TELEGRAM_FILE_URL": api.base_file_url,
        "TELEGRAM_MODE": "webhook",
        "TELEGRAM_WEBHOOK_URL": "https://bot.example.kz/tg/hook",
        "TELEGRAM_WEBHOOK_LISTEN": "127.0.0.1",
        "TELEGRAM_WEBHOOK_PORT": str(free_port()),
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "-v", cwd=tmp_path, env=env, stderr=asyncio.subprocess.PIPE
    )
    try:
        await asyncio.wait_for(api.wait_for(lambda s: bool(s.calls("setWebhook"))), timeout=60)
        await asyncio.sleep(1.0)  # the chain's warm-up logs too
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    logs = err.decode()
    assert "setWebhook" in logs  # the debug line was written, redacted
    assert api.calls("setWebhook")[0].params["secret_token"] == secrets["TELEGRAM_WEBHOOK_SECRET"]
    for name, value in secrets.items():
        assert value not in logs, name
