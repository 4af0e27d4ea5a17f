"""Retrieved documents → `Source` records (S1, S2, …) and the labelled context block the model reads."""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections.abc import Sequence

from langchain_core.documents import Document

from answer.lexical import TermSet
from answer.records import Source
from answer.templates import load_phrases
from config import Settings
from corpus.lang import lang_of
from corpus.legal import code_name, source_url
from corpus.legal.registry import SOURCES_BY_ID
from corpus.records import Lang
from retrieval.analyzer import analyze

logger = logging.getLogger(__name__)

_SENTENCE_END_RE = re.compile(r"[.;:!?»)](?=\s)")
# A numbered part of an article («1. Кража …», «3-1. …») starts a line; its subparagraphs follow it.
_PART_START_RE = re.compile(r"^\d+(?:-\d+)?\.\s")
_GAP = "…"


def body_of(doc: Document) -> str:
    """The chunk text without its header line («УК РК. Статья 188. Кража»), which the source label repeats."""
    text = doc.page_content.strip()
    head, sep, rest = text.partition("\n")
    code, article = doc.metadata.get("code", ""), str(doc.metadata.get("article", ""))
    if sep and article in head and (not code or head.startswith(code)):
        return rest.strip()
    return text


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, cut after the last paragraph or sentence end that fits."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    para = cut.rfind("\n")
    ends = [m.end() for m in _SENTENCE_END_RE.finditer(cut)]
    # Prefer a clean boundary unless it throws away more than a third of the room.
    best = max([para, *ends], default=-1)
    if best < limit * 2 // 3:
        best = cut.rfind(" ")
    return cut[: best if best > 0 else len(cut)].rstrip() + " …"


def parts_of(body: str) -> list[str]:
    """The article's parts in reading order: a numbered line («2. …») opens a part, other lines join the one
    before; an article without numbered parts has one part per paragraph."""
    lines = [ln.strip() for ln in body.splitlines() if ln.strip() and ln.strip() != _GAP]
    if not any(_PART_START_RE.match(ln) for ln in lines[1:]):
        return lines
    parts: list[str] = []
    for ln in lines:
        if parts and not _PART_START_RE.match(ln):
            parts[-1] += "\n" + ln
        else:
            parts.append(ln)
    return parts


def part_scores(parts: Sequence[str], question: str, lang: Lang | None = None) -> list[float]:
    """For each part, the distinct stemmed terms of the question it contains (inflected forms match), each
    weighted by how rare it is among the article's parts (log(1 + parts / parts having it))."""
    terms = set(analyze(question, lang))
    sets = [TermSet.of(p, lang) for p in parts]
    has = {t: [t in s for s in sets] for t in terms}
    weight = {t: math.log(1 + len(parts) / n) for t, hits in has.items() if (n := sum(hits))}
    return [sum(w for t, w in weight.items() if has[t][i]) for i in range(len(parts))]


def select_parts(body: str, question: str, limit: int, lang: Lang | None = None) -> str:
    """At most about `limit` characters of `body` for the prompt: its first part (the rule or definition), then
    the parts the question's terms hit most, in reading order, «…» standing for each run of skipped parts."""
    if len(body) <= limit:
        return body
    parts = parts_of(body)
    scores = part_scores(parts, question, lang)
    ranked = sorted((i for i in range(1, len(parts)) if scores[i] > 0), key=lambda i: (-scores[i], i))
    if not ranked:
        return clip(body, limit)
    best = ranked[0]
    # The first part and the best-matching one always; each clipped to leave room for the other.
    first = min(len(parts[0]), max(limit // 2, limit - len(parts[best]) - len(_GAP) - 2))
    room: dict[int, int] = {0: first, best: min(len(parts[best]), limit - first - len(_GAP) - 2)}
    left = limit - sum(room.values()) - 2 * len(_GAP)
    for i in ranked[1:]:  # then every other matching part that fits whole, best first
        if len(parts[i]) + len(_GAP) + 2 <= left:
            room[i] = len(parts[i])
            left -= len(parts[i]) + len(_GAP) + 2
    out: list[str] = []
    for i in sorted(room):
        if i > 0 and i - 1 not in room:
            out.append(_GAP)
        out.append(clip(parts[i], room[i]))
    if max(room) < len(parts) - 1:
        out.append(_GAP)
    return "\n".join(out)


def to_sources(
    docs: Sequence[Document], settings: Settings, question: str | None = None, lang: Lang | None = None
) -> tuple[Source, ...]:
    """One `Source` per article, best first, labelled S1, S2, …; repeated chunks of an article are dropped.

    With `question`, each snippet is the article's parts that match it (`select_parts`) within
    settings.prompt_source_chars: what the chat model reads. Without, the first context_max_chars. With `lang`,
    the answer's language, an article the corpus has only in the other language is cited in `lang`
    (`in_answer_lang`)."""
    sources: list[Source] = []
    seen: set[str] = set()
    for doc in docs:
        m = doc.metadata
        key = m.get("article_key") or f"{m.get('doc_id')}:{m.get('article')}"
        if key in seen:
            continue
        seen.add(key)
        sources.append(
            Source(
                source_id=f"S{len(sources) + 1}",
                doc_id=str(m.get("doc_id", "")),
                article=str(m.get("article", "")),
                code=str(m.get("code", "")),
                title=str(m.get("title", "")),
                url=str(m.get("url", "")),
                snippet=clip(body_of(doc), settings.context_max_chars)
                if question is None or settings.prompt_source_chars <= 0
                else select_parts(body_of(doc), question, settings.prompt_source_chars, lang_of(m.get("lang"))),
                score=float(m.get("score", m.get("relevance_score", 0.0))),
                lang=lang_of(m.get("lang")),
                status=str(m.get("status", "in_force")),
                remedy=bool(m.get("remedy", False)),
            )
        )
    if lang is None:
        return tuple(sources)
    return tuple(in_answer_lang(s, lang, settings) for s in sources)


def in_answer_lang(source: Source, lang: Lang, settings: Settings) -> Source:
    """`source` cited in the answer's language `lang` when its text is in the other one: the code's name and the
    article's label in `lang` («ҚР ЕК, 113-бап. …»; the title stays the text's), and a one-line note in `lang`
    that the text is in the other language, linking the document's page in `lang` on adilet."""
    if source.lang == lang or source.doc_id not in SOURCES_BY_ID:
        return source
    note = load_phrases(settings, lang).other_language_text.format(url=source_url(source.doc_id, lang))
    return dataclasses.replace(source, code=code_name(source.doc_id, lang), cite_lang=lang, note=note)


def label(source: Source, settings: Settings) -> str:
    """«[S1] УК РК, Статья 188. Кража», marked when the article is repealed, or its whole document («… (Закон
    утратил силу Законом РК от 16.01.2026 № 258-VIII …)», the manifest's note in the text's own language)."""
    text = f"[{source.source_id}] {source.citation()}"
    if source.status == "repealed":
        text += f" ({load_phrases(settings, source.lang).repealed})"
    elif source.repealed_by:
        text += f" ({source.repealed_by})"
    return text


def format_context(sources: Sequence[Source], settings: Settings) -> str:
    """The block the prompt's {context} receives: each source's label, then its text."""
    return "\n\n".join(f"{label(s, settings)}\n{s.snippet}" for s in sources)
