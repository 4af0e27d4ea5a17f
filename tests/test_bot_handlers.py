"""bot handlers on real `Update`s via `Application.process_update`, replying over HTTP to a local Bot API."""

from __future__ import annotations

import json
import logging
import re
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from telegram import Update
from telegram.ext import Application

from bot.__main__ import main
from bot.app import BotConfigError, build_application, webhook_kwargs
from bot.feedback import FeedbackStore
from bot.feedback_stats import percentile
from bot.format import article_heading
from bot.handlers import MAX_QUESTION_CHARS
from bot.ratelimit import SlidingWindowLimiter
from bot.texts import t
from config import Settings
from corpus.errors import IndexNotReady
from corpus.legal import split_article_args as parse_article_args
from tests.support.bot import (
    ScriptedQA,
    SharedLookup,
    make_source,
    shared_article,
)
from tests.support.telegram_server import (
    DOCUMENT,
    LOCATION,
    PHOTO,
    STICKER,
    VOICE,
    BotAPIServer,
    BotRequest,
    callback_update,
    inaccessible_message,
    message_update,
    settings_for,
)

ADMIN = 900


@pytest.fixture
def bot_settings(settings: Settings, api: BotAPIServer) -> Settings:
    return settings_for(settings, api, telegram_rate_limit_per_minute=3, telegram_admin_ids=[ADMIN])


@pytest.fixture
def qa() -> ScriptedQA:
    return ScriptedQA(
        {
            "индекс?": IndexNotReady("Индекс не построен <data/index>: выполните python -m index build"),
            "сломайся": RuntimeError("boom"),
        }
    )


@pytest.fixture
def lookup(shared_dir: Path) -> SharedLookup:
    return SharedLookup(shared_dir)


@pytest.fixture
async def app(bot_settings: Settings, qa: ScriptedQA, lookup: SharedLookup) -> AsyncIterator[Application]:
    application = build_application(bot_settings, qa=qa, lookup=lookup)
    async with application:
        yield application
    application.bot_data["services"].executor.shutdown()


class Chat:
    """Sends updates through the application and returns what the bot sent for each."""

    def __init__(self, app: Application, api: BotAPIServer) -> None:
        self.app, self.api = app, api
        self.update_ids = iter(range(1, 10_000))

    async def send(self, update: dict[str, Any]) -> list[BotRequest]:
        since = len(self.api.requests)
        await self.app.process_update(Update.de_json({"update_id": next(self.update_ids), **update}, self.app.bot))
        return self.api.calls(since=since)

    async def texts(self, update: dict[str, Any]) -> list[str]:
        return [r.params["text"] for r in await self.send(update) if r.method == "sendMessage"]


@pytest.fixture
def chat(app: Application, api: BotAPIServer) -> Chat:
    return Chat(app, api)


async def test_start_and_help_speak_the_users_language(chat: Chat) -> None:
    assert await chat.texts(message_update(1, "/start")) == [t("start", "ru")]
    assert await chat.texts(message_update(2, "/start", language_code="kk")) == [t("start", "kk")]
    assert await chat.texts(message_update(3, "/start", language_code=None)) == [t("start", "ru")]
    [help_ru] = await chat.texts(message_update(1, "/help"))
    [help_kk] = await chat.texts(message_update(2, "/help", language_code="kk"))
    assert "/article УК 188" in help_ru and "Не больше 3 вопросов в минуту." in help_ru
    assert "/article ҚК 188" in help_kk and "Минутына 3 сұрақтан артық емес." in help_kk
    # follow-ups, replies and /new are explained with the settings' numbers
    assert "в контексте 3 предыдущих вопросов" in help_ru and "после 30 мин тишины и по команде /new" in help_ru
    assert "алдыңғы 3 сұрақтың" in help_kk and "30 минут үнсіздіктен кейін және /new" in help_kk
    assert "/about — на чём основаны ответы" in help_ru and "/about — жауаптар неге сүйенеді" in help_kk


