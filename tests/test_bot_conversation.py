"""Conversations in the bot, polled end to end through the local Bot API server: follow-ups read with the chat's
earlier exchanges by the real chain over a corpus slice (the «Понял вопрос так» line), /new, a reply continuing
from an older answer, silence, a restart and retention; answers streamed from the local Groq server as drafts
(private chats) or edits of one message (groups), then the final message with sources and buttons."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from telegram import Update

from answer.templates import load_phrases
from bot.app import build_application
from bot.feedback import open_store
from bot.texts import t
from config import Settings
from corpus import database
from corpus.store import load_articles
from rag_chain import QAChain
from tests.support.bot import ScriptedQA, SharedLookup
from tests.support.llm_servers import GroqServer, with_backends
from tests.support.telegram_server import BotAPIServer, BotRequest, message_update, polling, settings_for

FRAUD = "Что будет за мошенничество?"
LARGE = "А если сумма крупная?"
UNDERSTOOD = "<i>Понял вопрос так: "
CONDENSED = "Какое наказание за мошенничество в крупном размере?"
WAIT = 120.0  # seconds: a guard against hanging on a loaded machine, not a timing assertion


@pytest.fixture(scope="module")
def articles(corpus_slice):
    return load_articles(corpus_slice.settings.corpus_dir)


def chain_qa(chain: QAChain):
    """The bot's `qa`: the real chain, given the history and the streaming callback the bot passes."""
    return lambda question, settings, **kw: chain.invoke(question, **kw)


def bot_settings(corpus_slice, api: BotAPIServer, data_dir: Path, **overrides: Any) -> Settings:
    return settings_for(corpus_slice.settings.model_copy(update={"data_dir": data_dir}), api, **overrides)


def is_final(r: BotRequest) -> bool:
    """The last message of an answer: the one under which the 👍/👎 buttons are."""
    return r.method in ("sendMessage", "editMessageText") and "rate:" in json.dumps(r.params.get("reply_markup"))


async def answer(api: BotAPIServer, update: dict[str, Any]) -> tuple[str, list[BotRequest]]:
    """Push a question; return the answer's text (its parts joined) and every request the bot made for it."""
    since = len(api.requests)
    api.push(update)
    await api.wait_for(lambda s: any(is_final(r) for r in s.calls(since=since)), timeout=WAIT)
    requests = api.calls(since=since)
    finals = [r for r in requests if r.method == "sendMessage" or is_final(r)]
    return "\n".join(r.params["text"] for r in finals), requests


def answer_message(api: BotAPIServer, chat_id: int, nth: int) -> dict[str, Any]:
    """The bot's message carrying the buttons of the chat's `nth` answer, as Telegram would quote it in a reply."""
    with_buttons = [
        m
        for _, m in sorted(api.sent.items())
        if m["chat"]["id"] == chat_id and "rate:" in json.dumps(m.get("reply_markup"))
    ]
    return with_buttons[nth]


def db(settings: Settings, sql: str, *args: object) -> list[tuple]:
    """Run `sql` ("?" marks its arguments) on the bot's store: the SQLite file, or PostgreSQL at DATABASE_URL."""
    names = iter(range(len(args)))
    statement = re.sub(r"\?", lambda _: f":a{next(names)}", sql)
    with database.engine(settings, settings.data_dir / "bot" / "feedback.sqlite").begin() as conn:
        result = conn.execute(text(statement), {f"a{i}": a for i, a in enumerate(args)})
        return [tuple(row) for row in result] if result.returns_rows else []


