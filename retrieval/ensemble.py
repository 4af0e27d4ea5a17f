"""Weighted reciprocal-rank fusion of dense and BM25 results, per article, with the fused score kept."""

from __future__ import annotations

import logging
from collections import defaultdict

from langchain_classic.retrievers import EnsembleRetriever
from langchain_core.documents import Document

logger = logging.getLogger(__name__)


class ScoredEnsembleRetriever(EnsembleRetriever):
    """`EnsembleRetriever` that fuses each list's first document per `id_key` and records the fused score.

    RRF assumes every list holds unique items: a dense list with the Russian and the Kazakh text of one
    article, or BM25 with several chunks of it, would otherwise count that article twice. The fused score goes
    to `metadata["score"]` (and each retriever's rank to `metadata["ranks"]`) of copies of the documents.
    """

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
            Document(
                page_content=first[k].page_content,
                metadata={**first[k].metadata, "score": scores[k], "ranks": ranks[k]},
                id=first[k].id,
            )
            for k in ordered
        ]
