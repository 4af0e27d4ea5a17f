"""A damaged index under the real bot (rag_chain.get_chain's backoff, bot/handlers.py on_error): users get one
plain sentence — no server path, no FAISS error, no operator command —, the details are logged once, and the chain
load is tried again once per backoff step, not once per question. The real chain over a real one-law data dir
whose index.faiss is really truncated, polled through the local Bot API server."""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

import pytest

import rag_chain
from bot.app import build_application
from bot.texts import t
from config import Settings
from index.build import build_index
from ingest_adilet.pipeline import ingest
from tests.support.telegram_server import BotAPIServer, message_update, polling, settings_for

DOC = "Z2300000193"  # «О цифровых активах»: 14 articles, 20 chunks
BACKOFF = 10.0  # seconds before the first retry (LOAD_RETRY_SECONDS), then 20


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, shared_dir: Path) -> Path:
    settings = Settings(data_dir=tmp_path_factory.mktemp("built") / "data", _env_file=None, sparse_weight=0)
    assert ingest(settings, source_dir=shared_dir / "corpus", doc_ids=[DOC], langs=["ru"], progress=False).ok
    assert build_index(settings, progress=False).vectors == 20
    return settings.data_dir


def attempts(caplog: pytest.LogCaptureFixture) -> int:
    return sum(r.name == "rag_chain" and r.getMessage().startswith("loading the chain") for r in caplog.records)


async def ask_all(api: BotAPIServer, users: range, text: str) -> list[str]:
    """Push one question from each user and return the texts the bot sent them."""
    since = len(api.requests)
    for user in users:
        api.push(message_update(user, text))
    await api.wait_for(lambda s: len(s.calls("sendMessage", since=since)) >= len(users))
    return [r.params["text"] for r in api.calls("sendMessage", since=since)]


async def test_a_damaged_index_gets_users_one_sentence_and_one_load_per_backoff_step(
    api: BotAPIServer,
    built: Path,
    settings: Settings,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    restore_loggers: None,
) -> None:
    monkeypatch.setattr(rag_chain, "_chains", {})
    monkeypatch.setattr(rag_chain, "_failed", {}, raising=False)
    data = Path(shutil.copytree(built, settings.data_dir))
    faiss_file = data / "index" / "faiss" / "index.faiss"
    faiss_file.write_bytes(faiss_file.read_bytes()[: faiss_file.stat().st_size * 2 // 3])  # a cut copy
    bot_settings = settings_for(
        settings.model_copy(update={"sparse_weight": 0}), api, load_retry_seconds=BACKOFF, telegram_retention_days=0
    )
    caplog.set_level(logging.INFO)
    app = build_application(bot_settings)  # the real chain: rag_chain.invoke_qa and lookup_article
    async with polling(app):
        await app.post_init(app)  # as run_polling does: menus, and the warm-up loads the chain
        await app.bot_data["warm_up"]  # its load failed
        at_start = attempts(caplog)
        first = await ask_all(api, range(101, 105), "Что такое цифровой актив?")
        article = await ask_all(api, range(105, 106), "/article УК 188")
        within_backoff = attempts(caplog)

        await asyncio.sleep(BACKOFF)  # the first backoff step has passed
        second = await ask_all(api, range(101, 104), "Что такое цифровой актив?")
        after_backoff = attempts(caplog)

    for text in first + article + second:
        assert str(data) not in text and "faiss" not in text.lower() and "ingest_adilet" not in text
        assert text == t("unavailable", "ru")  # one plain sentence
    logs = caplog.text
    assert logs.count(f"{faiss_file} is damaged") == 1  # the details, once
    assert "python -m ingest_adilet index" in logs  # the operator's command is in the log
    assert at_start == 1
    assert within_backoff == 1  # 5 updates within the backoff: not one load more
    assert after_backoff == 2  # one attempt for the three questions; the next step is twice as long
