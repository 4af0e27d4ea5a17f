"""Telegram HTML for answers and articles, and splitting it into messages Telegram accepts."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from telegram.constants import MessageLimit

from answer.links import unlink
from answer.records import QAResult, Source
from bot.texts import t
from corpus.legal import code_name, heading, source_url
from corpus.legal.registry import SOURCES_BY_ID
from corpus.records import Article, Lang
from corpus.store import LangTotals

if TYPE_CHECKING:
    from index.summary import DataSummary

MAX_MESSAGE = MessageLimit.MAX_TEXT_LENGTH  # 4096
UNDERSTOOD_CHARS = 300  # of the search question shown under a follow-up's answer

# Atoms are never cut: a tag, an entity, newlines, other whitespace, a word, a stray "&" or "<".
_ATOM = re.compile(r"<[^<>]*>|&(?:#\d+|#x[0-9a-fA-F]+|[A-Za-z]\w*);|\n\n+|\n|[^\S\n]+|[^\s<&]+|[<&]")
_TAG = re.compile(r"<(/?)([A-Za-z][\w-]*)")
_SENTENCE_END = re.compile(r"[.!?…;:»)\]]$")

# How good a place to cut is the end of an atom: paragraph > line/sentence > word > anywhere.
_PARAGRAPH, _SENTENCE, _WORD, _ANY = 3, 2, 1, 0


def split_html(text: str, limit: int = MAX_MESSAGE) -> list[str]:
    """Split Telegram HTML into parts of at most `limit` characters.

    Whole paragraphs move to the next part when they fit in one; a paragraph too long for any part is cut at
    the end of a sentence or line, else between words, else between characters; never inside a tag or an
    entity. Tags open at a cut are closed at the end of the part and reopened at the start of the next one, so
    every part parses on its own. Length is counted on the HTML source, not shorter than what Telegram counts.
    """
    text = text.strip()
    if len(text) <= limit:
        return [text] if text else []
    atoms = _atoms(text, max_word=max(1, limit // 4))
    scores = _scores(atoms)
    # Length from each atom to the end of its paragraph: does the rest of a paragraph fit in a part alone?
    to_para_end = [0] * (len(atoms) + 1)
    for i in range(len(atoms) - 1, -1, -1):
        to_para_end[i] = 0 if scores[i] == _PARAGRAPH else len(atoms[i]) + to_para_end[i + 1]
    parts: list[str] = []
    start = 0
    carried: list[tuple[str, str]] = []  # opening tags to reopen at the start of the next part
    while start < len(atoms):
        cut, stack = _find_cut(atoms, scores, to_para_end, start, carried, limit)
        body = "".join(atoms[start:cut]).rstrip()
        part = "".join(tag for _, tag in carried) + body + _closers(stack)
        if body.strip():
            parts.append(part)
        start, carried = cut, stack
        while start < len(atoms) and atoms[start].isspace():  # the next part does not start with blank lines
            start += 1
    return parts


def _atoms(text: str, max_word: int) -> list[str]:
    """Tokenize; words longer than `max_word` become single characters so they can be cut."""
    out: list[str] = []
    for atom in _ATOM.findall(text):
        if len(atom) > max_word and not atom.startswith("<") and not atom.isspace():
            out.extend(atom)
        else:
            out.append(atom)
    return out


def _scores(atoms: list[str]) -> list[int]:
    """The cut quality after each atom."""
    scores: list[int] = []
    last_text = ""
    for atom in atoms:
        if atom.startswith("\n\n"):
            scores.append(_PARAGRAPH)
        elif atom == "\n":
            scores.append(_SENTENCE)
        elif atom.isspace():
            scores.append(_SENTENCE if _SENTENCE_END.search(last_text) else _WORD)
        else:
            scores.append(_ANY)
        if not atom.startswith("<") and not atom.isspace():
            last_text = atom
    return scores


def _push(stack: list[tuple[str, str]], atom: str) -> list[tuple[str, str]]:
    """The stack of open tags after `atom`."""
    m = _TAG.match(atom)
    if not m or atom.endswith("/>"):
        return stack
    closing, name = m.group(1), m.group(2).lower()
    if not closing:
        return [*stack, (name, atom)]
    for i in range(len(stack) - 1, -1, -1):
        if stack[i][0] == name:
            return stack[:i]
    return stack


def _closers(stack: list[tuple[str, str]]) -> str:
    return "".join(f"</{name}>" for name, _ in reversed(stack))


def _find_cut(
    atoms: list[str],
    scores: list[int],
    to_para_end: list[int],
    start: int,
    carried: list[tuple[str, str]],
    limit: int,
) -> tuple[int, list[tuple[str, str]]]:
    """Fill one part greedily from `start`; return where to cut and the tags open there."""
    length = sum(len(tag) for _, tag in carried)
    stack = carried
    best: dict[int, tuple[int, list[tuple[str, str]]]] = {}  # score -> latest cut with that score
    lengths: dict[int, int] = {}
    i = start
    while i < len(atoms):
        new_stack = _push(stack, atoms[i])
        if length + len(atoms[i]) + len(_closers(new_stack)) > limit:
            break
        length += len(atoms[i])
        stack = new_stack
        i += 1
        best[scores[i - 1]] = (i, stack)
        lengths[scores[i - 1]] = length
    if i == len(atoms):
        return i, stack
    if i == start:
        raise ValueError(f"cannot fit {atoms[i][:40]!r} into a message of {limit} characters")
    if _PARAGRAPH in best:
        cut, open_tags = best[_PARAGRAPH]
        reopen = sum(len(tag) + len(name) + 3 for name, tag in open_tags)
        if to_para_end[cut] + reopen <= limit:  # the next paragraph fits in a part of its own: move it whole
            return cut, open_tags
    # The paragraph is too long for any part: fill this one and cut late, at a sentence if one is in the
    # second half, else between words.
    for score in (_SENTENCE, _WORD):
        if score in best and lengths[score] >= limit // 2:
            return best[score]
    for score in (_PARAGRAPH, _SENTENCE, _WORD):
        if score in best:
            return best[score]
    return i, stack


def shorten(text: str, limit: int) -> str:
    """At most `limit` characters of `text`, the cut marked with "…"."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def escape(text: str) -> str:
    """Escape text for Telegram HTML (<, >, & and quotes)."""
    return html.escape(text, quote=True)


