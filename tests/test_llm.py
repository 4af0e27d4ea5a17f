"""The chat model against local Groq and Ollama servers: requests as sent, fallbacks, and who answered."""

from __future__ import annotations

import functools
import operator

import ollama
import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from answer.llm import backend_of, build_chat_model
from config import Settings
from tests.support.llm_servers import GroqServer, OllamaServer, closed_port_url, with_backends

MESSAGES = [SystemMessage("Отвечай по источникам."), HumanMessage("Какое наказание за кражу?")]


def test_no_backend_without_key_or_switch(settings: Settings):
    assert build_chat_model(settings) is None  # the default: no GROQ_API_KEY, OLLAMA_ENABLED off
    assert build_chat_model(settings.model_copy(update={"llm_backends": []})) is None


def test_groq_request_and_reply(settings: Settings, groq_server: GroqServer):
    groq_server.reply = "Кража наказывается штрафом [S1]."
    model = build_chat_model(with_backends(settings, groq=groq_server.url))
    reply = model.invoke(MESSAGES)
    assert reply.content == "Кража наказывается штрафом [S1]."
    assert backend_of(reply) == "groq"
    [req] = groq_server.received
    assert req.path == "/openai/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer gsk_test_key"
    assert req.body["model"] == "llama-3.3-70b-versatile"
    assert req.body["temperature"] == pytest.approx(0, abs=1e-6)  # ChatGroq sends 0 as 1e-8
    assert req.body["max_tokens"] == 2048
    assert req.messages() == [
        {"role": "system", "content": "Отвечай по источникам."},
        {"role": "user", "content": "Какое наказание за кражу?"},
    ]


def test_groq_streaming_reads_server_sent_events(settings: Settings, groq_server: GroqServer):
    groq_server.reply = "Ответ по частям статьи [S1]."
    model = build_chat_model(with_backends(settings, groq=groq_server.url))
    chunks = list(model.stream(MESSAGES))
    assert "".join(c.content for c in chunks) == "Ответ по частям статьи [S1]."
    # the first piece carries the stamp, once: the pieces added up name the backend, not "groqgroq…"
    assert len(chunks) > 1 and backend_of(chunks[0]) == "groq"
    assert backend_of(functools.reduce(operator.add, chunks)) == "groq"
    assert groq_server.received[0].body["stream"] is True


def test_ollama_request_carries_num_ctx_and_streams_ndjson(settings: Settings, ollama_server: OllamaServer):
    ollama_server.reply = "Кража наказывается лишением свободы [S1]."
    model = build_chat_model(with_backends(settings, ollama=ollama_server.url, ollama_num_ctx=12288))
    reply = model.invoke(MESSAGES)
    assert reply.content == "Кража наказывается лишением свободы [S1]."
    assert backend_of(reply) == "ollama"
    [req] = ollama_server.received
    assert (req.method, req.path) == ("POST", "/api/chat")
    assert req.body["model"] == "llama3.1:8b"
    assert req.body["stream"] is True
    assert req.body["options"]["num_ctx"] == 12288
    assert req.body["options"]["num_predict"] == 2048
    assert req.body["options"]["temperature"] == 0
    assert [m["role"] for m in req.messages()] == ["system", "user"]


def test_ollama_server_lists_its_model(ollama_server: OllamaServer):
    listed = ollama.Client(host=ollama_server.url).list()
    assert [m.model for m in listed.models] == ["llama3.1:8b"]


def test_groq_rate_limit_moves_to_ollama_without_waiting(
    settings: Settings, groq_server: GroqServer, ollama_server: OllamaServer
):
    groq_server.rate_limit(retry_after=20)
    ollama_server.reply = "Ответ Ollama [S1]."
    model = build_chat_model(with_backends(settings, groq=groq_server.url, ollama=ollama_server.url))
    reply = model.invoke(MESSAGES)
    assert reply.content == "Ответ Ollama [S1]."
    assert backend_of(reply) == "ollama"
    # One request and no retry: honouring retry-after would have meant a second request after 20 s.
    assert len(groq_server.received) == 1
    assert len(ollama_server.received) == 1


def test_backends_follow_the_configured_order(settings: Settings, groq_server: GroqServer, ollama_server: OllamaServer):
    order = with_backends(settings, groq=groq_server.url, ollama=ollama_server.url, llm_backends=["ollama", "groq"])
    assert backend_of(build_chat_model(order).invoke(MESSAGES)) == "ollama"
    assert groq_server.received == []


def test_a_backend_that_is_not_configured_is_left_out(settings: Settings, ollama_server: OllamaServer):
    # Groq is listed first but has no key: Ollama alone answers, nothing tries Groq.
    model = build_chat_model(with_backends(settings, ollama=ollama_server.url))
    assert backend_of(model.invoke(MESSAGES)) == "ollama"


def test_a_hanging_backend_is_abandoned_after_the_timeout(
    settings: Settings, groq_server: GroqServer, ollama_server: OllamaServer
):
    groq_server.delay = 5.0
    ollama_server.reply = "Ответ Ollama [S1]."
    model = build_chat_model(with_backends(settings, groq=groq_server.url, ollama=ollama_server.url, llm_timeout=0.3))
    assert backend_of(model.invoke(MESSAGES)) == "ollama"
    assert len(groq_server.received) == 1


def test_a_hanging_ollama_times_out_too(settings: Settings, ollama_server: OllamaServer):
    ollama_server.delay = 5.0
    model = build_chat_model(with_backends(settings, ollama=ollama_server.url, llm_timeout=0.3))
    with pytest.raises(Exception, match="[Tt]imed? ?out"):
        model.invoke(MESSAGES)


def test_both_down_raises_for_the_caller_to_handle(settings: Settings):
    model = build_chat_model(with_backends(settings, groq=closed_port_url(), ollama=closed_port_url()))
    with pytest.raises(Exception, match="[Cc]onnect"):
        model.invoke(MESSAGES)