async def test_follow_up_new_reply_silence_and_restart(api, corpus_slice, bm25_retrieval, articles, tmp_path):
    chain = QAChain(corpus_slice.settings, bm25_retrieval, articles)
    settings = bot_settings(corpus_slice, api, tmp_path / "data", telegram_rate_limit_per_minute=0)
    user = 31
    async with polling(build_application(settings, qa=chain_qa(chain), lookup=SharedLookup(Path()))):
        first, _ = await answer(api, message_update(user, FRAUD))
        assert "Статья 190. Мошенничество" in first and UNDERSTOOD not in first

        # The follow-up is searched with the previous question, and the bot says so under the answer.
        follow, _ = await answer(api, message_update(user, LARGE))
        assert f"{UNDERSTOOD}{FRAUD} {LARGE}</i>" in follow
        assert follow.index("</i>") < follow.index("Источники")  # under the answer, above the sources
        assert "Статья 190. Мошенничество" in follow

        since = len(api.requests)
        api.push(message_update(user, "/new"))
        await api.wait_for(lambda s: len(s.calls("sendMessage", since=since)) == 1)
        assert api.calls("sendMessage", since=since)[0].params["text"] == t("new_conversation", "ru")

        alone, _ = await answer(api, message_update(user, LARGE))
        assert UNDERSTOOD not in alone

        # A reply to the first answer continues from that exchange, not from the last one (nor /new's reset).
        replied, _ = await answer(api, message_update(user, LARGE, reply_to_message=answer_message(api, user, 0)))
        assert f"{UNDERSTOOD}{FRAUD} {LARGE}</i>" in replied

    # A restart keeps the conversation: it lives in the bot's store.
    assert db(settings, "SELECT COUNT(*) FROM exchanges") == [(4,)]
    async with polling(build_application(settings, qa=chain_qa(chain), lookup=SharedLookup(Path()))):
        again, _ = await answer(api, message_update(user, "А если это сделала группа лиц?"))
        assert f"{UNDERSTOOD}{FRAUD} {LARGE} А если это сделала группа лиц?</i>" in again

        # 31 minutes of silence: the next message begins a new conversation.
        db(settings, "UPDATE exchanges SET created_at = created_at - 31 * 60")
        silent, _ = await answer(api, message_update(user, LARGE))
        assert UNDERSTOOD not in silent

    # Each exchange knows the one it continued and the bot's messages that carried it.
    rows = db(settings, "SELECT question_id, parent_id FROM exchanges ORDER BY question_id")
    assert [parent for _, parent in rows] == [None, 1, None, 1, 4, None]
    assert db(settings, "SELECT COUNT(DISTINCT question_id) FROM answer_messages") == [(6,)]


async def test_history_is_capped_per_chat_and_deleted_by_retention(api, db_settings, shared_dir) -> None:
    qa = ScriptedQA()
    bot = settings_for(db_settings, api, telegram_rate_limit_per_minute=0)
    app = build_application(bot, qa=qa, lookup=SharedLookup(shared_dir))
    async with app:
        ids = iter(range(1, 100))

        async def send(update: dict[str, Any]) -> None:
            await app.process_update(Update.de_json({"update_id": next(ids), **update}, app.bot))

        for n in range(5):
            await send(message_update(41, f"Вопрос {n}"))
        await send(message_update(42, "Вопрос другого пользователя"))
        # The last HISTORY_TURNS (3) exchanges of this chat only, oldest first, with their answers and sources.
        assert [e.question for e in qa.histories[4]] == ["Вопрос 1", "Вопрос 2", "Вопрос 3"]
        assert qa.histories[4][-1].answer.startswith("Ответ на вопрос «Вопрос 3»")
        assert qa.histories[4][-1].sources == qa.sources
        assert qa.histories[5] == ()
        first = answer_message(api, 41, 0)

    old = [row[0] for row in db(bot, "SELECT id FROM questions WHERE question IN ('Вопрос 0', 'Вопрос 1')")]
    for question_id in old:
        db(bot, "UPDATE questions SET created_at = ? WHERE id = ?", time.time() - 181 * 86400, question_id)
    store = open_store(bot)
    purged = store.purge(bot.telegram_retention_days)
    store.close()
    assert (purged.questions, purged.exchanges) == (2, 2)
    assert db(bot, "SELECT COUNT(*) FROM answer_messages WHERE question_id IN (?, ?)", *old) == [(0,)]

    app = build_application(bot, qa=qa, lookup=SharedLookup(shared_dir))
    async with app:
        # A reply to a deleted answer has nothing to continue from: the chat's last conversation is used.
        await app.process_update(
            Update.de_json({"update_id": 500, **message_update(41, "Ещё", reply_to_message=first)}, app.bot)
        )
        assert [e.question for e in qa.histories[-1]] == ["Вопрос 2", "Вопрос 3", "Вопрос 4"]


# --- streaming -----------------------------------------------------------------------------------------------