def link(url: str, label: str) -> str:
    return f'<a href="{escape(url)}">{escape(label)}</a>'


def source_line(source: Source, lang: Lang) -> str:
    """«[S1] УК РК, Статья 188. Кража» linked to adilet, marked when repealed."""
    label = source.citation()
    line = f"<b>[{escape(source.source_id)}]</b> " + (link(source.url, label) if source.url else escape(label))
    if source.status == "repealed":
        line += f" — <i>{t('repealed', lang)}</i>"
    return line


def source_lines(sources: Iterable[Source], lang: Lang, answer: str = "") -> list[str]:
    """A line per source; under the first source of a document whose text is in another language than the
    answer's, its note (the text is Russian, the Kazakh page is …) in italics, unless the `answer` (quotes) has
    it already."""
    lines: list[str] = []
    noted: set[str] = set()
    for s in sources:
        lines.append(source_line(s, lang))
        if s.note and s.doc_id not in noted and s.note not in answer:
            noted.add(s.doc_id)
            lines.append(f"<i>{escape(s.note)}</i>")
    return lines


def edition_lines(sources: Iterable[Source], lang: Lang) -> list[str]:
    """«УК РК — редакция по состоянию на 20.03.2026»: the edition of each cited document, once, in `lang`."""
    lines: dict[tuple[str, str], str] = {}
    for s in sources:
        if s.edition() and (s.doc_id, s.lang) not in lines:
            lines[(s.doc_id, s.lang)] = f"{escape(s.code)} — {escape(s.edition(lang))}"
    return list(lines.values())


