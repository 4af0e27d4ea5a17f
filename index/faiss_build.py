"""The FAISS index on disk (DATA_DIR/index/faiss): built from the embedding cache, checked for staleness at load.

A build does nothing when the folder was built from the same chunks, model and settings and its files are whole;
otherwise it embeds what the cache lacks and rewrites the folder (a damaged one is rebuilt from the cache).
Loading refuses an index built from another corpus, model or settings (IndexNotReady naming the command).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from config import Settings
from corpus.errors import DataDamaged, IndexNotReady
from corpus.files import DamagedFile
from corpus.records import Chunk, content_hash
from index.documents import IndexReport, chunk_document, chunk_hash, embedding_text, index_command, select_chunks
from index.embeddings import model_id
from index.faiss_store import LawFAISS, check_faiss_files, load_faiss, read_faiss_meta, save_faiss
from index.progress import embed

logger = logging.getLogger(__name__)


def build_faiss(
    settings: Settings,
    all_chunks: Sequence[Chunk],
    selected: Sequence[Chunk],
    embeddings: Embeddings,
    progress: bool,
    start: float,
) -> IndexReport:
    """Write the FAISS folder for the `selected` chunks, or nothing when the one on disk matches them."""
    folder = settings.index_dir / "faiss"
    fingerprint = _fingerprint(selected, settings, model_id(embeddings))
    if _faiss_unchanged(folder, fingerprint):
        logger.info("Vector index in %s is up to date (%d vectors): nothing to do", folder, len(selected))
        return IndexReport(
            "faiss",
            len(all_chunks),
            len(selected),
            0,
            len(selected),
            time.perf_counter() - start,
            _size(folder),
            unchanged=True,
        )
    texts = [embedding_text(c, settings) for c in selected]
    vectors, embedded = embed(settings, embeddings, texts, progress)
    store = LawFAISS.from_vectors(
        embeddings, [chunk_document(c) for c in selected], vectors, [c.chunk_id for c in selected]
    )
    meta = _meta(settings, embeddings, fingerprint, len(selected))
    size = save_faiss(store, folder, meta)
    seconds = time.perf_counter() - start
    logger.info(
        "FAISS index: %d vectors (%d embedded now) in %s, %.1f MB, %.0f s",
        len(selected),
        embedded,
        folder,
        size / 1e6,
        seconds,
    )
    return IndexReport("faiss", len(all_chunks), len(selected), embedded, len(selected) - embedded, seconds, size)


def check_faiss_index(
    settings: Settings, model: str, chunks: Sequence[Chunk] | None, *, read_at: list[int] | None = None
) -> dict[str, Any]:
    """meta.json of the built FAISS index when it can serve: built by the embeddings `model` (their model_id) with
    these settings from this corpus (`chunks`; if None, read when the corpus file changed since the build; if read
    from the corpus file while it had the stat `read_at` (`corpus_stat`) and the build recorded that stat, not
    hashed again).
    IndexNotReady when missing or out of date, DataDamaged when meta.json is not whole. The check
    load_faiss_store makes, and /about's (index/summary.py)."""
    folder = settings.index_dir / "faiss"
    try:
        meta = read_faiss_meta(folder)
    except FileNotFoundError:
        raise IndexNotReady(f"There is no vector index in {folder}: run `{index_command(settings)}`.") from None
    except DamagedFile as err:
        raise DataDamaged(err.path, err.problem, index_command(settings)) from None
    if problem := _stale(meta, settings, model, chunks, read_at):
        raise IndexNotReady(
            f"The vector index in {folder} is out of date ({problem}): run `{index_command(settings)}`."
        )
    return meta


def load_faiss_store(
    settings: Settings, embeddings: Embeddings, chunks: Sequence[Chunk] | None, *, read_at: list[int] | None = None
) -> VectorStore:
    """The built FAISS store; IndexNotReady when missing or stale (check_faiss_index), DataDamaged when a file of
    it is not whole."""
    folder = settings.index_dir / "faiss"
    check_faiss_index(settings, model_id(embeddings), chunks, read_at=read_at)
    try:
        return load_faiss(folder, embeddings)
    except FileNotFoundError:
        raise IndexNotReady(f"There is no vector index in {folder}: run `{index_command(settings)}`.") from None
    except DamagedFile as err:
        raise DataDamaged(err.path, err.problem, index_command(settings)) from None


def _faiss_unchanged(folder: Path, fingerprint: str) -> bool:
    """The index on disk was built from these chunks and its files are whole (checked, ~0.1 s per 50 MB);
    a damaged one is logged and rebuilt from the embedding cache."""
    try:
        old = read_faiss_meta(folder)
        if old.get("fingerprint") != fingerprint:
            return False
        if "files" not in old:
            logger.warning("The vector index in %s records no checksums: rewriting it from the embedding cache", folder)
            return False
        check_faiss_files(folder, old)
        return True
    except FileNotFoundError:
        return False
    except DamagedFile as err:
        logger.warning(
            "%s is damaged (%s): rebuilding the vector index from the embedding cache", err.path, err.problem
        )
        return False


def _meta(settings: Settings, embeddings: Embeddings, fingerprint: str, count: int) -> dict[str, Any]:
    return {
        "model_id": model_id(embeddings),
        "dense_scope": settings.dense_scope,
        "dense_search_lang": settings.dense_search_lang,
        "embed_max_chars": settings.embed_max_chars,
        "fingerprint": fingerprint,
        "chunk_hashes": count,
        "corpus_stat": corpus_stat(settings),
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _stale(
    meta: dict[str, Any], settings: Settings, model: str, chunks: Sequence[Chunk] | None, read_at: list[int] | None
) -> str | None:
    """Why the index on disk does not match the settings and corpus, or None."""
    if meta.get("model_id") != model:
        return f"built with {meta.get('model_id')}, settings give {model}"
    for key in ("dense_scope", "dense_search_lang", "embed_max_chars"):
        if meta.get(key) != getattr(settings, key):
            return f"built with {key}={meta.get(key)}, settings give {getattr(settings, key)}"
    if chunks is None and (read_at := corpus_stat(settings)) is None:
        return None  # no corpus file: the index alone is still usable
    if read_at is not None and meta.get("corpus_stat") == read_at:
        return None  # the chunks are (or were read from) the very file the index was built from: nothing to hash
    if chunks is None:
        from corpus.store import load_chunks

        chunks = load_chunks(settings.corpus_dir)
    if meta.get("fingerprint") != _fingerprint(select_chunks(chunks, settings), settings, model):
        return "the corpus changed since it was built"
    return None


def _fingerprint(selected: Sequence[Chunk], settings: Settings, model: str) -> str:
    return content_hash(
        model,
        settings.dense_scope,
        str(settings.dense_search_lang),
        str(settings.embed_max_chars),
        *sorted(chunk_hash(c) for c in selected),
    )


def corpus_stat(settings: Settings) -> list[int] | None:
    """Size and modification time (ns) of DATA_DIR/corpus/chunks.jsonl; None without it."""
    path = settings.corpus_dir / "chunks.jsonl"
    if not path.exists():
        return None
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.iterdir()) if folder.is_dir() else 0
