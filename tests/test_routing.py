"""Law routing (retrieval/routing.py) and the remedy routes' rank for short questions (retrieval/remedies.py), on
the real slice with BM25: the laws' own headings tell which law a question is about."""

from __future__ import annotations

import copy

from retrieval.articles import key_of
from retrieval.ranking import via
from retrieval.remedies import RemedyRoutes
from retrieval.routing import LawRouting, gaps, profile_terms
from tests.support.retrieval import CONSUMER, TK, UK

# «What is the penalty for giving a bribe?»: its words also match the Kazakh text of the consumer protection law
# (its article 42-3 comes first by BM25), while the Criminal Code's chapter headings name bribery (УК 367).
BRIBE_KK = "Пара бергені үшін қандай жаза бар?"


def test_the_laws_headings_route_a_question_to_its_law(bm25_retrieval) -> None:
    profiles = bm25_retrieval.profiles
    assert set(profiles.doc_ids) == {UK, TK, CONSUMER, "K1400000235"}
    leave = bm25_retrieval.analyze("Сколько дней ежегодного оплачиваемого отпуска положено?")
    assert max(profiles.scores(profile_terms(leave, None)).items(), key=lambda kv: kv[1])[0] == TK
    bribe = profile_terms(bm25_retrieval.analyze(BRIBE_KK), bm25_retrieval.lexicon)
    route = gaps(profiles.scores(bribe))
    assert route[UK] == 0.0 and route[CONSUMER] > 0.3


def test_a_question_whose_words_match_another_law_gets_its_own_laws_article_first(bm25_retrieval) -> None:
    unrouted = bm25_retrieval.variant(routing=False)
    assert key_of_first(unrouted.rank_articles(BRIBE_KK, 5)) == (CONSUMER, "42-3")
    routed = bm25_retrieval.variant(routing=True)  # off by default (docs/evaluation.md)
    assert key_of_first(routed.rank_articles(BRIBE_KK, 5)) == (UK, "367")


def key_of_first(ranked: list[tuple[str, str, float]]) -> tuple[str, str]:
    return ranked[0][0], ranked[0][1]


def test_routing_rescores_copies_and_leaves_long_and_named_questions_alone(bm25_retrieval) -> None:
    router: LawRouting = bm25_retrieval.router
    found = bm25_retrieval.first_stage.invoke(BRIBE_KK)
    before = copy.deepcopy(found)
    routed = router.compress_documents(found, bm25_retrieval.query(BRIBE_KK))
    assert found == before  # inputs untouched
    assert key_of(routed[0]) == (UK, "367")
    scores = [d.metadata["score"] for d in routed]
    assert scores == sorted(scores, reverse=True)
    # A story longer than max_chars keeps the first stage's order, and so does a question naming its article.
    long = BRIBE_KK + " " + "Мен бір жағдай туралы айтып берейін. " * 5
    assert len(long) >= router.max_chars
    docs = bm25_retrieval.first_stage.invoke(long)
    assert router.compress_documents(docs, bm25_retrieval.query(long)) == docs
    named = "ст. 42-3 " + BRIBE_KK
    docs = bm25_retrieval.first_stage.invoke(named)
    assert router.compress_documents(docs, bm25_retrieval.query(named)) == docs


def test_a_short_question_gets_the_remedy_route_below_the_top_five(bm25_retrieval) -> None:
    question = "Работодатель не выплачивает заработную плату, что делать?"
    lower = bm25_retrieval.variant(remedy_short_chars=150, remedy_short_rank=5)  # off by default (measured)
    assert len(question) < lower.settings.remedy_short_chars
    ranked = lower.retriever.invoke(lower.query(question))
    places = [i for i, d in enumerate(ranked) if via(d) == "remedy"]
    assert [key_of(ranked[i]) for i in places] == [(TK, "159"), (TK, "160")]
    assert places == [5, 6]
    # A long question telling the dispute still gets them at REMEDY_RANK, right below the best matches.
    story = (
        question + " Я работаю на складе два года по трудовому договору, зарплату задерживают с весны, на мои "
        "письма и звонки не отвечают."
    )
    assert len(story) >= lower.settings.remedy_short_chars
    routes = RemedyRoutes(articles=bm25_retrieval.articles, rank=3, short_chars=150, short_rank=5)
    found = bm25_retrieval.candidates(story)
    assert [via(d) for d in routes.compress_documents(found, story)][3:5] == ["remedy", "remedy"]
