"""Remedy routes: the data file against the corpus, when a route applies, and where its articles enter the
ranking of the real pipeline (Labour Code slice)."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.pipeline import Stages
from retrieval.query import ArticleRef, QueryInfo, analyze_query
from retrieval.remedies import load_remedies, pick_route
from tests.support.retrieval import TK, UK, corpus_titles

CIVIL_GENERAL = "K940001000_"
CIVIL_SPECIAL = "K990000409_"
CONSUMER = "Z100000274_"
WAGES = "Работодатель третий месяц не выплачивает заработную плату, что мне делать?"


def _info(question: str) -> QueryInfo:
    return analyze_query(question)


def test_every_route_article_exists_in_force_with_its_title(shared_dir: Path) -> None:
    routes = load_remedies().routes
    titles = corpus_titles(shared_dir, {r.doc_id for route in routes for r in route.refs})
    wrong = [
        f"{route.topic}: {r.doc_id} {r.article} {r.title!r} → corpus {titles.get((r.doc_id, r.article))}"
        for route in routes
        for r in route.refs
        if titles.get((r.doc_id, r.article)) != (r.title, "in_force")
    ]
    assert not wrong, "\n".join(wrong)
    assert {"K1500000377", CIVIL_GENERAL, TK} <= {r.doc_id for route in routes for r in route.refs}


def test_a_route_applies_when_most_found_articles_are_of_its_branch() -> None:
    info = _info("Продавец не возвращает деньги за бракованный телефон, что делать?")
    assert not info.is_criminal and not info.refs
    civil = pick_route(info, [CONSUMER, CIVIL_SPECIAL, UK, CONSUMER, "K1400000235"])
    assert civil is not None
    assert ArticleRef("K1500000377", "148") in {ArticleRef(r.doc_id, r.article) for r in civil.refs}
    labour = pick_route(_info(WAGES), [TK, TK, CONSUMER, TK, TK])
    assert labour is not None and {r.doc_id for r in labour.refs} == {TK}
    # Two of ten is not a branch: no route.
    assert pick_route(info, [CONSUMER, UK, UK, UK, UK, UK, CIVIL_GENERAL, UK, UK, UK]) is None
    # Only the ten best found articles count.
    assert pick_route(info, [UK] * 10 + [CONSUMER] * 5) is None


@pytest.mark.parametrize(
    "question",
    [
        "Какое наказание за кражу телефона?",  # a crime: the Criminal Code, not a civil claim
        "Что говорит статья 188 ГК о сделках?",  # names its article
    ],
)
def test_no_route_for_a_crime_or_a_named_article(question: str) -> None:
    info = _info(question)
    assert pick_route(info, [CIVIL_GENERAL] * 10) is None


@pytest.mark.slow
def test_labour_dispute_gets_the_dispute_articles_at_the_remedy_rank(hybrid_retrieval) -> None:
    pipeline = hybrid_retrieval.variant(Stages(rerank=False), remedy_short_chars=0)  # REMEDY_RANK for all
    at, step = pipeline.settings.remedy_rank, pipeline.settings.remedy_spacing
    ranked = [(d, a) for d, a, _ in pipeline.rank_articles(WAGES, 20)]
    assert (ranked[at], ranked[at + step]) == ((TK, "159"), (TK, "160"))  # found articles between them
    without = [(d, a) for d, a, _ in pipeline.variant(Stages(rerank=False, remedies=False)).rank_articles(WAGES, 20)]
    assert ranked[:at] == without[:at]  # the best matches keep their place
    route = {(TK, "159"), (TK, "160")}
    rest = [k for k in ranked if k not in route]
    assert rest == [k for k in without if k not in route][: len(rest)]  # the others keep their order

    docs = pipeline.retrieve(WAGES).docs
    marked = [(d.metadata["article"], d.metadata.get("remedy", False)) for d in (docs[at], docs[at + step])]
    assert marked == [("159", True), ("160", True)]
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.slow
def test_crime_question_gets_no_remedy_articles(hybrid_retrieval) -> None:
    ranked = hybrid_retrieval.rank_articles("Какая ответственность за кражу телефона?", 20)
    assert not any(d == TK and a in {"159", "160"} for d, a, _ in ranked)
