"""The ranking after the first stage: one Document per article, best first, passed through document compressors
(`BaseDocumentCompressor`: learned ranker, rerank, explicit references first, remedy routes) that each return a
new list and never touch their inputs.

A ranked Document says why it is there in `metadata["via"]` — named in the question ("explicit"), found by the
search ("found", the default), a remedy route's ("remedy") or the synonym map's moved up ("synonyms") — and
`metadata["found"] is False` when the search did not give it (a named, route or map article taken from the corpus:
it is read from its beginning). Its score is
`metadata["score"]`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
    Callbacks,
)
from langchain_core.documents import Document
from langchain_core.documents.compressor import BaseDocumentCompressor
from pydantic import ConfigDict

from index.titles import TitleVectors
from retrieval.articles import ArticleChunks, ArticleKey, key_of
from retrieval.query import QueryInfo, analyze_query
from retrieval.records import Query, as_query

logger = logging.getLogger(__name__)


def via(doc: Document) -> str:
    """Why a ranked article is there: "explicit", "found" or "remedy"."""
    return str(doc.metadata.get("via") or ("remedy" if doc.metadata.get("remedy") else "found"))


def score_of(doc: Document) -> float:
    return float(doc.metadata.get("score", 0.0))


def found_by_search(doc: Document) -> bool:
    """Whether the search gave this article (its best-matching chunks are known), not only its name."""
    return doc.metadata.get("found", True) is not False


def ranked_copy(doc: Document, **update: Any) -> Document:
    """A copy of `doc` with metadata updated (`model_copy`: not validated again, ~700 copies a question)."""
    return doc.model_copy(update={"metadata": {**doc.metadata, **update}})


def from_corpus(articles: ArticleChunks, key: ArticleKey, **meta: Any) -> Document:
    """An article the search did not give, for the ranking: its first Russian chunk, `found` False."""
    first = articles.documents[articles.positions(key, "ru")[0]]
    return ranked_copy(first, found=False, **meta)


class DemoteRepealed(BaseDocumentCompressor):
    """Repealed articles after the others, each group in its order. A repealed article keeps only its heading
    and a note: short, so BM25 loves it, but a question about the law in force is not answered by it (named
    explicitly, it still comes first)."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        return sorted(documents, key=lambda d: d.metadata.get("status") == "repealed")


class OwnBestAt(BaseDocumentCompressor):
    """A follow-up's own best article (`metadata["own_best"]`: the best of the search of the message's own words,
    marked by the law-aware first stage) moved up to rank `Followup.own_best_at` when it ranks lower and is in
    force: a message the conversation's words outweigh still shows what it asks on its own in the top few, so a
    change of subject read as a continuation costs the continuation one place, not the answer. It takes the score
    between its new neighbours'."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        at = query.followup.own_best_at if isinstance(query, Query) else None
        where = next((i for i, d in enumerate(documents) if d.metadata.get("own_best")), None)
        if at is None or where is None or where < at or documents[where].metadata.get("status") == "repealed":
            return documents
        ranked = [d for i, d in enumerate(documents) if i != where]
        below = score_of(ranked[at - 1])
        score = (score_of(ranked[at - 2]) + below) / 2 if at >= 2 else below + 1e-9
        return [*ranked[: at - 1], ranked_copy(documents[where], score=score), *ranked[at - 1 :]]


class SynonymFloor(BaseDocumentCompressor):
    """The synonym map's articles for the question (`QueryInfo.synonym_refs`, retrieval/data/synonyms.json) no lower
    than rank `rank`: one the ranking put below is moved up to it (or, not found, inserted from the corpus), in the
    map's order, with the score of the article before it. The map only writes their headings into the query, and a
    long question's other words outweigh one line: of jurhelp_train's 200, the map names a gold article for 33, and
    4 of those ranked below the top 10. `rank` is the number of articles the answer reads (settings.rerank_top_n),
    so what the map names reaches the answer. Articles already at or above `rank` keep their places. A follow-up
    searched with its conversation takes the map's articles for the message's own words (`Followup.own`): the
    earlier turns' already had their answer."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    articles: ArticleChunks
    """The corpus by article (a map article must exist in it)."""
    rank: int = 8
    analyze: Callable[[str], QueryInfo] = analyze_query

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        q = as_query(query, self.analyze)
        refs = (self.analyze(q.followup.own) if q.followup.own else q.info).synonym_refs
        ranked = list(documents)
        head = {key_of(d) for d in ranked[: self.rank]}
        low = [k for k in dict.fromkeys((r.doc_id, r.article) for r in refs) if k not in head and k in self.articles]
        if not low or self.rank < 1:
            return ranked
        found = {key_of(d): d for d in ranked[self.rank :]}
        out = ranked[: self.rank - 1]
        score = score_of(out[-1]) if out else 1.0
        for k in low:
            doc = found[k] if k in found else from_corpus(self.articles, k)
            out.append(ranked_copy(doc, score=score, via="synonyms"))
        return [*out, *(d for d in ranked[self.rank - 1 :] if key_of(d) not in low)]


