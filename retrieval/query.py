"""Query understanding: the question's language, its article references and named codes (read by corpus.legal), the
crime check and the articles the synonym map suggests (retrieval/synonyms.py); `augment` writes them under the
question for the searches."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from corpus.legal import ArticleRef, read_references
from corpus.legal.registry import CRIMINAL_CODE_ID, SOURCES_BY_ID
from corpus.records import Lang
from retrieval.analyzer import detect_lang, has_kazakh_letters
from retrieval.synonyms import (
    criminal_vocabulary,
    load_synonyms,
    match_phrases,
    question_stems,
    sanction_vocabulary,
)

logger = logging.getLogger(__name__)

__all__ = ["ArticleRef", "QueryInfo", "analyze_query", "augment"]


@dataclass(frozen=True)
class QueryInfo:
    """What a question asks for, read from the question as the user wrote it."""

    text: str
    lang: Lang
    refs: tuple[ArticleRef, ...]
    is_range: bool
    is_criminal: bool
    codes: tuple[str, ...]
    synonym_refs: tuple[ArticleRef, ...]
    augmented: str
    asks_sanction: bool = False
    """It asks about a crime, a punishment, a fine or liability (retrieval/routing.py `SanctionLaws`)."""

    @property
    def added_lines(self) -> list[str] | None:
        """The non-empty lines augmentation put after the question (article citations and titles); None when the
        augmented text does not start with the question."""
        question = self.text.strip()
        if not self.augmented.startswith(question):
            return None
        return [line for line in self.augmented[len(question) :].split("\n") if line]


# --- the analysis ---------------------------------------------------------------------------------


def analyze_query(question: str, *, titles: Callable[[ArticleRef], str | None] | None = None) -> QueryInfo:
    """Read explicit references, named codes, the crime check and synonym articles from the question."""
    lang = detect_lang(question)
    found = read_references(question)

    hits = match_phrases(question, lang)
    entries_all = load_synonyms().entries
    matched_entries = [entries_all[e] for e, _, _ in sorted(hits, key=lambda h: (h[2], -len(h[1])))]
    matched_entries = list({id(e): e for e in matched_entries}.values())

    stems = question_stems(question)
    criminal = criminal_vocabulary(stems, matched_entries, found.mentions)
    if found.names_code(CRIMINAL_CODE_ID):
        criminal = True

    refs = found.articles(CRIMINAL_CODE_ID if criminal else "")
    suggested = (ArticleRef(r.doc_id, r.article) for e in matched_entries for r in e.refs)
    synonym_refs = tuple(r for r in dict.fromkeys(suggested) if r not in refs)
    augmented = augment(question, lang, [*refs, *synonym_refs], titles)
    return QueryInfo(
        text=question,
        lang=lang,
        refs=tuple(refs),
        is_range=found.is_range,
        is_criminal=criminal,
        codes=found.codes,
        synonym_refs=synonym_refs,
        augmented=augmented,
        asks_sanction=criminal or sanction_vocabulary(stems),
    )


def augment(
    question: str,
    lang: Lang,
    refs: Iterable[ArticleRef],
    titles: Callable[[ArticleRef], str | None] | None = None,
) -> str:
    """The question, then a line per article: code short name, "статья N" and the title when known.

    Headings are Russian (most codes exist only in Russian in the corpus); a Kazakh question also gets
    "ҚР ҚК N-бап" on a line of its own, so that the analyzer stems each line in its own language.
    """
    lines = [question.strip()]
    for ref in refs:
        title = (titles(ref) if titles is not None else None) or ""
        src = SOURCES_BY_ID.get(ref.doc_id)
        ru = [src.short_ru if src else "", f"статья {ref.article}"]
        kk = [src.short_kk if src else "", f"{ref.article}-бап"]
        (kk if has_kazakh_letters(title) else ru).append(title)
        if lang == "kk":
            lines.append(" ".join(w for w in kk if w))
        lines.append(" ".join(w for w in ru if w))
    return "\n".join(lines)
