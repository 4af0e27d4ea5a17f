"""Retrieved documents → `Source` records (S1, S2, …) and the labelled context block the model reads."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from langchain_core.documents import Document

from answer.records import Source
from answer.templates import load_phrases
from config import Settings
from corpus.lang import lang_of

logger = logging.getLogger(__name__)

_SENTENCE_END_RE = re.compile(r"[.;:!?»)](?=\s)")


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


def to_sources(docs: Sequence[Document], settings: Settings) -> tuple[Source, ...]:
    """One `Source` per article, best first, labelled S1, S2, …; repeated chunks of an article are dropped."""
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
                snippet=clip(body_of(doc), settings.context_max_chars),
                score=float(m.get("score", m.get("relevance_score", 0.0))),
                lang=lang_of(m.get("lang")),
                status=str(m.get("status", "in_force")),
                remedy=bool(m.get("remedy", False)),
            )
        )
    return tuple(sources)


def label(source: Source, settings: Settings) -> str:
    """«[S1] УК РК, Статья 188. Кража», marked when the article is repealed."""
    text = f"[{source.source_id}] {source.citation()}"
    if source.status == "repealed":
        text += f" ({load_phrases(settings, source.lang).repealed})"
    return text


def format_context(sources: Sequence[Source], settings: Settings) -> str:
    """The block the prompt's {context} receives: each source's label, then its text."""
    return "\n\n".join(f"{label(s, settings)}\n{s.snippet}" for s in sources)
