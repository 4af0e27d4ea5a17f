"""Law routing (retrieval/routing.py) and the remedy routes' rank for short questions (retrieval/remedies.py), on
the real slice with BM25: the laws' own headings tell which law a question is about."""

from __future__ import annotations

import copy
import math

import pytest

from retrieval.articles import key_of
from retrieval.ranking import via
from retrieval.records import Followup
from retrieval.remedies import RemedyRoutes
from retrieval.routing import LawProfiles, LawRouting, SanctionLaws, defined_terms, gaps, profile_terms, sanction_laws
from tests.support.retrieval import CONSUMER, KOAP, TK, UK

# «What is the penalty for giving a bribe?»: its words also match the Kazakh text of the consumer protection law
# (its article 42-3 comes first by BM25 without the cross-language search), while the Criminal Code's chapter
# headings name bribery (УК 367); the glossary's «пара» → взятка finds it too.
BRIBE_KK = "Пара бергені үшін қандай жаза бар?"


def test_the_laws_headings_route_a_question_to_its_law(bm25_retrieval) -> None:
    profiles = bm25_retrieval.profiles
    assert set(profiles.doc_ids) == {UK, TK, CONSUMER, "K1400000235"}
    leave = bm25_retrieval.analyze("Сколько дней ежегодного оплачиваемого отпуска положено?")
    assert max(profiles.scores(profile_terms(leave, None)).items(), key=lambda kv: kv[1])[0] == TK
    bribe = profile_terms(bm25_retrieval.analyze(BRIBE_KK), bm25_retrieval.lexicon)
    route = gaps(profiles.scores(bribe))
    assert route[UK] == 0.0 and route[CONSUMER] > 0.3


def test_the_terms_a_law_defines_route_a_question_no_heading_names(bm25_retrieval) -> None:
    """«Что такое совместительство?»: no heading of the slice's laws says «совместительство», the Labour Code's
    definitions article (ТК 1) defines it; with its defined terms in the profiles the question goes to ТК."""
    articles = bm25_retrieval.articles
    tk_1 = [articles.documents[i].page_content for i in articles.positions((TK, "1"), "ru")]
    defined = [term for text in tk_1 for term in defined_terms(text)]
    assert {"совместительство", "работник", "трудовой договор", "сверхурочная работа"} <= set(defined)
    assert not any("далее" in term or term.startswith("исключ") for term in defined)
    question = profile_terms(bm25_retrieval.analyze("Что такое совместительство?"), None)
    headings, with_terms = (LawProfiles.from_articles(articles, definitions=d).scores(question) for d in (False, True))
    assert max(headings, key=headings.__getitem__) != TK
    assert max(with_terms, key=with_terms.__getitem__) == TK


def test_the_laws_headings_are_built_by_the_warm_up_not_by_the_first_question(corpus_slice) -> None:
    """The warm-up (rag_chain runs it beside a new chain's first questions, and before a hot swap) builds what
    routing reads when routing is on (~0.7 s on the full corpus), so that a replica's first Kazakh question does
    not pay for it and its start does not wait for it; with routing off nothing is built."""
    from retrieval.pipeline import Retrieval, Stages

    stages = Stages(dense=False, rerank=False)
    routed = Retrieval.load(corpus_slice.settings, chunks=corpus_slice.chunks, stages=stages)
    assert routed._profiles is None
    routed.warm_up()
    assert routed._profiles is not None and set(routed._profiles.doc_ids) == {UK, TK, CONSUMER, "K1400000235"}
    off = Retrieval.load(
        corpus_slice.settings.model_copy(update={"routing": False}), chunks=corpus_slice.chunks, stages=stages
    )
    off.warm_up()
    assert off._profiles is None


def test_a_question_whose_words_match_another_law_gets_its_own_laws_article_first(corpus_slice, bm25_retrieval) -> None:
    from retrieval.pipeline import Retrieval, Stages

    plain = corpus_slice.settings.model_copy(update={"crosslang_glossary": False})  # the learned lexicon alone
    learned = Retrieval.load(plain, chunks=corpus_slice.chunks, stages=Stages(dense=False, rerank=False))
    unrouted = learned.variant(routing=False)
    assert key_of_first(unrouted.rank_articles(BRIBE_KK, 5)) == (CONSUMER, "42-3")
    routed = learned.variant(routing=True)  # on by default, for Kazakh questions (docs/evaluation.md)
    assert key_of_first(routed.rank_articles(BRIBE_KK, 5)) == (UK, "367")
    # the glossary's «пара» → взятка alone finds it
    assert key_of_first(bm25_retrieval.variant(routing=False).rank_articles(BRIBE_KK, 5)) == (UK, "367")
    assert key_of_first(bm25_retrieval.rank_articles(BRIBE_KK, 5)) == (UK, "367")
    # A Russian question is not routed by default: the same candidates as with routing off.
    russian = "Можно ли работать без оформления трудового договора?"
    assert bm25_retrieval.rank_articles(russian, 10) == unrouted.rank_articles(russian, 10)
    assert routed.variant(routing_langs=["ru", "kk"]).rank_articles(russian, 10) != unrouted.rank_articles(russian, 10)


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
    # A follow-up read with its conversation: the conversation settles the law.
    followup = bm25_retrieval.query(BRIBE_KK, Followup(own=BRIBE_KK, own_weight=1.0))
    assert router.compress_documents(found, followup) == found