async def test_lang_switches_and_survives_a_restart(
    chat: Chat, api: BotAPIServer, bot_settings: Settings, qa: ScriptedQA, lookup: SharedLookup
) -> None:
    assert await chat.texts(message_update(5, "/lang қазақша")) == [t("lang_set", "kk")]
    assert await chat.texts(message_update(5, "/start")) == [t("start", "kk")]  # although the app says "ru"

    [choose] = await chat.send(message_update(6, "/lang", language_code="kk"))
    buttons = choose.params["reply_markup"]["inline_keyboard"][0]
    assert [b["callback_data"] for b in buttons] == ["lang:ru", "lang:kk"]
    sent = api.sent[max(api.sent)]
    reqs = await chat.send(callback_update(6, "lang:ru", sent, language_code="kk"))
    assert [r.method for r in reqs] == ["answerCallbackQuery", "editMessageText"]
    assert reqs[1].params["text"] == t("lang_set", "ru")
    assert await chat.texts(message_update(6, "/help", language_code="kk")) == [
        t(
            "help",
            "ru",
            max_chars=MAX_QUESTION_CHARS,
            rate_note=t("rate_note", "ru", per_minute=3),
            turns=3,
            minutes="30",
        )
    ]

    await chat.app.shutdown()  # flushes the users' choices to DATA_DIR/bot/feedback.sqlite, as JSON
    with sqlite3.connect(bot_settings.data_dir / "bot" / "feedback.sqlite") as db:
        rows = db.execute("SELECT user_id, data FROM user_state ORDER BY user_id").fetchall()
    assert [(user, json.loads(data)) for user, data in rows] == [(5, {"lang": "kk"}), (6, {"lang": "ru"})]
    assert not (bot_settings.data_dir / "bot" / "state.pickle").exists()  # nothing is pickled
    again = build_application(bot_settings, qa=qa, lookup=lookup)
    async with again:
        assert await Chat(again, api).texts(message_update(5, "/start")) == [t("start", "kk")]
    again.bot_data["services"].executor.shutdown()
    await chat.app.initialize()  # the fixture shuts it down again


async def test_article_is_shown_verbatim(chat: Chat, lookup: SharedLookup, shared_dir: Path) -> None:
    reqs = await chat.send(message_update(7, "/article УК 188"))
    assert lookup.calls == [("УК", "188", "ru")]
    assert [r.method for r in reqs] == ["sendChatAction", "sendMessage"]
    assert reqs[0].params == {"chat_id": 7, "action": "typing"}
    text = reqs[1].params["text"]
    assert text.startswith("<b>УК РК. Статья 188. Кража</b>\n\n1. Кража, то есть тайное хищение чужого имущества, –")
    article = shared_article(shared_dir, "K1400000226", "188")
    assert article.text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in text
    assert reqs[1].params["parse_mode"] == "HTML"

    [koap] = await chat.texts(message_update(7, "/article КоАП 608"))
    assert koap.startswith("<b>КоАП РК. Статья 608. Управление транспортным средством водителем")
    await chat.texts(message_update(7, "/article ТК РК ст. 22"))
    assert lookup.calls[-1] == ("ТК РК", "22", "ru")
    # The text comes in the language of the code's name, else in the user's language.
    await chat.texts(message_update(7, "/article ҚК 188"))
    await chat.texts(message_update(7, "/article УК 188", language_code="kk"))
    assert lookup.calls[-2:] == [("ҚК", "188", "kk"), ("УК", "188", "kk")]


async def test_long_article_comes_in_several_messages(chat: Chat, shared_dir: Path) -> None:
    parts = await chat.texts(message_update(8, "/article УК 72"))
    article = shared_article(shared_dir, "K1400000226", "72")
    assert len(parts) == 3 and all(len(p) <= 4096 for p in parts)
    assert parts[0].startswith(f"<b>{article_heading(article)}</b>")
    plain = " ".join(re.sub(r"<[^>]+>", "", " ".join(parts)).split())
    assert " ".join(article.text.split()) in plain


async def test_article_usage_and_not_found(chat: Chat, lookup: SharedLookup) -> None:
    assert await chat.texts(message_update(9, "/article")) == [t("article_usage", "ru")]
    assert await chat.texts(message_update(9, "/article 188")) == [t("article_usage", "ru")]
    assert await chat.texts(message_update(9, "/article УК 99999")) == [
        t("article_not_found", "ru", code="УК", number="99999")
    ]
    # No Kazakh Criminal Code in ../shared: the lookup finds nothing and the user hears so in Kazakh.
    assert await chat.texts(message_update(9, "/article ҚК 188-бап", language_code="kk")) == [
        t("article_not_found", "kk", code="ҚК", number="188")
    ]
    assert lookup.calls == [("УК", "99999", "ru"), ("ҚК", "188", "kk")]


