"""bot.format and bot.keyboards: escaping, splitting at 4096 without breaking HTML, answers and articles."""

from __future__ import annotations

import dataclasses
import html
import re
from html.parser import HTMLParser

import pytest

from answer.context import in_answer_lang
from answer.links import links
from answer.records import QAResult
from bot.format import MAX_MESSAGE, article_heading, format_answer, format_article, split_html
from bot.keyboards import answer_keyboard, mark_rating
from bot.texts import t
from corpus.records import Article
from tests.support.bot import THEFT_SOURCES, long_answer, make_source, shared_article

TELEGRAM_TAGS = {
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "a",
    "code",
    "pre",
    "blockquote",
    "tg-spoiler",
    "span",
}
LABOUR = [
    (1, "88", "Продолжительность основного оплачиваемого ежегодного трудового отпуска"),
    (2, "113", "Порядок и сроки выплаты заработной платы"),
]
BAD_AMPERSAND = re.compile(r"&(?!(?:#\d+|#x[0-9a-fA-F]+|[A-Za-z]+);)")


class _TagChecker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        assert tag in TELEGRAM_TAGS, f"<{tag}> is not Telegram HTML"
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes nothing open (open: {self.stack})"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def check_part(part: str, limit: int = MAX_MESSAGE) -> str:
    """Assert a message is valid Telegram HTML within the limit; return its visible text."""
    assert 0 < len(part) <= limit
    assert not BAD_AMPERSAND.search(part), "a broken entity or a bare &"
    assert not re.search(r"<[^>]*$", part) and not re.search(r"^[^<]*>", part), "a cut tag"
    checker = _TagChecker()
    checker.feed(part)
    checker.close()
    assert checker.stack == [], f"unclosed tags {checker.stack}"
    return "".join(checker.text)


def visible(parts: list[str]) -> str:
    return " ".join(" ".join(check_part(p).split()) for p in parts)


def result(answer: str, **kw: object) -> QAResult:
    return QAResult(
        question="q",
        answer=answer,
        sources=kw.pop("sources", THEFT_SOURCES),
        template="universal",
        backend="extractive",
        lang="ru",
        grounded=kw.pop("grounded", True),
    )


def test_answer_escapes_markup_from_the_model_and_titles() -> None:
    src = make_source(1, "K1400000226", "188", 'Кража <script> & "другое"')
    [message] = format_answer(result("Штраф < 100 МРП & арест > 10 суток <b>не тег</b>", sources=(src,)), "ru")
    assert "Штраф &lt; 100 МРП &amp; арест &gt; 10 суток &lt;b&gt;не тег&lt;/b&gt;" in message
    assert "Кража &lt;script&gt; &amp; &quot;другое&quot;" in message
    assert f'<a href="{src.url}">' in message
    assert "<script>" not in message
    assert visible([message]).startswith("Штраф < 100 МРП & арест > 10 суток <b>не тег</b>")


def test_an_answer_that_used_the_conversation_says_how_it_understood_the_question() -> None:
    searched = "Что будет за <кражу> & мошенничество? А если сумма крупная?"
    followed = dataclasses.replace(result("Ответ [S1]."), search_question=searched, used_history=True)
    [ru] = format_answer(followed, "ru")
    [kk] = format_answer(dataclasses.replace(followed, lang="kk"), "kk")
    line = "Что будет за &lt;кражу&gt; &amp; мошенничество? А если сумма крупная?"
    assert f"Ответ [S1].\n\n<i>Понял вопрос так: {line}</i>\n\n<b>Источники:</b>" in ru
    assert f"<i>Сұрақты былай түсіндім: {line}</i>" in kk
    # Without the conversation's help (or a search of the question itself) there is no such line.
    alone = dataclasses.replace(followed, used_history=False)
    assert "Понял вопрос так" not in format_answer(alone, "ru")[0]
    # A long glued search is shortened: the line stays short.
    [long] = format_answer(dataclasses.replace(followed, search_question="слово " * 200), "ru")
    understood = re.search(r"<i>Понял вопрос так: (.*?)</i>", long).group(1)
    assert len(understood) == 300 and understood.endswith("…")