def test_a_short_question_gets_the_remedy_route_below_the_top_five(bm25_retrieval) -> None:
    question = "Работодатель не выплачивает заработную плату, что делать?"
    lower = bm25_retrieval.variant(remedy_short_chars=150, remedy_short_rank=5, remedy_spacing=1)  # off by default
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


def test_remedy_routes_spaced_leave_substantive_articles_between_them(bm25_retrieval) -> None:
    question = "Работодатель не выплачивает заработную плату, что делать?"
    found = bm25_retrieval.candidates(question)
    together = RemedyRoutes(articles=bm25_retrieval.articles, rank=3).compress_documents(found, question)
    spaced = RemedyRoutes(articles=bm25_retrieval.articles, rank=3, spacing=3).compress_documents(found, question)
    assert [i for i, d in enumerate(together) if via(d) == "remedy"] == [3, 4]
    assert [i for i, d in enumerate(spaced) if via(d) == "remedy"] == [3, 6]
    # The same articles, the found ones in their order around the routes, none lost or repeated.
    assert sorted(map(key_of, spaced)) == sorted(map(key_of, together))
    assert [key_of(d) for d in spaced if via(d) != "remedy"] == [key_of(d) for d in together if via(d) != "remedy"]
    scores = [d.metadata["score"] for d in spaced]
    assert scores == sorted(scores, reverse=True)
    # The route's articles the search found go first, in its order; one it put above its route slot keeps its
    # place among the found articles (fifth here) instead of going down to its slot (the seventh).
    bare = [d for d in found if key_of(d) not in {(TK, "159"), (TK, "160")}]
    route = [bm25_retrieval.first_stage.invoke(f"статья {n} ТК")[0] for n in ("160", "159")]
    assert [key_of(d) for d in route] == [(TK, "160"), (TK, "159")]
    searched = [*bare[:4], *route, *bare[4:]]
    kept = RemedyRoutes(articles=bm25_retrieval.articles, rank=3, spacing=3).compress_documents(searched, question)
    assert [(i, key_of(d)) for i, d in enumerate(kept) if via(d) == "remedy"] == [(3, (TK, "160")), (5, (TK, "159"))]


def test_the_laws_of_sanctions_are_read_from_the_corpus(bm25_retrieval) -> None:
    # The slice: the Criminal Code and the Code on Administrative Offences punish; the Labour Code and the
    # consumer protection law set rules.
    assert sanction_laws(bm25_retrieval.articles) == {UK, KOAP}
    assert bm25_retrieval.sanction_laws == {UK, KOAP}


def test_a_question_asking_no_sanction_gets_the_rule_before_the_fine(bm25_retrieval) -> None:
    # «May I hire a teenager?»: an article of the Code on Administrative Offences (КоАП 455, on the slice's BM25)
    # comes first in the candidates, above the Labour Code's rules.
    question = "Можно ли нанять подростка на работу?"
    assert not bm25_retrieval.analyze(question).asks_sanction
    assert not bm25_retrieval.analyze("Можно ли работать без оформления трудового договора?").asks_sanction
    assert bm25_retrieval.analyze(BRIBE_KK).asks_sanction  # «жаза»: a punishment, in Kazakh
    assert bm25_retrieval.analyze("Жұмыс беруші қандай жауапкершілікке тартылады?").asks_sanction
    plain = bm25_retrieval.variant(sanction_weight=0.0)
    found = plain.candidates(question)
    assert key_of(found[0]) == (KOAP, "455")
    stage = SanctionLaws(laws=bm25_retrieval.sanction_laws, weight=0.4)
    demoted = stage.compress_documents(found, question)
    assert demoted[0].metadata["doc_id"] == TK
    assert key_of(bm25_retrieval.candidates(question)[0]) == key_of(demoted[0])  # on by default
    assert sorted(map(key_of, demoted)) == sorted(map(key_of, found))
    for doc in demoted:
        before = next(d for d in found if key_of(d) == key_of(doc))
        factor = math.exp(-0.4) if doc.metadata["doc_id"] in {UK, KOAP} else 1.0
        assert doc.metadata["score"] == pytest.approx(before.metadata["score"] * factor)
    assert [doc.metadata["score"] for doc in demoted] == sorted((d.metadata["score"] for d in demoted), reverse=True)
    # A question about the fine, or naming the code, keeps the first stage's scores.
    for asks in ("Какой штраф грозит работодателю за задержку зарплаты?", "Что говорит КоАП о задержке зарплаты?"):
        found = plain.candidates(asks)
        assert stage.compress_documents(found, asks) == found
