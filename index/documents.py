"""What a corpus chunk becomes in the search index, shared by the FAISS and Pinecone builds.

The chunks that get a vector (`select_chunks`), the text embedded for each (`embedding_text`) and the head of it
the latent terms are taken from (`latent_text`), the Document stored (`chunk_document`), a hash that changes with
anything stored for a chunk (`chunk_hash`), a metadata filter both stores understand, the report a build
returns, and the command that builds the index (`INDEX_COMMAND`), which errors and index/status.py name.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.documents import Document

from config import Settings
from corpus.records import Chunk, content_hash

INDEX_COMMAND = "python -m ingest_adilet index --data-dir {data_dir}"


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
    deleted: int = 0  # Pinecone vectors removed because their chunk is gone or changed


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
        out[key] = {"$in": list(value)} if isinstance(value, list | tuple | set | frozenset) else {"$eq": value}
    return out


def chunk_document(chunk: Chunk) -> Document:
    """The stored document: the chunk's full text, and its metadata for citations and filters."""
    return Document(id=chunk.chunk_id, page_content=chunk.text, metadata=chunk.metadata())


def chunk_hash(chunk: Chunk) -> str:
    """Changes when anything stored for the chunk changes (text, metadata), not only its embedded text."""
    return content_hash(json.dumps(chunk.to_json(), ensure_ascii=False, sort_keys=True))


def index_command(settings: Settings) -> str:
    """The command that builds (or repairs) the index of this data dir."""
    return INDEX_COMMAND.format(data_dir=settings.data_dir)
