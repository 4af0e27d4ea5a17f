"""The first stage's fusion: the searches (retrieval/searches.py: BM25, dense, latent terms) as retrievers in an
`EnsembleRetriever`, fused by weighted reciprocal rank per article, the fused score kept.

    Query ─┬─ augmented ─ BM25 ───────────────┬─ weighted RRF per article (c = settings.rrf_c) ─ Documents
           ├─ augmented ─ head+tail ─ dense ──┤  (metadata "score": fused, "ranks": each search's rank)
           └─ as asked, head ─ latent terms ──┘
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable

from langchain_classic.retrievers import EnsembleRetriever
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig

from config import Settings
from retrieval.query import QueryInfo, analyze_query
from retrieval.records import as_query
from retrieval.searches import Searches

logger = logging.getLogger(__name__)


class ScoredEnsembleRetriever(EnsembleRetriever):
    """`EnsembleRetriever` that fuses each list's first document per `id_key` and records the fused score.

    RRF assumes every list holds unique items: a dense list with the Russian and the Kazakh text of one
    article, or BM25 with several chunks of it, would otherwise count that article twice. The fused score goes
    to `metadata["score"]` (and each retriever's rank to `metadata["ranks"]`) of copies of the documents.
    The retrievers get the analysed question (`Query`; a plain `str` is analysed once here by `analyze`).
    """

    analyze: Callable[[str], QueryInfo] = analyze_query
    """Question → QueryInfo, for a question given as a plain `str`."""

    def rank_fusion(
        self, query: str, run_manager: CallbackManagerForRetrieverRun, *, config: RunnableConfig | None = None
    ) -> list[Document]:
        return super().rank_fusion(as_query(query, self.analyze), run_manager, config=config)

    async def arank_fusion(
        self, query: str, run_manager: AsyncCallbackManagerForRetrieverRun, *, config: RunnableConfig | None = None
    ) -> list[Document]:
        return await super().arank_fusion(as_query(query, self.analyze), run_manager, config=config)

    def weighted_reciprocal_rank(self, doc_lists: list[list[Document]]) -> list[Document]:
        if len(doc_lists) != len(self.weights):
            raise ValueError("Number of rank lists must be equal to the number of weights.")
        scores: dict[str, float] = defaultdict(float)
        ranks: dict[str, list[int | None]] = {}
        first: dict[str, Document] = {}
        for n, (docs, weight) in enumerate(zip(doc_lists, self.weights, strict=True)):
            rank = 0
            for doc in docs:
                key = doc.page_content if self.id_key is None else doc.metadata[self.id_key]
                ranks.setdefault(key, [None] * len(doc_lists))
                if ranks[key][n] is not None:
                    continue
                rank += 1
                ranks[key][n] = rank
                scores[key] += weight / (rank + self.c)
                first.setdefault(key, doc)
        ordered = sorted(first, key=lambda k: scores[k], reverse=True)
        return [
            first[k].model_copy(update={"metadata": {**first[k].metadata, "score": scores[k], "ranks": ranks[k]}})
            for k in ordered
        ]


def fused_search(
    searches: Searches,
    settings: Settings,
    analyze: Callable[[str], QueryInfo],
    *,
    k: int,
    where: dict[str, str] | None = None,
) -> ScoredEnsembleRetriever:
    """Weighted RRF per article of the searches there are, each `k` deep, optionally within metadata values."""
    weighted = searches.weighted(settings, k=k, where=where)
    if not weighted:
        raise ValueError("Retrieval needs at least one search: BM25, a vector store or latent terms")
    weights, retrievers = zip(*weighted, strict=True)
    return ScoredEnsembleRetriever(
        retrievers=list(retrievers), weights=list(weights), c=settings.rrf_c, id_key="article_key", analyze=analyze
    )
