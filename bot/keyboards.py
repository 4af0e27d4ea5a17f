"""Inline keyboards: a URL button to adilet for each cited article, 👍/👎 rating buttons, language choice.

callback_data (at most 64 bytes) carries only ids: "rate:<question id>:up|down" and "lang:ru|kk"; the
question and answer themselves stay in SQLite under that id.
"""

from __future__ import annotations

import re

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from answer.records import QAResult
from bot.format import unique_sources
from bot.texts import t
from corpus.lang import LANGS
from corpus.legal.registry import SOURCES_BY_ID
from corpus.records import Lang

MAX_ARTICLE_BUTTONS = 8
UP, DOWN = "👍", "👎"
CHOSEN = "✅ "
RATE_PATTERN = re.compile(r"^rate:(\d{1,18}):(up|down)$")
LANG_PATTERN = re.compile(r"^lang:(ru|kk)$")


def rate_data(question_id: int, up: bool) -> str:
    return f"rate:{question_id}:{'up' if up else 'down'}"


def answer_keyboard(result: QAResult, question_id: int | None, lang: Lang) -> InlineKeyboardMarkup | None:
    """URL buttons opening each cited article on adilet (two a row), then 👍 and 👎 (not when the answer could not
    be stored: `question_id` None)."""
    buttons = []
    for s in unique_sources(result.sources)[:MAX_ARTICLE_BUTTONS]:
        entry = SOURCES_BY_ID.get(s.doc_id)
        url = s.url or (entry.url(s.lang) if entry else "")
        if url.startswith(("https://", "http://")):
            buttons.append(InlineKeyboardButton(t("article_button", lang, code=s.code, number=s.article), url=url))
    rows = [buttons[i : i + 2] for i in range(0, len(buttons), 2)]
    if question_id is None:
        return InlineKeyboardMarkup(rows) if rows else None
    rows.append(
        [
            InlineKeyboardButton(UP, callback_data=rate_data(question_id, True)),
            InlineKeyboardButton(DOWN, callback_data=rate_data(question_id, False)),
        ]
    )
    return InlineKeyboardMarkup(rows)


def mark_rating(markup: InlineKeyboardMarkup, question_id: int, up: bool) -> InlineKeyboardMarkup:
    """The same keyboard with the chosen rating ticked; the other stays pressable to change one's mind."""
    chosen = rate_data(question_id, up)
    rows = []
    for row in markup.inline_keyboard:
        new_row = []
        for b in row:
            if b.callback_data in (rate_data(question_id, True), rate_data(question_id, False)):
                label = UP if b.callback_data.endswith(":up") else DOWN
                b = InlineKeyboardButton(
                    CHOSEN + label if b.callback_data == chosen else label, callback_data=b.callback_data
                )
            new_row.append(b)
        rows.append(new_row)
    return InlineKeyboardMarkup(rows)


def lang_keyboard() -> InlineKeyboardMarkup:
    names = {"ru": "Русский", "kk": "Қазақша"}
    return InlineKeyboardMarkup([[InlineKeyboardButton(names[lang], callback_data=f"lang:{lang}") for lang in LANGS]])
