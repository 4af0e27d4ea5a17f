"""answer_question end to end: real articles, real ChatGroq/ChatOllama on local servers, every fallback."""

from __future__ import annotations

from pathlib import Path

import pytest

from answer.generate import answer_question
from answer.llm import build_chat_model
from answer.templates import load_phrases
from config import Settings
from tests.support.answer import GK, PERSONAL_DATA, UK, docs
from tests.support.llm_servers import GroqServer, OllamaServer, closed_port_url, with_backends

THEFT_Q = "Какое наказание за кражу?"
THEFT_A = (
    "Кража — это тайное хищение чужого имущества [S1]. По части 1 статьи 188 УК РК она наказывается "
    "штрафом до одной тысячи месячных расчетных показателей либо лишением свободы на срок до трех лет [S1]. "
    "Мелкое хищение наказывается штрафом или арестом [S2]."
)
KK_Q = "Дербес деректерді жинауға келісім қалай беріледі?"
KK_A = (
    "Субъект немесе оның заңды өкілі дербес деректерді жинауға, өңдеуге жазбаша немесе мемлекеттік сервис "
    "арқылы келісім береді [S1]."
)


@pytest.fixture
def theft_docs(shared_dir: Path):
    return docs(shared_dir, UK, ["188", "187", "190"])


def ask(
    question: str,
    documents,
    settings: Settings,
    *,
    lang: str = "ru",
    crime: bool = True,
    range_: bool = False,
):
    return answer_question(question, documents, lang=lang, is_criminal=crime, is_range=range_, settings=settings)


def test_groq_answer_is_grounded_cited_and_ends_with_the_disclaimer(
    settings: Settings, groq_server: GroqServer, theft_docs
):
    groq_server.reply = THEFT_A
    answer = ask(THEFT_Q, theft_docs, with_backends(settings, groq=groq_server.url))
    assert (answer.backend, answer.template, answer.grounded) == ("groq", "criminal", True)
    phrases = load_phrases(settings, "ru")
    assert answer.text == f"{THEFT_A}\n\n{phrases.disclaimer}"
    # the sources the answer cites, with their labels: faces list them with links
    assert [(s.source_id, s.article) for s in answer.sources] == [("S1", "188"), ("S2", "187")]
    assert {"context_ms", "llm_ms", "grounding_ms", "answer_ms"} <= answer.timings.keys()
    assert "extractive_ms" not in answer.timings

    [req] = groq_server.received
    assert req.headers["authorization"] == "Bearer gsk_test_key"
    assert req.body["model"] == "llama-3.3-70b-versatile"
    assert req.body["temperature"] == pytest.approx(0, abs=1e-6)
    assert req.body["max_tokens"] == settings.llm_max_tokens
    system, user = req.text_of("system"), req.text_of("user")
    assert "Состав преступления" in system and phrases.disclaimer in system
    assert "[S1] УК РК, Статья 188. Кража\n1. Кража, то есть тайное хищение" in user
    assert "[S3] УК РК, Статья 190. Мошенничество\n" in user
    assert user.rstrip().endswith(f"Вопрос: {THEFT_Q}")


def test_a_disclaimer_the_model_wrote_is_not_repeated(settings: Settings, groq_server: GroqServer, theft_docs):
    disclaimer = load_phrases(settings, "ru").disclaimer
    groq_server.reply = f"{THEFT_A}\n\n{disclaimer}"
    answer = ask(THEFT_Q, theft_docs, with_backends(settings, groq=groq_server.url))
    assert answer.grounded and answer.text.count(disclaimer) == 1 and answer.text.endswith(disclaimer)


def test_groq_rate_limited_then_ollama_answers(
    settings: Settings, groq_server: GroqServer, ollama_server: OllamaServer, theft_docs
):
    groq_server.rate_limit(retry_after=20)
    ollama_server.reply = THEFT_A
    configured = with_backends(settings, groq=groq_server.url, ollama=ollama_server.url)
    answer = ask(THEFT_Q, theft_docs, configured)
    assert (answer.backend, answer.grounded) == ("ollama", True)
    assert len(groq_server.received) == 1  # not retried after retry-after
    [req] = ollama_server.received
    assert req.body["options"]["num_ctx"] == settings.ollama_num_ctx
    assert "[S1] УК РК, Статья 188. Кража" in req.text_of("user")


