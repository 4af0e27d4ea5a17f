"""Pinecone as the vector store: the namespace kept in step with the corpus by LangChain's indexing API.

`sync_pinecone` hands every selected chunk to `langchain_core.indexing.index` with a SQL record manager kept in
the data dir (`DATA_DIR/index/pinecone-records.sqlite`, one record set per Pinecone host and namespace) and
`cleanup="full"`: a chunk whose key is recorded is skipped, a new or changed one is embedded (through the
embedding cache) and upserted, and the vectors of chunks that changed or are gone are deleted. A vector's id is
the chunk id with a hash of everything stored for it and the model (`K1400000226:ru:188:0#3f2a…`); results come
back with the chunk id as `Document.id`, as from FAISS. Records are written after each batch of upserts, so an
interrupted sync resumes. `pinecone.json` beside the records names the model that filled the namespace; the
vectors an older build recorded there under plain chunk ids are deleted by the first sync.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from langchain_pinecone import PineconeVectorStore

from config import Settings
from corpus.errors import DataDamaged, IndexNotReady, UserError
from corpus.files import atomic_write
from corpus.records import Chunk, content_hash
from index.cache import CachedEmbeddings
from index.documents import IndexReport, chunk_document, chunk_hash, embedding_text, index_command
from index.embeddings import model_id
from index.progress import cached_embeddings

logger = logging.getLogger(__name__)

PINECONE_BATCH = 100  # vectors per upsert request, well under Pinecone's 2 MB request limit
RECORDS_FILE = "pinecone-records.sqlite"
MANIFEST_FILE = "pinecone.json"


class LawPinecone(PineconeVectorStore):
    """PineconeVectorStore whose results carry their chunk id as `Document.id` (the vector id adds a hash)."""

    def similarity_search_by_vector_with_score(
        self, embedding: list[float], *, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        return [
            (Document(id=d.metadata.get("chunk_id", d.id), page_content=d.page_content, metadata=d.metadata), s)
            for d, s in super().similarity_search_by_vector_with_score(embedding, k=k, **kwargs)
        ]


class _ChunkEmbeddings(Embeddings):
    """What PineconeVectorStore embeds is the stored text (the chunk's); this embeds that chunk's
    `embedding_text` instead, through the embedding cache, and checks the index's dimension first."""

    def __init__(self, cached: CachedEmbeddings, texts: dict[str, str], dimension: int | None) -> None:
        self.cached = cached
        self.texts = texts  # stored text → embedded text
        self.dimension = dimension

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors = self.cached.embed_documents([self.texts[t] for t in texts])  # Python floats, as Pinecone needs
        if vectors and self.dimension is not None and len(vectors[0]) != self.dimension:
            raise UserError(
                f"The Pinecone index has dimension {self.dimension} but the embedding model "
                f"gives {len(vectors[0])}: create the index with dimension {len(vectors[0])}."
            )
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.cached.embed_query(text)


def pinecone_index(settings: Settings) -> Any:
    """The Pinecone data-plane index for settings.pinecone_host; UserError naming what to set."""
    if settings.pinecone_api_key is None or not settings.pinecone_host:
        raise UserError(
            "VECTOR_STORE=pinecone needs PINECONE_API_KEY and PINECONE_HOST (the index host shown in the "
            "Pinecone console); or use VECTOR_STORE=faiss."
        )
    from pinecone import Pinecone

    return Pinecone(api_key=settings.pinecone_api_key.get_secret_value()).Index(host=settings.pinecone_host)


def record_manager(settings: Settings) -> Any:
    """The SQL record manager of what this data dir upserted to the configured host and namespace."""
    from langchain_classic.indexes import SQLRecordManager

    settings.index_dir.mkdir(parents=True, exist_ok=True)
    records = SQLRecordManager(
        f"pinecone:{settings.pinecone_host}/{settings.pinecone_namespace}",
        db_url=f"sqlite:///{settings.index_dir / RECORDS_FILE}",
    )
    records.create_schema()
    return records


def sync_pinecone(
    settings: Settings,
    all_chunks: Sequence[Chunk],
    selected: Sequence[Chunk],
    embeddings: Embeddings,
    progress: bool,
    start: float,
) -> IndexReport:
    """Upsert the new and changed `selected` chunks and delete the vectors of changed and gone ones."""
    from langchain_core.indexing import index

    pc = pinecone_index(settings)
    model = model_id(embeddings)
    records = record_manager(settings)
    stats = pc.describe_index_stats()
    if not _remote_count(stats, settings.pinecone_namespace) and (recorded := records.list_keys()):
        logger.warning(
            "Pinecone namespace %r is empty although %d vectors are recorded: upserting all again",
            settings.pinecone_namespace,
            len(recorded),
        )
        records.delete_keys(recorded)
    texts = {c.text: embedding_text(c, settings) for c in selected}
    keys = {c.chunk_id: f"{c.chunk_id}#{content_hash(model, texts[c.text], chunk_hash(c))[:16]}" for c in selected}
    todo = [
        c for c, known in zip(selected, records.exists([keys[c.chunk_id] for c in selected]), strict=True) if not known
    ]
    logger.info(
        "Pinecone %s/%s: %d of %d vectors to upsert",
        settings.pinecone_host,
        settings.pinecone_namespace,
        len(todo),
        len(selected),
    )
    with cached_embeddings(settings, embeddings, [texts[c.text] for c in todo], progress) as cached:
        store = PineconeVectorStore(
            index=pc,
            embedding=_ChunkEmbeddings(cached, texts, stats.get("dimension")),
            namespace=settings.pinecone_namespace,
        )
        result = index(
            [chunk_document(c) for c in selected],
            records,
            store,
            batch_size=PINECONE_BATCH,
            cleanup="full",
            source_id_key="chunk_id",
            key_encoder=lambda d: keys[d.metadata["chunk_id"]],
            upsert_kwargs={"async_req": False},  # one upsert request per batch, answered before the next
        )
    deleted = result["num_deleted"] + _delete_legacy(settings, store)
    _write_manifest(settings, model)
    upserted = result["num_added"] + result["num_updated"]
    logger.info("Pinecone: %d upserted (%d embedded now), %d deleted", upserted, cached.misses, deleted)
    return IndexReport(
        "pinecone",
        len(all_chunks),
        len(selected),
        cached.misses,
        upserted - cached.misses,
        time.perf_counter() - start,
        0,
        unchanged=not upserted and not deleted,
        upserted=upserted,
        deleted=deleted,
    )


def load_pinecone(settings: Settings, embeddings: Embeddings) -> VectorStore:
    """The namespace as a vector store; IndexNotReady when it is empty or was filled by another model."""
    index = pinecone_index(settings)
    where = f"Pinecone namespace {settings.pinecone_namespace!r} at {settings.pinecone_host}"
    command = index_command(settings) + " with VECTOR_STORE=pinecone"
    if not _remote_count(index.describe_index_stats(), settings.pinecone_namespace):
        raise IndexNotReady(f"{where} is empty: run `{command}`.")
    path = _manifest_path(settings)
    if path.exists():  # a data dir that built this namespace knows which model filled it
        built = _read_json(path)
        if built is None:
            raise DataDamaged(path, "not a JSON object", command)
        same_place = (built.get("host"), built.get("namespace")) == (
            settings.pinecone_host,
            settings.pinecone_namespace,
        )
        if same_place and built.get("model_id") != model_id(embeddings):
            raise IndexNotReady(
                f"{where} was filled by {built.get('model_id')}, settings give {model_id(embeddings)}: run `{command}`."
            )
    return LawPinecone(index=index, embedding=embeddings, namespace=settings.pinecone_namespace)


def _delete_legacy(settings: Settings, store: PineconeVectorStore) -> int:
    """Delete the vectors an older build recorded in pinecone.json under their plain chunk ids (before the
    indexing API named them chunk id + hash): they are not in the record manager, so no cleanup would."""
    old = _read_json(_manifest_path(settings)) if _manifest_path(settings).exists() else None
    same_place = old is not None and (old.get("host"), old.get("namespace")) == (
        settings.pinecone_host,
        settings.pinecone_namespace,
    )
    ids = list(old.get("vectors") or {}) if same_place and old is not None else []
    if ids:
        store.delete(ids=ids)
        logger.info("Pinecone: %d vectors of the previous build's ids deleted", len(ids))
    return len(ids)


def _manifest_path(settings: Settings) -> Path:
    return settings.index_dir / MANIFEST_FILE


def _write_manifest(settings: Settings, model: str) -> None:
    """Which host, namespace and model the last sync filled (read by load_pinecone)."""
    manifest = {
        "host": settings.pinecone_host,
        "namespace": settings.pinecone_namespace,
        "model_id": model,
        "dense_scope": settings.dense_scope,
        "dense_search_lang": settings.dense_search_lang,
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    atomic_write(_manifest_path(settings), json.dumps(manifest, ensure_ascii=False))


def _read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from a file, or None when it does not hold one (damaged)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _remote_count(stats: Any, namespace: str) -> int:
    """Vectors Pinecone reports in `namespace` (0 when it does not exist)."""
    summary = (stats.get("namespaces") or {}).get(namespace) or {}
    return int(summary.get("vector_count", 0) or 0)
