"""Article assembly, the last compressor: the ranking's top articles, one citable Document each."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np
from langchain_core.callbacks import Callbacks
from langchain_core.documents import Document
from langchain_core.documents.compressor import BaseDocumentCompressor
from pydantic import ConfigDict

from retrieval.articles import ArticleChunks, key_of
from retrieval.query import QueryInfo, analyze_query
from retrieval.ranking import found_by_search, score_of, via
from retrieval.records import as_query

logger = logging.getLogger(__name__)


class ArticleAssembly(BaseDocumentCompressor):
    """The first `top_n` ranked articles (every named one and every remedy route's, even beyond), one Document each
    (`ArticleChunks.article_document`): the header, then the article's chunks that match the question best
    (`chunk_scores`) in the question's language when the article has it — from its beginning when the search did
    not give it — with its `rank`, `score`, and `explicit` / `remedy` / `law_aware` as the ranking says."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    articles: ArticleChunks
    """The corpus by article."""
    max_chars: int = 1800
    """Characters of each article's Document (settings.context_max_chars)."""
    top_n: int = 8
    """Articles given (settings.rerank_top_n), unless more are named."""
    chunk_scores: Callable[[str], np.ndarray] | None = None
    """Augmented question → a score of every chunk (BM25's); None: each article from its beginning."""
    analyze: Callable[[str], QueryInfo] = analyze_query
    """Question → QueryInfo, for a question given as a plain `str`."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        info = as_query(query, self.analyze).info
        scores = self.chunk_scores(info.augmented) if self.chunk_scores is not None else None
        n_explicit = sum(1 for d in documents if via(d) == "explicit")
        given = [
            (rank, doc)
            for rank, doc in enumerate(documents, start=1)
            if rank <= max(self.top_n, n_explicit) or via(doc) == "remedy"
        ]
        out: list[Document] = []
        for rank, doc in given:
            key, why = key_of(doc), via(doc)
            extra: dict[str, object] = {"rank": rank, "explicit": why == "explicit"}
            if why == "remedy":
                extra["remedy"] = True
            found = found_by_search(doc)
            if found and doc.metadata.get("law_aware"):
                extra["law_aware"] = True
            order = None
            if found and scores is not None:
                positions = self.articles.positions(key, info.lang)
                order = sorted((p for p in positions if scores[p] > 0), key=lambda p: -scores[p]) or None
            out.append(
                self.articles.article_document(
                    key, info.lang, self.max_chars, order=order, score=score_of(doc), **extra
                )
            )
        return out
