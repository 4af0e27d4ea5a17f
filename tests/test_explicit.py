"""Explicit references on the real Criminal Code slice: the named articles come first, in the order asked."""

from __future__ import annotations

import pytest

from retrieval.explicit import ExplicitRetriever
from retrieval.query import ArticleRef, QueryInfo
from tests.support.retrieval import CONSUMER, TK, UK


def _articles(ranked, n):
    return [(doc_id, article) for doc_id, article, _ in ranked[:n]]


def test_range_comes_first_in_order(bm25_retrieval):
    ranked = bm25_retrieval.rank_articles("Что грозит по ст. 190-192 УК?", 10)
    assert _articles(ranked, 3) == [(UK, "190"), (UK, "191"), (UK, "192")]
    assert len({(d, a) for d, a, _ in ranked}) == len(ranked) == 10  # the search fills the rest, no repeats


def test_the_order_asked_is_kept(bm25_retrieval):
    ranked = bm25_retrieval.rank_articles("Сравните статьи 192 и 190 УК РК", 5)
    assert _articles(ranked, 2) == [(UK, "192"), (UK, "190")]


@pytest.mark.parametrize(
    "question",
    ["ст. 188 УК РК", "Что говорит 188 статья уголовного кодекса?", "ҚК-нің 188-бабы не дейді?"],
)
def test_single_reference_in_russian_and_kazakh(bm25_retrieval, question):
    assert _articles(bm25_retrieval.rank_articles(question, 5), 1) == [(UK, "188")]


@pytest.mark.parametrize(
    "question",
    [
        "Тұтынушылардың құқықтарын қорғау туралы Заңның 14-бабы не дейді?",
        "«Тұтынушылардың құқықтарын қорғау туралы» Қазақстан Республикасының Заңына сәйкес 14-бап",
        "статья 14 Закона о защите прав потребителей",
    ],
)
def test_a_law_named_in_either_language_gets_its_article_first(bm25_retrieval, question):
    # read as the named article from its beginning, not found by the search (which finds it too on this slice)
    first = bm25_retrieval.retrieve(question).docs[0].metadata
    assert (first["doc_id"], first["article"], first["explicit"]) == (CONSUMER, "14", True)


def test_a_long_range_comes_first_even_when_retrieve_returns_more_than_top_n(bm25_retrieval):
    result = bm25_retrieval.retrieve("Какая ответственность по статьям 120-135 УК РК за преступления против детей?")
    articles = [d.metadata["article"] for d in result.docs]
    assert articles[:16] == [str(n) for n in range(120, 136)]
    assert all(d.metadata["explicit"] for d in result.docs[:16])
    first = result.docs[0]
    assert first.page_content.startswith("УК РК. Статья 120. ")
    assert len(first.page_content) <= bm25_retrieval.settings.context_max_chars


def test_explicit_retriever_reads_the_article_from_its_beginning(bm25_retrieval):
    retriever = bm25_retrieval.explicit.model_copy(update={"max_chars": 600})
    docs = retriever.invoke("ст. 188 УК и ст. 99999 УК")  # the second one does not exist: skipped
    assert [d.metadata["article"] for d in docs] == ["188"]
    doc = docs[0]
    assert doc.page_content.startswith("УК РК. Статья 188. Кража\n")
    assert "1. Кража, то есть тайное хищение чужого имущества" in doc.page_content
    assert len(doc.page_content) <= 600
    assert doc.metadata["score"] == 1.0 and doc.metadata["explicit"] is True
    assert doc.metadata["url"].startswith("https://adilet.zan.kz/rus/docs/K1400000226")


def test_reference_without_a_code_is_left_to_the_search(corpus_slice):
    from retrieval.articles import ArticleChunks

    info = QueryInfo(
        text="статья 15",
        lang="ru",
        refs=(ArticleRef("", "15"), ArticleRef(TK, "22")),
        is_range=False,
        is_criminal=False,
        codes=(),
        synonym_refs=(),
        augmented="статья 15",
    )
    retriever = ExplicitRetriever(articles=ArticleChunks.from_chunks(corpus_slice.chunks), analyze=lambda q: info)
    assert retriever.keys(info) == [(TK, "22")]
    assert ExplicitRetriever.unresolved(info) == ["15"]
