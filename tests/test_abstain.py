"""What cannot be answered is said so (issue 10, item 8): an article that does not exist, a code the registry
lacks, a message with no legal content — on the real pipeline over a real corpus slice, with the thresholds
measured by bench/abstain.py (config.off_topic_*, retrieval.pipeline.off_topic)."""

from __future__ import annotations

import pytest

from answer.generate import answer_question
from answer.records import Answer
from config import Settings
from retrieval.pipeline import Retrieval
from tests.support.retrieval import UK

OFF_TOPIC_PROBES = [
    "12345",
    "Hello, how are you doing today?",
    "привет всем",
    # Small talk the scores cannot tell from law: «как дела» (full corpus: BM25 4.45, best cosine 0.852) scores like
    # the legal word «прописка» (BM25 0, cosine 0.859), «қалайсыз» stems like «қала» (BM25 110), «ок» and «понятно,
    # спасибо» land near anything in the vectors. Told by their words (retrieval/verdict.py: small_talk).
    "как дела",
    "Как дела?",
    "қалайсыз",
    "ок",
    "Понятно, спасибо!",
    "Сәлеметсіз бе! Жағдайыңыз қалай?",
]


def _answer(retrieval: Retrieval, question: str) -> tuple[object, Answer]:
    result = retrieval.retrieve(question)
    info = result.query
    answer = answer_question(
        question,
        result.docs,
        lang=info.lang,
        is_criminal=info.is_criminal,
        is_range=info.is_range,
        settings=retrieval.settings,
        verdict=result.verdict,
    )
    return result, answer


def test_an_article_that_does_not_exist_is_said_so_and_nothing_is_quoted(bm25_retrieval: Retrieval) -> None:
    result, answer = _answer(bm25_retrieval, "статья 9999 УК")
    assert result.verdict.status == "no_such_article"
    assert answer.status == "no_such_article"
    assert result.docs == [] and answer.sources == ()
    assert answer.text.startswith("В УК РК нет статьи 9999.")
    # the nearest existing articles are offered only as "possibly": named and linked, never quoted
    assert "Возможно, вы имели в виду:" in answer.text
    assert [d.metadata["article"] for d in result.verdict.suggestions] == ["467", "466", "465"]
    assert all(d.metadata["doc_id"] == UK and d.metadata["possibly"] for d in result.verdict.suggestions)
    uk_399 = bm25_retrieval.articles.article_document((UK, "399"), "ru", 1800)
    assert "Статья 399" not in answer.text
    assert uk_399.page_content.split("\n")[1][:60] not in answer.text


def test_a_kazakh_reference_to_a_missing_article_is_answered_in_kazakh(bm25_retrieval: Retrieval) -> None:
    result, answer = _answer(bm25_retrieval, "ҚК-нің 9999-бабы")
    assert answer.status == "no_such_article"
    assert answer.text.startswith("ҚР ҚК құрамында 9999-бап жоқ.")


def test_a_number_no_document_has_is_said_so(bm25_retrieval: Retrieval) -> None:
    result, answer = _answer(bm25_retrieval, "что говорит статья 9999?")
    assert answer.status == "no_such_article"
    assert "Ни в одном из известных мне кодексов и законов нет статьи 9999." in answer.text
    assert answer.sources == ()


def test_a_year_the_analysis_reads_as_a_reference_is_not_a_missing_article(bm25_retrieval: Retrieval) -> None:
    # «2023 статья» reads as «статья 2023» (tests/test_query.py: «стало 2027» no longer reads as «ст. 2027»)
    result, _ = _answer(bm25_retrieval, "В 2023 статья была отменена?")
    assert [r.article for r in result.query.refs] == ["2023"]
    assert result.verdict.status != "no_such_article"


def test_an_existing_article_is_still_answered(bm25_retrieval: Retrieval) -> None:
    result, answer = _answer(bm25_retrieval, "статья 188 УК")
    assert answer.status == "answered"
    assert [d.metadata["article"] for d in result.docs][:1] == ["188"]


def test_a_code_the_registry_lacks_lists_the_known_codes(bm25_retrieval: Retrieval) -> None:
    result, answer = _answer(bm25_retrieval, "статья 5 Кодекса о космосе")
    assert result.verdict.status == "unknown_code"
    assert result.verdict.unknown_codes == ("Кодекса о космосе",)
    assert answer.sources == () and result.docs == []
    assert "«Кодекса о космосе»" in answer.text
    for code in ("ТК РК", "УК РК", "КоАП РК", "ГК РК"):
        assert code in answer.text
    assert "Статья 5" not in answer.text  # ТК 5 was quoted before


def test_an_unknown_code_in_kazakh_gets_the_kazakh_list(bm25_retrieval: Retrieval) -> None:
    _, answer = _answer(bm25_retrieval, "Ғарыш кодексінің 5-бабы")
    assert answer.status == "unknown_code"
    assert "ҚР ҚК" in answer.text and "ҚР ЕК" in answer.text


