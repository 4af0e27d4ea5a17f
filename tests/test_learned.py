"""The learned second stage on the real corpus slice: trained on real gold questions, its model file, the fallback
to the fusion, and features that are the same at training and at query time."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from retrieval.features import COLUMN, FEATURE_NAMES, candidate_pool
from retrieval.learned import LearnedRanker, ordered, sidecar
from retrieval.pipeline import Retrieval, Stages
from retrieval.train import Sample, TrainConfig, collect, fit, folds_of, read_gold, searches_of
from tests.support.retrieval import UK, CorpusSlice

pytestmark = pytest.mark.slow

# Small enough for ~20 questions: a shallow pool, few rounds, small leaves.
TINY = TrainConfig(pool_k=20, rounds=12, num_leaves=4, min_data_in_leaf=5)


@pytest.fixture(scope="module")
def gold(shared_dir: Path):
    """citizen_dev: 20 real questions, every gold article in the slice's Criminal Code."""
    questions = read_gold(shared_dir / "eval" / "citizen_dev.jsonl")
    assert {k[0] for q in questions for k in q.relevant_keys} == {UK}
    return {"citizen_dev": questions}


@pytest.fixture(scope="module")
def samples(hybrid_retrieval: Retrieval, gold) -> list[Sample]:
    return collect(hybrid_retrieval, gold, TINY.pool_k)


@pytest.fixture(scope="module")
def model(hybrid_retrieval: Retrieval, samples: list[Sample]) -> LearnedRanker:
    return fit(samples, TINY, {"citizen_dev": len(samples)}, searches_of(hybrid_retrieval))