def test_both_backends_down_gives_the_extractive_answer_with_a_note(settings: Settings, theft_docs):
    answer = ask(THEFT_Q, theft_docs, with_backends(settings, groq=closed_port_url(), ollama=closed_port_url()))
    phrases = load_phrases(settings, "ru")
    assert answer.backend == "extractive" and answer.grounded
    assert answer.text.startswith(f"{phrases.model_failed}\n\n{phrases.extractive_intro}")
    assert "[S1] УК РК, Статья 188. Кража" in answer.text
    assert answer.sources[0].article == "188"  # the quoted sources
    assert any(n.startswith("model failed") for n in answer.notes)


def test_no_model_configured_answers_with_quotes_and_no_note(settings: Settings, theft_docs):
    answer = ask(THEFT_Q, theft_docs, settings)
    assert answer.backend == "extractive" and answer.grounded
    assert answer.text.startswith(load_phrases(settings, "ru").extractive_intro)
    assert answer.notes == ("no chat model configured",)
    assert "extractive_ms" in answer.timings and "llm_ms" not in answer.timings


def test_an_answer_citing_an_article_outside_the_sources_is_replaced(
    settings: Settings, groq_server: GroqServer, theft_docs
):
    groq_server.reply = THEFT_A + " Кроме того, применяется статья 175 УК РК [S1]."
    answer = ask(THEFT_Q, theft_docs, with_backends(settings, groq=groq_server.url))
    assert answer.backend == "extractive"
    assert answer.text.startswith(load_phrases(settings, "ru").grounding_failed)
    assert "175" not in answer.text  # the ungrounded citation never reaches the user
    assert "groq answer failed grounding" in answer.notes
    assert any("статья 175" in n for n in answer.notes)


def test_kazakh_question_gets_the_kazakh_template_and_disclaimer(
    settings: Settings, groq_server: GroqServer, shared_dir: Path
):
    groq_server.reply = KK_A  # the model forgot the disclaimer
    kk_docs = docs(shared_dir, PERSONAL_DATA, ["8", "7"], "kk")
    answer = ask(KK_Q, kk_docs, with_backends(settings, groq=groq_server.url), lang="kk", crime=False)
    kk = load_phrases(settings, "kk")
    assert (answer.backend, answer.template, answer.grounded) == ("groq", "universal", True)
    assert answer.text.endswith(kk.disclaimer)
    assert answer.text == f"{KK_A}\n\n{kk.disclaimer}"
    assert [(s.source_id, s.article, s.lang) for s in answer.sources] == [("S1", "8", "kk")]
    [req] = groq_server.received
    assert "Ережелер:" in req.text_of("system") and kk.disclaimer in req.text_of("system")
    assert req.text_of("user").rstrip().endswith(f"Сұрақ: {KK_Q}")


def test_range_question_gets_the_range_template(settings: Settings, groq_server: GroqServer, shared_dir: Path):
    groq_server.reply = (
        "Статья 188 — кража, то есть тайное хищение чужого имущества [S1]. "
        "Статья 189 — присвоение или растрата чужого имущества, вверенного виновному [S2]. "
        "Статья 190 — мошенничество, то есть хищение чужого имущества путем обмана [S3]."
    )
    range_docs = docs(shared_dir, UK, ["188", "189", "190"])
    answer = ask("Статьи 188-190 УК", range_docs, with_backends(settings, groq=groq_server.url), range_=True)
    assert (answer.template, answer.backend, answer.grounded) == ("range", "groq", True)
    assert "каждую статью" in groq_server.received[0].text_of("system")


def test_crime_question_without_a_criminal_code_source_falls_back(
    settings: Settings, groq_server: GroqServer, shared_dir: Path
):
    groq_server.reply = "Собственнику принадлежат права владения, пользования и распоряжения своим имуществом [S1]."
    gk_docs = docs(shared_dir, GK, ["188"])
    answer = ask("Какое наказание за кражу имущества?", gk_docs, with_backends(settings, groq=groq_server.url))
    assert answer.backend == "extractive"
    assert "crime question: no Criminal Code source" in answer.notes


