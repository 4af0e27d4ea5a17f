"""The service's metrics: `python -m bot` (polling and webhook) serving /metrics and /healthz on METRICS_PORT over
the real chain on a corpus slice, the local Bot API and Groq servers; each search's time; the answer's log line."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from answer.generate import answer_question
from bot.app import build_application
from config import Settings
from corpus.errors import UserError
from tests.support.answer import UK, docs
from tests.support.bot import ScriptedQA, SharedLookup
from tests.support.llm_servers import GroqServer, OllamaServer, with_backends
from tests.support.telegram_server import BotAPIServer, BotRequest, message_update, settings_for
from tests.test_bot_e2e import free_port
from tests.test_generate import THEFT_A, THEFT_Q

ROOT = Path(__file__).resolve().parents[1]
SECRET = "metrics-hook-secret"
# Grounded in «УК РК, Статья 188. Кража» (tests/test_rag_chain.py): Groq's answer passes the check.
GROQ_REPLY = (
    "Кража — тайное хищение чужого имущества [S1]. Она наказывается штрафом до одной тысячи месячных "
    "расчетных показателей либо лишением свободы на срок до трех лет [S1]."
)
# Every stage of an answer by a model after a lexical search (no vector index is built in the copied slice).
MODEL_STAGES = {"analyze", "search", "search_bm25", "rerank", "retrieval", "context", "llm", "answer", "total"}


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    """(sample name, sorted labels) → value of every sample in a Prometheus text exposition, by the real parser."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: Samples, name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


@asynccontextmanager
async def bot_process(env: dict[str, str], cwd: Path) -> AsyncIterator[list[str]]:
    """`python -m bot` running with `env`; yields a list that holds its stderr lines once it has stopped."""
    stderr_file = cwd / "bot.stderr"
    with stderr_file.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot", cwd=cwd, env=env, stderr=err)
        lines: list[str] = []
        try:
            yield lines
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGINT)
                try:
                    await asyncio.wait_for(proc.wait(), timeout=60)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
    lines += stderr_file.read_text(encoding="utf-8", errors="replace").splitlines()


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(url) as r:
        return r.status, await r.text()


async def until_up(url: str, timeout: float = 90.0) -> tuple[int, str]:
    """GET `url` once something listens there (the bot process is starting)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await get(url)
        except aiohttp.ClientConnectionError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def post_when_up(url: str, body: dict[str, Any], headers: dict[str, str], timeout: float = 60.0) -> int:
    """POST `body` once something listens at `url` (PTB sets the webhook before its server listens)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            async with aiohttp.ClientSession() as http, http.post(url, json=body, headers=headers) as r:
                return r.status
        except aiohttp.ClientConnectionError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


def answered(api: BotAPIServer, chat_id: int, since: int) -> list[BotRequest]:
    """The bot's sendMessage calls to `chat_id` since request number `since`."""
    return api.calls("sendMessage", chat_id=chat_id, since=since)


def rated_id(request: BotRequest) -> int:
    """The question id the answer's rating buttons carry."""
    buttons = [b for row in request.params["reply_markup"]["inline_keyboard"] for b in row]
    [up] = [b["callback_data"] for b in buttons if b.get("callback_data", "").endswith(":up")]
    return int(up.split(":")[1])


