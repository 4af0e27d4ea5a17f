"""Whether the corpus answers a question at all: a named article that exists, a named one that does not, a code
the registry lacks, or nothing relevant (off-topic), from the searches' relevance signals."""

from __future__ import annotations

import logging

import numpy as np

from config import Settings
from retrieval.explicit import ExplicitRetriever, unknown_codes
from retrieval.query import QueryInfo
from retrieval.records import Verdict
from retrieval.searches import Searches

logger = logging.getLogger(__name__)


def decide(
    info: QueryInfo,
    *,
    explicit: ExplicitRetriever | None,
    searches: Searches,
    settings: Settings,
    max_chars: int,
    chunk_scores: np.ndarray | None = None,
) -> Verdict:
    """Whether to answer: a named existing article is answered; a code the registry lacks or an article
    that does not exist is said so; a question naming neither whose relevance is below its setting is
    off-topic. Without `explicit` (references not read) every question is answered."""
    if explicit is None or explicit.keys(info):
        return Verdict()
    if unknown := unknown_codes(info.text):
        return Verdict("unknown_code", unknown_codes=unknown)
    missing = explicit.missing(info)
    if missing and len(missing) == len(set(info.refs)):
        near = dict.fromkeys(k for ref in missing if ref.doc_id for k in explicit.nearest(ref))
        suggestions = tuple(explicit.articles.article_document(k, info.lang, max_chars, possibly=True) for k in near)
        return Verdict("no_such_article", missing=tuple(missing), suggestions=suggestions)
    if info.refs or info.codes:
        return Verdict()
    s = settings
    signals = dict(relevance(info, searches, s, chunk_scores, dense=searches.bm25 is None))
    # The dense signal only has a say over a weak lexical match: its one-hit search runs only then.
    if signals.get("bm25", 0.0) < max(s.off_topic_bm25, s.off_topic_weak_bm25) and s.off_topic_dense > 0:
        signals = dict(relevance(info, searches, s, chunk_scores, dense=True))
    return Verdict("off_topic" if off_topic(signals, s) else "answered", relevance=tuple(signals.items()))


def relevance(
    info: QueryInfo,
    searches: Searches,
    settings: Settings,
    chunk_scores: np.ndarray | None = None,
    *,
    dense: bool = True,
) -> tuple[tuple[str, float], ...]:
    """How well the corpus matches the question at all, by each search that runs: ("bm25", the best BM25
    score of a chunk for the augmented question; `chunk_scores` if computed already) and, with `dense`,
    ("dense", the best cosine similarity of a chunk); measured against the gold questions and off-topic probes
    by bench/abstain.py."""
    out: list[tuple[str, float]] = []
    if searches.bm25 is not None:
        if chunk_scores is None:
            chunk_scores = searches.bm25.chunk_scores(info.augmented)
        out.append(("bm25", float(chunk_scores.max()) if len(chunk_scores) else 0.0))
    if dense and searches.vector_store is not None:
        out.append(("dense", searches.best_dense(info.augmented, settings)))
    return tuple(out)


def off_topic(signals: dict[str, float], settings: Settings) -> bool:
    """Whether retrieval's relevance signals say the question has no legal content: no word of it matches the
    laws (BM25 below OFF_TOPIC_BM25) and the vectors find nothing close either, or its words match weakly
    (below OFF_TOPIC_WEAK_BM25) and the vectors find nothing close (below OFF_TOPIC_DENSE). Every threshold is
    set below every gold question's value (bench/abstain.py). Without the vectors only the first test runs."""
    bm25, dense = signals.get("bm25"), signals.get("dense")
    if bm25 is None:
        return dense is not None and dense < settings.off_topic_dense
    if bm25 < settings.off_topic_bm25:
        return dense is None or dense < settings.off_topic_dense_rescue
    return dense is not None and bm25 < settings.off_topic_weak_bm25 and dense < settings.off_topic_dense
