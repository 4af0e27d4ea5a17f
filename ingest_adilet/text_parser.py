"""Parse the plain text of an adilet document (`get_text("\\n")` of its page) into articles.

Headings are lines of their own: structural ones («РАЗДЕЛ 1. …», «Глава 2. …», «3-тарау. …») set the path,
and an article heading («Статья 188. Кража», «188-бап. Ұрлық») opens an article that runs to the next heading.
Body paragraphs are indented with &nbsp;; a heading is not, which keeps inline references out.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from corpus.records import Article, Lang
from ingest_adilet.articles import (
    build_article,
    is_editor_note,
    is_footnote,
    paragraphs,
    split_notes,
    starts_paragraph,
    trailing_editor_note,
)
from ingest_adilet.headings import (
    ArticleHeading,
    HeadingPath,
    StructuralHeading,
    clean,
    match_article_heading,
    match_structural_heading,
)

logger = logging.getLogger(__name__)

# A heading title broken over blank-separated pieces (a few Kazakh pages put each word in its own element)
# is rejoined while the pieces stay short; a long unindented line after a heading is body text.
_TITLE_PIECE_MAX = 80
_TITLE_MAX = 400
_DOTTED = re.compile(r"(?:Статья|СТАТЬЯ)?\s*\d+(?:-\d+)*\s*(?:-\s*(?:бап|БАП))?\s*\.")  # «Статья 5.»
_POINT = re.compile(r"^\s*\d+(?:-\d+)*[.)]\s")  # «1. …», «2) …»: body text, never a title piece


@dataclass
class _Open:
    """The article being read: heading, title pieces, body lines and the path when it started."""

    heading: ArticleHeading
    path: tuple[str, ...]
    title: list[str]
    body: list[str] = field(default_factory=list)
    in_title: bool = True
    title_gap: bool = False  # a blank line since the last title piece


def _article_heading(line: str, prev_blank: bool, after_heading: bool) -> ArticleHeading | None:
    """The article heading on this raw line, if the line is placed where headings stand."""
    if not line.strip():
        return None
    indented = starts_paragraph(line)
    heading = match_article_heading(line)
    if heading is None:
        return None
    dotted = bool(_DOTTED.match(clean(line)))
    if indented:
        # Body paragraphs are indented; a few Kazakh pages indent a real «2-1-бап. Title» heading too.
        return heading if dotted and heading.title and prev_blank else None
    if heading.title or dotted:
        return heading
    # A bare «Статья 1» / «31-бап» must start a block: inside a paragraph it would be a link's text.
    return heading if prev_blank or after_heading else None


def _structural(line: str, prev_blank: bool, after_heading: bool) -> StructuralHeading | None:
    if not line.strip() or starts_paragraph(line) or not (prev_blank or after_heading):
        return None
    return match_structural_heading(line)


def _raw_title(line: str, heading: ArticleHeading) -> str:
    """The title on the heading line, with a trailing space that parts it from the next piece."""
    if not heading.title:
        return ""
    return heading.title + (" " if line != line.rstrip() else "")


def _finish(article: _Open, doc_id: str, lang: Lang, url: str, edition_date: str | None) -> Article:
    title = clean("".join(article.title)).lstrip(". ").strip()
    return build_article(doc_id, lang, article.heading.number, title, article.body, article.path, url, edition_date)


def _notes_only(lines: list[str]) -> list[str]:
    """The footnotes and editor's notes among lines that stand between headings, one paragraph each."""
    _, footnotes, notes = split_notes(paragraphs(lines))
    return [p for note in (*footnotes, *notes) for p in (note, "")]


def parse_text(text: str, doc_id: str, lang: Lang, url: str = "", edition_date: str | None = None) -> list[Article]:
    """Articles of one document in reading order; a table of contents (headings without bodies) is skipped."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    path = HeadingPath()
    last_level = None
    articles: list[Article] = []
    current: _Open | None = None
    between: list[str] = []  # lines after a structural heading, before the next article
    prev_blank = True
    after_heading = False  # the previous non-blank line was a heading (or its continuation)

    def close() -> None:
        nonlocal current
        if current is not None:
            articles.append(_finish(current, doc_id, lang, url, edition_date))
            current = None

    for line in lines:
        blank = not line.strip()
        heading = None if blank else _article_heading(line, prev_blank, after_heading)
        if heading is not None and current is not None and heading.number == current.heading.number:
            # «6-бап. …» repeated as the first body line: the same heading twice, not a new article.
            prev_blank, after_heading = False, True
            continue
        if heading is not None:
            carried: list[str] = []
            if current is not None:
                cut = trailing_editor_note(current.body, heading.number)
                carried = current.body[cut:]
                current.body = current.body[:cut]
            # Notes before the first article concern the whole document (its table of contents, its
            # commencement), not article 1; later ones (under a chapter heading) go to the next article.
            carried = (_notes_only(between) if articles or current is not None else []) + carried
            close()
            between = []
            current = _Open(heading, path.current(), [_raw_title(line, heading)], carried)
            last_level = None
            prev_blank, after_heading = False, True
            continue
        structural = None if blank else _structural(line, prev_blank, after_heading)
        if structural is not None:
            close()
            path.enter(structural)
            last_level = structural.level
            prev_blank, after_heading = False, True
            continue
        if blank:
            prev_blank = True
            if current is not None:
                if current.in_title:
                    current.title_gap = True
                else:
                    current.body.append(line)
            else:
                between.append(line)
            continue
        if current is None:
            if last_level is not None and after_heading and not starts_paragraph(line):
                path.extend(last_level, line)  # «(СУПРУЖЕСКО-СЕМЕЙНЫХ) ПРАВ» under «Глава 2. …»
            else:
                between.append(line)
                after_heading = False
            prev_blank = False
            continue
        if current.in_title and not starts_paragraph(line) and _continues_title(current, line):
            current.title.append((" " if current.title_gap else "") + line)
            current.title_gap = False
            prev_blank = False
            continue
        current.in_title = False
        current.body.append(line)
        prev_blank, after_heading = False, False
    close()
    return _dedupe(articles, doc_id, lang)


def _continues_title(article: _Open, line: str) -> bool:
    """Whether an unindented line after a heading is more of its title (broken around a link) or body text."""
    if is_footnote(line) or is_editor_note(line) or _POINT.match(line):
        return False
    title = "".join(article.title)
    if len(title) > _TITLE_MAX:
        return False
    if article.title_gap:
        return len(line.strip()) <= _TITLE_PIECE_MAX
    return True


def _dedupe(articles: list[Article], doc_id: str, lang: str) -> list[Article]:
    """One article per number: a table of contents leaves empty twins; keep the fullest."""
    best: dict[str, Article] = {}
    for a in articles:
        kept = best.get(a.number)
        if kept is None or len(a.text) > len(kept.text):
            if kept is not None:
                logger.debug("%s/%s: article %s appears twice; keeping the longer", doc_id, lang, a.number)
            best[a.number] = a
    return [a for a in articles if best[a.number] is a]
