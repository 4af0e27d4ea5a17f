"""Deterministic stand-ins for `invoke_qa` and `lookup_article` that return real records, for the bot's tests.

`SharedLookup` cuts articles out of the real texts in ../shared (heading to next heading), so /article shows
real, sometimes very long, law text; `ScriptedQA` answers from a script and counts how many calls overlap.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pytest

from answer.records import Exchange, QAResult, Source
from bot.logsetup import NOISY_LOGGERS
from config import Settings
from corpus.legal import article_ref, source_url
from corpus.legal.registry import source
from corpus.records import Article, Lang
from tests.support.telegram_server import BotAPIServer


def shared_article(shared_dir: Path, doc_id: str, number: str, lang: Lang = "ru") -> Article | None:
    """Article `number` of a document in ../shared/corpus, text from its heading line to the next one."""
    folder = "kaz" if lang == "kk" else "rus"
    path = shared_dir / "corpus" / folder / f"{doc_id}.txt"
    if not path.exists():
        return None
    text = path.read_text(encoding="utf-8")
    if lang == "kk":
        heading = re.compile(rf"(?m)^\s*{re.escape(number)}-бап\.\s*(.*)$")
        any_heading = re.compile(r"(?m)^\s*\d+(?:-\d+)?-бап\.")
    else:
        heading = re.compile(rf"(?m)^\s*Статья {re.escape(number)}\.\s*(.*)$")
        any_heading = re.compile(r"(?m)^\s*Статья \d+(?:-\d+)?\.")
    # The table of contents lists headings too: the article is the last occurrence.
    matches = list(heading.finditer(text))
    if not matches:
        return None
    m = matches[-1]
    nxt = any_heading.search(text, m.end())
    body = text[m.end() : nxt.start() if nxt else len(text)]
    paragraphs = [" ".join(line.split()) for line in body.splitlines()]
    return Article(
        doc_id=doc_id,
        lang=lang,
        number=number,
        title=m.group(1).strip(),
        text="\n".join(p for p in paragraphs if p),
        url=source_url(doc_id, lang),
    )


class SharedLookup:
    """`lookup_article(code, number, settings, lang)` over ../shared; records its calls."""

    def __init__(self, shared_dir: Path) -> None:
        self.shared_dir = shared_dir
        self.calls: list[tuple[str, str, str]] = []

    def __call__(self, code: str, number: str, settings: Settings, lang: Lang = "ru") -> Article | None:
        self.calls.append((code, number, lang))
        ref = article_ref(code, number)  # the same reading of a code's name as the chain's
        return shared_article(self.shared_dir, ref.doc_id, ref.article, lang) if ref else None


def make_source(
    n: int,
    doc_id: str,
    article: str,
    title: str,
    snippet: str = "",
    lang: Lang = "ru",
    status: str = "in_force",
) -> Source:
    entry = source(doc_id)
    return Source(
        source_id=f"S{n}",
        doc_id=doc_id,
        article=article,
        code=entry.short(lang),
        title=title,
        url=f"{entry.url(lang)}#z{article.replace('-', '_')}",
        snippet=snippet or title,
        score=1.0 / n,
        lang=lang,
        status=status,
    )


THEFT_SOURCES = (
    make_source(1, "K1400000226", "188", "Кража", "Кража, то есть тайное хищение чужого имущества"),
    make_source(2, "K1400000235", "136", "Мелкое хищение"),
)


class ScriptedQA:
    """`invoke_qa(question, settings, history, on_token)`: answers from `script` (question -> answer text, or an
    exception).

    Unscripted questions get a short answer citing THEFT_SOURCES. `delay` seconds of blocking sleep stand for
    the chain's work; `max_in_flight` says how many calls ran at the same time; `histories` what history each
    call got. With `stream_delay`, the answer goes to `on_token` word by word, that many seconds apart.
    """

    def __init__(
        self,
        script: dict[str, str | BaseException] | None = None,
        *,
        delay: float = 0.0,
        sources: tuple[Source, ...] = THEFT_SOURCES,
        grounded: bool = True,
        lang: Lang = "ru",
        stream_delay: float = 0.0,
    ) -> None:
        self.script = script or {}
        self.delay = delay
        self.sources = sources
        self.grounded = grounded
        self.lang = lang
        self.stream_delay = stream_delay
        self.calls: list[str] = []
        self.histories: list[tuple[Exchange, ...]] = []  # the history each call was given
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()

    def __call__(
        self,
        question: str,
        settings: Settings,
        history: Sequence[Exchange] = (),
        on_token: Callable[[str], None] | None = None,
    ) -> QAResult:
        with self._lock:
            self.calls.append(question)
            self.histories.append(tuple(history))
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            if self.delay:
                time.sleep(self.delay)
            scripted = self.script.get(question)
            if isinstance(scripted, BaseException):
                raise scripted
            answer = scripted or f"Ответ на вопрос «{question}»: см. статью 188 УК РК [S1]."
            if on_token is not None and self.stream_delay:  # as a model generating it, word by word
                for word in answer.split(" "):
                    on_token(word + " ")
                    time.sleep(self.stream_delay)
            return QAResult(
                question=question,
                answer=answer,
                sources=self.sources,
                template="criminal",
                backend="extractive",
                lang=self.lang,
                grounded=self.grounded,
                timings={"total": self.delay},
            )
        finally:
            with self._lock:
                self._in_flight -= 1


def long_answer(
    paragraphs: int = 12,
    sentence: str = "Кража наказывается штрафом или лишением свободы. ",
    per_paragraph: int = 10,
) -> str:
    """An answer of `paragraphs` paragraphs (~500 characters each with the defaults)."""
    return "\n\n".join((f"{i + 1}. " + sentence * per_paragraph).strip() for i in range(paragraphs))


@pytest.fixture
async def api() -> AsyncIterator[BotAPIServer]:
    """The local Bot API server (tests/support/telegram_server.py) for one test."""
    async with BotAPIServer() as server:
        yield server


@pytest.fixture
def restore_loggers() -> None:
    """Puts back the levels of the loggers the bot quiets, after a test that set them up."""
    levels = {name: logging.getLogger(name).level for name in NOISY_LOGGERS}
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