def test_answer_in_the_wrong_language_falls_back(settings: Settings, groq_server: GroqServer, theft_docs):
    groq_server.reply = THEFT_A  # Russian, to a Kazakh question
    answer = ask("Ұрлық үшін қандай жаза бар?", theft_docs, with_backends(settings, groq=groq_server.url), lang="kk")
    kk = load_phrases(settings, "kk")
    assert answer.backend == "extractive"
    assert answer.text.startswith(kk.grounding_failed) and answer.text.endswith(kk.disclaimer)
    assert "answer is in 'ru', the question in 'kk'" in answer.notes


def test_server_error_falls_back_to_quotes(settings: Settings, groq_server: GroqServer, theft_docs):
    groq_server.fail(500, {"error": {"message": "Internal Server Error", "type": "internal_server_error"}})
    answer = ask(THEFT_Q, theft_docs, with_backends(settings, groq=groq_server.url))
    assert answer.backend == "extractive" and answer.text.startswith(load_phrases(settings, "ru").model_failed)


def test_no_documents_says_nothing_was_found(settings: Settings, groq_server: GroqServer):
    answer = ask(THEFT_Q, [], with_backends(settings, groq=groq_server.url))
    assert answer.backend == "extractive" and not answer.grounded
    assert answer.text.startswith(load_phrases(settings, "ru").no_sources)
    assert groq_server.received == []  # nothing to ground an answer on: the model is not asked


def test_a_prebuilt_chat_model_is_reused(settings: Settings, ollama_server: OllamaServer, theft_docs):
    ollama_server.reply = THEFT_A
    model = build_chat_model(with_backends(settings, ollama=ollama_server.url))
    for _ in range(2):
        # `settings` itself configures no backend: only the model passed in can answer.
        answer = answer_question(
            THEFT_Q,
            theft_docs,
            lang="ru",
            is_criminal=True,
            is_range=False,
            settings=settings,
            chat_model=model,
        )
        assert answer.backend == "ollama"
    assert len(ollama_server.received) == 2


def test_a_reversed_norm_is_replaced_by_the_quotes(settings: Settings, groq_server: GroqServer, theft_docs):
    groq_server.reply = THEFT_A.replace("она наказывается", "она не наказывается")
    answer = ask(THEFT_Q, theft_docs, with_backends(settings, groq=groq_server.url))
    assert answer.backend == "extractive" and answer.text.startswith(load_phrases(settings, "ru").grounding_failed)
    assert "не наказывается" not in answer.text
    assert "groq answer failed grounding" in answer.notes
    assert any("contradict their sources: «не наказывается»" in n for n in answer.notes)


def test_a_phishing_link_never_reaches_the_answer(settings: Settings, groq_server: GroqServer, theft_docs):
    phishing = "Оплатить штраф онлайн можно на https://adilet-zan.kz.evil.com/pay [S1]."
    groq_server.reply = f"{THEFT_A}\n{phishing}"
    answer = ask(THEFT_Q, theft_docs, with_backends(settings, groq=groq_server.url))
    assert (answer.backend, answer.grounded) == ("groq", True)
    assert answer.text == f"{THEFT_A}\n\n{load_phrases(settings, 'ru').disclaimer}"
    assert "evil" not in answer.text


def test_the_model_reads_the_part_the_question_asks_about_and_its_answer_stays_grounded(
    settings: Settings, groq_server: GroqServer, shared_dir: Path
):
    from langchain_core.documents import Document

    from tests.support.answer import articles

    # The whole of УК 188 (as the assembly hands it over when it fits); the question is about its part 4.
    [first] = docs(shared_dir, UK, ["188"])
    whole = Document(
        page_content=f"УК РК. Статья 188. Кража\n{articles(shared_dir, UK)['188'].text}", metadata=first.metadata
    )
    groq_server.reply = (
        "Кража из нефтегазопровода наказывается лишением свободы на срок от пяти до десяти лет "
        "с конфискацией имущества [S1]."
    )
    small = with_backends(settings, groq=groq_server.url).model_copy(update={"prompt_source_chars": 700})
    answer = ask("Какое наказание за кражу из нефтегазопровода?", [whole], small)
    assert (answer.backend, answer.grounded) == ("groq", True)
    [req] = groq_server.received
    user = req.text_of("user")
    assert "2) из нефтегазопровода;" in user and "предварительному сговору" not in user
    assert len(user) < len(whole.page_content)
