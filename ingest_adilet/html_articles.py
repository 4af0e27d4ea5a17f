"""Assemble the lines `html_reader` read from an adilet page into articles.

Headings set the path (part, section, chapter) and open articles; the paragraphs after an article heading fill
it. Each line yields a paragraph of law text, an amendment footnote or a red editor's note; red notes right
before a heading that speak of the next article are carried to it, and `articles.build_article` turns each
article's paragraphs into an `Article`, with its editor's notes and its anchor in the URL.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field, replace
from typing import Literal

from corpus.records import Article, Lang
from ingest_adilet.articles import EDITOR_NOTE, build_article, is_footnote
from ingest_adilet.headings import (
    ArticleHeading,
    HeadingPath,
    StructuralHeading,
    clean,
    match_article_heading,
    match_structural_heading,
)
from ingest_adilet.html_reader import Kind, Line

logger = logging.getLogger(__name__)

_POINT = re.compile(r"^\d+(?:-\d+)*[.)]\s")  # «1. …», «11-2) …»: an item of the law, never a footnote's tail
_UPPERCASE_TITLE = re.compile(r"^[^a-zа-яёәіңғүұқөһ]*[A-ZА-ЯЁӘІҢҒҮҰҚӨҺ]{3}[^a-zа-яёәіңғүұқөһ]*$")


def assemble_articles(lines: list[Line], doc_id: str, lang: Lang, url: str, edition_date: str | None) -> list[Article]:
    """The articles the lines hold, in reading order; `url` gets each article's anchor."""
    return _Assembler(doc_id, lang, url, edition_date).run(lines)


ParaKind = Literal["law", "footnote", "editor"]


@dataclass
class _Para:
    kind: ParaKind
    text: str
    anchors: list[str]


@dataclass
class _OpenArticle:
    heading: ArticleHeading
    path: tuple[str, ...]
    anchor: str | None
    paras: list[_Para] = field(default_factory=list)


