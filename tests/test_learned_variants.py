"""bench/learned_variants.py on the real corpus slice: its saved candidates round-trip, and the variants' features
learned from gold never see the question they rank, nor its translation."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bench.learned_variants import (
    VARIANTS,
    _citation_prior,
    _code_classifier,
    _neighbours,
    load_samples,
    rank_held_out,
    save_samples,
    title_similarity,
)
from retrieval.gold import GoldArticle
from retrieval.pipeline import Retrieval
from retrieval.train import Sample, collect, fold_groups, read_gold
from tests.support.retrieval import UK

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def samples(hybrid_retrieval: Retrieval, shared_dir: Path) -> list[Sample]:
    return collect(hybrid_retrieval, {"citizen_dev": read_gold(shared_dir / "eval" / "citizen_dev.jsonl")}, 20)


def test_saved_candidates_load_as_they_were(samples: list[Sample], tmp_path: Path) -> None:
    save_samples(samples, tmp_path)
    loaded = load_samples(tmp_path)
    assert loaded is not None and len(loaded) == len(samples)
    for a, b in zip(samples, loaded, strict=True):
        assert (a.question, a.source, a.named, a.numbers, a.fusion) == (
            b.question,
            b.source,
            b.named,
            b.numbers,
            b.fusion,
        )
        assert a.pool.keys == b.pool.keys
        np.testing.assert_array_equal(a.pool.matrix, b.pool.matrix)  # NaN where absent, in the same places
    meta = json.loads((tmp_path / "samples.json").read_text(encoding="utf-8"))
    meta["features"] = meta["features"][:-1]  # saved by another feature schema: collected again, not misread
    (tmp_path / "samples.json").write_text(json.dumps(meta), encoding="utf-8")
    assert load_samples(tmp_path) is None
    assert load_samples(tmp_path / "none") is None


@pytest.mark.parametrize("extra", [_neighbours, _citation_prior, _code_classifier])
def test_features_from_gold_never_see_the_question_or_its_translation(samples: list[Sample], extra) -> None:
    groups = fold_groups(samples)
    everyone = list(range(len(samples)))
    twins = [i for i in everyone if groups.count(groups[i]) > 1]
    assert twins  # citizen_dev asks most questions in Russian and in Kazakh
    signal = False
    for i in twins:
        # the question and its translation cite something else: what the others taught must stay the same
        elsewhere = [GoldArticle(doc_id="K000", article="1")]
        altered = [
            replace(s, question=s.question.model_copy(update={"relevant": elsewhere})) if groups[m] == groups[i] else s
            for m, s in enumerate(samples)
        ]
        columns = extra(samples, groups, everyone)(i)
        np.testing.assert_array_equal(columns, extra(altered, groups, everyone)(i))
        assert columns.shape[0] == len(samples[i].pool.keys)
        signal |= bool(columns.any())
    assert signal  # other questions cite the same Criminal Code: the columns are not all zero


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_each_variant_ranks_held_out_questions_with_named_articles_first(samples: list[Sample], variant) -> None:
    groups = fold_groups(samples)
    held = [i for i, s in enumerate(samples) if groups[i] == groups[0]]
    train = [i for i in range(len(samples)) if i not in held]
    ranked = rank_held_out(variant, samples, groups, train, held)
    assert set(ranked) == set(held)
    for i in held:
        assert sorted(ranked[i]) == sorted(set(samples[i].pool.keys) | set(samples[i].named))
        assert ranked[i][: len(samples[i].named)] == list(samples[i].named)


def test_title_similarity_is_the_cosine_of_the_question_and_the_candidates_title(
    hybrid_retrieval: Retrieval, samples: list[Sample]
) -> None:
    from corpus.store import load_articles
    from index.embeddings import make_embeddings
    from retrieval.searches import dense_query

    settings = hybrid_retrieval.settings
    columns = title_similarity(samples, settings)
    theft = next(i for i, s in enumerate(samples) if s.question.query.startswith("Какая ответственность за кражу"))
    sims, keys = columns(theft), samples[theft].pool.keys
    assert sims.shape == (len(keys), 2) and np.isfinite(sims[:, 0]).sum() > len(keys) // 2
    assert np.nanmax(sims[:, 1]) == 0.0  # the second column is relative to the pool's best
    titles = {(a.doc_id, a.number): a.title for a in load_articles(settings.corpus_dir) if a.lang == "ru"}
    embeddings = make_embeddings(settings)
    query = np.asarray(
        embeddings.embed_query(dense_query(samples[theft].question.query, settings.dense_query_max_chars))
    )
    assert (UK, "188") in keys and titles[(UK, "188")] == "Кража"
    for j in [keys.index((UK, "188")), 0, len(keys) - 1]:
        title = np.asarray(embeddings.embed_documents([titles[keys[j]]])[0])
        assert sims[j, 0] == pytest.approx(float(title @ query), abs=1e-5), keys[j]
