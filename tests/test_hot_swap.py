"""A loaded chain picks up a newly published build without a restart and without failing a question in flight
(rag_chain.get_chain), and the bot builds a missing index in the background and switches to it."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from pathlib import Path

import pytest

import bot.app
import rag_chain
from bot.app import build_application
from config import Settings
from corpus.errors import ChainUnavailable
from index.publication import DATA_FORMAT
from index.publish import publish, published
from ingest_adilet.cli import main as ingest_main
from tests.support.index import save_tiny_sentence_transformer
from tests.support.ingest import make_source_dir
from tests.support.retrieval import CONSUMER
from tests.support.telegram_server import BotAPIServer, message_update, polling, settings_for
from tests.test_bot_e2e import step
from tests.test_pack import tree

NEW_WORDS = "самовозвратный товар"
NEW_SENTENCE = "Самовозвратный товар принимается продавцом без чека в течение трех дней."
QUESTIONS = [NEW_WORDS, "Могу ли я обменять купленный товар надлежащего качества?"]


def amend(source: Path) -> None:
    """Add a sentence to article 14 of the consumer protection law (its heading is the last «Статья 14.» line)."""
    path = source / "rus" / f"{CONSUMER}.txt"
    text = path.read_text(encoding="utf-8")
    at = text.rindex("Статья 14.")
    at = text.index("\n", at)
    path.write_text(f"{text[:at]}\n\n      {NEW_SENTENCE}{text[at:]}", encoding="utf-8")


def ingest(source: Path, settings: Settings) -> None:
    """`python -m ingest_adilet --from-dir SOURCE --data-dir DATA`, which publishes the build."""
    assert (
        ingest_main(
            ["--from-dir", str(source), "--data-dir", str(settings.data_dir), "--docs", CONSUMER, "--no-progress"]
        )
        == 0
    )


def wait_for(condition, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def swapped(settings: Settings) -> bool:
    publication = published(settings)
    return publication is not None and rag_chain.get_chain(settings).generation == publication.generation


@pytest.fixture
def lexical(settings: Settings, shared_dir: Path, tmp_path: Path) -> tuple[Settings, Path]:
    """A data dir holding the consumer protection law (ru + kk), ingested and published; no index."""
    settings = settings.model_copy(update={"reload_check_seconds": 0.0})
    source = make_source_dir(tmp_path / "src", shared_dir, [CONSUMER])
    ingest(source, settings)
    return settings, source


def test_questions_from_threads_while_a_new_build_is_published(
    lexical: tuple[Settings, Path], caplog: pytest.LogCaptureFixture
) -> None:
    settings, source = lexical
    caplog.set_level(logging.INFO, logger="rag_chain")
    first = rag_chain.get_chain(settings)
    assert first.generation == published(settings).generation
    assert NEW_SENTENCE not in rag_chain.invoke_qa(NEW_WORDS, settings).answer

    answers: list[tuple[float, str, rag_chain.QAResult]] = []  # (time asked, question, result)
    errors: list[BaseException] = []
    stop = threading.Event()

    def ask(n: int) -> None:
        while not stop.is_set():
            question = QUESTIONS[n % 2]
            asked = time.monotonic()
            try:
                answers.append((asked, question, rag_chain.invoke_qa(question, settings)))
            except BaseException as err:
                errors.append(err)

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: len(answers) >= 8)
        amend(source)
        started = time.monotonic()
        ingest(source, settings)  # rewrites the corpus under the loaded chain, then publishes
        wait_for(lambda: swapped(settings))
        swap = time.monotonic()
        # eight answers asked after the swap, two of them to the question only the new build answers (its threads
        # may be slower than the other question's: waiting for any eight let a loaded machine see none of them)
        wait_for(
            lambda: (
                sum(asked > swap for asked, _, _ in answers) >= 8
                and sum(q == NEW_WORDS and asked > swap for asked, q, _ in answers) >= 2
            )
        )
    finally:
        stop.set()
        for t in threads:
            t.join()

    assert errors == []
    new = rag_chain.get_chain(settings)
    assert new is not first and new.generation != first.generation
    # the first chain was warmed up beside its first questions, the new one before it was swapped in
    logged = [r.getMessage() for r in caplog.records if r.name == "rag_chain"]
    assert any(m.startswith("chain warmed up in") for m in logged)
    assert any("loaded and warmed up in" in m and "swapped in" in m for m in logged)
    for asked, question, result in answers:
        if question == NEW_WORDS and asked < started:  # no article holds these words yet
            assert result.status == "off_topic" and NEW_SENTENCE not in result.answer
        if question != NEW_WORDS:
            assert result.sources
        if question == NEW_WORDS and asked > swap:  # only the new build has the sentence
            top = result.sources[0]
            assert (top.doc_id, top.article) == (CONSUMER, "14") and NEW_SENTENCE in result.answer
    assert sum(q == NEW_WORDS and a > swap for a, q, _ in answers) >= 2


def test_a_build_that_fails_to_load_keeps_the_old_chain_until_the_next_publication(
    lexical: tuple[Settings, Path], caplog: pytest.LogCaptureFixture
) -> None:
    settings, _ = lexical
    first = rag_chain.get_chain(settings)
    chunks = settings.corpus_dir / "chunks.jsonl"
    whole = chunks.read_bytes()
    chunks.write_bytes(whole[: len(whole) // 2])  # a damaged (or half-copied) corpus is published
    bad = publish(settings, "test").generation
    caplog.set_level(logging.INFO, logger="rag_chain")
    rag_chain.get_chain(settings)
    wait_for(lambda: any(bad in r.getMessage() for r in caplog.records))
    [record] = [r for r in caplog.records if bad in r.getMessage()]
    assert record.levelno == logging.WARNING and "chunks.jsonl is damaged" in record.getMessage()
    assert "\n" not in record.getMessage()
    for _ in range(3):  # the failed generation is not loaded again at each check
        assert rag_chain.get_chain(settings) is first
        assert rag_chain.invoke_qa(QUESTIONS[1], settings).sources
    time.sleep(0.2)
    assert len([r for r in caplog.records if bad in r.getMessage()]) == 1

    chunks.write_bytes(whole)  # repaired and published again: swapped in
    good = publish(settings, "test").generation
    rag_chain.get_chain(settings)
    wait_for(lambda: rag_chain.get_chain(settings).generation == good)
    assert rag_chain.get_chain(settings) is not first


def publish_newer(settings: Settings) -> str:
    """A build published by a program one data format ahead (a replica upgraded before this one)."""
    path = settings.data_dir / "published.json"
    record = {**json.loads(path.read_text(encoding="utf-8")), "generation": "newer", "data_format": DATA_FORMAT + 1}
    path.write_text(json.dumps(record), encoding="utf-8")
    return f"data format {DATA_FORMAT + 1}; this one reads formats up to {DATA_FORMAT}): upgrade this program"


def test_a_build_of_a_newer_data_format_is_left_to_upgraded_replicas(
    lexical: tuple[Settings, Path], caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    settings, source = lexical
    first = rag_chain.get_chain(settings)
    assert published(settings).data_format == DATA_FORMAT
    message = publish_newer(settings)
    caplog.set_level(logging.INFO, logger="rag_chain")
    rag_chain.get_chain(settings)
    wait_for(lambda: any("(newer)" in r.getMessage() for r in caplog.records))
    [record] = [r for r in caplog.records if "(newer)" in r.getMessage()]
    assert record.levelno == logging.WARNING and message in record.getMessage()
    assert rag_chain.get_chain(settings) is first and rag_chain.invoke_qa(QUESTIONS[1], settings).sources

    fresh = settings.model_copy(update={"warm_up": False})  # a replica starting: no chain to keep
    with pytest.raises(ChainUnavailable, match=re.escape(message)):
        rag_chain.get_chain(fresh)
    before = tree(settings.data_dir)
    argv = ["--from-dir", str(source), "--data-dir", str(settings.data_dir), "--docs", CONSUMER, "--no-progress"]
    amend(source)
    assert ingest_main(argv) == 2  # an older writer leaves the newer build alone
    assert message in " ".join(capsys.readouterr().err.split())
    assert tree(settings.data_dir) == before


def test_a_first_load_is_warmed_up_beside_its_questions_unless_told_not_to(lexical: tuple[Settings, Path]) -> None:
    """WARM_UP (on but for `ask`): the thread builds routing's headings, which nothing else here would ask for."""
    settings, _ = lexical
    cold = rag_chain.get_chain(settings.model_copy(update={"warm_up": False}))
    warm = rag_chain.get_chain(settings)
    assert warm is not cold
    wait_for(lambda: warm.retrieval._profiles is not None)
    assert cold.retrieval._profiles is None


