"""The JSONL corpus store: round trips, per-document replacement, atomic writes, missing-corpus errors."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

import pytest

import corpus.files as files
import corpus.store as store
from corpus.chunking import chunk_article
from corpus.errors import DataDamaged, IndexNotReady
from corpus.legal.registry import SOURCES_BY_ID
from corpus.records import Article
from corpus.store import DocumentRecords, load_articles, load_chunks, load_manifest, write_corpus
from ingest_adilet.text_parser import parse_text
from tests.conftest import SHARED_DIR
from tests.support.ingest import digests, read_lines

T0 = datetime(2026, 3, 20, 12, 0, tzinfo=UTC)


@cache
def _articles(doc_id: str, lang: str) -> tuple[Article, ...]:
    site = "kaz" if lang == "kk" else "rus"
    text = (SHARED_DIR / "corpus" / site / f"{doc_id}.txt").read_text(encoding="utf-8")
    return tuple(parse_text(text, doc_id, lang, SOURCES_BY_ID[doc_id].url(lang)))


def records(doc_id: str, lang: str = "ru", *, input_hash: str = "h1", articles=None) -> DocumentRecords:
    arts = list(articles if articles is not None else _articles(doc_id, lang))
    source = SOURCES_BY_ID[doc_id]
    chunks = [c for a in arts for c in chunk_article(a, source)]
    return DocumentRecords(doc_id, lang, source.title(lang), "txt", input_hash, arts, chunks)


def test_round_trip_and_manifest(tmp_path: Path) -> None:
    docs = [records("Z2300000193"), records("Z2300000193", "kk"), records("Z1800000167")]
    manifest = write_corpus(tmp_path, docs, now=T0)
    in_registry_order = [docs[2], docs[0], docs[1]]
    assert load_articles(tmp_path) == [a for d in in_registry_order for a in d.articles]
    assert load_chunks(tmp_path) == [c for d in in_registry_order for c in d.chunks]
    assert load_manifest(tmp_path) == manifest
    # Registry order (Z1800000167 comes before Z2300000193 in ADILET_SOURCES), Russian before Kazakh.
    assert [(d.doc_id, d.lang) for d in manifest.documents] == [
        ("Z1800000167", "ru"),
        ("Z2300000193", "ru"),
        ("Z2300000193", "kk"),
    ]
    entry = manifest.entry("Z2300000193", "ru")
    assert entry.articles == len(docs[0].articles) and entry.chunks == len(docs[0].chunks)
    assert entry.ingested_at == "2026-03-20T12:00:00+00:00" and entry.input_hash == "h1"
    assert manifest.totals["ru"].documents == 2 and manifest.totals["kk"].documents == 1
    assert manifest.totals["ru"].articles == len(docs[0].articles) + len(docs[2].articles)
    assert list(manifest.totals) == ["ru", "kk"]


def test_replacing_one_document_keeps_the_others_byte_for_byte(tmp_path: Path) -> None:
    docs = [records("Z2300000193"), records("Z1800000167"), records("Z2300000193", "kk")]
    write_corpus(tmp_path, docs, now=T0)
    kept = {
        (name, doc_id, lang): read_lines(tmp_path / name, doc_id, lang)
        for name in ("articles.jsonl", "chunks.jsonl")
        for doc_id, lang in (("Z1800000167", "ru"), ("Z2300000193", "kk"))
    }
    changed = list(_articles("Z2300000193", "ru"))
    changed[0] = Article(
        **{**changed[0].to_json(), "path": (), "footnotes": (), "editor_notes": (), "title": "Новый заголовок"}
    ).with_hash()
    manifest = write_corpus(
        tmp_path, [records("Z2300000193", input_hash="h2", articles=changed)], now=datetime(2026, 4, 1, tzinfo=UTC)
    )
    for (name, doc_id, lang), lines in kept.items():
        assert lines and read_lines(tmp_path / name, doc_id, lang) == lines
    titles = [a.title for a in load_articles(tmp_path) if a.doc_id == "Z2300000193" and a.lang == "ru"]
    assert titles[0] == "Новый заголовок"
    assert manifest.entry("Z2300000193", "ru").input_hash == "h2"
    assert manifest.entry("Z1800000167", "ru").ingested_at == "2026-03-20T12:00:00+00:00"


def test_nothing_to_write_changes_nothing(tmp_path: Path) -> None:
    write_corpus(tmp_path, [records("Z2300000193")], now=T0)
    before = digests(tmp_path)
    write_corpus(tmp_path, [])
    assert digests(tmp_path) == before


def test_a_failed_write_leaves_the_previous_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_corpus(tmp_path, [records("Z2300000193")], now=T0)
    before = digests(tmp_path)
    real_replace = os.replace
    calls = []

    def replace_then_fail(src: str | Path, dst: str | Path) -> None:
        calls.append(dst)
        raise OSError("disk full")

    monkeypatch.setattr(files.os, "replace", replace_then_fail)
    with pytest.raises(OSError, match="disk full"):
        write_corpus(tmp_path, [records("Z1800000167")])
    monkeypatch.setattr(files.os, "replace", real_replace)
    assert calls, "the writer moves temporary files into place"
    assert digests(tmp_path) == before  # untouched, and no temporary file left behind

    def fail_while_writing(path: Path, lines) -> files.Staged:
        raise OSError("no space left")

    monkeypatch.setattr(store, "stage_file", fail_while_writing)
    with pytest.raises(OSError):
        write_corpus(tmp_path, [records("Z1800000167")])
    assert digests(tmp_path) == before


def test_temporary_files_are_removed_when_a_write_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_corpus(tmp_path, [records("Z2300000193")], now=T0)
    before = digests(tmp_path)
    real = store.stage_file
    calls = []

    def second_fails(path: Path, lines) -> files.Staged:
        calls.append(path.name)
        if len(calls) == 2:
            raise OSError("no space left")
        return real(path, lines)

    monkeypatch.setattr(store, "stage_file", second_fails)
    with pytest.raises(OSError):
        write_corpus(tmp_path, [records("Z1800000167")])
    assert digests(tmp_path) == before  # the first temporary file was removed, nothing else changed


def test_missing_corpus_says_how_to_build_it(tmp_path: Path) -> None:
    for load in (load_articles, load_chunks, load_manifest):
        with pytest.raises(IndexNotReady, match="python -m ingest_adilet"):
            load(tmp_path / "nowhere")


def test_manifest_records_each_file_and_a_load_checks_it(tmp_path: Path) -> None:
    manifest = write_corpus(tmp_path, [records("Z2300000193")], now=T0)
    for name in ("articles.jsonl", "chunks.jsonl"):
        assert manifest.files[name] == files.file_digest(tmp_path / name)
    assert store.check_corpus(tmp_path) == manifest


@pytest.mark.parametrize("name", ["articles.jsonl", "chunks.jsonl"])
@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[: len(b) // 2],  # truncated (mid-line)
        lambda b: b[: b.index(b"\n") + 1],  # truncated at a line end: every line that is left parses
        lambda b: b.replace("Статья".encode(), "СТАТЬЯ".encode(), 1),  # same size, other bytes
    ],
    ids=["mid-line", "line-end", "same-size"],
)
def test_a_damaged_file_is_named_with_the_ingest_command(tmp_path: Path, name: str, damage) -> None:
    write_corpus(tmp_path / "corpus", [records("Z2300000193")], now=T0)
    path = tmp_path / "corpus" / name
    path.write_bytes(damage(path.read_bytes()))
    load = load_articles if name == "articles.jsonl" else load_chunks
    for check in (load, store.check_corpus):
        with pytest.raises(DataDamaged) as err:
            check(tmp_path / "corpus")
        assert str(path) in str(err.value) and "damaged" in str(err.value)
        assert f"python -m ingest_adilet --data-dir {tmp_path}" in str(err.value)


def test_a_damaged_manifest_is_named(tmp_path: Path) -> None:
    write_corpus(tmp_path / "corpus", [records("Z2300000193")], now=T0)
    (tmp_path / "corpus" / "manifest.json").write_bytes(b"")
    for check in (load_manifest, load_chunks, store.check_corpus):
        with pytest.raises(DataDamaged, match="manifest.json is damaged .*python -m ingest_adilet --data-dir"):
            check(tmp_path / "corpus")


def test_a_corpus_written_before_checksums_is_checked_by_parsing(tmp_path: Path) -> None:
    write_corpus(tmp_path, [records("Z2300000193")], now=T0)
    manifest = store.read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text(manifest.model_copy(update={"files": {}}).model_dump_json())
    assert store.check_corpus(tmp_path).documents == manifest.documents
    chunks = tmp_path / "chunks.jsonl"
    chunks.write_bytes(chunks.read_bytes()[:-10])
    with pytest.raises(DataDamaged, match="chunks.jsonl is damaged .line \\d+ is not JSON"):
        store.check_corpus(tmp_path)
