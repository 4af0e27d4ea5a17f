"""Follow-ups: the offline rule on the real retrieval of a corpus slice, the condense prompt through the local
Groq server, and the chain answering a follow-up in the context of the conversation."""

from __future__ import annotations

import dataclasses

import pytest

from answer.followup import FollowupCondenser, glue, history_messages, related
from answer.llm import build_chat_model
from answer.records import Exchange
from corpus.legal.registry import CRIMINAL_CODE_ID
from corpus.store import load_articles
from rag_chain import QAChain
from retrieval.pipeline import Followup
from tests.support.llm_servers import with_backends
from tests.support.retrieval import KOAP, TK

FRAUD = "Что будет за мошенничество?"
LARGE = "А если сумма крупная?"


@pytest.fixture(scope="module")
def chain(corpus_slice, bm25_retrieval) -> QAChain:
    return QAChain(corpus_slice.settings, bm25_retrieval, load_articles(corpus_slice.settings.corpus_dir))


def top(chain: QAChain, text: str, k: int = 5) -> list[tuple[str, str]]:
    return [(d, a) for d, a, _ in chain.retrieval.rank_articles(text, k)]


def asked(chain: QAChain, *turns: str) -> list[Exchange]:
    """The turns answered in order through the chain, each with the ones before as history."""
    history: list[Exchange] = []
    for turn in turns:
        history.append(Exchange.of(chain.invoke(turn, history)))
    return history


def test_no_history_searches_the_question_as_asked(chain):
    result = chain.invoke(FRAUD)
    assert (result.search_question, result.used_history) == (FRAUD, False)
    again = chain.invoke(FRAUD, [])
    assert (again.answer, again.sources, again.used_history) == (result.answer, result.sources, False)
    assert "followup_ms" not in result.timings
    # the same articles as the retrieval gives the question alone: nothing changes without a conversation
    retrieved = [(d.metadata["doc_id"], d.metadata["article"]) for d in chain.retrieval.retrieve(FRAUD).docs]
    assert [(s.doc_id, s.article) for s in result.sources] == [
        k for k in retrieved if k in {(s.doc_id, s.article) for s in result.sources}
    ]


def test_an_elliptical_follow_up_is_searched_with_the_previous_question(chain):
    # alone, «А если сумма крупная?» does not find fraud; in the conversation it does (УК 190)
    assert (CRIMINAL_CODE_ID, "190") not in top(chain, LARGE)
    result = chain.invoke(LARGE, asked(chain, FRAUD))
    assert result.used_history and result.question == LARGE
    assert result.search_question == f"{FRAUD} {LARGE}"
    assert (CRIMINAL_CODE_ID, "190") in {(s.doc_id, s.article) for s in result.sources}
    assert result.template == "criminal" and "followup_ms" in result.timings


def test_thanks_after_an_answer_is_not_the_previous_question_again(chain):
    history = asked(chain, FRAUD)
    for thanks in ("Спасибо!", "Понятно, спасибо", "Рахмет!"):
        result = chain.invoke(thanks, history)
        assert result.status == "off_topic" and result.sources == (), (thanks, result.search_question)
    assert chain.invoke(LARGE, history).status == "answered"  # a real follow-up still is


def test_a_third_turn_keeps_the_whole_thread(chain):
    history = asked(chain, FRAUD, LARGE)
    understood = chain.understand("И сколько лет лишения свободы?", history)
    assert understood.used_history
    assert understood.search_question == f"{FRAUD} {LARGE} И сколько лет лишения свободы?"


def test_a_change_of_subject_said_in_words_drops_the_context(chain):
    history = asked(chain, "Что будет за кражу?")
    for marker in ("Другой вопрос:", "Ладно, другой вопрос:", "Спасибо за ответ. Новый вопрос —", "Тағы бір сұрақ:"):
        understood = chain.understand(f"{marker} сколько может длиться испытательный срок?", history)
        assert understood.search_question == "сколько может длиться испытательный срок?"
        assert not understood.used_history and understood.how == "topic change"
    assert (TK, "36") in top(chain, "сколько может длиться испытательный срок?")
    # a marker inside the message's own sentence is not a change of subject
    understood = chain.understand("Вор сказал, что другой вопрос его не волнует, а если сумма крупная?", history)
    assert understood.how != "topic change"