def test_answer_lists_each_article_once_with_link_and_status() -> None:
    repealed = make_source(3, "K1400000226", "189", "Присвоение", status="repealed")
    sources = (*THEFT_SOURCES, THEFT_SOURCES[0], repealed)
    [message] = format_answer(result("Ответ [S1].", sources=sources), "ru")
    lines = message.split("\n")
    i = lines.index("<b>Источники:</b>")
    assert lines[i + 1 :] == [
        f'<b>[S1]</b> <a href="{THEFT_SOURCES[0].url}">УК РК, Статья 188. Кража</a>',
        f'<b>[S2]</b> <a href="{THEFT_SOURCES[1].url}">КоАП РК, Статья 136. Мелкое хищение</a>',
        f'<b>[S3]</b> <a href="{repealed.url}">УК РК, Статья 189. Присвоение</a> — <i>утратила силу</i>',
    ]


def test_ungrounded_answer_carries_a_warning_in_the_users_language() -> None:
    [ru] = format_answer(result("Ответ.", grounded=False), "ru")
    [kk] = format_answer(result("Жауап.", grounded=False), "kk")
    assert t("not_grounded", "ru") in ru and "<b>Источники:</b>" in ru
    assert t("not_grounded", "kk") in kk and "<b>Дереккөздер:</b>" in kk


def test_long_answer_splits_on_paragraph_boundaries() -> None:
    answer = long_answer(paragraphs=12)  # ~6000 characters in 12 paragraphs
    assert len(answer) > MAX_MESSAGE
    parts = format_answer(result(answer), "ru")
    assert len(parts) == 2
    for part in parts:
        check_part(part)
    paragraphs = answer.split("\n\n")
    first = parts[0].split("\n\n")
    assert first == paragraphs[: len(first)]  # whole paragraphs only
    assert parts[1].startswith(paragraphs[len(first)])
    assert visible(parts).startswith(" ".join(answer.split()))


def test_split_fills_parts_and_keeps_every_paragraph() -> None:
    paragraphs = [f"Абзац {i}. " + "слово " * (20 + 17 * (i % 7)) for i in range(60)]
    text = "\n\n".join(p.strip() for p in paragraphs)
    parts = split_html(text, 1000)
    assert all(len(p) <= 1000 for p in parts)
    assert "\n\n".join(parts) == text  # no paragraph cut: only whole paragraphs were moved
    assert len(parts) <= 2 * len(text) // 1000 + 1


def test_overlong_paragraph_splits_at_sentences() -> None:
    sentences = [f"Предложение {i} о сроках исковой давности по договору займа." for i in range(200)]
    text = " ".join(sentences)  # one paragraph of ~12 000 characters
    parts = split_html(text, MAX_MESSAGE)
    assert len(parts) == 3
    for part in parts:
        check_part(part)
        assert part.endswith(".")  # cut after a sentence, not inside one
    assert " ".join(parts) == text


def test_never_breaks_entities_or_tags() -> None:
    unit = 'Статья &amp; <b>часть &lt;1&gt;</b> <a href="https://adilet.zan.kz/rus/docs/K1400000226">ссылка</a> '
    text = "<i>" + unit * 400 + "</i>"  # one paragraph of ~40 000 characters inside <i>
    for limit in (MAX_MESSAGE, 1000, 333):
        parts = split_html(text, limit)
        texts = [check_part(p, limit) for p in parts]
        assert all(p.startswith("<i>") and p.endswith("</i>") for p in parts)
        assert " ".join(" ".join(x.split()) for x in texts) == " ".join(
            html.unescape(re.sub("<[^>]+>", "", text)).split()
        )


def test_a_word_longer_than_a_message_is_cut_between_characters() -> None:
    text = "x" * 5000 + " &amp;" * 10
    parts = split_html(text)
    assert [len(p) for p in parts] == [4096, 964]
    assert parts[1].endswith("&amp;")


def test_short_text_is_one_part_and_blank_is_none() -> None:
    assert split_html("  <b>Да</b>  ") == ["<b>Да</b>"]
    assert split_html(" \n\n ") == []


def test_article_heading_in_both_languages() -> None:
    ru = Article(doc_id="K1400000226", lang="ru", number="188", title="Кража", text="...")
    kk = Article(doc_id="K1400000226", lang="kk", number="188", title="Ұрлық", text="...")
    assert article_heading(ru) == "УК РК. Статья 188. Кража"
    assert article_heading(kk) == "ҚР ҚК. 188-бап. Ұрлық"