@pytest.mark.parametrize("mode", ["polling", "webhook"])
async def test_the_bot_serves_metrics_and_health(
    mode: str, api: BotAPIServer, corpus_slice, groq_server: GroqServer, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    metrics_port, hook_port = free_port(), free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TELEGRAM_", "GROQ_", "PINECONE_", "OLLAMA_"))},
        "PYTHONPATH": str(ROOT),
        "DATA_DIR": str(data_dir),
        "TELEGRAM_BOT_TOKEN": api.token,
        "TELEGRAM_API_URL": api.base_url,
        "TELEGRAM_FILE_URL": api.base_file_url,
        "TELEGRAM_MODE": mode,
        "TELEGRAM_WEBHOOK_URL": "https://bot.example.kz/tg/hook",
        "TELEGRAM_WEBHOOK_LISTEN": "127.0.0.1",
        "TELEGRAM_WEBHOOK_PORT": str(hook_port),
        "TELEGRAM_WEBHOOK_SECRET": SECRET,
        "GROQ_API_KEY": "gsk_test_key",
        "GROQ_BASE_URL": groq_server.url,
        "LLM_BACKENDS": '["groq"]',
        "LEARNED_RANKER": "false",  # the shipped ranker is trained on the whole corpus, this is a slice
        "BACKGROUND_INDEX_BUILD": "false",
        "LOAD_RETRY_SECONDS": "0.05",  # the chain is loaded again soon after the corpus arrives
        "METRICS_PORT": str(metrics_port),
        "METRICS_LISTEN": "127.0.0.1",
    }
    groq_server.reply = GROQ_REPLY
    base = f"http://127.0.0.1:{metrics_port}"

    async def ask(user: int, text: str) -> Callable[[], Awaitable[list[BotRequest]]]:
        """Send a question as Telegram would in this mode; the returned call waits for the bot's reply."""
        since = len(api.requests)
        update = message_update(user, text)
        if mode == "polling":
            api.push(update)
        else:
            assert (
                await post_when_up(
                    f"http://127.0.0.1:{hook_port}/tg/hook",
                    {"update_id": user, **update},
                    {"X-Telegram-Bot-Api-Secret-Token": SECRET},
                )
                == 200
            )

        async def reply() -> list[BotRequest]:
            await api.wait_for(lambda s: bool(answered(s, user, since)), timeout=120)
            return answered(api, user, since)

        return reply

    async with bot_process(env, tmp_path) as stderr:
        # No corpus yet: the chain cannot load, so the service is not healthy and a question gets the error.
        status, body = await until_up(f"{base}/healthz")
        assert (status, body) == (503, "no chain loaded\n")
        failed = await (await ask(601, "Какое наказание за кражу?"))()
        assert "недоступна" in failed[-1].params["text"]  # one plain sentence: the operator's command is logged
        assert (await get(f"{base}/healthz"))[0] == 503

        shutil.copytree(corpus_slice.settings.corpus_dir, data_dir / "corpus")  # the corpus arrives
        await asyncio.sleep(1)  # past the failed load's backoff (LOAD_RETRY_SECONDS, doubled at each failure)
        by_model = (await (await ask(602, "Какое наказание за кражу?"))())[-1]
        assert by_model.params["text"].startswith("Кража — тайное хищение"), by_model.params["text"]
        assert await get(f"{base}/healthz") == (200, "ok\n")

        groq_server.rate_limit()  # Groq's free tier is spent: the quotes answer
        by_quotes = (await (await ask(603, "Какое наказание за грабеж?"))())[-1]
        assert "Источники" in by_quotes.params["text"]

        status, text = await get(f"{base}/metrics")
        assert status == 200
        assert (await get(f"{base}/other"))[0] == 404
    found = samples(text)

    assert value(found, "kzlaw_questions_total") == 3
    assert value(found, "kzlaw_answers_total", backend="groq", template="criminal", status="answered") == 1
    assert value(found, "kzlaw_answers_total", backend="extractive", template="criminal", status="answered") == 1
    assert value(found, "kzlaw_fallbacks_total", cause="llm_error") == 1
    assert value(found, "kzlaw_llm_errors_total", backend="groq", error="RateLimitError") == 1
    assert value(found, "kzlaw_errors_total", where="qa", kind="user") == 1  # the question before the corpus
    assert value(found, "kzlaw_errors_total", where="update", kind="user") == 1
    assert value(found, "kzlaw_errors_total", where="chain_load", kind="user") == 1  # the warm-up
    for stage in MODEL_STAGES:
        assert value(found, "kzlaw_stage_seconds_count", stage=stage) == 2, stage
        assert value(found, "kzlaw_stage_seconds_sum", stage=stage) > 0, stage
    assert value(found, "kzlaw_stage_seconds_count", stage="grounding") == 1  # only the model's text is checked
    assert value(found, "kzlaw_stage_seconds_count", stage="extractive") == 1
    assert value(found, "kzlaw_stage_seconds_bucket", stage="total", le="+Inf") == 2

    # One structured line per answer: its question id (the one its rating buttons carry) and each stage's time.
    lines = [json.loads(line.split(" answer ", 1)[1]) for line in stderr if " bot.handlers: answer {" in line]
    assert [(line["question_id"], line["backend"]) for line in lines] == [
        (rated_id(by_model), "groq"),
        (rated_id(by_quotes), "extractive"),
    ]
    assert MODEL_STAGES | {"grounding"} <= lines[0]["stages_ms"].keys()
    assert all(ms >= 0 for ms in lines[0]["stages_ms"].values())
    assert lines[0]["stages_ms"]["total"] >= lines[0]["stages_ms"]["llm"] > 0


