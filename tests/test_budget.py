"""The LLM budget (answer/budget.py) against the local Groq and Ollama servers: a spent budget sends nothing and
says so once, the provider's x-ratelimit-* headers and retry-after keep it current, replicas share it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from prometheus_client import REGISTRY
from pydantic import SecretStr
from sqlalchemy import text

from answer.budget import BudgetSpent, LLMBudget, duration
from answer.generate import answer_question
from answer.llm import build_chat_model
from answer.templates import load_phrases
from config import Settings
from corpus.database import engine
from tests.support.answer import PERSONAL_DATA, UK, docs
from tests.support.llm_servers import GroqServer, OllamaServer, with_backends

ROOT = Path(__file__).resolve().parents[1]
THEFT_Q = "Какое наказание за кражу?"
THEFT_A = "Кража — это тайное хищение чужого имущества [S1]."


@pytest.fixture
def theft_docs(shared_dir: Path):
    return docs(shared_dir, UK, ["188", "187", "190"])


def ask(settings: Settings, theft_docs, question: str = THEFT_Q):
    return answer_question(question, theft_docs, lang="ru", is_criminal=True, is_range=False, settings=settings)


def gauge(backend: str, kind: str) -> float | None:
    return REGISTRY.get_sample_value("kzlaw_llm_budget_remaining", {"backend": backend, "kind": kind})


def test_a_spent_budget_sends_nothing_and_says_why_once(settings: Settings, groq_server: GroqServer, theft_docs):
    groq_server.reply = THEFT_A
    configured = with_backends(settings, groq=groq_server.url, groq_requests_per_minute=2)
    first, second = ask(configured, theft_docs), ask(configured, theft_docs)
    assert first.backend == second.backend == "groq"
    third = ask(configured, theft_docs)
    assert len(groq_server.received) == 2  # the third request never reached the server: no 429 round trip
    phrases = load_phrases(settings, "ru")
    assert third.backend == "extractive" and third.grounded
    assert third.text.startswith(f"{phrases.budget_spent}\n\n{phrases.extractive_intro}")
    assert third.text.count(phrases.budget_spent) == 1 and phrases.model_failed not in third.text
    assert any("budget spent: requests_per_minute" in n for n in third.notes)
    assert gauge("groq", "requests_per_minute") == 0


def test_the_kazakh_note(settings: Settings, groq_server: GroqServer, shared_dir: Path):
    configured = with_backends(settings, groq=groq_server.url, groq_tokens_per_minute=100)  # less than one prompt
    kk_docs = docs(shared_dir, PERSONAL_DATA, ["8", "7"], "kk")
    question = "Дербес деректерді жинауға келісім қалай беріледі?"
    answer = answer_question(question, kk_docs, lang="kk", is_criminal=False, is_range=False, settings=configured)
    assert groq_server.received == []
    assert answer.text.startswith(load_phrases(settings, "kk").budget_spent)


def test_a_spent_groq_budget_goes_straight_to_ollama(
    settings: Settings, groq_server: GroqServer, ollama_server: OllamaServer, theft_docs
):
    ollama_server.reply = groq_server.reply = THEFT_A
    groq_server.ratelimit = {}  # no headers: the setting (one request a day) is all the budget knows
    configured = with_backends(settings, groq=groq_server.url, ollama=ollama_server.url, groq_requests_per_day=1)
    assert ask(configured, theft_docs).backend == "groq"
    answer = ask(configured, theft_docs)
    assert answer.backend == "ollama" and len(groq_server.received) == 1 and len(ollama_server.received) == 1


def test_the_reservation_covers_the_prompt_and_the_longest_reply(settings: Settings, groq_server: GroqServer):
    groq_server.ratelimit = {}  # no headers: only the budget's own count
    configured = with_backends(settings, groq=groq_server.url, groq_tokens_per_minute=3000, llm_max_tokens=1000)
    model = build_chat_model(configured)
    model.invoke([HumanMessage("к" * 300)])  # 100 estimated + 1000 reserved, then the reply's 150 replace them
    assert gauge("groq", "tokens_per_minute") == 3000 - 150
    with pytest.raises(Exception, match="budget spent: tokens_per_minute"):
        model.invoke([HumanMessage("к" * 6000)])  # 2000 + 1000 > 2850
    assert len(groq_server.received) == 1


def test_headers_update_the_budget(settings: Settings, groq_server: GroqServer):
    groq_server.ratelimit = {
        "x-ratelimit-limit-requests": "14400",
        "x-ratelimit-remaining-requests": "14000",
        "x-ratelimit-reset-requests": "2m59.56s",
        "x-ratelimit-limit-tokens": "6000",
        "x-ratelimit-remaining-tokens": "2500",
        "x-ratelimit-reset-tokens": "7.66s",
    }
    configured = with_backends(settings, groq=groq_server.url, llm_max_tokens=2048)
    model = build_chat_model(configured)
    model.invoke([HumanMessage("Какое наказание за кражу?")])
    budget = LLMBudget(configured, "groq")
    assert budget.remaining() == {
        "requests_per_day": 14000,  # the provider's figures replace the settings' 1,000
        "requests_per_minute": 29,
        "tokens_per_minute": 2500,
        "tokens_per_day": 100000 - 150,  # the reply's usage
    }
    assert gauge("groq", "tokens_per_minute") == 2500
    # 2,500 tokens left this minute cannot hold a 2,048-token reply and this prompt: not sent
    with pytest.raises(Exception, match="budget spent: tokens_per_minute"):
        model.invoke([HumanMessage("к" * 2000)])
    assert len(groq_server.received) == 1


def test_retry_after_holds_every_request_back(
    settings: Settings, groq_server: GroqServer, ollama_server: OllamaServer, theft_docs
):
    groq_server.rate_limit(retry_after=30)
    ollama_server.reply = THEFT_A
    configured = with_backends(settings, groq=groq_server.url, ollama=ollama_server.url)
    assert ask(configured, theft_docs).backend == "ollama"  # the one 429
    assert ask(configured, theft_docs).backend == "ollama"
    assert len(groq_server.received) == 1 and len(ollama_server.received) == 2  # no second 429 round trip


def test_streaming_is_budgeted_too(settings: Settings, groq_server: GroqServer):
    groq_server.reply = "Ответ по частям [S1]."
    model = build_chat_model(with_backends(settings, groq=groq_server.url, groq_requests_per_minute=1))
    assert "".join(str(c.content) for c in model.stream([HumanMessage("вопрос")])) == "Ответ по частям [S1]."
    with pytest.raises(Exception, match="budget spent"):
        list(model.stream([HumanMessage("вопрос")]))
    assert len(groq_server.received) == 1


def test_two_processes_share_the_budget(settings: Settings, groq_server: GroqServer):
    """Two replicas (here: this process and another over the same DATA_DIR) spend one budget between them."""
    configured = with_backends(settings, groq=groq_server.url, groq_requests_per_minute=3)
    model = build_chat_model(configured)
    model.invoke([HumanMessage("первый")])
    other = textwrap.dedent(
        f"""
        from langchain_core.messages import HumanMessage
        from pydantic import SecretStr
        from answer.llm import build_chat_model
        from config import Settings
        settings = Settings(_env_file=None, data_dir={str(settings.data_dir)!r}, groq_api_key=SecretStr("gsk_test_key"),
                            groq_base_url={groq_server.url!r}, groq_requests_per_minute=3)
        model = build_chat_model(settings)
        for question in ("второй", "третий", "четвёртый"):
            try:
                model.invoke([HumanMessage(question)])
                print("sent")
            except Exception as err:
                print(type(err).__name__)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", other], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split() == ["sent", "sent", "BudgetSpent"]
    with pytest.raises(Exception, match="budget spent"):
        model.invoke([HumanMessage("пятый")])
    assert len(groq_server.received) == 3
    other_model = LLMBudget(configured.model_copy(update={"groq_model": "llama-3.1-8b-instant"}), "groq")
    assert other_model.remaining()["requests_per_minute"] == 3  # Groq limits each model apart


