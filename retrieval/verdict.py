"""Whether the corpus answers a question at all: a named article that exists, a named one that does not, a code
the registry lacks, or nothing relevant (off-topic), from the searches' relevance signals."""

from __future__ import annotations

import logging
import re

import numpy as np

from config import Settings
from corpus.lang import normalize
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
    message: str | None = None,
) -> Verdict:
    """Whether to answer: a named existing article is answered; a code the registry lacks or an article
    that does not exist is said so; small talk, or a question naming neither whose relevance is below its
    setting, is off-topic. `message`: what the user wrote, when `info` reads more (a follow-up glued to the
    conversation): «спасибо» after an answer is small talk, not the previous question again. Without `explicit`
    (references not read) every question is answered."""
    if explicit is None:
        return Verdict()
    if small_talk(info.text if message is None else message):
        return Verdict("off_topic")
    if explicit.keys(info):
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


# Chat words with no legal content, as written (normalized, not stemmed): a message made of these alone is small talk
# whatever the searches find — «как дела» matches «дело» (a case), «қалайсыз» stems like «қала», «ок» and «понятно,
# спасибо» land near anything in the vectors. «да» and «нет» are not here: they may answer something.
_SMALL_TALK = frozenset(
    """
    привет приветствую здравствуйте здравствуй добрый доброе доброго день вечер утро утра дня вечера хай
    как дела делишки ты вы у тебя вас твои ваши всем
    спасибо спс благодарю большое огромное понятно ясно ок окей хорошо ладно отлично супер класс пока до свидания
    hi hello hey thanks thank you ok okay bye
    сәлем салем сәлеметсіз салеметсиз сәлеметсіздер бе ме қалайсыз калайсыз қалың калын қалай калай жағдай жагдай
    жағдайың жағдайыңыз жагдайыныз рахмет рақмет көп коп үлкен жақсы жаксы түсінікті тусиникти түсіндім сау
    болыңыз болыныз бол қайырлы кайырлы күн кун таң тан кеш
    """.split()
)
_CHAT_WORD_RE = re.compile(r"[^\W_]+")


def small_talk(text: str) -> bool:
    """Whether a message is only greetings, thanks or «how are you», in Russian, Kazakh or English."""
    words = _CHAT_WORD_RE.findall(normalize(text))
    return bool(words) and all(w in _SMALL_TALK for w in words)


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
