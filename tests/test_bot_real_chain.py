"""The bot over the real chain: a real corpus slice, real retrieval and the extractive answer, polled end to end."""

from __future__ import annotations

import re
import sqlite3

from bot.app import build_application
from corpus.store import load_articles
from rag_chain import QAChain
from tests.support.telegram_server import message_update, polling, settings_for
from tests.test_bot_e2e import step


async def test_question_and_article_through_the_real_chain(api, corpus_slice, hybrid_retrieval) -> None:
    settings = corpus_slice.settings
    chain = QAChain(settings, hybrid_retrieval, load_articles(settings.corpus_dir))
    app = build_application(
        settings_for(settings, api),
        qa=lambda question, settings, **kw: chain.invoke(question, **kw),
        lookup=lambda code, number, settings, lang="ru": chain.article(code, number, lang),
    )
    async with polling(app):
        sent = [
            r
            for r in await step(api, message_update(7, "Что будет за кражу телефона?"), "sendMessage")
            if r.method == "sendMessage"
        ]
        text = sent[-1].params["text"]
        assert "Статья 188. Кража" in text and "https://adilet.zan.kz/rus/docs/K1400000226" in text
        buttons = [b for row in sent[-1].params["reply_markup"]["inline_keyboard"] for b in row]
        assert any(b.get("url", "").startswith("https://adilet.zan.kz/rus/docs/K1400000226") for b in buttons)
        assert any(b.get("callback_data", "").endswith(":up") for b in buttons)

        sent = await step(api, message_update(7, "/article УК 188"), "sendMessage")
        article = "\n".join(r.params["text"] for r in sent if r.method == "sendMessage")
        assert "Кража, то есть тайное хищение чужого имущества" in article


async def test_a_question_with_unpaired_surrogates_is_answered_and_stored(api, corpus_slice, hybrid_retrieval) -> None:
    # "кража \xff\xfe телефона" read as UTF-8 with surrogateescape, or sent as "\udcff" escapes in the JSON:
    # the embedder raised UnicodeEncodeError on it, and storing the failure raised again, losing the question.
    settings = corpus_slice.settings
    chain = QAChain(settings, hybrid_retrieval, load_articles(settings.corpus_dir))
    bot_settings = settings_for(settings.model_copy(update={"data_dir": settings.data_dir / "surrogates"}), api)
    app = build_application(
        bot_settings,
        qa=lambda question, settings, **kw: chain.invoke(question, **kw),
        lookup=lambda code, number, settings, lang="ru": chain.article(code, number, lang),
    )
    async with polling(app):
        sent = await step(api, message_update(8, "Что будет за кражу \udcff\udcfe телефона?"), "sendMessage")
    text = [r for r in sent if r.method == "sendMessage"][-1].params["text"]
    assert "Статья 188. Кража" in text
    with sqlite3.connect(bot_settings.data_dir / "bot" / "feedback.sqlite") as db:
        rows = db.execute("SELECT user_id, question, error FROM questions").fetchall()
    assert rows == [(8, "Что будет за кражу \ufffd\ufffd телефона?", None)]


async def test_kazakh_answer_and_article_through_the_real_chain(api, corpus_slice, bm25_retrieval) -> None:
    """A Kazakh user: the Labour Code, here only in Russian, is cited as «ҚР ЕК, 22-бап» with the one-line Kazakh
    note linking its Kazakh page, under the answer and under /article ЕК 22."""
    settings = corpus_slice.settings
    chain = QAChain(settings, bm25_retrieval, load_articles(settings.corpus_dir))
    bot_settings = settings_for(settings.model_copy(update={"data_dir": settings.data_dir / "kazakh"}), api)
    app = build_application(
        bot_settings,
        qa=lambda question, settings, **kw: chain.invoke(question, **kw),
        lookup=lambda code, number, settings, lang="ru": chain.article(code, number, lang),
    )
    note = "Бұл баптың қазақ тіліндегі мәтіні осы корпуста жоқ, орыс тіліндегі мәтіні"
    kazakh_page = "https://adilet.zan.kz/kaz/docs/K1500000414"
    async with polling(app):
        question = message_update(9, "ЕК 22-бап бойынша қызметкердің қандай құқықтары бар?", language_code="kk")
        sent = [r for r in await step(api, question, "sendMessage") if r.method == "sendMessage"]
        text = sent[-1].params["text"]
        # The quotes: the article under its Kazakh heading, the note under it (once, not again under the sources).
        assert re.search(
            r"\[S\d\] ҚР ЕК, 22-бап\. Основные права и обязанности работника\n"
            r"https://adilet\.zan\.kz/rus/docs/K1500000414[^\n]*\n"
            rf"{note} келтірілді; қазақша мәтіні: {kazakh_page}\n1\. Работник имеет право на:",
            text,
        )
        assert text.count(note) == 1
        sources = text[text.index("<b>Дереккөздер:</b>") :]
        assert re.search(
            r'<b>\[S\d\]</b> <a href="https://adilet\.zan\.kz/rus/docs/K1500000414[^"]*">ҚР ЕК, 22-бап\. Основные '
            r"права и обязанности работника</a>",
            sources,
        )
        assert "ТК РК" not in text and "Статья 22" not in text

        sent = await step(api, message_update(9, "/article ЕК 22", language_code="kk"), "sendMessage")
        article = "\n".join(r.params["text"] for r in sent if r.method == "sendMessage")
        assert article.startswith(
            "<b>ҚР ЕК. 22-бап. Основные права и обязанности работника</b>\n\n"
            f'<i>{note} көрсетілді; қазақша мәтіні: <a href="{kazakh_page}">adilet.zan.kz</a></i>\n\n'
            "1. Работник имеет право на:"
        )
