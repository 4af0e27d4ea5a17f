"""What travels through retrieval: the question with its analysis (`Query`), what a conversation adds to it
(`Followup`), and what comes out (`Verdict`, `RetrievalResult`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from langchain_core.documents import Document

from retrieval.articles import ArticleKey
from retrieval.query import ArticleRef, QueryInfo

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Followup:
    """What a conversation adds to the search of a follow-up: documents to prefer like a code the question
    names; the message's own words, searched too and fused with the search of the question (the conversation
    glued before them) at `own_weight` against 1, the best article of their own search ranked no lower than
    `own_best_at` (None: where the fusion puts it); and the remedy-route articles the previous answer already gave,
    not put at the top again. Empty (the default) for a single question: nothing changes."""

    prefer_docs: tuple[str, ...] = ()
    own: str = ""
    given: frozenset[ArticleKey] = frozenset()
    own_weight: float = 0.3
    own_best_at: int | None = None


NO_FOLLOWUP = Followup()  # a single question's


class Query(str):
    """The question as asked — a `str`, which is what LangChain's retrievers and compressors take — carrying its
    analysis (`info`, made once by the pipeline) and what a conversation adds (`followup`), so that no stage
    analyses it again. A stage given a plain `str` (used on its own) analyses it itself: `as_query`."""

    info: QueryInfo
    followup: Followup

    def __new__(cls, text: str, info: QueryInfo, followup: Followup = NO_FOLLOWUP) -> Query:
        query = super().__new__(cls, text)
        query.info = info
        query.followup = followup
        return query


def as_query(query: str, analyze: Callable[[str], QueryInfo]) -> Query:
    """`query` itself when it is a `Query`, else the text analysed by `analyze` (a stage used on its own)."""
    return query if isinstance(query, Query) else Query(query, analyze(query))


Status = Literal["answered", "no_such_article", "unknown_code", "off_topic"]


@dataclass(frozen=True)
class Verdict:
    """Whether the corpus answers the question, and if not, why: a named article that does not exist
    (`missing`, with the nearest existing ones as `suggestions`), a code the registry lacks (`unknown_codes`,
    as written), or nothing relevant found (`relevance` below the settings: see `retrieval.verdict`)."""

    status: Status = "answered"
    missing: tuple[ArticleRef, ...] = ()
    suggestions: tuple[Document, ...] = ()
    unknown_codes: tuple[str, ...] = ()
    relevance: tuple[tuple[str, float], ...] = ()  # (signal, value) of each search, e.g. ("bm25", 7.9)


@dataclass(frozen=True)
class RetrievalResult:
    """The analyzed question, one Document per article (best first; none unless the verdict is "answered"),
    the verdict, and how long each step took (ms)."""

    query: QueryInfo
    docs: list[Document]
    timings: dict[str, float] = field(default_factory=dict)
    verdict: Verdict = Verdict()