def test_kazakh_answer_cites_a_russian_only_code_in_kazakh_with_one_note(settings) -> None:
    """Two Labour Code articles (Russian text) in a Kazakh answer: Kazakh names, and the note once, under the
    first of them; the Kazakh law beside them has its own text and no note."""
    labour = [in_answer_lang(make_source(i, "K1500000414", n, t), "kk", settings) for i, n, t in LABOUR]
    consumer = make_source(3, "Z100000274_", "7", "Тұтынушылардың құқықтары", lang="kk")
    result = QAResult("Демалыс?", "Жауап [S1].", (*labour, consumer), "universal", "extractive", "kk", True)
    [message] = format_answer(result, "kk")
    note = (
        "<i>Бұл баптың қазақ тіліндегі мәтіні осы корпуста жоқ, орыс тіліндегі мәтіні келтірілді; қазақша мәтіні: "
        "https://adilet.zan.kz/kaz/docs/K1500000414</i>"
    )
    assert message.endswith(
        "<b>Дереккөздер:</b>\n"
        '<b>[S1]</b> <a href="https://adilet.zan.kz/rus/docs/K1500000414#z88">ҚР ЕК, 88-бап. Продолжительность '
        f"основного оплачиваемого ежегодного трудового отпуска</a>\n{note}\n"
        '<b>[S2]</b> <a href="https://adilet.zan.kz/rus/docs/K1500000414#z113">ҚР ЕК, 113-бап. Порядок и сроки '
        "выплаты заработной платы</a>\n"
        '<b>[S3]</b> <a href="https://adilet.zan.kz/kaz/docs/Z100000274_#z7">Тұтынушылардың құқықтарын қорғау туралы '
        "Заң, 7-бап. Тұтынушылардың құқықтары</a>"
    )
    # The same sources in a Russian answer: as before, no note.
    russian = format_answer(
        dataclasses.replace(
            result, sources=tuple(make_source(i, "K1500000414", n, t) for i, n, t in LABOUR), lang="ru"
        ),
        "ru",
    )
    assert "ТК РК, Статья 88." in russian[0] and "<i>" not in russian[0]


def test_article_asked_in_kazakh_but_only_in_russian_says_so() -> None:
    article = Article(
        doc_id="K1500000414",
        lang="ru",
        number="113",
        title="Порядок и сроки выплаты заработной платы",
        text="1. …",
        status="repealed",
        edition_date="16.07.2025",
        url="https://adilet.zan.kz/rus/docs/K1500000414",
    )
    [message] = format_article(article, lang="kk")
    assert message == (
        "<b>ҚР ЕК. 113-бап. Порядок и сроки выплаты заработной платы</b>\n\n"
        "<i>Бұл баптың қазақ тіліндегі мәтіні осы корпуста жоқ, орыс тіліндегі мәтіні көрсетілді; қазақша мәтіні: "
        '<a href="https://adilet.zan.kz/kaz/docs/K1500000414">adilet.zan.kz</a></i>\n\n'
        "<i>Баптың күші жойылған.</i>\n\n1. …\n\n"
        '16.07.2025 редакциясы · <a href="https://adilet.zan.kz/rus/docs/K1500000414">adilet.zan.kz</a>'
    )
    assert format_article(article, lang="ru") == format_article(article)


def test_long_real_article_is_shown_whole_in_several_messages(shared_dir) -> None:
    article = shared_article(shared_dir, "K1400000226", "72")  # ~11 000 characters
    parts = format_article(article)
    assert len(parts) == 3
    assert parts[0].startswith("<b>УК РК. Статья 72. Условно-досрочное освобождение от отбывания наказания</b>")
    assert parts[-1].endswith('<a href="https://adilet.zan.kz/rus/docs/K1400000226">adilet.zan.kz</a>')
    shown = visible(parts)
    assert " ".join(article.text.split()) in shown