def test_an_aside_is_read_by_retrieval_like_any_follow_up(chain):
    # «by the way» opens a new question as often as a new fact: the rest is read by the signals, not searched alone
    question = "сколько может длиться испытательный срок при приеме на работу?"
    understood = chain.understand(f"Кстати, {question}", asked(chain, "Что будет за кражу?"))
    assert understood.how == "new subject" and understood.followup.own == question
    understood = chain.understand("Кстати, а если сумма крупная?", asked(chain, FRAUD))
    assert understood.how in ("continues", "refines") and understood.followup.own == "а если сумма крупная?"
    assert (CRIMINAL_CODE_ID, "190") in ranked(chain, understood, 5)


def test_a_question_with_strong_matches_elsewhere_leads_its_own_search(chain):
    # no marker: the question's own search lands in the Labour Code, which the answer about theft did not cite;
    # its own words lead, the conversation is fused in below them
    history = asked(chain, "Что будет за кражу?")
    question = "Сколько дней ежегодного оплачиваемого трудового отпуска положено работнику?"
    understood = chain.understand(question, history)
    assert understood.how == "new subject" and understood.followup.own == question
    assert understood.followup.own_weight == chain.followup.rule.new_weight
    assert top(chain, question, 1) == ranked(chain, understood, 1)
    # and the other way round: a theft question after a labour one
    understood = chain.understand("Какое наказание за кражу телефона?", asked(chain, question))
    assert understood.how == "new subject" and ranked(chain, understood, 1)[0][0] == CRIMINAL_CODE_ID


def test_a_question_naming_its_own_article_stands_alone(chain):
    understood = chain.understand("Что говорит статья 188 УК?", asked(chain, FRAUD))
    assert (understood.used_history, understood.how) == (False, "own article")


def test_a_short_follow_up_in_the_same_area_leans_on_the_conversation(chain):
    history = asked(chain, "Сосед избил меня, врачи установили тяжкий вред здоровью.")
    understood = chain.understand("Сколько лет ему грозит?", history)
    assert understood.used_history and understood.how == "continues"
    assert (CRIMINAL_CODE_ID, "106") in top(chain, understood.search_question, 10)


def test_glue_keeps_the_head_of_a_long_thread():
    history = [Exchange("слово " * 200)]
    glued = glue(history, "А если?", 50)
    assert glued.endswith(" А если?") and len(glued) <= 50 + len(" А если?")
    assert glued.startswith("слово слово")


def test_history_messages_cut_answers_and_name_their_sources(chain):
    [ex] = asked(chain, FRAUD)
    messages = history_messages([ex], turns=3, answer_chars=100)
    assert [m.type for m in messages] == ["human", "ai"]
    assert messages[0].content == FRAUD
    assert "Статья 190. Мошенничество" in messages[1].content and len(messages[1].content) < len(ex.answer)
    assert history_messages([ex, ex, ex], turns=2) == history_messages([ex, ex], turns=2)
    assert history_messages([ex], turns=0) == []


# --- with a chat model ----------------------------------------------------------------------------


def condenser(chain: QAChain, settings) -> FollowupCondenser:
    return FollowupCondenser(settings, chain.followup.rule, build_chat_model(settings))


def test_the_model_condenses_a_follow_up_from_the_prompt_and_the_history(chain, groq_server):
    groq_server.reply = "«Какое наказание за мошенничество в крупном размере?»"
    settings = with_backends(chain.settings, groq=groq_server.url)
    history = asked(chain, FRAUD)
    understood = condenser(chain, settings).invoke(LARGE, history)
    assert understood.search_question == "Какое наказание за мошенничество в крупном размере?"
    assert understood.used_history and understood.how == "groq"
    [req] = groq_server.received
    roles = [m["role"] for m in req.messages()]
    assert roles == ["system", "user", "assistant", "user"]
    system = (settings.prompts_dir / "condense.ru.txt").read_text(encoding="utf-8").strip()
    assert req.messages()[0]["content"] == system
    assert req.messages()[1]["content"] == FRAUD and req.messages()[-1]["content"] == LARGE
    assert "Статья 190. Мошенничество" in req.messages()[2]["content"]


def test_a_kazakh_follow_up_gets_the_kazakh_prompt(chain, groq_server):
    groq_server.reply = "Жұмыс беруші жалақыны қашан төлеуге міндетті?"
    settings = with_backends(chain.settings, groq=groq_server.url)
    history = [Exchange("Жұмыс берушім жалақыны үнемі кешіктіреді.", "Жауап.")]
    understood = condenser(chain, settings).invoke("Ол қашан төлеуге міндетті?", history)
    assert understood.search_question == "Жұмыс беруші жалақыны қашан төлеуге міндетті?"
    system = groq_server.received[0].messages()[0]["content"]
    assert system == (settings.prompts_dir / "condense.kk.txt").read_text(encoding="utf-8").strip()