def format_about(summary: DataSummary | None, lang: Lang) -> str:
    """/about: what the answers rest on (documents, articles, chunks, editions, corpus date, searches built, the
    headings' vectors the title rerank reads)."""
    if summary is None or not summary.totals:
        return t("about_no_corpus", lang)
    totals = summary.totals.values()

    def count(n: int) -> str:
        return f"{n:,}".replace(",", "\u202f")

    editions = ""
    if summary.oldest_edition and summary.newest_edition:
        editions = t(
            "about_editions",
            lang,
            oldest=summary.oldest_edition,
            newest=summary.newest_edition,
            as_of=summary.editions_as_of,
            amended=summary.editions_amended,
        )
    searches = [t("about_lexical", lang)]
    for key, n, stale in (
        ("about_vectors", summary.vectors, summary.vectors_stale),
        ("about_latent", summary.latent_rows, summary.latent_stale),
        ("about_titles", summary.titles, summary.titles_stale),
    ):
        state = count(n) if n else t("about_stale" if stale else "about_not_built", lang)
        searches.append(t(key, lang, n=state))
    built = summary.ingested_at or summary.published_at or ""
    return t(
        "about",
        lang,
        documents=t(
            "about_documents",
            lang,
            ru=count(summary.totals.get("ru", LangTotals()).documents),
            kk=count(summary.totals.get("kk", LangTotals()).documents),
        ),
        articles=count(sum(x.articles for x in totals)),
        repealed=count(sum(x.repealed for x in totals)),
        chunks=count(sum(x.chunks for x in totals)),
        editions=editions,
        ingested=built[:16].replace("T", " ") + (" UTC" if built else ""),
        searches="; ".join(searches),
    )


def unique_sources(sources: Iterable[Source]) -> list[Source]:
    """Sources without repeats of the same article."""
    seen: set[tuple[str, str, str]] = set()
    out: list[Source] = []
    for s in sources:
        key = (s.doc_id, s.lang, s.article)
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


def format_answer(result: QAResult, lang: Lang, limit: int = MAX_MESSAGE) -> list[str]:
    """The answer, how a follow-up was understood, a warning when it is not grounded, and its sources, as HTML.

    Telegram makes any URL, domain, e-mail or @username clickable: in the texts a model may have written (the
    answer, the follow-up as understood) only the sources' links and adilet.zan.kz pages (an abstention names
    the nearest articles, which are no sources) survive; the rest become «[ссылка удалена]».
    """
    allowed, removed = [s.url for s in result.sources if s.url], t("link_removed", lang)
    blocks = [escape(unlink(result.answer.strip(), allowed, removed, site=True)) or t("empty_answer", lang)]
    if result.used_history and result.search_question:
        # A misunderstood follow-up is visible at once, under the answer it led to.
        understood = shorten(unlink(result.search_question, allowed, removed, site=True), UNDERSTOOD_CHARS)
        blocks.append(f"<i>{t('understood', lang, question=understood)}</i>")
    if not result.grounded:
        blocks.append(f"<i>{t('not_grounded', lang)}</i>")
    sources = unique_sources(result.sources)
    if sources:
        blocks.append(f"<b>{t('sources', lang)}</b>\n" + "\n".join(source_lines(sources, lang, result.answer)))
        if editions := edition_lines(sources, lang):
            blocks.append(f"<i>{t('editions', lang)}</i>\n" + "\n".join(editions))
    return split_html("\n\n".join(blocks), limit)


def article_heading(article: Article, lang: Lang | None = None) -> str:
    """«УК РК. Статья 188. Кража» / «ҚР ҚК. 188-бап. Ұрлық» (corpus.legal.heading) in `lang` (default: the
    article's; the title stays in the text's language); a title's closing period is not shown in the bold heading."""
    lang = lang or article.lang
    return heading(code_name(article.doc_id, lang), article.number, article.title.rstrip(". "), lang)


def format_article(article: Article, limit: int = MAX_MESSAGE, note: str = "", lang: Lang | None = None) -> list[str]:
    """The article verbatim under its heading, with its status, edition and adilet link, as HTML messages;
    `note` (HTML) in italics under the heading. `lang`: the language asked for (default: the article's); an
    article the corpus has only in the other language is headed in `lang`, with a line saying so that links the
    document's page in `lang`."""
    lang = lang or article.lang
    blocks = [f"<b>{escape(article_heading(article, lang))}</b>"]
    if lang != article.lang and article.doc_id in SOURCES_BY_ID:
        page = link(source_url(article.doc_id, lang), "adilet.zan.kz")
        blocks.append(f"<i>{t('article_other_lang', lang)} {page}</i>")
    if note:
        blocks.append(f"<i>{note}</i>")
    if article.status == "repealed":
        blocks.append(f"<i>{t('repealed_article', lang)}</i>")
    if article.text.strip():
        blocks.append(escape(article.text.strip()))
    footer = []
    if article.edition_date:
        footer.append(t("edition", lang, date=article.edition_date))
    if article.url:
        footer.append(link(article.url, "adilet.zan.kz"))
    if footer:
        blocks.append(" · ".join(footer))
    return split_html("\n\n".join(blocks), limit)
