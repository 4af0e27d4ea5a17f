"""Explicit references («ст. 188 УК», «статьи 190-192 УК РК», «ҚК-нің 188-бабы»): those articles first."""

from __future__ import annotations

import logging
from collections.abc import Callable

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from retrieval.articles import ArticleChunks, ArticleKey
from retrieval.query import QueryInfo

logger = logging.getLogger(__name__)


class ExplicitRetriever(BaseRetriever):
    """The articles a question names itself, in the order it names them, each from its beginning.

    A reference without a code («статья 15» in a question naming no code) is ambiguous: it is left to the
    pipeline, which lifts that number among the articles the search found (see `unresolved`).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    articles: ArticleChunks
    """The corpus, by article."""
    analyze: Callable[[str], QueryInfo]
    """Question → QueryInfo (the pipeline's cached `analyze_query`)."""
    max_chars: int = 1800
    """Characters of each article's Document."""

    def keys(self, info: QueryInfo) -> list[ArticleKey]:
        """The referenced articles that exist in the corpus, in the order asked (missing ones are logged)."""
        out: list[ArticleKey] = []
        for ref in info.refs:
            key = (ref.doc_id, ref.article)
            if not ref.doc_id or key in out:
                continue
            if key in self.articles:
                out.append(key)
            else:
                logger.info("Question names %s article %s, which the corpus lacks", ref.doc_id, ref.article)
        return out

    @staticmethod
    def unresolved(info: QueryInfo) -> list[str]:
        """Article numbers referred to without a code."""
        return list(dict.fromkeys(ref.article for ref in info.refs if not ref.doc_id))

    def documents(self, info: QueryInfo) -> list[Document]:
        """One Document per referenced article (question's language when the article has it), score 1.0."""
        return [
            self.articles.article_document(key, info.lang, self.max_chars, score=1.0, explicit=True)
            for key in self.keys(info)
        ]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self.documents(self.analyze(query))
