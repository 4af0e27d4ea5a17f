"""Law-aware first stage: a crime question always gets Criminal Code candidates; a named code is searched and
its articles are preferred, and so are the codes a conversation's previous answer cited (`Followup.prefer_docs`)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from corpus.legal.registry import CRIMINAL_CODE_ID
from retrieval.articles import key_of
from retrieval.query import QueryInfo
from retrieval.records import Query, as_query

logger = logging.getLogger(__name__)


class LawAwareRetriever(BaseRetriever):
    """Runs `base` on the analysed question (`Query`: each of its searches reads it its own way, e.g. BM25 the
    augmented text), then, decided from the question as asked (not the augmented text, which names codes):

    - a crime question with fewer than `min_docs` Criminal Code articles gets the best missing ones from the
      same search limited to the Criminal Code;
    - a question naming a code («по Трудовому кодексу», «ҚК-нің») gets up to `min_docs` articles of that code
      the same way, and that code's articles count `named_boost` times their fused score;
    - the documents a follow-up prefers (`Followup.prefer_docs`: the codes the previous answer cited) are
      treated as named, and its own words (`Followup.own`) are searched the same way and fused in
      (`Followup.own_weight`); the best article of their own search is marked `metadata["own_best"]`
      (retrieval/ranking.py's `OwnBestAt` keeps it in the top few).

    Added articles keep the score the limited search gave them, so a strong match there ranks among the strong
    matches of the whole corpus rather than after all of them. A plain `str` is analysed by `analyze`.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    base: BaseRetriever
    """The first stage over the whole corpus (the ensemble of BM25, dense and latent-term searches)."""
    within: Callable[[str], BaseRetriever]
    """doc_id → the same first stage limited to that document."""
    analyze: Callable[[str], QueryInfo]
    """Question → QueryInfo, for a question given as a plain `str` and for a follow-up's own words."""
    min_docs: int = 12
    """Articles of the Criminal Code (crime questions) or of a named code among the candidates."""
    named_boost: float = 3.0
    """Score multiplier of the articles of a code the question names (1: no preference)."""
    code_id: str = CRIMINAL_CODE_ID
    rrf_c: float = 5.0
    """Reciprocal-rank constant of that fusion."""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        query = as_query(query, self.analyze)
        prefer, own = query.followup.prefer_docs, query.followup.own
        docs = self._law_aware(query, prefer, run_manager)
        if not own or own == query:
            return docs
        own_query = Query(own, self.analyze(own))
        # `own_weight` below 1: the conversation's search keeps the top and the own words' strong matches join it
        own_docs = self._law_aware(own_query, prefer, run_manager)
        fused = self._fuse([(1.0, docs), (query.followup.own_weight, own_docs)])
        best = key_of(own_docs[0]) if own_docs else None
        return [
            d.model_copy(update={"metadata": {**d.metadata, "own_best": True}}) if key_of(d) == best else d
            for d in fused
        ]

    def _fuse(self, rankings: list[tuple[float, list[Document]]]) -> list[Document]:
        """Reciprocal-rank fusion per article; each article keeps its Document from the first list having it."""
        first: dict[object, Document] = {}
        scores: dict[object, float] = {}
        for weight, ranking in rankings:
            for rank, d in enumerate(ranking, start=1):
                first.setdefault(key_of(d), d)
                scores[key_of(d)] = scores.get(key_of(d), 0.0) + weight / (rank + self.rrf_c)
        ordered = sorted(first, key=lambda k: scores[k], reverse=True)
        return [first[k].model_copy(update={"metadata": {**first[k].metadata, "score": scores[k]}}) for k in ordered]

    def _law_aware(
        self, query: Query, prefer: tuple[str, ...], run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        info = query.info
        docs = self.base.invoke(query, config={"callbacks": run_manager.get_child("base")})
        named = list(dict.fromkeys([*info.codes, *prefer]))
        focus = list(named)
        if info.is_criminal and self.code_id not in focus:
            focus.append(self.code_id)
        if not focus or self.min_docs <= 0 and self.named_boost == 1:
            return docs
        have = {key_of(d) for d in docs}
        for doc_id in focus:
            present = sum(1 for d in docs if d.metadata["doc_id"] == doc_id)
            if present >= self.min_docs:
                continue
            limited = self.within(doc_id).invoke(query, config={"callbacks": run_manager.get_child(doc_id)})
            for doc in limited:
                if present >= self.min_docs:
                    break
                if key_of(doc) in have:
                    continue
                have.add(key_of(doc))
                docs.append(doc.model_copy(update={"metadata": {**doc.metadata, "law_aware": True}}))
                present += 1
        named_set = set(named)

        def score(d: Document) -> float:
            s = d.metadata.get("score", 0.0)
            return s * self.named_boost if d.metadata["doc_id"] in named_set else s

        ranked = sorted(docs, key=score, reverse=True)
        return [
            d.model_copy(update={"metadata": {**d.metadata, "score": score(d)}})
            if d.metadata["doc_id"] in named_set
            else d
            for d in ranked
        ]
