"""The ingest pipeline and its CLI on slices of the real corpus: local dirs, local adilet, failures."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from config import PROJECT_DIR, Settings
from corpus.errors import UserError
from corpus.legal.registry import ADILET_SOURCES
from corpus.legal.registry import source as registry_entry
from corpus.store import load_articles, load_chunks, load_manifest
from ingest_adilet import pipeline
from ingest_adilet.pipeline import IngestReport, ingest
from tests.support.adilet_server import Reply, page_from_text, serve_adilet
from tests.support.ingest import digests, make_source_dir, read_lines

SLICE = ["Z2300000193", "Z1800000167"]  # two small laws, each in Russian and Kazakh
LAND = "K030000442_"  # the Land Code: its Kazakh text is in ../shared, its saved page is an empty shell


def outcomes(report: IngestReport) -> dict[tuple[str, str], str]:
    return {(r.doc_id, r.lang): r.outcome for r in report.results}


@pytest.fixture
def source(tmp_path: Path, shared_dir: Path) -> Path:
    return make_source_dir(tmp_path / "src", shared_dir, SLICE)


def test_ingest_a_slice(settings: Settings, source: Path) -> None:
    report = ingest(settings, source_dir=source, progress=False)
    assert report.ok
    done = {k for k, v in outcomes(report).items() if v == "ingested"}
    assert done == {(d, lang) for d in SLICE for lang in ("ru", "kk")}
    skipped = [r for r in report.results if r.outcome == "skipped"]
    assert ("K1400000226", "ru") in {(r.doc_id, r.lang) for r in skipped}
    assert all(str(source) in r.reason for r in skipped)

    manifest = load_manifest(settings.corpus_dir)
    articles, chunks = load_articles(settings.corpus_dir), load_chunks(settings.corpus_dir)
    assert len(manifest.documents) == 4
    assert manifest.totals["ru"].articles + manifest.totals["kk"].articles == len(articles)
    assert sum(d.chunks for d in manifest.documents) == len(chunks)
    for r in report.results:
        if r.outcome == "ingested":
            entry = manifest.entry(r.doc_id, r.lang)
            assert (entry.articles, entry.repealed, entry.chunks, entry.source) == (
                r.articles,
                r.repealed,
                r.chunks,
                "txt",
            )
    assert {c.key for c in chunks} == {a.key for a in articles}
    kk = [a for a in articles if a.lang == "kk"]
    assert kk and all(a.url == f"https://adilet.zan.kz/kaz/docs/{a.doc_id}" for a in kk)


def test_rerun_on_unchanged_input_changes_no_byte(settings: Settings, source: Path) -> None:
    ingest(settings, source_dir=source, progress=False)
    before = digests(settings.corpus_dir)
    report = ingest(settings, source_dir=source, progress=False)
    assert {v for k, v in outcomes(report).items() if k[0] in SLICE} == {"unchanged"}
    assert digests(settings.corpus_dir) == before


def test_a_change_to_the_chunk_heading_code_reparses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A chunk starts with «УК РК. Статья 188. Кража», built by corpus/legal (names.py, the registry's short names),
    # not by the chunker itself: a change there changes every chunk, so it must change the parser version.
    tree = tmp_path / "project"
    tree.mkdir()
    shutil.copy(PROJECT_DIR / "config.py", tree / "config.py")
    for package in ("corpus", "ingest_adilet"):
        shutil.copytree(PROJECT_DIR / package, tree / package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(pipeline, "PROJECT_DIR", tree)

    def version_after(edit: str | None) -> str:
        if edit:
            with (tree / edit).open("a", encoding="utf-8") as f:
                f.write("\n# edited\n")
        pipeline.parser_version.cache_clear()
        return pipeline.parser_version()

    try:
        before = version_after(None)
        assert version_after("corpus/store.py") == before  # the corpus files' reader: no part of parsing
        after_names = version_after("corpus/legal/names.py")
        assert after_names != before
        after_registry = version_after("corpus/legal/registry.py")
        assert after_registry != after_names
        # the registry's table, short names included, is data beside it
        (tree / "corpus/legal/registry.json").write_text(
            (tree / "corpus/legal/registry.json").read_text(encoding="utf-8").replace("УК РК", "УК"), encoding="utf-8"
        )
        assert version_after(None) != after_registry
    finally:
        pipeline.parser_version.cache_clear()


def test_changed_document_replaces_only_its_records(settings: Settings, source: Path) -> None:
    ingest(settings, source_dir=source, progress=False)
    corpus = settings.corpus_dir
    kept = {
        (n, d, lang): read_lines(corpus / n, d, lang)
        for n in ("articles.jsonl", "chunks.jsonl")
        for d, lang in (("Z2300000193", "ru"), ("Z2300000193", "kk"), ("Z1800000167", "kk"))
    }
    txt = source / "rus" / "Z1800000167.txt"
    text = txt.read_text(encoding="utf-8")
    assert "Статья 1. Основные понятия и термины" in text
    new_text = text.replace("Статья 1. Основные понятия и термины", "Статья 1. Понятия")
    txt.write_text(new_text, encoding="utf-8")

    report = ingest(settings, source_dir=source, progress=False)
    assert outcomes(report)[("Z1800000167", "ru")] == "ingested"
    assert outcomes(report)[("Z1800000167", "kk")] == "unchanged"
    for (name, doc_id, lang), lines in kept.items():
        assert lines and read_lines(corpus / name, doc_id, lang) == lines
    [first] = [a for a in load_articles(corpus) if a.key == "Z1800000167:1" and a.lang == "ru"]
    assert first.title.startswith("Понятия")


def test_failing_document_keeps_its_previous_records(
    settings: Settings, tmp_path: Path, shared_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = make_source_dir(tmp_path / "good", shared_dir, ["K030000442_", *SLICE])
    assert ingest(settings, source_dir=good, langs=["ru"], progress=False).ok
    before = digests(settings.corpus_dir)

    # The empty JavaScript shell the new adilet serves, as the only source of the Land Code.
    shell = tmp_path / "shell"
    (shell / "html").mkdir(parents=True)
    shutil.copyfile(shared_dir / "corpus/html/K030000442_.html", shell / "html/K030000442_.html")
    report = ingest(settings, source_dir=shell, doc_ids=["K030000442_"], langs=["ru"], progress=False)
    [failure] = report.failures
    assert (failure.doc_id, failure.lang) == ("K030000442_", "ru")
    assert "K030000442_" in failure.reason
    assert digests(settings.corpus_dir) == before

    # Garbage where the text should be: no articles is a failure, never an empty document.
    junk = make_source_dir(tmp_path / "junk", shared_dir, [])
    (junk / "rus/Z1800000167.txt").write_text("<html>Сервис временно недоступен</html>\n", encoding="utf-8")
    report = ingest(settings, source_dir=junk, doc_ids=["Z1800000167"], progress=False)
    [failure] = report.failures
    assert failure.doc_id == "Z1800000167" and "no articles" in failure.reason
    assert outcomes(report)[("Z1800000167", "kk")] == "skipped"
    assert digests(settings.corpus_dir) == before

    # The shell beside a readable text: the text is used, with a warning naming the document.
    (good / "html").mkdir()
    shutil.copyfile(shared_dir / "corpus/html/K030000442_.html", good / "html/K030000442_.html")
    caplog.set_level(logging.WARNING, logger="ingest_adilet.pipeline")
    report = ingest(settings, source_dir=good, doc_ids=["K030000442_"], langs=["ru"], progress=False)
    assert outcomes(report) == {("K030000442_", "ru"): "unchanged"}
    assert any("K030000442_" in r.getMessage() and "txt" in r.getMessage() for r in caplog.records)


def test_saved_page_is_preferred_for_russian(settings: Settings, tmp_path: Path, shared_dir: Path) -> None:
    src = make_source_dir(tmp_path / "src", shared_dir, ["Z1300000094"])
    (src / "html").mkdir()
    shutil.copyfile(shared_dir / "corpus/html/Z1300000094.html", src / "html/Z1300000094.html")
    report = ingest(settings, source_dir=src, doc_ids=["Z1300000094"], progress=False)
    assert report.ok
    manifest = load_manifest(settings.corpus_dir)
    assert manifest.entry("Z1300000094", "ru").source == "html"
    assert manifest.entry("Z1300000094", "ru").edition_date is not None
    assert manifest.entry("Z1300000094", "kk").source == "txt"
    assert manifest.entry("Z1300000094", "ru").articles > 30


def test_live_adilet_through_the_fetcher(settings: Settings, shared_dir: Path) -> None:
    page = (shared_dir / "corpus/html/Z1300000094.html").read_text(encoding="utf-8")
    shell = (shared_dir / "corpus/html/K030000442_.html").read_text(encoding="utf-8")
    with serve_adilet() as adilet:
        adilet.route("/rus/docs/Z1300000094", Reply.html(page))
        adilet.route("/rus/docs/K030000442_", Reply.html(shell))
        live = settings.model_copy(
            update={"adilet_base_url": adilet.base_url, "http_delay": 0.0, "http_backoff": 0.0, "http_retries": 1}
        )
        report = ingest(live, doc_ids=["Z1300000094", "K030000442_"], langs=["ru"], progress=False)
    assert outcomes(report) == {("Z1300000094", "ru"): "ingested", ("K030000442_", "ru"): "failed"}
    assert "/rus/docs/Z1300000094" in adilet.paths() and "/rus/docs/K030000442_" in adilet.paths()
    assert all(r.headers.get("user-agent") == settings.user_agent for r in adilet.requests)
    assert "K030000442_" in report.failures[0].reason
    manifest = load_manifest(live.corpus_dir)
    assert [(d.doc_id, d.source) for d in manifest.documents] == [("Z1300000094", "adilet")]


def test_live_ingest_takes_every_document_in_kazakh(settings: Settings, shared_dir: Path) -> None:
    """By default the live ingest asks adilet for every registry document in Kazakh too (the API, then the
    page); a code served in Kazakh, the Land Code's first two chapters in a real page's markup
    (tests/support/adilet_server.py `page_from_text`), becomes Kazakh articles and chunks under Kazakh names."""
    text = (shared_dir / "corpus/kaz/K030000442_.txt").read_text(encoding="utf-8")
    two_chapters = text[: re.search(r"(?m)^\s*3-тарау\.", text).start()]
    page = page_from_text(shared_dir / "corpus/html/Z1300000094.html", two_chapters, registry_entry(LAND).title("kk"))
    with serve_adilet() as adilet:
        adilet.route(f"/kaz/docs/{LAND}", Reply.html(page))
        live = settings.model_copy(
            update={"adilet_base_url": adilet.base_url, "http_delay": 0.0, "http_backoff": 0.0, "http_retries": 0}
        )
        assert live.ingest_languages == ["ru", "kk"]
        report = ingest(live, progress=False)
    every = {s.doc_id for s in ADILET_SOURCES}
    asked = {(r.path, tuple(r.query.get("language", ()))) for r in adilet.requests}
    assert {(f"/api/documents/by-ngr/{d}", ("kaz",)) for d in every} <= asked
    assert {(f"/kaz/docs/{d}", ()) for d in every} <= asked
    assert {k for k, v in outcomes(report).items() if v == "ingested"} == {(LAND, "kk")}

    manifest = load_manifest(live.corpus_dir)
    assert [(d.doc_id, d.lang, d.source) for d in manifest.documents] == [(LAND, "kk", "adilet")]
    articles = load_articles(live.corpus_dir)
    assert [a.number for a in articles][:4] == ["1", "2", "3", "4"] and articles[-1].number == "19-1"
    first = articles[0]
    assert (first.lang, first.title) == ("kk", "Қазақстан Республикасының жер қоры")
    assert first.url.startswith(f"https://adilet.zan.kz/kaz/docs/{LAND}#z")
    chunks = load_chunks(live.corpus_dir)
    assert {c.lang for c in chunks} == {"kk"} and {c.key for c in chunks} == {a.key for a in articles}
    assert chunks[0].text.startswith("ҚР ЖК. 1-бап. Қазақстан Республикасының жер қоры\n")


def test_unknown_document_is_a_user_error(settings: Settings, source: Path) -> None:
    with pytest.raises(UserError, match="K000"):
        ingest(settings, source_dir=source, doc_ids=["K000"], progress=False)
    with pytest.raises(UserError, match="not a directory"):
        ingest(settings, source_dir=source / "missing", progress=False)


def _cli(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATA_DIR", "SOURCE_DIR")}
    return subprocess.run(
        [sys.executable, "-m", "ingest_adilet", *args],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(PROJECT_DIR)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cli(tmp_path: Path, source: Path) -> None:
    helped = _cli("--help", tmp_path=tmp_path)
    assert helped.returncode == 0 and "--from-dir" in helped.stdout and "--data-dir" in helped.stdout
    helped = _cli("index", "--help", tmp_path=tmp_path)
    assert helped.returncode == 0 and "--data-dir" in helped.stdout
    no_corpus = _cli("index", "--data-dir", str(tmp_path / "nothing"), tmp_path=tmp_path)
    assert no_corpus.returncode == 2 and "python -m ingest_adilet" in no_corpus.stderr

    data = tmp_path / "data"
    run = _cli("--from-dir", str(source), "--data-dir", str(data), "--docs", *SLICE, "--no-progress", tmp_path=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "Building the corpus" in run.stderr  # the first run says what it builds and how long it takes
    assert "ru" in run.stdout and "kk" in run.stdout
    manifest = load_manifest(data / "corpus")
    expected = {(d, lang) for d in SLICE for lang in ("ru", "kk")}
    assert {(d.doc_id, d.lang) for d in manifest.documents} == expected

    again = _cli(
        "--from-dir",
        str(source),
        "--data-dir",
        str(data),
        "--docs",
        *SLICE,
        "--lang",
        "ru",
        "--no-progress",
        tmp_path=tmp_path,
    )
    assert again.returncode == 0 and "Building the corpus" not in again.stderr

    wrong = _cli("--from-dir", str(source), "--data-dir", str(data), "--docs", "NOPE", tmp_path=tmp_path)
    assert wrong.returncode == 2 and "NOPE" in wrong.stderr

    empty = tmp_path / "empty"
    (empty / "rus").mkdir(parents=True)
    (empty / "rus/Z2300000193.txt").write_text("nothing here\n", encoding="utf-8")
    failed = _cli(
        "--from-dir", str(empty), "--data-dir", str(data), "--docs", "Z2300000193", "--no-progress", tmp_path=tmp_path
    )
    assert failed.returncode == 1 and "Z2300000193" in failed.stdout