async def test_article_with_a_part_or_a_second_number_shows_the_article_and_says_what_was_ignored(
    chat: Chat, lookup: SharedLookup, shared_dir: Path
) -> None:
    # «часть 2» was read as article 2, «188 189» as article 189: the article is the first number after the code.
    [text] = await chat.texts(message_update(10, "/article УК 188 часть 2"))
    ignored = f"<i>{t('article_ignored', 'ru', ignored='часть 2')}</i>"
    assert text.startswith(f"<b>УК РК. Статья 188. Кража</b>\n\n{ignored}\n\n1. Кража, то есть тайное хищение")
    [text] = await chat.texts(message_update(10, "/article УК 188 189"))
    assert text.startswith("<b>УК РК. Статья 188. Кража</b>\n\n<i>Показана вся статья; не учтено: «189».</i>")
    [text] = await chat.texts(message_update(10, "/article УК ч. 3 ст. 188"))
    assert "<i>Показана вся статья; не учтено: «ч. 3».</i>" in text and "Статья 188. Кража" in text
    parts = await chat.texts(message_update(10, "/article ЖК 9 2-бөлік", language_code="kk"))
    land = shared_article(shared_dir, "K030000442_", "9", "kk")
    assert parts[0].startswith(
        f"<b>{article_heading(land)}</b>\n\n<i>Бап толық көрсетілді; ескерілмеді: «2-бөлік».</i>"
    )
    assert lookup.calls == [("УК", "188", "ru")] * 3 + [("ЖК", "9", "kk")]
    # No Kazakh Criminal Code in ../shared: article 188 is not found (not «2-бөлік», not the usage)
    assert await chat.texts(message_update(10, "/article ҚК 188 2-бөлік", language_code="kk")) == [
        t("article_not_found", "kk", code="ҚК", number="188")
    ]


def test_parse_article_args() -> None:
    assert parse_article_args(["УК", "188"]) == ("УК", "188")
    assert parse_article_args(["ТК", "РК", "ст.", "22"]) == ("ТК РК", "22")
    assert parse_article_args(["ҚК", "188-1-бап"]) == ("ҚК", "188-1")
    assert parse_article_args(["КоАП", "статья", "608."]) == ("КоАП", "608")
    assert parse_article_args(["УК"]) is None
    assert parse_article_args(["УК", "кража"]) is None


async def test_a_data_error_is_one_plain_sentence_for_the_user_and_stored_in_full(
    chat: Chat, bot_settings: Settings
) -> None:
    # The operator's message (a path, a command) is for the log and the database, not for the user.
    reqs = await chat.send(message_update(10, "индекс?"))
    assert [r.method for r in reqs] == ["sendChatAction", "sendMessage"]
    assert reqs[1].params["text"] == t("unavailable", "ru")
    with sqlite3.connect(bot_settings.data_dir / "bot" / "feedback.sqlite") as db:
        rows = db.execute("SELECT user_id, question, answer, error FROM questions").fetchall()
    assert rows == [
        (
            10,
            "индекс?",
            None,
            "IndexNotReady: Индекс не построен <data/index>: выполните python -m index build",
        )
    ]