def test_no_model_call_without_history(chain, groq_server):
    settings = with_backends(chain.settings, groq=groq_server.url)
    understood = condenser(chain, settings).invoke(FRAUD, [])
    assert (understood.search_question, understood.used_history) == (FRAUD, False)
    assert groq_server.received == []


def test_when_no_model_answers_the_rule_decides(chain, groq_server):
    groq_server.rate_limit()
    settings = with_backends(chain.settings, groq=groq_server.url)
    history = asked(chain, FRAUD)
    understood = condenser(chain, settings).invoke(LARGE, history)
    assert len(groq_server.received) == 1  # asked, refused with 429
    assert (understood.search_question, understood.how) == (f"{FRAUD} {LARGE}", "continues")


def test_an_unusable_model_reply_falls_back_to_the_rule(chain, groq_server):
    groq_server.reply = "   "
    settings = with_backends(chain.settings, groq=groq_server.url)
    understood = condenser(chain, settings).invoke(LARGE, asked(chain, FRAUD))
    assert understood.how == "continues" and len(groq_server.received) == 1


def test_the_chain_answers_the_condensed_question(corpus_slice, bm25_retrieval, groq_server):
    def reply(body: dict) -> str:
        system = body["messages"][0]["content"]
        if system.startswith("Ты переформулируешь"):
            return "Какое наказание за мошенничество в крупном размере?"
        return "Мошенничество в крупном размере наказывается лишением свободы [S1]."

    groq_server.reply = reply
    settings = with_backends(corpus_slice.settings, groq=groq_server.url)
    chain = QAChain(settings, bm25_retrieval, load_articles(settings.corpus_dir))
    result = chain.invoke(LARGE, [Exchange(FRAUD, "Мошенничество наказывается [S1].")])
    assert result.search_question == "Какое наказание за мошенничество в крупном размере?"
    assert result.used_history
    answer_prompt = groq_server.received[-1].text_of("user")
    assert "Какое наказание за мошенничество в крупном размере?" in answer_prompt
    assert "Статья 190. Мошенничество" in answer_prompt


def test_the_thresholds_decide_between_continuing_refining_and_a_new_subject(chain):
    history = asked(chain, "Что будет за кражу?")
    question = "Сколько дней ежегодного оплачиваемого трудового отпуска положено работнику?"
    reading = chain.followup.rule.read(question, history)
    assert reading.share is not None and reading.share > 0.5  # the message alone explains most of the glued match
    assert TK in reading.own_docs and CRIMINAL_CODE_ID in reading.previous_docs
    assert chain.followup.rule.decide(reading).how == "new subject"
    rule = chain.followup.rule
    assert dataclasses.replace(rule, new_subject=1.01).decide(reading).how == "refines"
    assert dataclasses.replace(rule, new_subject=1.01, lean=1.01).decide(reading).how == "continues"
    alone = dataclasses.replace(rule, new_weight=None).decide(reading)
    assert (alone.search_question, alone.used_history, alone.how) == (question, False, "new subject")
    # a message that says little on its own continues the conversation: its own words weigh in proportion
    elliptical = rule.read(LARGE, asked(chain, FRAUD))
    assert elliptical.share is not None and elliptical.share < rule.lean
    continued = rule.decide(elliptical)
    assert continued.how == "continues" and continued.followup.own_weight == elliptical.share / rule.lean
    # the more of the glued match the message explains, the more its own words weigh, up to the glued search's
    never_new = dataclasses.replace(rule, new_subject=1.01)
    weights = [never_new.decide(dataclasses.replace(elliptical, share=s)).followup.own_weight for s in (0, 0.2, 0.9)]
    assert weights == [0.0, 0.2 / rule.lean, 1.0]


# --- what the conversation adds to the search: the previous answer's codes, its remedy route ---------------

HOLIDAY = "Меня вызвали работать в праздничный день."
PAID = "Как это оплачивается?"
DISMISSED = "Меня хотят уволить за прогул."