@pytest.mark.parametrize(
    "question",
    [
        "статья 5 Кодекса о браке и семье",
        "Кодекса РК о браке (супружестве) и семье",
        "по какому кодексу судят за кражу?",
        "Налоговый кодекс статья 5",
        "ҚР Еңбек кодексінің 5-бабы",
    ],
)
def test_registered_codes_and_pointers_are_not_unknown(question: str) -> None:
    from retrieval.explicit import unknown_codes

    assert unknown_codes(question) == ()


@pytest.mark.parametrize("question", OFF_TOPIC_PROBES)
def test_no_legal_content_gets_what_would_you_like_to_know(hybrid_retrieval: Retrieval, question: str) -> None:
    result, answer = _answer(hybrid_retrieval, question)
    assert result.verdict.status == "off_topic", result.verdict.relevance
    assert answer.status == "off_topic"
    assert answer.sources == () and result.docs == []
    if result.query.lang == "kk":
        assert answer.text.startswith("Мен Қазақстан заңдары туралы сұрақтарға жауап беремін. Не білгіңіз келеді?")
    else:
        assert answer.text.startswith("Я отвечаю на вопросы о законах Казахстана. Что вы хотели бы узнать?")


@pytest.mark.parametrize(
    "question", ["спасибо, а какой штраф за кражу?", "Здравствуйте! Что будет за кражу телефона?", "дело закрыли"]
)
def test_a_question_with_chat_words_is_still_a_question(bm25_retrieval: Retrieval, question: str) -> None:
    result, answer = _answer(bm25_retrieval, question)
    assert result.verdict.status == "answered" and answer.sources


@pytest.mark.parametrize("question", ["12345", "Hello, how are you doing today?"])
def test_without_vectors_the_lexical_signal_catches_what_no_law_contains(
    bm25_retrieval: Retrieval, question: str
) -> None:
    result, _ = _answer(bm25_retrieval, question)
    assert result.verdict.status == "off_topic"
    assert [name for name, _ in result.verdict.relevance] == ["bm25"]


@pytest.mark.parametrize("fixture", ["bm25_retrieval", "hybrid_retrieval"])
def test_a_real_question_still_answers_with_the_same_sources(fixture: str, request: pytest.FixtureRequest) -> None:
    retrieval: Retrieval = request.getfixturevalue(fixture)
    question = "Какая ответственность за кражу телефона?"
    result, answer = _answer(retrieval, question)
    assert answer.status == "answered" and result.verdict.status == "answered"
    ranked = [(d, a) for d, a, _ in retrieval.rank_articles(question, len(result.docs))]
    assert [(d.metadata["doc_id"], d.metadata["article"]) for d in result.docs] == ranked
    assert (UK, "188") in ranked[:3]
    assert answer.sources


def test_the_verdict_reaches_the_result_every_face_gets(bm25_retrieval: Retrieval, settings: Settings) -> None:
    from corpus.store import load_articles
    from rag_chain import QAChain

    chain = QAChain(bm25_retrieval.settings, bm25_retrieval, load_articles(bm25_retrieval.settings.corpus_dir))
    result = chain.invoke("статья 9999 УК")
    assert result.status == "no_such_article" and result.sources == ()
    assert result.to_json()["status"] == "no_such_article"
    assert chain.invoke("статья 188 УК").status == "answered"


# Signals measured on the full corpus by bench/abstain.py: (question, best chunk BM25, best dense cosine).
FULL_CORPUS_SIGNALS_ANSWERED = [
    ("Я работаю по ночам.", 9.392, 0.860),  # the lowest gold BM25 (a follow-up's first turn)
    ("Является ли легальной работа чатером", 16.604, 0.839),  # the lowest gold cosine
    ("Лишат ли меня прав?", 2.36, 0.833),  # a follow-up asked alone
    ("штраф", 5.30, 0.884),
    ("ажырасу", 8.42, 0.827),
    ("зарплата", 0.0, 0.874),  # no word of it in the laws («заработная плата»), the vectors find it
    ("прописка", 0.0, 0.859),
]
FULL_CORPUS_SIGNALS_OFF_TOPIC = [
    ("привет всем", 7.865, 0.804),
    ("қалың қалай", 8.939, 0.805),
    ("ок спасибо", 0.0, 0.845),
    ("12345", 0.0, 0.808),
]


@pytest.mark.parametrize(("question", "bm25", "dense"), FULL_CORPUS_SIGNALS_ANSWERED)
def test_the_rule_keeps_weakly_matching_legal_questions(question: str, bm25: float, dense: float) -> None:
    from retrieval.pipeline import off_topic

    assert not off_topic({"bm25": bm25, "dense": dense}, Settings(_env_file=None)), question


@pytest.mark.parametrize(("question", "bm25", "dense"), FULL_CORPUS_SIGNALS_OFF_TOPIC)
def test_the_rule_catches_small_talk_with_both_signals_weak(question: str, bm25: float, dense: float) -> None:
    from retrieval.pipeline import off_topic

    assert off_topic({"bm25": bm25, "dense": dense}, Settings(_env_file=None)), question


def test_without_vectors_only_a_question_matching_no_word_is_off_topic() -> None:
    from retrieval.pipeline import off_topic

    settings = Settings(_env_file=None)
    assert off_topic({"bm25": 0.0}, settings)
    assert not off_topic({"bm25": 7.865}, settings)  # «привет всем» stays answered with BM25 alone
