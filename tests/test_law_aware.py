"""Law-aware first stage on the real slice: crime questions always get Criminal Code candidates, a named
code gets its articles searched and preferred."""

from __future__ import annotations

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from retrieval.law_aware import LawAwareRetriever
from tests.support.retrieval import KOAP, TK, UK

CRIME = "Что мне будет, если я украду телефон у соседа?"
LABOUR = "Работодатель третий месяц не выплачивает заработную плату, что делать?"


class Recording(BaseRetriever):
    """Delegates to another retriever and remembers the queries it was given."""

    inner: BaseRetriever
    queries: list[str] = []

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        self.queries.append(query)
        return self.inner.invoke(query)


def _law_aware(pipeline, base_doc_id: str, **kw) -> LawAwareRetriever:
    """Base search limited to one code (so it finds nothing elsewhere by itself); fill from any code."""
    ensemble = pipeline.ensemble
    return LawAwareRetriever(
        base=Recording(inner=ensemble({"doc_id": base_doc_id})),
        within=lambda doc_id: ensemble({"doc_id": doc_id}),
        analyze=pipeline.analyze,
        **{"min_docs": 12, **kw},
    )


def test_crime_question_gets_twelve_criminal_code_articles(bm25_retrieval):
    retriever = _law_aware(bm25_retrieval, TK)
    docs = retriever.invoke(CRIME)
    uk = [d for d in docs if d.metadata["doc_id"] == UK]
    assert len(uk) == 12
    assert all(d.metadata["law_aware"] for d in uk)
    assert not any(d.metadata.get("law_aware") for d in docs if d.metadata["doc_id"] != UK)
    assert "188" in [d.metadata["article"] for d in uk[:3]]  # the best Criminal Code match is theft
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)
    # the base got the question as asked (each search reads it its own way); the crime check read it too
    info = bm25_retrieval.analyze(CRIME)
    assert info.is_criminal and retriever.base.queries == [CRIME]


def test_labour_question_gets_no_forced_criminal_code_articles(bm25_retrieval):
    info = bm25_retrieval.analyze(LABOUR)
    assert not info.is_criminal
    docs = _law_aware(bm25_retrieval, TK).invoke(LABOUR)
    assert docs and not any(d.metadata["doc_id"] == UK or d.metadata.get("law_aware") for d in docs)


def test_enough_criminal_code_articles_already_means_nothing_added(bm25_retrieval):
    docs = _law_aware(bm25_retrieval, UK).invoke(CRIME)
    assert sum(d.metadata["doc_id"] == UK for d in docs) >= 12
    assert not any(d.metadata.get("law_aware") for d in docs)


def test_pipeline_first_stage_for_crime_and_labour(bm25_retrieval):
    crime = bm25_retrieval.first_stage.invoke("За что могут посадить в тюрьму за драку?")
    assert sum(d.metadata["doc_id"] == UK for d in crime) >= bm25_retrieval.settings.criminal_min_docs
    labour = bm25_retrieval.first_stage.invoke(LABOUR)
    assert not any(d.metadata.get("law_aware") for d in labour)
    assert labour[0].metadata["doc_id"] == TK


def test_a_named_code_is_searched_and_preferred(bm25_retrieval):
    question = "Какой штраф по КоАП за мелкое хулиганство?"
    info = bm25_retrieval.analyze(question)
    assert info.codes == (KOAP,) and not info.is_criminal
    docs = _law_aware(bm25_retrieval, TK).invoke(question)  # the base alone finds only Labour Code articles
    koap = [d for d in docs if d.metadata["doc_id"] == KOAP]
    assert len(koap) == 12 and all(d.metadata["law_aware"] for d in koap)
    assert docs[0].metadata["doc_id"] == KOAP  # preferred: boosted above the Labour Code matches
    unboosted = _law_aware(bm25_retrieval, TK, named_boost=1.0).invoke(question)
    assert {d.id: d.metadata["score"] for d in unboosted if d.metadata["doc_id"] == KOAP} == pytest.approx(
        {d.id: d.metadata["score"] / 3.0 for d in koap}
    )


def test_switched_off_it_changes_nothing(bm25_retrieval):
    retriever = _law_aware(bm25_retrieval, TK, min_docs=0, named_boost=1.0)
    base = bm25_retrieval.ensemble({"doc_id": TK}).invoke(CRIME)
    assert retriever.invoke(CRIME) == base
