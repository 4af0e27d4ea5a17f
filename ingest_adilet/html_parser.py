"""Parse an adilet law page (old server-rendered HTML, or the JSON API's `text_content`) into articles.

The law text is read in document order as lines (split at `<br>` and block elements), each part of a line
tagged by what the page says it is: law text, a link, an amendment footnote (`span.note`, `p.note`) or a red
editor's note (`<font color="#FF0000">`). Headings are `<h3>` elements and bold-only paragraphs; their text is
classified by `headings`, and `articles.build_article` turns each article's paragraphs into an `Article`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field, replace
from typing import Literal

from bs4 import BeautifulSoup, NavigableString, Tag
from bs4.element import Comment, Declaration, Doctype, ProcessingInstruction

from corpus.errors import IngestError
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

logger = logging.getLogger(__name__)

_SHELL = re.compile(r"<div\s[^>]*\bid\s*=\s*[\"']?root\b", re.IGNORECASE)
_CAPTCHA = re.compile(r"captcha", re.IGNORECASE)
_ANY_HEADING = re.compile(r"Статья\s+\d|\d+-бап\b")
# The footer's «Документы по состоянию на: 20.03.2026» (Kazakh pages: «… жағдай бойынша …»; unverified).
_EDITION = re.compile(r"(?:по\s+состоянию\s+на|жағдай)[^0-9]{0,40}(\d{2}\.\d{2}\.\d{4})", re.IGNORECASE)
_RED = re.compile(r"^#?ff0000$", re.IGNORECASE)
_POINT = re.compile(r"^\d+(?:-\d+)*[.)]\s")  # «1. …», «11-2) …»: an item of the law, never a footnote's tail
_SIGNATURE = re.compile(r"^(?:Президент\s+Республики\s+Казахстан|Қазақстан\s+Республикасының\s+Президенті)\b")
_UPPERCASE_TITLE = re.compile(r"^[^a-zа-яёәіңғүұқөһ]*[A-ZА-ЯЁӘІҢҒҮҰҚӨҺ]{3}[^a-zа-яёәіңғүұқөһ]*$")

_BLOCK = frozenset(
    {
        "p",
        "div",
        "table",
        "tr",
        "td",
        "th",
        "li",
        "ul",
        "ol",
        "h1",
        "h2",
        "h4",
        "h5",
        "h6",
        "blockquote",
        "section",
        "article",
        "center",
        "pre",
        "dl",
        "dt",
        "dd",
    }
)
_SKIP = frozenset({"script", "style", "noscript", "head", "title", "iframe", "svg", "button", "form"})

Kind = Literal["text", "link", "note", "editor"]


@dataclass(frozen=True)
class ParsedPage:
    """What one page yields: its articles in reading order and what the page says about the act."""

    articles: tuple[Article, ...]
    title: str = ""
    status: str = ""  # the badge, e.g. «Обновленный»; "" when the page has none (API text)
    edition_date: str | None = None  # DD.MM.YYYY from the footer «Документы по состоянию на: …»


def page_problem(html: str) -> str | None:
    """Why `html` is not law text (empty JS shell, captcha, no article heading), or None when it is."""
    if "<article" in html:
        return None
    if _SHELL.search(html):
        return 'an empty JavaScript shell (<div id="root">, no law text)'
    if _CAPTCHA.search(html):
        return "a captcha page"
    if not _ANY_HEADING.search(html):
        return "a page without any article heading"
    return None


def parse_html(html: str, doc_id: str, lang: Lang, url: str) -> ParsedPage:
    """Articles of one adilet page (or API `text_content`); an empty shell, captcha or no articles raises."""
    if problem := page_problem(html):
        raise IngestError(f"{doc_id}: adilet gave {problem}; nothing to index (check the page in a browser)")
    soup = BeautifulSoup(html, "lxml")
    edition_date = _edition_date(soup)
    reader = _Reader()
    reader.walk(_law_container(soup), "text")
    reader.flush()
    articles = _Assembler(doc_id, lang, url, edition_date).run(reader.lines)
    if not articles:
        raise IngestError(f"{doc_id}: no article headings found in the adilet page (a captcha or a stub?)")
    return ParsedPage(
        articles=tuple(articles),
        title=_text(soup.select_one("div.container_alpha.slogan h1")),
        status=_text(soup.select_one("div.container_alpha span.status")),
        edition_date=edition_date,
    )


def _text(tag: Tag | None) -> str:
    return clean(tag.get_text(" ")) if tag is not None else ""


def _edition_date(soup: BeautifulSoup) -> str | None:
    footer = soup.select_one("#footer")
    if footer is None:
        return None
    for item in footer.find_all("li"):
        if m := _EDITION.search(clean(item.get_text(" "))):
            return m.group(1)
    return None


def _law_container(soup: BeautifulSoup) -> Tag:
    """The element holding the law text: the page's `<article>`, or the whole fragment for API text."""
    return soup.select_one("div.container_gamma.text article") or soup.find("article") or soup.body or soup


