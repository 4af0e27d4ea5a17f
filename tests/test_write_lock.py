"""One writer at a time per data dir (index.publish.writing): ingest, index, refresh, unpack and the bot's
background build all take the same lock, so an index built from an older corpus never lands over a newer one."""

from __future__ import annotations

from pathlib import Path

import pytest

import cli
from config import Settings
from corpus.store import load_chunks
from index.build import build_index
from index.publish import DataDirBusy, writing
from ingest_adilet.pipeline import ingest
from tests.support.index import KeywordEmbeddings

DIGITAL_ASSETS = "Z2300000193"  # 14 articles, 20 chunks: the smallest law of the registry


@pytest.fixture
def slice_settings(shared_dir: Path, tmp_path: Path) -> Settings:
    settings = Settings(data_dir=tmp_path / "data", _env_file=None, learned_ranker=False, sparse_weight=0)
    ingest(settings, source_dir=shared_dir / "corpus", doc_ids=[DIGITAL_ASSETS], langs=["ru"], progress=False)
    return settings


def test_an_ingest_is_refused_while_an_index_build_holds_the_data_dir(
    slice_settings: Settings, shared_dir: Path
) -> None:
    manifest = (slice_settings.corpus_dir / "manifest.json").read_bytes()
    with writing(slice_settings.data_dir, "index"):
        with pytest.raises(DataDirBusy, match=r"being written by index \(pid \d+\)"):
            ingest(slice_settings, source_dir=shared_dir / "corpus", doc_ids=[DIGITAL_ASSETS], progress=False)
    assert (slice_settings.corpus_dir / "manifest.json").read_bytes() == manifest


def test_an_index_build_is_refused_while_an_ingest_holds_the_data_dir(slice_settings: Settings) -> None:
    with writing(slice_settings.data_dir, "ingest"):
        with pytest.raises(DataDirBusy, match="being written by ingest"):
            build_index(slice_settings, embeddings=KeywordEmbeddings(["актив", "цифров"]), progress=False)
    assert not slice_settings.index_dir.exists()
    # released: the same build goes through
    report = build_index(slice_settings, embeddings=KeywordEmbeddings(["актив", "цифров"]), progress=False)
    assert report.chunks == len(load_chunks(slice_settings.corpus_dir)) and report.embedded > 0


def test_ask_answers_from_the_corpus_it_has_while_another_process_writes(
    slice_settings: Settings, shared_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with writing(slice_settings.data_dir, "refresh"):
        cli._prepare(slice_settings, shared_dir / "corpus")
    err = capsys.readouterr().err
    assert "The corpus was not re-read:" in err and "being written by refresh" in err