def test_a_chain_checks_for_new_builds_at_most_every_reload_check_seconds(lexical: tuple[Settings, Path]) -> None:
    settings, source = lexical
    settings = settings.model_copy(update={"reload_check_seconds": 3600.0})
    first = rag_chain.get_chain(settings)
    publish(settings, "test")
    time.sleep(0.5)
    assert rag_chain.get_chain(settings) is first  # not looked at yet: an hour has not passed


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small random sentence-transformers model: the bot's background build takes seconds with it."""
    return save_tiny_sentence_transformer(tmp_path_factory.mktemp("st"))


def complete(settings: Settings, by: str) -> bool:
    """The chain has swapped to the build `by` published, and it has its vectors."""
    publication = published(settings)
    chain = rag_chain.get_chain(settings)
    return (
        publication is not None
        and publication.by == by
        and chain.generation == publication.generation
        and chain.retrieval.searches == ("bm25", "dense")
    )


async def test_the_bot_answers_at_once_and_keeps_its_index_complete(
    api: BotAPIServer,
    lexical: tuple[Settings, Path],
    tiny_model: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bot.app, "INDEX_CHECK_EVERY", 0.2)
    settings, source = lexical
    settings = settings_for(
        settings.model_copy(update={"embedding_backend": "sentence-transformers", "embedding_model": str(tiny_model)}),
        api,
    )
    caplog.set_level(logging.INFO)
    app = build_application(settings)  # the real chain (rag_chain.invoke_qa), over a data dir without an index
    async with polling(app):
        await app.post_init(app)
        await app.bot_data["warm_up"]
        sent = await step(api, message_update(5, QUESTIONS[1]), "sendMessage")  # answered at once, lexically
        assert "Статья 14" in [r for r in sent if r.method == "sendMessage"][-1].params["text"]
        await asyncio.to_thread(wait_for, lambda: complete(settings, "index"))
        assert rag_chain.get_chain(settings).retrieval.pending is None

        # A new corpus is published (article 14 amended): the chain swaps to it with the changed chunk's vector
        # missing, and the bot builds it again (the other vectors come from the embedding cache).
        amend(source)
        await asyncio.to_thread(ingest, source, settings)
        await asyncio.to_thread(wait_for, lambda: complete(settings, "index"))
        sent = await step(api, message_update(5, "/article зозпп 14"), "sendMessage")
        assert NEW_SENTENCE in "\n".join(r.params["text"] for r in sent if r.method == "sendMessage")
        thread, stop = app.bot_data["index_keeper"]
        stop.set()
        await asyncio.to_thread(thread.join, 30)
    lines = [r.getMessage() for r in caplog.records if r.name == "bot.app" and "background" in r.getMessage()]
    assert len(lines) == 4  # a start and an end line for each build
    assert lines[0].startswith("answering with the lexical searches while the vectors are built in the background")
    assert lines[1].startswith("search index built in the background") and "published" in lines[1]
    assert lines[2].startswith("answering with the lexical searches") and "under a minute" in lines[2]
    [stale] = [r for r in caplog.records if r.name == "rag_chain" and r.levelno == logging.WARNING]
    assert "out of date" in stale.getMessage()  # said once when the new corpus was swapped in without vectors
    # each build's progress is in the log too (a line when it starts, every 5 % or 30 s, and when it is done)
    progress = [r.getMessage() for r in caplog.records if r.name == "corpus.progress"]
    titles = [line for line in progress if line.startswith("Embedding titles: ")]  # the first build's headings
    assert titles[0].endswith(" to do") and " done in " in titles[-1]
    progress = [line for line in progress if line not in titles]
    assert progress[0] == "Embedding: 116 to do" and progress[1].startswith("Embedding: 32/116 (27%), ")
    assert progress[-3].startswith("Embedding: 116/116 done in ")
    assert progress[-2:-1] == ["Embedding: 1 to do"] and progress[-1].startswith("Embedding: 1/1 done in ")


async def test_background_build_off_only_says_what_to_build(
    api: BotAPIServer, lexical: tuple[Settings, Path], caplog: pytest.LogCaptureFixture
) -> None:
    settings, _ = lexical
    settings = settings_for(settings.model_copy(update={"background_index_build": False}), api)
    app = build_application(settings)
    async with app:
        await app.post_init(app)
        await app.bot_data["warm_up"]
    app.bot_data["services"].executor.shutdown()
    assert "index_keeper" not in app.bot_data and not settings.index_dir.exists()
    [line] = [r.getMessage() for r in caplog.records if r.name == "bot.app" and r.levelno == logging.WARNING]
    assert "python -m ingest_adilet index --data-dir" in line and "BACKGROUND_INDEX_BUILD is off" in line