def _is_chrome(tag: Tag) -> bool:
    """Site chrome after the law text: share buttons, latest and popular documents, footer."""
    classes = tag.get("class") or ()
    return ("container_omega" in classes) or tag.get("id") in ("footer", "footer_top")


def _is_red(tag: Tag) -> bool:
    if tag.name != "font":
        return False
    color = str(tag.get("color") or "").strip()
    return bool(_RED.match(color))


# --- reading the page into lines --------------------------------------------------------------------------


@dataclass
class _Line:
    """One visual line of the law text: its tagged parts, the anchors on it, and whether it is a heading."""

    parts: list[tuple[str, Kind]] = field(default_factory=list)
    anchors: list[str] = field(default_factory=list)
    heading: list[str] | None = None  # the heading's own lines (split at <br>) when this is a heading

    def text(self, *kinds: Kind) -> str:
        """The text of the parts of the given kinds; the other parts leave a space so words stay apart."""
        return clean("".join(t if k in kinds else " " for t, k in self.parts))

    def has(self, kind: Kind) -> bool:
        return any(k == kind and t.strip() for t, k in self.parts)


class _Reader:
    """Walks the law container in document order and cuts it into `_Line`s; stops at the site chrome."""

    def __init__(self) -> None:
        self.lines: list[_Line] = []
        self.current = _Line()
        self.stopped = False

    def flush(self) -> None:
        """End the current line; an empty one passes its anchors on (an anchor alone marks what follows)."""
        line = self.current
        if any(t.strip() for t, _ in line.parts):
            self.lines.append(line)
            self.current = _Line()
        else:
            self.current = _Line(anchors=line.anchors)

    def walk(self, node: Tag, kind: Kind) -> None:
        for child in node.children:
            if self.stopped:
                return
            if isinstance(child, (Comment, Declaration, Doctype, ProcessingInstruction)):
                continue
            if isinstance(child, NavigableString):
                self.current.parts.append((str(child), kind))
                continue
            if not isinstance(child, Tag) or child.name in _SKIP:
                continue
            if _is_chrome(child):
                self.stopped = True
                return
            if child.name == "br":
                self.flush()
                continue
            if child.name == "table" and _is_signature(child):
                continue
            if child.name == "h3" or (child.name == "p" and _is_bold_heading(child)):
                self.flush()
                self._heading(child)
                continue
            if child.name == "a" and child.get("name"):
                self.current.anchors.append(str(child["name"]))
            child_kind: Kind = kind
            if _is_red(child):
                child_kind = "editor"
            elif "note" in (child.get("class") or ()):
                child_kind = "note"
            elif child.name == "a" and kind == "text":
                child_kind = "link"
            block = child.name in _BLOCK
            if block:
                self.flush()
                if child.get("id"):
                    self.current.anchors.append(str(child["id"]))
            self.walk(child, child_kind)
            if block:
                self.flush()

    def _heading(self, tag: Tag) -> None:
        """A heading element: its lines (several levels may share one <h3>, parted by <br>) and anchors."""
        inner = _Reader()
        inner.walk(tag, "text")
        inner.flush()
        anchors = [str(tag["id"])] if tag.get("id") else []
        texts: list[str] = []
        for line in (*inner.lines, inner.current):
            anchors += line.anchors
            # a footnote or red note inside a heading is not part of it
            if text := line.text("text", "link"):
                texts.append(text)
        if texts:
            self.lines.append(_Line(anchors=anchors + self.current.anchors, heading=texts))
            self.current = _Line()
        elif anchors:
            self.current.anchors += anchors


def _is_signature(table: Tag) -> bool:
    """The President's signature block closing a law («Президент Республики Казахстан Н. НАЗАРБАЕВ»)."""
    text = clean(table.get_text(" "))
    return len(text) < 200 and _SIGNATURE.match(text) is not None


def _is_bold_heading(p: Tag) -> bool:
    """A paragraph that is a heading: all its text is bold, or it opens with a bold article heading."""
    bolds = [d for d in p.descendants if isinstance(d, Tag) and d.name in ("b", "strong")]
    if not bolds:
        return False
    bold_text = clean(" ".join(b.get_text(" ") for b in bolds))
    if not bold_text:
        return False
    if bold_text == clean(p.get_text(" ")):
        return True
    first = next((c for c in p.children if not (isinstance(c, NavigableString) and not c.strip())), None)
    return first is bolds[0] and match_article_heading(bold_text) is not None


# --- assembling articles ----------------------------------------------------------------------------------

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

    def run(self, lines: list[_Line]) -> list[Article]:
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

    def _heading(self, line: _Line) -> None:
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


def _paragraphs_of(line: _Line) -> list[_Para]:
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