async def test_where_drafts_are_refused_one_message_is_edited(
    api, settings, shared_dir, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(BotAPIServer, "_api_sendMessageDraft", None)  # an older Bot API server: 404
    qa = ScriptedQA(stream_delay=0.05)
    app = build_application(
        settings_for(settings, api, telegram_stream_interval=0.1), qa=qa, lookup=SharedLookup(shared_dir)
    )
    async with app:
        since = len(api.requests)
        await app.process_update(Update.de_json({"update_id": 1, **message_update(61, "Вопрос о краже")}, app.bot))
        requests = [r for r in api.calls(since=since) if r.method != "sendChatAction"]
    methods = [r.method for r in requests]
    assert methods.count("sendMessageDraft") == 1  # tried once, then edits
    assert methods[1] == "sendMessage" and methods.count("sendMessage") == 1
    assert methods.count("editMessageText") >= 3 and is_final(requests[-1])
    edits = [r.params["text"] for r in requests if r.method == "editMessageText"]
    assert edits[-1].startswith("Ответ на вопрос «Вопрос о краже»: см. статью 188 УК РК [S1].\n\n<b>Источники:</b>")
    assert all(len(a) < len(b) for a, b in zip(edits, edits[1:-1], strict=False))  # more of the answer each time


def quoting(body: dict[str, Any]) -> str:
    """A model that answers by quoting its first source (grounded), or condenses a follow-up."""
    prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") == "user")
    if "[S1]" not in prompt:  # the condense prompt
        return CONDENSED
    snippet = prompt.split("[S1]", 1)[1].split("\n", 1)[1]
    words = " ".join(snippet.split()[:45])
    return f"Ответ по статье [S1]: {words} [S1]."


def streaming_chain(corpus_slice, bm25_retrieval, articles, groq: GroqServer) -> QAChain:
    groq.reply = quoting
    groq.stream_chunk_chars = 16
    groq.stream_chunk_delay = 0.06
    return QAChain(with_backends(corpus_slice.settings, groq=groq.url), bm25_retrieval, articles)


async def test_a_groq_answer_is_shown_in_drafts_then_sent(
    api, corpus_slice, bm25_retrieval, articles, groq_server, tmp_path
):
    chain = streaming_chain(corpus_slice, bm25_retrieval, articles, groq_server)
    interval = 0.3
    settings = bot_settings(corpus_slice, api, tmp_path / "data", telegram_stream_interval=interval)
    async with polling(build_application(settings, qa=chain_qa(chain), lookup=SharedLookup(Path()))):
        question = message_update(51, FRAUD)
        text, requests = await answer(api, question)

    assert groq_server.received[-1].body["stream"] is True
    drafts = [r for r in requests if r.method == "sendMessageDraft"]
    assert len(drafts) >= 2, [r.method for r in requests]
    final = [r for r in requests if r.method == "sendMessage"]
    assert len(final) == 1 and requests.index(final[0]) > requests.index(drafts[-1])  # the final message last
    assert text.startswith("Ответ по статье [S1]: ") and "Источники" in text
    assert "Статья 190. Мошенничество" in text  # the grounded model answer, with its source
    body = text.split("\n\n")[0]
    # Each draft shows more of the same answer, under one draft id: the question's message id.
    shown = [d.params["text"] for d in drafts]
    assert all(body.startswith(s) for s in shown) and shown == sorted(shown, key=len) and len(set(shown)) == len(shown)
    assert {d.params["draft_id"] for d in drafts} == {question["message"]["message_id"]}
    # At most one update per interval (the server's clock: a lower bound, which load cannot break).
    assert all(b.at - a.at >= interval * 0.9 for a, b in zip(drafts, drafts[1:], strict=False))


async def test_in_a_group_one_message_is_edited_into_the_answer(
    api, corpus_slice, bm25_retrieval, articles, groq_server, tmp_path
):
    chain = streaming_chain(corpus_slice, bm25_retrieval, articles, groq_server)
    settings = bot_settings(corpus_slice, api, tmp_path / "data", telegram_stream_interval=0.3)
    group = -500
    async with polling(build_application(settings, qa=chain_qa(chain), lookup=SharedLookup(Path()))):
        _, requests = await answer(api, message_update(52, FRAUD, group=group))
        methods = [r.method for r in requests if r.method != "sendChatAction"]
        assert "sendMessageDraft" not in methods  # drafts are for private chats
        assert methods[0] == "sendMessage" and methods.count("sendMessage") == 1
        assert methods.count("editMessageText") >= 2 and methods[-1] == "editMessageText"
        final = requests[-1]
        assert is_final(final) and "Источники" in final.params["text"]
        streamed = next(r for r in requests if r.method == "sendMessage")
        assert final.params["message_id"] == max(api.sent)  # the streamed message became the answer

        # A reply to that edited message continues from its exchange (through the condense prompt: an LLM is set).
        text, _ = await answer(api, message_update(52, LARGE, group=group, reply_to_message=api.sent[max(api.sent)]))
        assert f"{UNDERSTOOD}{CONDENSED}</i>" in text
        assert "Что будет за мошенничество?" in groq_server.received[-2].text_of("user")  # the history, condensed
        assert streamed.params["text"] != final.params["text"]


async def test_a_streamed_answer_that_fails_grounding_is_replaced_by_the_quotes(
    api, corpus_slice, bm25_retrieval, articles, groq_server, tmp_path
):
    groq_server.reply = "Мошенничество карается пожизненной ссылкой на Луну согласно статье 999 [S1]. " * 3
    groq_server.stream_chunk_chars, groq_server.stream_chunk_delay = 20, 0.06
    chain = QAChain(with_backends(corpus_slice.settings, groq=groq_server.url), bm25_retrieval, articles)
    settings = bot_settings(corpus_slice, api, tmp_path / "data", telegram_stream_interval=0.2)
    async with polling(build_application(settings, qa=chain_qa(chain), lookup=SharedLookup(Path()))):
        text, requests = await answer(api, message_update(53, FRAUD))
    assert any("Луну" in r.params["text"] for r in requests if r.method == "sendMessageDraft")
    assert "Луну" not in text and "Статья 190. Мошенничество" in text
    assert load_phrases(corpus_slice.settings, "ru").grounding_failed.strip() in text


async def test_a_link_the_model_streams_is_never_shown(
    api, corpus_slice, bm25_retrieval, articles, groq_server, tmp_path
):
    groq_server.reply = lambda body: f"{quoting(body)}\nОплатить штраф: https://evil.example/pay [S1]."
    groq_server.stream_chunk_chars, groq_server.stream_chunk_delay = 16, 0.06
    chain = QAChain(with_backends(corpus_slice.settings, groq=groq_server.url), bm25_retrieval, articles)
    settings = bot_settings(corpus_slice, api, tmp_path / "data", telegram_stream_interval=0.2)
    async with polling(build_application(settings, qa=chain_qa(chain), lookup=SharedLookup(Path()))):
        text, requests = await answer(api, message_update(54, FRAUD))
    drafts = [r.params["text"] for r in requests if r.method == "sendMessageDraft"]
    assert any("Оплатить штраф: […]" in d for d in drafts)  # streamed as a mark, before the check
    assert not any("evil" in str(r.params.get("text", "")) for r in requests)
    # the checked answer: the model's, grounded, without the sentence that carried the link
    assert text.startswith("Ответ по статье [S1]: ") and "Оплатить" not in text


def test_the_chain_streams_through_the_fallbacks(corpus_slice, bm25_retrieval, articles, groq_server, ollama_server):
    # Groq out of tokens: Ollama streams the answer (retry-after 0: the LLM budget lets the next request try again)
    groq_server.rate_limit(retry_after=0)
    ollama_server.reply = quoting
    chain = QAChain(
        with_backends(corpus_slice.settings, groq=groq_server.url, ollama=ollama_server.url),
        bm25_retrieval,
        articles,
    )
    pieces: list[str] = []
    result = chain.invoke(FRAUD, on_token=pieces.append)
    assert result.backend == "ollama" and result.grounded, result.grounding_notes
    assert len(pieces) > 5 and result.answer.startswith("".join(pieces).strip())
    assert len(groq_server.received) == 1 and groq_server.received[0].body["stream"] is True
    plain = chain.invoke(FRAUD)  # no callback: the same answer, not streamed to anyone
    assert plain.answer == result.answer and groq_server.received[1].body.get("stream") is not True
