"""BM25 over real chunks: the sparse scorer equals rank-bm25, and the retriever finds the right articles."""

from __future__ import annotations

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from retrieval.analyzer import analyze, analyze_phrases
from retrieval.articles import ArticleChunks
from retrieval.bm25 import ChunkBM25Retriever, SparseBM25, title_weighted
from tests.support.retrieval import CONSUMER, TK, UK


@pytest.fixture(scope="module")
def documents(corpus_slice):
    return ArticleChunks.from_chunks(corpus_slice.chunks).documents


@pytest.fixture(scope="module")
def retriever(documents):
    """Chunk-level BM25 over the whole slice (analyzed once for the module)."""
    return ChunkBM25Retriever.from_documents(documents, preprocess_func=analyze, k=5)


def test_sparse_scores_equal_rank_bm25(documents):
    sample = [d.page_content for d in documents if d.metadata["doc_id"] == UK][:1500]
    corpus = [analyze(t) for t in sample]
    reference = BM25Okapi(corpus)
    fast = SparseBM25(corpus)
    for question in (
        "кража чужого имущества",
        "работник отпуск заработная плата работник",
        "неизвестноеслово",
    ):
        terms = analyze(question)
        np.testing.assert_allclose(fast.get_scores(terms), reference.get_scores(terms), rtol=1e-4, atol=1e-4)
    top = fast.get_top_n(analyze("кража"), sample, n=3)
    assert top == reference.get_top_n(analyze("кража"), sample, n=3)
    assert top[0].startswith("УК РК. Статья 188. Кража")


def test_title_weight_counts_the_header_line():
    analyze_document = title_weighted(analyze, 3)
    assert analyze_document("УК РК. Статья 188. Кража\nТайное хищение") == [
        *analyze("УК РК. Статья 188. Кража") * 3,
        *analyze("Тайное хищение"),
    ]
    assert title_weighted(analyze, 1) is analyze


def test_theft_of_a_phone_finds_article_188_first_in_the_criminal_code(retriever):
    docs = retriever.model_copy(update={"filter": {"doc_id": UK}}).invoke("кража телефона")
    assert [d.metadata["article"] for d in docs][0] == "188"
    assert all(d.metadata["doc_id"] == UK for d in docs)
    scores = [d.metadata["bm25_score"] for d in docs]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0


def test_article_grouping_keeps_one_chunk_per_article(retriever):
    chunks = retriever.model_copy(update={"k": 40})
    articles = chunks.model_copy(update={"group_by": "article_key"})
    question = "ежегодный оплачиваемый трудовой отпуск работника продолжительность"
    by_chunk = chunks.invoke(question)
    by_article = articles.invoke(question)
    keys = [d.metadata["article_key"] for d in by_article]
    assert len(keys) == len(set(keys)) == 40
    assert len({d.metadata["article_key"] for d in by_chunk}) < 40  # long articles fill a chunk list
    assert by_article[0].metadata["doc_id"] == TK
    # an article scores as its best chunk
    assert by_article[0].metadata["bm25_score"] == by_chunk[0].metadata["bm25_score"]


def test_results_are_copies(retriever, documents):
    doc = retriever.invoke("кража")[0]
    original = next(d for d in documents if d.id == doc.id)
    assert "bm25_score" not in original.metadata
    assert doc.page_content == original.page_content


def test_kazakh_question_matches_kazakh_texts(retriever):
    docs = retriever.model_copy(update={"group_by": "article_key"}).invoke(
        "тұтынушының сапасы тиісті емес тауарды қайтару құқығы"
    )
    assert docs and all(d.metadata["lang"] == "kk" and d.metadata["doc_id"] == CONSUMER for d in docs)


def test_nothing_matching_returns_nothing(retriever):
    assert retriever.invoke("qwertyuiop") == []


def test_phrase_terms_pair_adjacent_stems():
    terms = analyze("Предварительная оплата товара")
    pairs = [f"{terms[0]}_{terms[1]}", f"{terms[1]}_{terms[2]}"]
    assert analyze_phrases("Предварительная оплата товара") == [*terms, *pairs]
    assert analyze_phrases("кража") == analyze("кража")  # one term: no pairs


def test_phrase_kept_together_outranks_scattered_words():
    from langchain_core.documents import Document

    together = "Покупатель обязан произвести предварительную оплату товара в срок, предусмотренный договором."
    scattered = "Предварительный осмотр товара проводится покупателем до его оплаты, в срок, предусмотренный договором."
    others = (
        "Кража, то есть тайное хищение чужого имущества, наказывается штрафом.",
        "Работнику предоставляется ежегодный оплачиваемый трудовой отпуск.",
        "Брак заключается в органах регистрации актов гражданского состояния.",
        "Исковая давность устанавливается в три года.",
        "Арендатор обязан своевременно вносить арендную плату.",
        "Наследство открывается со смертью гражданина.",
    )
    docs = [Document(page_content=t) for t in (scattered, together, *others)]

    def scores(preprocess):
        bm25 = ChunkBM25Retriever.from_documents(docs, preprocess_func=preprocess, k=2)
        return bm25.vectorizer.get_scores(preprocess("предварительная оплата"))

    plain, phrases = scores(analyze), scores(analyze_phrases)
    assert phrases[1] > phrases[0]
    assert phrases[1] - phrases[0] > plain[1] - plain[0]