def test_repealed_article_says_so() -> None:
    article = Article(
        doc_id="K1400000226",
        lang="kk",
        number="190",
        title="",
        text="",
        status="repealed",
        edition_date="01.01.2025",
        url="https://adilet.zan.kz/kaz/docs/K1400000226",
    )
    [message] = format_article(article)
    assert message == (
        "<b>ҚР ҚК. 190-бап</b>\n\n<i>Баптың күші жойылған.</i>\n\n"
        '01.01.2025 редакциясы · <a href="https://adilet.zan.kz/kaz/docs/K1400000226">adilet.zan.kz</a>'
    )


def test_keyboard_opens_each_article_and_rates_within_64_bytes() -> None:
    sources = (
        *THEFT_SOURCES,
        THEFT_SOURCES[0],
        *(make_source(i, "K1500000414", str(i), "t") for i in range(3, 12)),
    )
    markup = answer_keyboard(result("a", sources=sources), 987654321012, "ru")
    rows = markup.inline_keyboard
    urls = [b.url for row in rows for b in row if b.url]
    assert urls[:2] == [THEFT_SOURCES[0].url, THEFT_SOURCES[1].url]
    assert len(urls) == 8  # at most eight article buttons, no repeats
    assert [b.text for b in rows[0]] == ["УК РК, ст. 188", "КоАП РК, ст. 136"]
    assert [(b.text, b.callback_data) for b in rows[-1]] == [
        ("👍", "rate:987654321012:up"),
        ("👎", "rate:987654321012:down"),
    ]
    assert all(len(b.callback_data.encode()) <= 64 for row in rows for b in row if b.callback_data)
    marked = mark_rating(markup, 987654321012, up=False)
    assert [b.text for b in marked.inline_keyboard[-1]] == ["👍", "✅ 👎"]
    assert marked.inline_keyboard[:-1] == rows[:-1]


@pytest.mark.parametrize("lang,label", [("ru", "УК РК, ст. 188"), ("kk", "ҚР ҚК, 188-бап")])
def test_article_button_label_follows_the_source_language(lang: str, label: str) -> None:
    src = make_source(1, "K1400000226", "188", "Кража", lang=lang)
    markup = answer_keyboard(result("a", sources=(src,)), 1, lang)
    assert markup.inline_keyboard[0][0].text == label


def test_an_answer_shows_no_link_but_its_sources() -> None:
    source = THEFT_SOURCES[0]
    answer = (
        f"Кража наказывается штрафом [S1]. Текст статьи: {source.url}.\n"
        "Оплатите штраф на https://adilet.zan.kz.evil.com/pay или adilet-zan.kz, "
        "[adilet.zan.kz](https://evil.example/login), аdilet.zan.kz/rus, @adilet_help_bot, help@evil.kz.\n"
        "Проверьте действующую редакцию на adilet.zan.kz."
    )
    [message] = format_answer(result(answer), "ru")
    shown = visible([message])
    removed = t("link_removed", "ru")
    assert shown.count(removed) == 6
    assert "evil" not in message and "adilet-zan" not in message and "@adilet_help_bot" not in message
    assert "аdilet" not in message  # the lookalike with a Cyrillic «а»
    # What a Telegram client would make clickable: the source's own link and the site the disclaimer names.
    assert set(links(shown)) == {source.url, "adilet.zan.kz"}
    [kk] = format_answer(dataclasses.replace(result("Толығырақ: evil.com/kz [S1]."), lang="kk"), "kk")
    assert "Толығырақ: [сілтеме алынып тасталды] [S1]." in kk


def test_the_nearest_articles_of_an_abstention_keep_their_adilet_links() -> None:
    url = "https://adilet.zan.kz/rus/docs/K1400000226"
    text = f"В УК РК нет статьи 9999.\n\nВозможно, вы имели в виду:\n— УК РК, Статья 188. Кража: {url}"
    [message] = format_answer(result(text, sources=()), "ru")
    assert url in message and t("link_removed", "ru") not in message


def test_a_follow_up_as_understood_shows_no_foreign_link() -> None:
    followed = dataclasses.replace(
        result("Ответ [S1]."), search_question="Штраф за кражу? См. https://evil.example", used_history=True
    )
    [message] = format_answer(followed, "ru")
    assert "evil" not in message and "Понял вопрос так: Штраф за кражу? См. [ссылка удалена]" in message