def test_a_single_question_ranks_the_same_with_an_empty_followup(chain):
    for question in (FRAUD, HOLIDAY, DISMISSED, "Жұмыс берушім жалақыны үнемі кешіктіреді."):
        assert chain.retrieval.rank_articles(question, 20) == chain.retrieval.rank_articles(question, 20, Followup())


def test_the_rule_passes_on_the_remedy_route_not_the_previous_answers_code(chain):
    history = asked(chain, DISMISSED)
    cited = [s for s in history[-1].sources if not s.remedy]
    remedies = {(s.doc_id, s.article) for s in history[-1].sources if s.remedy}
    assert cited and remedies  # a labour dispute: the Labour Code and its route (ТК 159/160)
    understood = chain.understand("Должны ли сначала взять с меня объяснение?", history)
    assert understood.used_history
    # the message's own terms decide the code: the previous answer's is not boosted
    assert understood.followup.prefer_docs == () and understood.followup.given == remedies
    # a change of subject carries nothing over
    assert chain.understand("Другой вопрос: что будет за кражу?", history).followup == Followup()
    assert chain.understand("Что будет за кражу?", []).followup == Followup()


def test_preferred_documents_are_boosted_like_a_named_code(chain):
    alone = top(chain, PAID, 10)
    preferred = chain.retrieval.rank_articles(PAID, 10, Followup(prefer_docs=(KOAP,)))
    assert sum(d == KOAP for d, _ in alone) < sum(d == KOAP for d, _, _ in preferred)
    assert preferred[0][0] == KOAP


def test_a_remedy_route_already_given_is_not_put_at_the_top_again(chain):
    ranked = top(chain, DISMISSED, 5)
    route = [k for k in ranked if k in {(TK, "159"), (TK, "160")}]
    assert route  # the labour route enters the top 5 of a dismissal question
    again = chain.retrieval.rank_articles(DISMISSED, 5, Followup(given=frozenset(route)))
    assert not {(d, a) for d, a, _ in again} & set(route)


def test_the_own_words_weight_pulls_their_articles_up(chain):
    # «Должны ли сначала взять с меня объяснение?» after a dismissal for absence: the glued search stays on the
    # dismissal articles the first turn's words name; the message's own words, fused at a higher weight, bring
    # their own best article up
    question = "Должны ли сначала взять с меня объяснение?"
    understood = chain.understand(question, asked(chain, DISMISSED))
    assert understood.used_history and understood.followup.own == question
    own_best = top(chain, question, 1)[0]
    light = chain.retrieval.rank_articles(understood.search_question, 20, Followup(own=question, own_weight=0.1))
    heavy = chain.retrieval.rank_articles(understood.search_question, 20, Followup(own=question, own_weight=1.0))
    assert rank_of(heavy, own_best) < rank_of(light, own_best)


def ranked(chain: QAChain, understood, k: int = 5) -> list[tuple[str, str]]:
    """The top `k` articles of a follow-up as understood (its search question and what the conversation adds)."""
    return [(d, a) for d, a, _ in chain.retrieval.rank_articles(understood.search_question, k, understood.followup)]


def rank_of(ranked: list[tuple[str, str, float]], key: tuple[str, str]) -> int:
    return next((i for i, (d, a, _) in enumerate(ranked, 1) if (d, a) == key), len(ranked) + 1)


# --- continues, refines or changes the subject: read by retrieval, not by word lists -----------------------------


def test_a_new_subject_after_a_continuation_word_is_not_glued(chain):
    # «И ещё: …» opens like a continuation but asks something new: the speeding fine after a dismissal
    history = asked(chain, DISMISSED)
    question = "И ещё: какой штраф за превышение скорости?"
    understood = chain.understand(question, history)
    assert understood.how == "new subject" and understood.followup.own == question
    assert ranked(chain, understood, 1)[0][0] == KOAP


def test_a_new_subject_keeps_the_conversations_best_articles_below_its_own(chain):
    # the signals may misread a follow-up as a new subject: the glued search, fused below the message's own,
    # still brings the conversation's best articles into the top 10, which the message alone does not
    history = asked(chain, DISMISSED)
    question = "И ещё: какой штраф за превышение скорости?"
    understood = chain.understand(question, history)
    assert understood.how == "new subject"
    glued_best = top(chain, understood.search_question, 3)
    fused = ranked(chain, understood, 10)
    assert fused[0] == top(chain, question, 1)[0]  # the message's own best leads
    kept = [k for k in glued_best if k in fused]
    assert kept and not set(kept) & set(top(chain, question, 10))


