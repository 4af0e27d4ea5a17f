"""Parse an adilet law page (old server-rendered HTML, or the JSON API's `text_content`) into articles.

`page_problem` tells a page without law text (an empty JavaScript shell, a captcha) from one with it;
`parse_html` finds the law text and the page's title, status badge and edition date, has `html_reader` read the
law text into tagged lines and `html_articles` assemble them into articles. Heading texts are classified by
`headings`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from bs4 import BeautifulSoup, Tag

from corpus.errors import IngestError
from corpus.records import Article, Lang
from ingest_adilet.headings import clean
from ingest_adilet.html_articles import assemble_articles
from ingest_adilet.html_reader import read_lines

logger = logging.getLogger(__name__)

_SHELL = re.compile(r"<div\s[^>]*\bid\s*=\s*[\"']?root\b", re.IGNORECASE)
_CAPTCHA = re.compile(r"captcha", re.IGNORECASE)
_ANY_HEADING = re.compile(r"Статья\s+\d|\d+-бап\b")
# The footer's «Документы по состоянию на: 20.03.2026» (Kazakh pages: «… жағдай бойынша …»; unverified).
_EDITION = re.compile(r"(?:по\s+состоянию\s+на|жағдай)[^0-9]{0,40}(\d{2}\.\d{2}\.\d{4})", re.IGNORECASE)


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
    lines = read_lines(_law_container(soup))
    articles = assemble_articles(lines, doc_id, lang, url, edition_date)
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