def test_provider_durations():
    assert duration("2m59.56s") == pytest.approx(179.56)
    assert duration("7.66s") == pytest.approx(7.66)
    assert duration("120ms") == pytest.approx(0.12)
    assert duration("1h0m1s") == pytest.approx(3601)
    assert duration("20", unit="s") == 20 and duration(None) is None and duration("soon") is None


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_replicas_never_both_spend_the_last_request(
    settings: Settings, groq_server: GroqServer, database: str, request: pytest.FixtureRequest
):
    """Eight questions at once from two replicas (two chat models, one database) with five requests left: five
    reach the server, three go on to the next backend unsent."""
    update = {"groq_requests_per_minute": 5}
    if database == "postgresql":
        update["database_url"] = SecretStr(request.getfixturevalue("pg_url"))
    configured = with_backends(settings, groq=groq_server.url, **update)
    replicas = [
        build_chat_model(configured),
        build_chat_model(configured.model_copy(update={"telegram_admin_ids": [1]})),
    ]
    groq_server.delay = 0.05

    def ask_once(i: int) -> str:
        try:
            replicas[i % 2].invoke([HumanMessage(f"вопрос {i}")])
            return "sent"
        except BudgetSpent:
            return "spent"

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(ask_once, range(8)))
    assert sorted(outcomes) == ["sent"] * 5 + ["spent"] * 3
    assert len(groq_server.received) == 5
    if database == "postgresql":
        with engine(configured, configured.cache_dir / "unused.sqlite").connect() as conn:
            [(used,)] = conn.execute(text("SELECT used FROM llm_budget WHERE \"window\" = 'requests_per_minute'"))
        assert used == 5