def test_a_messages_own_best_article_stays_in_the_top_few_however_light_its_words(chain):
    # a change of subject the signals read as a continuation: its own words weigh little against the glued
    # search, yet their best article is shown at rank 4 at the lowest (`own_best_at`), the others in their order
    question = "какой штраф за превышение скорости?"
    history = asked(chain, DISMISSED)
    glued = glue(history, question, 600)
    own_best = top(chain, question, 1)[0]
    light = Followup(own=question, own_weight=0.01)
    as_fused = chain.retrieval.rank_articles(glued, 20, light)
    assert rank_of(as_fused, own_best) > 4
    placed = chain.retrieval.rank_articles(glued, 20, dataclasses.replace(light, own_best_at=4))
    assert rank_of(placed, own_best) == 4
    others = [(d, a) for d, a, _ in as_fused if (d, a) != own_best]
    assert [(d, a) for d, a, _ in placed if (d, a) != own_best] == others[:19]
    assert [s for _, _, s in placed] == sorted((s for _, _, s in placed), reverse=True)
    assert chain.understand(question, history).followup.own_best_at == 4  # the rule's setting


def test_a_message_goes_on_from_the_earlier_turn_holding_its_own_articles():
    # the index of the turn whose documents hold most of the message's own top articles; the latest wins a tie
    dismissal, fine = frozenset({TK}), frozenset({KOAP})
    assert related([TK, TK, KOAP], [dismissal, fine]) == -2
    assert related([TK, KOAP], [dismissal, fine]) == -1
    assert related([CRIMINAL_CODE_ID], [dismissal, fine]) == -1
    assert related([TK], [dismissal]) == -1


def test_a_return_to_an_older_turn_is_glued_to_it(chain):
    # a dismissal, then a speeding fine, then back to the dismissal: the message goes on from the first turn
    history = asked(chain, "Меня незаконно уволили с работы.", "И ещё вопрос: какой штраф за превышение скорости?")
    assert {s.doc_id for s in history[-1].sources} == {KOAP}
    question = "Возвращаясь к увольнению: в какой срок можно обратиться в суд?"
    understood = chain.understand(question, history)
    assert understood.used_history
    assert understood.search_question == glue(history, question, chain.followup.rule.max_chars, -2)
    assert "скорости" not in understood.search_question
    result = chain.invoke(question, history)
    assert result.sources and result.sources[0].doc_id == TK


def test_the_messages_own_terms_leave_the_previous_answers_code(chain):
    # after a drunk-driving answer (КоАП), a question about being dismissed for it lands in the Labour Code
    history = asked(chain, "Меня остановили пьяным за рулём.")
    assert {s.doc_id for s in history[-1].sources} == {KOAP}
    result = chain.invoke("А может ли работодатель уволить за появление на работе в состоянии опьянения?", history)
    assert result.sources and result.sources[0].doc_id == TK


def test_the_model_reads_a_refinement_and_a_change_of_subject_with_the_exact_prompt(chain, groq_server):
    history = asked(chain, "Что будет за кражу?")
    settings = with_backends(chain.settings, groq=groq_server.url)
    system = (settings.prompts_dir / "condense.ru.txt").read_text(encoding="utf-8").strip()
    groq_server.reply = "Что грозит за хищение, если при этом угрожали ножом?"
    refined = condenser(chain, settings).invoke("А если при этом угрожали ножом?", history)
    assert refined.search_question == "Что грозит за хищение, если при этом угрожали ножом?"
    assert refined.used_history and refined.how == "groq"
    # a change of subject opening like a continuation: the model returns it as written, without the «И ещё:»
    groq_server.reply = "Какой штраф за превышение скорости?"
    switched = condenser(chain, settings).invoke("И ещё: какой штраф за превышение скорости?", history)
    assert switched.search_question == "Какой штраф за превышение скорости?" and not switched.used_history
    for req, message in zip(
        groq_server.received, ("А если при этом угрожали ножом?", "И ещё: какой штраф"), strict=True
    ):
        sent = req.messages()
        assert sent[0] == {"role": "system", "content": system}
        assert sent[1]["content"] == "Что будет за кражу?" and "Статья 188. Кража" in sent[2]["content"]
        assert sent[-1]["content"].startswith(message)
    # the prompt tells the model the three kinds apart, not by the opening words
    assert "уточняет ту же ситуацию" in system and "не по первым словам" in system
