"""A persistent embedding cache keyed by content hash, so a rebuild embeds only new or changed texts.

A damaged cache file (truncated, overwritten) is moved aside with a warning and a new one started: the build
then embeds again what it needs, instead of failing.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from langchain_core.embeddings import Embeddings
from numpy.typing import ArrayLike

from corpus.records import content_hash
from index.embeddings import model_id

logger = logging.getLogger(__name__)


def cache_key(model: str, text: str, kind: str = "passage") -> str:
    """sha256 of (model id, kind, embedded text): a new model or a changed text never hits a stale vector."""
    return content_hash(model, kind, text)


class EmbeddingCache:
    """SQLite table key → float32 vector bytes (DATA_DIR/cache/embeddings.sqlite)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        try:
            self._db = self._connect(path)
        except sqlite3.DatabaseError as err:
            if err.sqlite_errorname not in _DAMAGED:  # locked, no permission…: not ours to throw away
                raise
            aside = _move_aside(path)
            logger.warning(
                "The embedding cache %s is damaged (%s): moved to %s, starting an empty one (what it held is "
                "embedded again)",
                path,
                err,
                aside.name,
            )
            self._db = self._connect(path)

    @staticmethod
    def _connect(path: Path) -> sqlite3.Connection:
        """Open the cache and check it (PRAGMA quick_check: ~0.15 s for 90 MB); DatabaseError when damaged."""
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")  # readers never block the build that writes
            verdict = db.execute("PRAGMA quick_check").fetchone()[0]
            if verdict != "ok":
                err = sqlite3.DatabaseError(f"quick_check: {verdict}")
                err.sqlite_errorname = "SQLITE_CORRUPT"
                raise err
            db.execute("CREATE TABLE IF NOT EXISTS embeddings (key TEXT PRIMARY KEY, vector BLOB NOT NULL)")
        except BaseException:
            db.close()
            raise
        return db

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for i in range(0, len(keys), 500):  # SQLite caps the number of bound parameters
                part = list(keys[i : i + 500])
                marks = ",".join("?" * len(part))
                for key, blob in self._db.execute(f"SELECT key, vector FROM embeddings WHERE key IN ({marks})", part):
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, items: Sequence[tuple[str, ArrayLike]]) -> None:
        """Store vectors in one committed transaction."""
        rows = [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items]
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO embeddings (key, vector) VALUES (?, ?)", rows)
            self._db.execute("COMMIT")

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


_DAMAGED = frozenset({"SQLITE_CORRUPT", "SQLITE_NOTADB"})


def _move_aside(path: Path) -> Path:
    """Rename a damaged database and its WAL files to `NAME.damaged-STAMP…`; returns the new name."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    for suffix in ("", "-wal", "-shm"):
        src = path.with_name(path.name + suffix)
        if src.exists():
            src.replace(aside.with_name(aside.name + suffix))
    return aside


class CachedEmbeddings(Embeddings):
    """Wraps Embeddings: passages come from the cache, misses are embedded in batches committed one by one.

    An interrupted build keeps every committed batch, so the next build resumes where it stopped.
    Queries are not cached (each is embedded once, in a few milliseconds).
    """

    def __init__(
        self,
        embeddings: Embeddings,
        cache: EmbeddingCache,
        *,
        batch_size: int = 32,
        on_batch: Callable[[int, float], None] | None = None,
    ) -> None:
        """Args: on_batch: called after each embedded batch with (texts in the batch, seconds it took)."""
        self.embeddings = embeddings
        self.cache = cache
        self.batch_size = batch_size
        self.on_batch = on_batch
        self.model_id = model_id(embeddings)
        self.hits = 0
        self.misses = 0

    def missing(self, texts: Sequence[str]) -> list[str]:
        """The distinct texts that are not cached yet (what a build will embed)."""
        keys = {cache_key(self.model_id, t): t for t in texts}
        cached = self.cache.get_many(list(keys))
        return [t for k, t in keys.items() if k not in cached]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        keys = [cache_key(self.model_id, t) for t in texts]
        vectors = self.cache.get_many(keys)
        todo = list(dict.fromkeys(t for k, t in zip(keys, texts, strict=True) if k not in vectors))
        self.hits += len(texts) - sum(1 for k in keys if k not in vectors)
        for i in range(0, len(todo), self.batch_size):
            batch = todo[i : i + self.batch_size]
            start = time.perf_counter()
            new = self.embeddings.embed_documents(batch)
            items = [(cache_key(self.model_id, t), v) for t, v in zip(batch, new, strict=True)]
            self.cache.put_many(items)
            vectors.update((k, np.asarray(v, dtype=np.float32)) for k, v in items)
            self.misses += len(batch)
            if self.on_batch:
                self.on_batch(len(batch), time.perf_counter() - start)
        # float32 either way: a vector reads the same whether it was just embedded or came from the cache
        return [vectors[k].astype(np.float64).tolist() for k in keys]

    def embed_query(self, text: str) -> list[float]:
        return self.embeddings.embed_query(text)