class TitleRerank(BaseDocumentCompressor):
    """The first `top` articles the search found reordered by their fused score (relative to the best) plus
    `weight` times how much closer the question's vector is to the article's heading than to the others' on
    average (index/titles.py): neighbouring articles on one subject («Дисциплинарные взыскания», 64, and «Порядок
    применения дисциплинарных взысканий», 65) are told apart by what each is about. Each place keeps its score,
    so scores stay non-increasing; an article without a heading counts as average.

    A question that asks about a punishment, fine or liability and finds a law of sanctions first (`sanction_laws`:
    the Criminal Code and the Code on Administrative Offences, read from the corpus) is reordered with
    `sanction_factor` times the weight (0 by default: the order found there stands): the offences' short headings
    («Кража») would be weighed against every law's «Ответственность за нарушение законодательства о …», which a
    question on liability is always near."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    titles: TitleVectors
    query_vector: Callable[[Query], Sequence[float] | None]
    weight: float
    top: int = 10
    sanction_factor: float = 1.0  # the weight's factor for a question that asks about a sanction and finds one first
    sanction_laws: Callable[[], frozenset[str]] = frozenset  # the laws of sanctions (retrieval/routing.py)

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        places = [
            i
            for i, d in enumerate(documents[: self.top])
            if found_by_search(d) and via(d) == "found" and d.metadata.get("status") != "repealed"
        ]
        if not isinstance(query, Query) or len(places) < 2:
            return documents
        first_law = documents[places[0]].metadata.get("doc_id")
        finds_sanction = query.info.asks_sanction and first_law in self.sanction_laws()
        weight = self.weight * (self.sanction_factor if finds_sanction else 1.0)
        vector = self.query_vector(query) if weight else None
        if vector is None:
            return documents
        sims = self.titles.similarity(vector, [key_of(documents[i]) for i in places])
        known = [s for s in sims if s is not None]
        mean = sum(known) / len(known) if known else 0.0
        best = max(score_of(documents[i]) for i in places) or 1.0
        order = sorted(
            zip(places, sims, strict=True),
            key=lambda p: -(score_of(documents[p[0]]) / best + weight * ((mean if p[1] is None else p[1]) - mean)),
        )
        out = list(documents)
        for place, (i, _) in zip(places, order, strict=True):
            out[place] = documents[i] if i == place else ranked_copy(documents[i], score=score_of(documents[place]))
        return out


class CompressedRetriever(ContextualCompressionRetriever):
    """`ContextualCompressionRetriever` whose compressors run even when the base finds nothing: the articles a
    question names come first whether or not the search found anything."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        docs = self.base_retriever.invoke(query, config={"callbacks": run_manager.get_child()}, **kwargs)
        return list(self.base_compressor.compress_documents(docs, query, callbacks=run_manager.get_child()))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        docs = await self.base_retriever.ainvoke(query, config={"callbacks": run_manager.get_child()}, **kwargs)
        compressed = await self.base_compressor.acompress_documents(docs, query, callbacks=run_manager.get_child())
        return list(compressed)