async def test_unexpected_error_gets_an_apology_and_a_logged_traceback(
    chat: Chat, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        assert await chat.texts(message_update(11, "сломайся", language_code="kk")) == [t("error", "kk")]
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert record.name == "bot.handlers" and record.exc_info and isinstance(record.exc_info[1], RuntimeError)
    assert "сломайся" not in caplog.text  # users' texts stay out of logs above DEBUG


@pytest.mark.parametrize(
    "content,key",
    [
        ({"sticker": STICKER}, "sticker"),
        ({"photo": PHOTO, "caption": "что тут?"}, "photo"),
        ({"voice": VOICE}, "voice"),
        ({"document": DOCUMENT}, "document"),
        ({"location": LOCATION}, "other_media"),
    ],
)
async def test_non_text_messages_get_a_clear_reply(chat: Chat, qa: ScriptedQA, content: dict, key: str) -> None:
    assert await chat.texts(message_update(12, **content)) == [t(key, "ru")]
    assert await chat.texts(message_update(12, language_code="kk", **content)) == [t(key, "kk")]
    assert qa.calls == []


async def test_empty_and_overlong_questions_are_refused(chat: Chat, qa: ScriptedQA) -> None:
    assert await chat.texts(message_update(13, "\u200b \u200b")) == [t("empty", "ru")]
    assert await chat.texts(message_update(13, "ж" * (MAX_QUESTION_CHARS + 1), language_code="kk")) == [
        t("too_long", "kk", length=MAX_QUESTION_CHARS + 1, max_chars=MAX_QUESTION_CHARS)
    ]
    assert qa.calls == []
    # The stand-in's answer quotes the question: at the chain's limit (4000) it takes two Telegram messages.
    *_, last = await chat.texts(message_update(13, "ж" * MAX_QUESTION_CHARS))
    assert qa.calls == ["ж" * MAX_QUESTION_CHARS] and "Источники:" in last


async def test_the_bot_accepts_every_question_the_chain_accepts(chat: Chat, qa: ScriptedQA) -> None:
    question = "Что будет за кражу? " * 150  # 3000 characters: over the bot's old 2000, within the chain's 4000
    await chat.texts(message_update(14, question))
    assert qa.calls == [question.strip()]


async def test_answer_labels_follow_the_answers_language(chat: Chat, qa: ScriptedQA) -> None:
    qa.lang = "kk"
    qa.sources = (make_source(1, "K1400000226", "188", "Ұрлық", lang="kk"),)
    [request] = [r for r in await chat.send(message_update(18, "Ұрлық үшін жаза?")) if r.method == "sendMessage"]
    assert "<b>Дереккөздер:</b>" in request.params["text"] and "ҚР ҚК, 188-бап. Ұрлық</a>" in request.params["text"]
    assert request.params["reply_markup"]["inline_keyboard"][0][0]["text"] == "ҚР ҚК, 188-бап"


async def test_unknown_command(chat: Chat) -> None:
    assert await chat.texts(message_update(14, "/foo bar")) == [t("unknown_command", "ru")]
    assert await chat.texts(message_update(14, "/stats", language_code="kk")) == [t("admins_only", "kk")]


async def test_rating_can_change_and_stale_buttons_say_so(
    chat: Chat, api: BotAPIServer, bot_settings: Settings
) -> None:
    [_, answer] = await chat.send(message_update(15, "Что грозит за кражу?"))
    message = api.sent[max(api.sent)]
    rate_row = answer.params["reply_markup"]["inline_keyboard"][-1]
    up, down = rate_row[0]["callback_data"], rate_row[1]["callback_data"]
    question_id = int(up.split(":")[1])

    reqs = await chat.send(callback_update(15, up, message))
    assert [r.method for r in reqs] == ["answerCallbackQuery", "editMessageReplyMarkup"]
    assert reqs[0].params["text"] == t("rated", "ru")
    assert [b["text"] for b in reqs[1].params["reply_markup"]["inline_keyboard"][-1]] == ["✅ 👍", "👎"]
    reqs = await chat.send(callback_update(15, down, api.sent[message["message_id"]]))
    assert [b["text"] for b in reqs[1].params["reply_markup"]["inline_keyboard"][-1]] == ["👍", "✅ 👎"]
    with sqlite3.connect(bot_settings.data_dir / "bot" / "feedback.sqlite") as db:
        assert db.execute("SELECT question_id, user_id, rating FROM ratings").fetchall() == [(question_id, 15, -1)]

    reqs = await chat.send(callback_update(15, "rate:424242:up", message))
    assert [(r.method, r.params.get("text")) for r in reqs] == [("answerCallbackQuery", t("rating_expired", "ru"))]
    reqs = await chat.send(callback_update(15, "something-old", message))
    assert [(r.method, r.params.get("text")) for r in reqs] == [("answerCallbackQuery", t("rating_expired", "ru"))]


async def test_stats_for_admins(chat: Chat, api: BotAPIServer) -> None:
    await chat.send(message_update(16, "Вопрос один"))
    await chat.send(message_update(17, "Вопрос два"))
    await chat.send(message_update(17, "сломайся"))
    up = api.calls("sendMessage", chat_id=16)[-1].params["reply_markup"]["inline_keyboard"][-1][0]["callback_data"]
    answered = [m for m in api.sent.values() if m["chat"]["id"] == 16][-1]
    await chat.send(callback_update(16, up, answered))
    [stats] = await chat.texts(message_update(ADMIN, "/stats"))
    assert re.fullmatch(
        r"📊 <b>Статистика</b>\nВопросов: 3 \(ответов 2, ошибок 1\), пользователей: 2\n"
        r"Оценки: 👍 1 · 👎 0\nВремя ответа: p50 \d+\.\d\d с · p95 \d+\.\d\d с",
        stats,
    ), stats


def test_feedback_store_stats(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "fb.sqlite")
    qa = ScriptedQA()
    ids = [store.record_answer(qa(f"q{i}", None), user_id=i % 3, chat_id=i % 3, latency=float(i)) for i in range(1, 21)]
    failed = store.record_failure("q", ValueError("x"), user_id=5, chat_id=5, latency=99.0)
    # ids[0] was asked by user 1, ids[1] by user 2, ids[2] by user 0: only the asker rates.
    assert store.rate(ids[0], 1, 1) == "rated" and store.rate(ids[1], 2, 1) == "rated"
    assert store.rate(ids[2], 0, -1) == "rated"
    assert store.rate(ids[0], 1, -1) == "rated"  # changed its mind
    assert store.rate(ids[0], 2, 1) == "not_asker"
    assert store.rate(999, 1, 1) == "gone" and store.rate(failed, 5, 1) == "gone"
    s = store.stats()
    assert (s.questions, s.answered, s.failed, s.users, s.up, s.down) == (21, 20, 1, 4, 1, 2)
    assert (s.latency_p50, s.latency_p95) == (10.0, 19.0)  # failures do not count
    assert percentile([], 0.5) is None and percentile([3.0], 0.95) == 3.0


def test_sliding_window_limiter() -> None:
    now = [0.0]
    limiter = SlidingWindowLimiter(2, window=60.0, clock=lambda: now[0])
    assert limiter.hit("a") is None
    now[0] = 10.0
    assert limiter.hit("a") is None
    assert limiter.hit("b") is None  # per user
    now[0] = 30.0
    assert limiter.hit("a") == pytest.approx(30.0)  # the first event leaves the window at t=60
    now[0] = 60.0
    assert limiter.hit("a") is None  # the window slid: one event (t=10) is left in it
    assert limiter.hit("a") == pytest.approx(10.0)
    assert SlidingWindowLimiter(0).hit("a") is None  # 0 disables the limit


def test_main_refuses_to_start_without_token(
    settings: Settings, capsys: pytest.CaptureFixture, restore_loggers: None
) -> None:
    assert main(["--data-dir", str(settings.data_dir)]) == 2
    err = capsys.readouterr().err
    assert "TELEGRAM_BOT_TOKEN is not set" in err and "@BotFather" in err


def test_main_refuses_webhook_without_url(
    settings: Settings, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, restore_loggers: None
) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123456:TEST")
    monkeypatch.setenv("TELEGRAM_MODE", "webhook")
    assert main(["--data-dir", str(settings.data_dir)]) == 2
    err = capsys.readouterr().err
    assert "TELEGRAM_WEBHOOK_URL" in err and "123456:TEST" not in err


def test_webhook_mode_refuses_to_start_without_a_secret(
    settings: Settings, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, restore_loggers: None
) -> None:
    webhook = {"telegram_mode": "webhook", "telegram_webhook_url": "https://bot.example.kz/tg"}
    with pytest.raises(BotConfigError, match="TELEGRAM_WEBHOOK_SECRET") as refused:
        webhook_kwargs(settings.model_copy(update=webhook))
    assert "secrets.token_urlsafe" in str(refused.value)  # says how to make one
    for bad in ("", "has spaces", "x" * 257):
        with pytest.raises(BotConfigError, match="TELEGRAM_WEBHOOK_SECRET"):
            webhook_kwargs(settings.model_copy(update={**webhook, "telegram_webhook_secret": SecretStr(bad)}))
    good = webhook_kwargs(settings.model_copy(update={**webhook, "telegram_webhook_secret": SecretStr("a_B-9")}))
    assert good["secret_token"] == "a_B-9" and good["url_path"] == "tg"

    # The entry point refuses before it builds anything: no webhook is registered, nothing listens.
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123456:TEST")
    monkeypatch.setenv("TELEGRAM_MODE", "webhook")
    monkeypatch.setenv("TELEGRAM_WEBHOOK_URL", "https://bot.example.kz/tg")
    assert main(["--data-dir", str(settings.data_dir)]) == 2
    err = capsys.readouterr().err
    assert "TELEGRAM_WEBHOOK_SECRET" in err and "123456:TEST" not in err
    assert not (settings.data_dir / "bot").exists()


async def test_only_the_asker_can_rate_an_answer(chat: Chat, api: BotAPIServer, bot_settings: Settings) -> None:
    [_, answer] = await chat.send(message_update(20, "Что грозит за кражу?"))
    message = api.sent[max(api.sent)]
    up = answer.params["reply_markup"]["inline_keyboard"][-1][0]["callback_data"]

    # Another user (say in a group, or with forged callback data) presses 👍: refused, nothing changes.
    reqs = await chat.send(callback_update(21, up, message))
    assert [(r.method, r.params.get("text")) for r in reqs] == [("answerCallbackQuery", t("rate_not_asker", "ru"))]
    reqs = await chat.send(callback_update(21, up, message, language_code="kk"))
    assert reqs[0].params["text"] == t("rate_not_asker", "kk")
    db_path = bot_settings.data_dir / "bot" / "feedback.sqlite"
    with sqlite3.connect(db_path) as db:
        assert db.execute("SELECT COUNT(*) FROM ratings").fetchone() == (0,)

    reqs = await chat.send(callback_update(20, up, message))  # the asker
    assert [r.method for r in reqs] == ["answerCallbackQuery", "editMessageReplyMarkup"]
    with sqlite3.connect(db_path) as db:
        assert db.execute("SELECT user_id, rating FROM ratings").fetchall() == [(20, 1)]


async def test_article_reply_echoes_a_capped_code_and_stays_within_4096(chat: Chat, lookup: SharedLookup) -> None:
    code = "<" * 4000  # escaped, each "<" is four characters: the reply was 16,085 characters
    reqs = await chat.send(message_update(22, f"/article {code} 188"))
    sent = [r for r in reqs if r.method == "sendMessage"]
    assert [r.params["text"] for r in sent] == [t("article_not_found", "ru", code="<" * 39 + "…", number="188")]
    assert all(len(r.params["text"]) <= 4096 for r in sent)

    number = "1" * 4000
    [text] = await chat.texts(message_update(22, f"/article УК {number}", language_code="kk"))
    assert text == t("article_not_found", "kk", code="УК", number="1" * 39 + "…")


@pytest.mark.parametrize("message", [inaccessible_message(23, 5), None], ids=["date-0", "no-message"])
async def test_lang_button_on_an_inaccessible_message(
    chat: Chat, caplog: pytest.LogCaptureFixture, message: dict | None
) -> None:
    with caplog.at_level(logging.WARNING):
        reqs = await chat.send(callback_update(23, "lang:kk", message))
    # The choice is confirmed in the button's popup: there is no message to edit.
    assert [(r.method, r.params.get("text")) for r in reqs] == [("answerCallbackQuery", t("lang_set", "kk"))]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # no TypeError, no failed edit
    assert await chat.texts(message_update(23, "/start")) == [t("start", "kk")]  # the choice took effect


async def test_unpaired_surrogates_are_cleaned_and_the_question_is_stored(
    chat: Chat, qa: ScriptedQA, bot_settings: Settings
) -> None:
    raw, clean = "кража \udcff\udcfe телефона", "кража \ufffd\ufffd телефона"
    qa.script["сломайся \ufffd"] = RuntimeError("boom")
    [answer] = await chat.texts(message_update(24, raw))
    assert answer.startswith(f"Ответ на вопрос «{clean}»")
    assert await chat.texts(message_update(24, "сломайся \udcff")) == [t("error", "ru")]
    assert qa.calls == [clean, "сломайся \ufffd"]
    with sqlite3.connect(bot_settings.data_dir / "bot" / "feedback.sqlite") as db:
        rows = db.execute("SELECT user_id, question, error FROM questions ORDER BY id").fetchall()
    assert rows == [(24, clean, None), (24, "сломайся \ufffd", "RuntimeError: boom")]


async def test_a_flood_is_refused_once_per_window(chat: Chat, api: BotAPIServer, qa: ScriptedQA) -> None:
    # Every refusal would spend the bot's shared send budget and delay everyone else's answers.
    for i in range(3):  # the limit is 3 a minute
        await chat.send(message_update(77, f"Вопрос {i}"))
    since = len(api.requests)
    for i in range(20):
        await chat.send(message_update(77, f"Флуд {i}"))
    sent = api.calls(since=since)
    assert [r.method for r in sent] == ["sendMessage"]
    assert sent[0].params["text"].startswith("Слишком много вопросов")
    assert not any(q.startswith("Флуд") for q in qa.calls)