def test_training_twice_writes_the_same_model_file(
    hybrid_retrieval: Retrieval, gold, samples: list[Sample], model: LearnedRanker, tmp_path: Path
) -> None:
    again = fit(collect(hybrid_retrieval, gold, TINY.pool_k), TINY, {"citizen_dev": 20}, searches_of(hybrid_retrieval))
    model.save(tmp_path / "a" / "ranker.txt")
    again.save(tmp_path / "b" / "ranker.txt")
    for name in ("ranker.txt", "ranker.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert model.booster.num_trees() == TINY.rounds
    assert sum(model.booster.feature_importance()) > 0  # it learned splits, not a constant
    # every search of the slice fed the features: BM25, e5 vectors and latent terms
    matrix = np.vstack([s.pool.matrix for s in samples])
    for search in ("bm25", "dense", "latent"):
        assert np.isfinite(matrix[:, COLUMN[f"{search}_best"]]).any(), search


def test_a_question_and_its_translation_are_held_out_together(samples: list[Sample]) -> None:
    # citizen_dev asks most questions in Russian and again in Kazakh («…финансовой пирамиды?» and «Қаржылық
    # пирамиданы…»): with one twin in training, the other is not held out. Folds keep each gold set in one fold.
    folds = folds_of(samples, 5)
    assert sorted(i for held in folds for i in held) == list(range(len(samples)))
    assert all(held for held in folds)
    fold_of = {i: n for n, held in enumerate(folds) for i in held}
    by_gold: dict[frozenset, list[int]] = {}
    for i, s in enumerate(samples):
        by_gold.setdefault(frozenset(s.question.relevant_keys), []).append(fold_of[i])
    twins = [folds_of_gold for folds_of_gold in by_gold.values() if len(folds_of_gold) > 1]
    assert len(twins) >= 8  # 188, 214, 217, 136, 140, 135, 297, the 120-135 range, 214+245
    assert all(len(set(folds_of_gold)) == 1 for folds_of_gold in twins)
    assert folds_of(samples, 5) == folds  # seeded: the same folds every run


def test_the_model_file_round_trips(model: LearnedRanker, samples: list[Sample], tmp_path: Path) -> None:
    path = tmp_path / "ranker.txt"
    model.save(path)
    loaded = LearnedRanker.read(path)
    assert loaded.meta.model_copy(update={"sha256": ""}) == model.meta and len(loaded.meta.sha256) == 64
    assert loaded.meta.pool_k == TINY.pool_k and loaded.meta.feature_names == list(FEATURE_NAMES)
    assert loaded.booster.model_to_string() == model.booster.model_to_string()
    x = np.vstack([s.pool.matrix for s in samples])
    assert np.array_equal(loaded.scores(x), model.scores(x))


def test_features_at_query_time_are_the_ones_trained_on(
    hybrid_retrieval: Retrieval, samples: list[Sample], model: LearnedRanker
) -> None:
    """The pipeline's ranking with the model is the model's order of the features `collect` computed (the
    ranking cross-validation scores), and its scores are the model's."""
    pipeline = hybrid_retrieval.variant(Stages(rerank=False, learned=True), learned=model)
    for sample in samples:
        query = sample.question.query
        assert np.array_equal(candidate_pool(pipeline, query).matrix, sample.pool.matrix, equal_nan=True), query
        scores = model.scores(sample.pool.matrix)
        ranked = pipeline.rank_articles(query, 100)
        assert [(d, a) for d, a, _ in ranked] == sample.ranking(scores)[:100], query
        if not sample.named and not sample.numbers:
            expected = [d.metadata["score"] for d in ordered(sample.pool, scores)]
            assert [s for _, _, s in ranked] == pytest.approx(expected, abs=1e-9)
    assert sum(bool(s.named) for s in samples) >= 2  # «статьям 120-135 УК» and the like went through too


def test_learned_ranking_differs_from_the_fusion_and_keeps_named_articles_first(
    samples: list[Sample], model: LearnedRanker
) -> None:
    reordered = 0
    for sample in samples:
        ranking = sample.ranking(model.scores(sample.pool.matrix))
        assert ranking[: len(sample.named)] == list(sample.named)
        reordered += ranking[:10] != list(sample.fusion[:10])
    assert reordered > 0


def test_a_missing_or_damaged_model_falls_back_to_the_fusion_with_one_log_line(
    corpus_slice: CorpusSlice,
    dense_store,
    latent_index,
    hybrid_retrieval: Retrieval,
    model: LearnedRanker,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = tmp_path / "good" / "ranker.txt"
    model.save(good)
    truncated = tmp_path / "truncated" / "ranker.txt"
    model.save(truncated)
    truncated.write_text(good.read_text(encoding="utf-8")[:2000], encoding="utf-8")
    renamed = tmp_path / "renamed" / "ranker.txt"
    model.save(renamed)
    sidecar(renamed).write_text(
        sidecar(good).read_text(encoding="utf-8").replace('"fused_rank"', '"fused_place"'), encoding="utf-8"
    )
    settings = corpus_slice.settings.model_copy(update={"learned_ranker": True})
    searches = searches_of(hybrid_retrieval)
    assert LearnedRanker.load(settings.model_copy(update={"ranker_path": good}), searches) is not None
    for path in (tmp_path / "none" / "ranker.txt", truncated, renamed):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            assert LearnedRanker.load(settings.model_copy(update={"ranker_path": path}), searches) is None
        lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(lines) == 1 and "python -m retrieval.train" in lines[0].getMessage(), path

    # The whole pipeline, loaded with the damaged model, ranks as the fusion does.
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        pipeline = Retrieval.load(
            settings.model_copy(update={"ranker_path": truncated}),
            chunks=corpus_slice.chunks,
            vector_store=dense_store,
            latent_index=latent_index,
            stages=Stages(rerank=False),
        )
    assert pipeline.learned is None
    assert len([r for r in caplog.records if r.name == "retrieval.learned"]) == 1
    fusion = hybrid_retrieval.variant(Stages(rerank=False, learned=False))
    question = "Какая ответственность за создание финансовой пирамиды?"
    assert pipeline.rank_articles(question, 20) == fusion.rank_articles(question, 20)
    learned = hybrid_retrieval.variant(Stages(rerank=False, learned=True), learned=model)
    assert learned.rank_articles(question, 20) != fusion.rank_articles(question, 20)  # the model does rank
