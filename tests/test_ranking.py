"""The retrieval composition's steps used on their own, on the real slice with BM25 (retrieval/ranking.py,
the compressors of explicit.py, remedies.py, rerank.py, assembly.py, and the `Query` of records.py): each takes
Documents and a question, returns new Documents in the documented order, and never touches its inputs."""

from __future__ import annotations

import copy

import pytest
from langchain_classic.retrievers import ContextualCompressionRetriever

from retrieval.articles import key_of
from retrieval.assembly import ArticleAssembly
from retrieval.explicit import ExplicitFirst
from retrieval.law_aware import LawAwareRetriever
from retrieval.pipeline import Stages
from retrieval.query import analyze_query
from retrieval.ranking import CompressedRetriever, DemoteRepealed, SynonymFloor, found_by_search, via
from retrieval.records import Followup, Query
from retrieval.remedies import RemedyRoutes
from retrieval.rerank import HeadRerank, load_reranker
from tests.support.retrieval import TK, UK, TinyCrossEncoder

WAGES = "Работодатель третий месяц не выплачивает заработную плату, что мне делать?"


def _keys(docs) -> list[tuple[str, str]]:
    return [key_of(d) for d in docs]


def _not_analysed(question: str):
    raise AssertionError(f"analysed again: {question!r}")


def test_a_query_carries_its_analysis_through_the_first_stage(bm25_retrieval) -> None:
    question = "Что мне будет, если я украду телефон у соседа?"
    query = bm25_retrieval.query(question)
    assert query == question and query.info.is_criminal and query.followup == Followup()
    # Given a Query, neither the law-aware step nor the ensemble analyses the question again.
    first_stage = LawAwareRetriever(
        base=bm25_retrieval.ensemble().model_copy(update={"analyze": _not_analysed}),
        within=lambda doc_id: bm25_retrieval.ensemble({"doc_id": doc_id}).model_copy(update={"analyze": _not_analysed}),
        analyze=_not_analysed,
        min_docs=12,
    )
    docs = first_stage.invoke(query)
    assert _keys(docs) == _keys(bm25_retrieval.first_stage.invoke(question))
    assert sum(d.metadata["doc_id"] == UK for d in docs) >= 12
    with pytest.raises(AssertionError, match="analysed again"):
        first_stage.invoke(question)  # a plain str is analysed by the step itself


def test_explicit_first_puts_the_named_articles_first_then_the_found_ones(bm25_retrieval) -> None:
    question = "ст. 187 УК и кража телефона"
    found = bm25_retrieval.candidates("кража телефона")[:10]
    before = copy.deepcopy(found)
    ranked = ExplicitFirst(explicit=bm25_retrieval.explicit).compress_documents(found, question)
    assert found == before  # inputs untouched
    assert _keys(ranked)[0] == (UK, "187")
    assert via(ranked[0]) == "explicit" and not found_by_search(ranked[0]) and ranked[0].metadata["score"] == 1.0
    assert _keys(ranked)[1:] == [k for k in _keys(found) if k != (UK, "187")]  # found ones keep their order
    assert all(via(d) == "found" and found_by_search(d) for d in ranked[1:])


def test_a_number_named_without_a_code_is_lifted_among_the_found(bm25_retrieval) -> None:
    found = bm25_retrieval.candidates("кража телефона")[:20]
    number = found[5].metadata["article"]
    ranked = ExplicitFirst(explicit=bm25_retrieval.explicit).compress_documents(found, f"статья {number}")
    lifted = [k for k in _keys(found) if k[1] == number]
    assert _keys(ranked)[: len(lifted)] == lifted
    assert [d.metadata["score"] for d in ranked[: len(lifted)]] == [1.0] * len(lifted)


def test_compressors_run_even_when_the_search_finds_nothing(bm25_retrieval) -> None:
    nothing = bm25_retrieval.ensemble({"doc_id": "no-such-document"})
    explicit = ExplicitFirst(explicit=bm25_retrieval.explicit)
    question = "ст. 188 УК"
    assert nothing.invoke(question) == []
    assert _keys(CompressedRetriever(base_retriever=nothing, base_compressor=explicit).invoke(question)) == [
        (UK, "188")
    ]
    # LangChain's own retriever skips its compressor then: the named article would be lost.
    assert ContextualCompressionRetriever(base_retriever=nothing, base_compressor=explicit).invoke(question) == []


def test_remedy_routes_enter_the_ranking_at_their_rank(bm25_retrieval) -> None:
    query = bm25_retrieval.query(WAGES)
    found = list(bm25_retrieval.variant(Stages(dense=False, rerank=False, remedies=False)).retriever.invoke(query))
    before = copy.deepcopy(found)
    routes = RemedyRoutes(articles=bm25_retrieval.articles, rank=3)
    ranked = routes.compress_documents(found, query)
    assert found == before
    assert _keys(ranked)[:3] == _keys(found)[:3]
    assert _keys(ranked)[3:5] == [(TK, "159"), (TK, "160")]
    assert [via(d) for d in ranked[3:5]] == ["remedy", "remedy"]
    assert [d.metadata["score"] for d in ranked[3:5]] == [found[2].metadata["score"]] * 2
    rest = [k for k in _keys(ranked) if k not in {(TK, "159"), (TK, "160")}]
    assert rest == [k for k in _keys(found) if k not in {(TK, "159"), (TK, "160")}]
    # A follow-up whose previous answer gave the route does not get it again.
    given = Query(WAGES, query.info, Followup(given=frozenset({(TK, "159"), (TK, "160")})))
    assert _keys(routes.compress_documents(found, given)) == _keys(found)