def test_each_search_is_timed(hybrid_retrieval) -> None:
    timings = hybrid_retrieval.retrieve("Какое наказание за кражу телефона?").timings
    each = [timings[f"search_{name}_ms"] for name in ("bm25", "dense", "latent")]
    assert all(ms > 0 for ms in each)
    assert sum(each) <= timings["search_ms"]  # parts of the first stage, which also fuses them


def test_a_metrics_port_in_use_stops_the_start_with_one_message(
    api: BotAPIServer, settings: Settings, shared_dir: Path
) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        bot_settings = settings_for(settings, api, metrics_port=port, metrics_listen="127.0.0.1")
        with pytest.raises(UserError, match=f"METRICS_PORT {port} on 127.0.0.1 cannot be listened on"):
            build_application(bot_settings, qa=ScriptedQA(), lookup=SharedLookup(shared_dir))


class Counts:
    """How much metrics of the default registry moved since it was made."""

    def __init__(self, *keys: tuple[str, dict[str, str]]) -> None:
        self.keys = keys
        self.before = [self._get(name, labels) for name, labels in keys]

    @staticmethod
    def _get(name: str, labels: dict[str, str]) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    def moved(self) -> list[float]:
        return [self._get(n, labels) - b for (n, labels), b in zip(self.keys, self.before, strict=True)]


FALLBACK_KEYS = [("kzlaw_fallbacks_total", {"cause": c}) for c in ("llm_error", "grounding_failed", "no_model")]
FALLBACK_KEYS += [
    ("kzlaw_fallbacks_total", {"cause": "no_sources"}),
    ("kzlaw_llm_errors_total", {"backend": "groq", "error": "RateLimitError"}),
    ("kzlaw_fallbacks_total", {"cause": "budget_spent"}),
]


def test_fallbacks_and_failed_backends_are_counted_by_cause(
    settings: Settings, groq_server: GroqServer, ollama_server: OllamaServer, shared_dir: Path
) -> None:
    theft = docs(shared_dir, UK, ["188", "187", "190"])

    def ask(documents: list, configured: Settings) -> str:
        answer = answer_question(THEFT_Q, documents, lang="ru", is_criminal=True, is_range=False, settings=configured)
        return answer.backend

    counts = Counts(*FALLBACK_KEYS)
    groq_server.rate_limit(retry_after=0)  # Groq refuses, Ollama answers: a failed request, no fallback to the quotes
    ollama_server.reply = THEFT_A
    assert ask(theft, with_backends(settings, groq=groq_server.url, ollama=ollama_server.url)) == "ollama"
    assert counts.moved() == [0, 0, 0, 0, 1, 0]

    ollama_server.reply = THEFT_A + " Кроме того, применяется статья 175 УК РК [S1]."  # not in the sources
    assert ask(theft, with_backends(settings, ollama=ollama_server.url)) == "extractive"
    assert ask(theft, settings) == "extractive"  # no backend configured
    assert ask([], with_backends(settings, ollama=ollama_server.url)) == "extractive"
    assert ask(theft, with_backends(settings, groq=groq_server.url)) == "extractive"  # the only backend fails
    assert counts.moved() == [1, 1, 1, 1, 2, 0]

    groq_server.rate_limit()  # 20 s: the LLM budget learns it from retry-after …
    assert ask(theft, with_backends(settings, groq=groq_server.url)) == "extractive"
    sent = len(groq_server.received)
    assert ask(theft, with_backends(settings, groq=groq_server.url)) == "extractive"  # … and sends nothing more
    assert len(groq_server.received) == sent
    assert counts.moved() == [2, 1, 1, 1, 3, 1]
