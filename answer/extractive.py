"""The answer without a model: the parts of the retrieved articles that match the question, with citations."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from answer.context import clip, label, to_sources
from answer.lexical import TermSet, coverage
from answer.records import Source
from answer.templates import load_phrases
from config import Settings
from corpus.legal.registry import ADILET_SOURCES, CRIMINAL_CODE_ID, SOURCES_BY_ID
from corpus.records import Lang
from retrieval.analyzer import analyze

if TYPE_CHECKING:
    from retrieval.pipeline import Verdict

logger = logging.getLogger(__name__)

# «1. Кража, …» / «2-1. …» opens a numbered part; sub-items «1)» and the «наказывается …» line belong to it.
_PART_RE = re.compile(r"^\d+(?:-\d+)?\.\s")
# A part or sub-item that is only a repeal note says nothing to the reader of today's law.
_REPEALED_ITEM_RE = re.compile(r"^\d+(?:-\d+)?[.)]\s*(?:исключен|утратил|алып\s+тасталды|алынып\s+тасталды)", re.I)
_PUNISHMENT_RE = re.compile(r"наказыва|жазалан", re.I)

MAX_SOURCES = 3  # sources quoted for a question about one matter
MAX_RANGE_SOURCES = 8  # a range question gets every article of the range
TOP_SOURCE_CHARS = 1800  # room for the best source: a whole article of the Criminal Code fits
OTHER_SOURCE_CHARS = 700
UNIT_CHARS = 700
UNITS_PER_SOURCE = 2  # outside crime questions


@dataclass(frozen=True)
class _Unit:
    """A numbered part of an article (with its sub-items) or a paragraph, in reading order."""

    index: int
    text: str
    score: float
    punishment: bool


def units(text: str) -> list[str]:
    """Numbered parts with their sub-items, or paragraphs when the article has no numbered parts."""
    lines = [ln.strip() for ln in text.split("\n") if ln.strip() and not _REPEALED_ITEM_RE.match(ln.strip())]
    out: list[list[str]] = []
    for line in lines:
        if _PART_RE.match(line) or not out or not _PART_RE.match(out[-1][0]):
            out.append([line])
        else:
            out[-1].append(line)
    return ["\n".join(u) for u in out]


def _scored_units(source: Source, question_terms: list[str]) -> list[_Unit]:
    return [
        _Unit(i, u, coverage(question_terms, TermSet.of(u, source.lang)), bool(_PUNISHMENT_RE.search(u)))
        for i, u in enumerate(units(source.snippet))
    ]


def _pick(scored: list[_Unit], *, crime: bool, budget: int) -> list[_Unit]:
    """The units to quote, in reading order, within `budget` characters."""
    if crime and any(u.punishment for u in scored):
        # A crime question is about the punishment: every part that sets one, best first if room runs out.
        wanted = sorted((u for u in scored if u.punishment), key=lambda u: (u.index != 0, -u.score, u.index))
    else:
        matching = sorted((u for u in scored if u.score > 0), key=lambda u: (-u.score, u.index))
        wanted = matching[:UNITS_PER_SOURCE] or scored[:1]
    picked: list[_Unit] = []
    used = 0
    for u in wanted:
        size = min(len(u.text), UNIT_CHARS)
        if picked and used + size > budget:
            continue
        picked.append(u)
        used += size
    return sorted(picked, key=lambda u: u.index)


def _relevant(
    sources: Sequence[Source], question_terms: list[str], *, is_range: bool, is_criminal: bool
) -> list[Source]:
    """The best source always; others scoring at least half as much as the best one; for a crime question, the
    best-ranked Criminal Code source too (the rule grounding applies to model answers).

    A question term found in every source («наказание» among articles of the Criminal Code) tells them apart
    less than one found in few («кража»): terms weigh log(1 + n / sources containing them). Words cannot tell
    apart sources in another language than the question's (a Kazakh question, the Russian-only Criminal Code),
    which is why the crime rule goes by retrieval rank.
    """
    if is_range:
        return list(sources[:MAX_RANGE_SOURCES])
    term_sets = [TermSet.of(f"{s.title}\n{s.snippet}", s.lang) for s in sources]
    found = {t: [t in ts for ts in term_sets] for t in set(question_terms)}
    weight = {t: math.log(1 + len(sources) / sum(hits)) for t, hits in found.items() if any(hits)}
    scores = [sum(w for t, w in weight.items() if found[t][i]) for i in range(len(sources))]
    best = max(scores, default=0.0)
    keep = [s for i, (s, sc) in enumerate(zip(sources, scores, strict=True)) if i == 0 or 0 < sc and sc >= best / 2][
        :MAX_SOURCES
    ]
    criminal = next((s for s in sources if s.doc_id == CRIMINAL_CODE_ID), None)
    if is_criminal and criminal is not None and criminal not in keep:
        keep = [*keep[: MAX_SOURCES - 1], criminal]
    return keep


def _quote(source: Source, picked: list[_Unit]) -> str:
    parts: list[str] = []
    last = -1
    for u in picked:
        if u.index > last + 1:
            parts.append("…")
        parts.append(clip(u.text, UNIT_CHARS))
        last = u.index
    return "\n".join(parts)


@dataclass(frozen=True)
class Extract:
    """An answer made of quotes, and the sources it quotes."""

    text: str
    sources: tuple[Source, ...]


def extractive_answer(
    question: str,
    sources: Sequence[Source],
    *,
    lang: Lang,
    is_criminal: bool,
    settings: Settings,
    is_range: bool = False,
    note: str | None = None,
) -> Extract:
    """Quotes of the matching parts of the relevant sources with citations and links, then the disclaimer."""
    phrases = load_phrases(settings, lang)
    head = [note] if note else []
    if not sources:
        return Extract("\n\n".join([*head, phrases.no_sources, phrases.disclaimer]), ())
    question_terms = analyze(question, lang)
    substance = [s for s in sources if not s.remedy] or list(sources)
    quoted = _relevant(substance, question_terms, is_range=is_range, is_criminal=is_criminal)
    blocks: list[str] = []
    noted: set[str] = set()  # documents whose note was given
    for rank, source in enumerate(quoted):
        crime = is_criminal and source.doc_id == CRIMINAL_CODE_ID
        budget = TOP_SOURCE_CHARS if rank == 0 and not is_range else OTHER_SOURCE_CHARS
        picked = _pick(_scored_units(source, question_terms), crime=crime, budget=budget)
        lines = [label(source, settings)]
        if source.url:
            lines.append(source.url)
        if source.note and source.doc_id not in noted:  # a Kazakh answer quoting a Russian-only text says so,
            noted.add(source.doc_id)  # once per document, and links the document's Kazakh page
            lines.append(source.note)
        if picked:
            lines.append(_quote(source, picked))
        blocks.append("\n".join(lines))
    # A remedy route's articles are named with their links, not quoted: where to go, not what the law says.
    remedies = [s for s in sources if s.remedy and s not in quoted]
    if remedies:
        blocks.append("\n".join([phrases.remedy_intro, *(f"— {label(s, settings)}: {s.url}" for s in remedies)]))
    return Extract("\n\n".join([*head, phrases.extractive_intro, *blocks, phrases.disclaimer]), (*quoted, *remedies))


def abstention(verdict: Verdict, *, lang: Lang, settings: Settings) -> str:
    """The short reply when nothing answers (retrieval's verdict): the article that does not exist, with the
    nearest existing ones only as "possibly" (named and linked, never quoted); the codes known when the
    question names an unknown one; «what would you like to know» when it has no legal content."""
    phrases = load_phrases(settings, lang)
    if verdict.status == "unknown_code":
        codes = ", ".join(dict.fromkeys(s.short(lang) for s in ADILET_SOURCES if s.kind == "code"))
        return phrases.unknown_code.format(name=verdict.unknown_codes[0], codes=codes)
    if verdict.status == "no_such_article":
        lines = [
            phrases.no_such_article.format(code=SOURCES_BY_ID[ref.doc_id].short(lang), article=ref.article)
            if ref.doc_id in SOURCES_BY_ID
            else phrases.no_such_article_anywhere.format(article=ref.article)
            for ref in verdict.missing
        ]
        possibly = to_sources(verdict.suggestions, settings, lang=lang)
        if possibly:
            lines += ["", phrases.possibly, *(f"— {s.citation()}: {s.url}" for s in possibly)]
        return "\n".join(lines)
    return phrases.off_topic
