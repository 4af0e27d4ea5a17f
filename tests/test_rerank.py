"""FlashRank reranking: off without a model folder; with a tiny real cross-encoder, ordered by its scores."""

from __future__ import annotations

import logging

import pytest
from langchain_core.documents import Document

from retrieval.rerank import load_reranker, missing_model_files
from tests.support.retrieval import TinyCrossEncoder

PASSAGES = [
    "УК РК. Статья 188. Кража телефона наказание штраф",
    "ТК РК. Статья 88. Работник отпуск",
    "ГК РК. Статья 540. Договор аренда квартиры",
    "ГПК РК. Статья 148. Суд иск",
    "УК РК. Статья 190. Уголовный кодекс лишение свободы",
    "Кража кража кража",
]


@pytest.fixture
def tiny_model(settings):
    from flashrank.Config import model_file_map

    folder = settings.flashrank_dir / settings.flashrank_model
    return TinyCrossEncoder(folder, model_file_map[settings.flashrank_model])


def test_no_model_folder_means_no_reranker_and_one_log_line(settings, caplog):
    caplog.set_level(logging.INFO, logger="retrieval.rerank")
    assert load_reranker(settings) is None
    assert len(caplog.records) == 1
    assert "flashrank" in caplog.records[0].getMessage().lower()
    assert not settings.flashrank_dir.exists()  # nothing was downloaded or created


def test_incomplete_folder_is_not_loaded(settings, tiny_model):
    (settings.flashrank_dir / settings.flashrank_model / "tokenizer.json").unlink()
    assert missing_model_files(settings) == ["tokenizer.json"]
    assert load_reranker(settings) is None


def test_reranker_orders_by_the_models_scores(settings, tiny_model):
    root_handlers = list(logging.getLogger().handlers)
    reranker = load_reranker(settings, top_n=4)
    assert reranker is not None
    assert logging.getLogger().handlers == root_handlers  # Ranker's basicConfig was undone

    query = "кража телефона"
    docs = [
        Document(page_content=p, metadata={"article": str(i), "score": 0.5}, id=f"d{i}") for i, p in enumerate(PASSAGES)
    ]
    originals = [d.model_copy(deep=True) for d in docs]
    out = reranker.compress_documents(docs, query)

    expected = sorted(range(len(PASSAGES)), key=lambda i: tiny_model.score(query, PASSAGES[i]), reverse=True)
    assert expected[:4] != [0, 1, 2, 3]  # the model really changes the order of the input
    assert [d.metadata["article"] for d in out] == [str(i) for i in expected[:4]]
    assert [d.id for d in out] == [f"d{i}" for i in expected[:4]]
    for d in out:
        score = d.metadata["relevance_score"]
        assert type(score) is float
        assert score == pytest.approx(tiny_model.score(query, d.page_content), abs=1e-4)
        assert d.metadata["score"] == 0.5  # earlier metadata is kept
    assert docs == originals  # inputs untouched
    assert reranker.compress_documents([], query) == []