def test_the_synonym_maps_articles_rank_no_lower_than_the_answer_reads(bm25_retrieval) -> None:
    question = "Нас заставляют работать в выходные без доплаты"
    query = bm25_retrieval.query(question)
    mapped = [(r.doc_id, r.article) for r in query.info.synonym_refs]
    assert mapped == [(TK, "84"), (TK, "85"), (TK, "109")]
    stages = Stages(dense=False, rerank=False, remedies=False)
    found = list(bm25_retrieval.variant(stages, synonym_floor=False).retriever.invoke(query))
    before = copy.deepcopy(found)
    floor = SynonymFloor(articles=bm25_retrieval.articles, rank=2)
    ranked = floor.compress_documents(found, query)
    assert found == before
    low = [k for k in mapped if k not in _keys(found)[:2]]
    assert low, "the search alone must leave a map article below rank 2 for this test to show anything"
    assert _keys(ranked)[:1] == _keys(found)[:1]
    assert _keys(ranked)[1 : 1 + len(low)] == low
    assert [via(d) for d in ranked[1 : 1 + len(low)]] == ["synonyms"] * len(low)
    assert [k for k in _keys(ranked) if k not in low] == [k for k in _keys(found) if k not in low]
    scores = [d.metadata["score"] for d in ranked[: 2 + len(low)]]  # the moved take the score before them
    assert scores == sorted(scores, reverse=True)
    # One the search did not give comes from the corpus, read from its beginning.
    others = [d for d in found if key_of(d) not in set(mapped)][:3]
    inserted = floor.compress_documents(others, query)
    assert _keys(inserted)[1:4] == mapped and not any(found_by_search(d) for d in inserted[1:4])
    # The pipeline lifts the map's articles into what the answer reads (RERANK_TOP_N): «бермей жүр» names КоАП 87
    # (wages unpaid), which the same search without the floor ranks lower on the slice.
    wages, koap_87, n = "Жалақымды үш ай бермей жүр", ("K1400000235", "87"), bm25_retrieval.settings.rerank_top_n
    without = bm25_retrieval.variant(Stages(dense=False, rerank=False), synonym_floor=False).rank_articles(wages, n)
    assert koap_87 not in [(d, a) for d, a, _ in without]
    assert koap_87 in [
        (d, a) for d, a, _ in bm25_retrieval.variant(Stages(dense=False, rerank=False)).rank_articles(wages, n)
    ]


def test_repealed_articles_go_last_each_group_in_its_order(bm25_retrieval) -> None:
    docs = bm25_retrieval.first_stage.invoke("утратила силу статья")[:30]
    repealed = [d for d in docs if d.metadata.get("status") == "repealed"]
    assert repealed, "the slice has repealed articles for this question"
    out = DemoteRepealed().compress_documents(docs, "утратила силу статья")
    assert out == [d for d in docs if d not in repealed] + repealed


def test_article_assembly_gives_one_citable_document_per_article(bm25_retrieval) -> None:
    query = bm25_retrieval.query("ст. 187 УК и кража из нефтегазопровода")
    ranked = bm25_retrieval.retriever.invoke(query)
    assembly = ArticleAssembly(
        articles=bm25_retrieval.articles, max_chars=400, top_n=3, chunk_scores=bm25_retrieval.bm25.chunk_scores
    )
    docs = assembly.compress_documents(ranked, query)
    assert [d.metadata["rank"] for d in docs] == [1, 2, 3]
    assert _keys(docs) == _keys(ranked)[:3]
    assert docs[0].metadata["explicit"] is True and "1. " in docs[0].page_content  # named: from its beginning
    theft = next(d for d in docs if key_of(d) == (UK, "188"))
    assert "нефтегазопровода" in theft.page_content  # found: its best-matching chunk
    assert all(len(d.page_content) <= 400 and d.page_content.startswith(d.metadata["code"]) for d in docs)


def test_head_rerank_orders_the_head_and_keeps_the_tail_below(bm25_retrieval, tmp_path) -> None:
    from flashrank.Config import model_file_map

    settings = bm25_retrieval.settings.model_copy(update={"flashrank_cache_dir": tmp_path})
    model = TinyCrossEncoder(tmp_path / settings.flashrank_model, model_file_map[settings.flashrank_model])
    question = "кража телефона"
    found = bm25_retrieval.candidates(question)[:12]
    before = copy.deepcopy(found)
    ranked = HeadRerank(reranker=load_reranker(settings, top_n=5)).compress_documents(found, question)
    assert found == before
    head = sorted(found[:5], key=lambda d: model.score(question, d.page_content), reverse=True)
    assert _keys(ranked) == _keys(head) + _keys(found[5:])
    scores = [d.metadata["score"] for d in ranked]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] == pytest.approx(model.score(question, head[0].page_content), abs=1e-4)


def test_the_pipeline_analyses_a_question_once(bm25_retrieval, monkeypatch) -> None:
    import retrieval.pipeline

    calls: list[str] = []

    def counted(question: str, **kw):
        calls.append(question)
        return analyze_query(question, **kw)

    monkeypatch.setattr(retrieval.pipeline, "analyze_query", counted)
    fresh = bm25_retrieval.variant()  # nothing remembered yet
    fresh.retrieve("Работодатель не платит зарплату")
    assert calls == ["Работодатель не платит зарплату"]