class _Assembler:
    """Turns lines into articles: headings set the path and open articles, paragraphs fill them."""

    def __init__(self, doc_id: str, lang: Lang, url: str, edition_date: str | None) -> None:
        self.doc_id, self.lang, self.url, self.edition_date = doc_id, lang, url.split("#")[0], edition_date
        self.path = HeadingPath()
        self.articles: list[Article] = []
        self.current: _OpenArticle | None = None
        self.between: list[_Para] = []  # paragraphs after a structural heading, before the next article

    def run(self, lines: list[Line]) -> list[Article]:
        for line in lines:
            if line.heading is not None:
                self._heading(line)
            else:
                for para in _paragraphs_of(line):
                    self._add(para)
        self._close()
        return self.articles

    @property
    def _paras(self) -> list[_Para]:
        return self.current.paras if self.current is not None else self.between

    def _add(self, para: _Para) -> None:
        paras = self._paras
        last = paras[-1] if paras else None
        if para.kind == "editor" and last is not None and last.kind == "editor" and not _note_start(para):
            last.text = clean(f"{last.text} {para.text}")  # the body of a red note under its header
            last.anchors += para.anchors
        elif para.kind == "footnote" and not is_footnote(para.text):
            if last is not None and last.kind == "footnote" and not _POINT.match(para.text):
                last.text = clean(f"{last.text} {para.text}")  # «Сноска. По всему тексту:» and its items
                last.anchors += para.anchors
            else:  # a `note` span that is law, e.g. «11-2) Исключен Законом РК от …»
                paras.append(_Para("law", para.text, para.anchors))
        else:
            paras.append(para)

    def _heading(self, line: Line) -> None:
        opened = False
        last_level = None
        for i, text in enumerate(line.heading or ()):
            article = match_article_heading(text)
            if article is not None:  # a second one in the same element gets no anchor of its own
                self._open(article, [] if opened else line.anchors)
                opened = True
                continue
            structural = match_structural_heading(text)
            if structural is None and i == 0 and _UPPERCASE_TITLE.match(text):
                structural = StructuralHeading("part", text)  # «ЗАКЛЮЧИТЕЛЬНЫЕ ПОЛОЖЕНИЯ»
            if structural is not None and not opened:
                self._close()
                self.path.enter(structural)
                last_level = structural.level
            elif opened and self.current is not None:
                title = clean(f"{self.current.heading.title} {text}")  # a title broken over two lines
                self.current.heading = ArticleHeading(self.current.heading.number, title)
            elif last_level is not None:
                self.path.extend(last_level, text)  # «РАЗДЕЛ 5.» <br> «ОСВОБОЖДЕНИЕ ОТ …»
            else:
                self._add(_Para("law", text, []))  # a bold line that heads nothing: body text

    def _open(self, heading: ArticleHeading, anchors: list[str]) -> None:
        carried: list[_Para] = []
        previous = self.current
        anchor = anchors[0] if anchors else self._anchor_before(previous)
        if previous is not None:
            # Red notes right before a heading that speak of the next article belong to it.
            while previous.paras and _about(previous.paras[-1], heading.number, previous.heading.number):
                carried.insert(0, previous.paras.pop())
        elif self.articles:
            carried = [p for p in self.between if p.kind != "law"]
        self._close()
        self.between = []
        self.current = _OpenArticle(heading, self.path.current(), anchor, carried)

    def _anchor_before(self, previous: _OpenArticle | None) -> str | None:
        """The anchor a note just before the heading took from it (adilet links «статья 45» there)."""
        paras = previous.paras if previous is not None else self.between
        for para in reversed(paras):
            if para.kind == "law":
                break
            if para.anchors:
                return para.anchors[-1]
        return None

    def _close(self) -> None:
        article = self.current
        if article is None:
            return
        self.current = None
        law_and_footnotes: list[str] = []
        notes: list[str] = []
        anchor = article.anchor
        for para in article.paras:
            if para.kind == "editor":
                notes.append(para.text)
            else:
                law_and_footnotes += [para.text, ""]  # a blank line parts paragraphs for build_article
                anchor = anchor or next(iter(para.anchors), None)
        built = build_article(
            self.doc_id,
            self.lang,
            article.heading.number,
            article.heading.title,
            law_and_footnotes,
            article.path,
            f"{self.url}#{anchor}" if anchor and self.url else self.url,
            self.edition_date,
        )
        if notes:
            built = replace(built, editor_notes=built.editor_notes + tuple(notes))
        self.articles.append(built)


def _note_start(para: _Para) -> bool:
    return EDITOR_NOTE.match(para.text) is not None


def _about(para: _Para, next_number: str, number: str) -> bool:
    """Whether a red note speaks of article `next_number` (and not of `number`)."""
    if para.kind != "editor":
        return False
    return _mentions(para.text, next_number) and not _mentions(para.text, number)


def _mentions(text: str, number: str) -> bool:
    num = re.escape(number)
    return re.search(rf"(?:[Сс]тать[а-я]*|ст\.)\s+{num}(?![\d-])|(?<![\d-]){num}-бап", text) is not None


def _paragraphs_of(line: Line) -> list[_Para]:
    """A line's law text, footnote and editor's note, each a paragraph of its own when present."""
    anchors = line.anchors
    if line.has("editor") and not line.has("text") and not line.has("note"):
        return [_Para("editor", line.text("editor", "link"), anchors)]
    if line.has("note") and not line.has("text") and not line.has("editor"):
        return [_Para("footnote", line.text("note", "link"), anchors)]
    out = []
    by_kind: tuple[tuple[ParaKind, tuple[Kind, ...]], ...] = (
        ("law", ("text", "link")),
        ("footnote", ("note",)),
        ("editor", ("editor",)),
    )
    for kind, kinds in by_kind:
        if text := line.text(*kinds):
            out.append(_Para(kind, text, anchors if kind == "law" else []))
    return out
