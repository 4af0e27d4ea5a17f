"""Article title vectors: each article's heading («Дисциплинарные взыскания») embedded on its own, by the model of
the chunk vectors, for the title rerank (retrieval/ranking.py `TitleRerank`).

A chunk's vector mixes its heading with its text, so neighbouring articles on one subject (ТК 64, the disciplinary
measures; 65, how one is imposed) come out close; the heading alone says which of them a question asks about. The
build embeds the Russian heading of every article that has one (the cache first: ~8,000 short texts, ~3 minutes
the first time) and writes `DATA_DIR/index/titles/`: `vectors.npy` (float32, one row per article, read without
pickles) and `meta.json` last (the articles in row order, the model, a fingerprint of the headings, the file's size
and sha256), so a half-written folder is never taken for a built one.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from config import Settings
from corpus.files import DamagedFile, atomic_write, check_file, read_meta, recorded_digest
from corpus.records import Chunk, content_hash
from index.embeddings import model_id
from index.progress import embed

logger = logging.getLogger(__name__)

FOLDER = "titles"
VECTORS_FILE = "vectors.npy"
VERSION = 1
LANG = "ru"  # every document has its Russian text, and the vectors searched are Russian (DENSE_SEARCH_LANG)
MAX_ROWS = 200_000  # far above any corpus: a meta.json listing more is not one the build wrote

ArticleKey = tuple[str, str]  # (doc_id, article)


@dataclass(frozen=True)
class TitleVectors:
    """Unit vectors of the articles' headings, a row per article."""

    rows: dict[ArticleKey, int]
    matrix: np.ndarray  # float32, (articles, dim)

    def similarity(self, query: Sequence[float], keys: Sequence[ArticleKey]) -> list[float | None]:
        """Cosine of the query vector to each article's heading; None for an article without one."""
        q = np.asarray(query, dtype=np.float32)
        q = q / (float(np.linalg.norm(q)) or 1.0)
        return [float(self.matrix[i] @ q) if (i := self.rows.get(k)) is not None else None for k in keys]


def title_texts(chunks: Iterable[Chunk]) -> dict[ArticleKey, str]:
    """Each article's Russian heading (its chunks' title), for the articles that have one, in corpus order."""
    out: dict[ArticleKey, str] = {}
    for c in chunks:
        if c.lang == LANG and c.title.strip():
            out.setdefault((c.doc_id, c.article), c.title.strip())
    return out


def fingerprint(texts: dict[ArticleKey, str], model: str) -> str:
    """What the vectors are made from: the recipe's version, the model and every heading."""
    return content_hash(f"titles-v{VERSION}", model, *(f"{d}:{a}={t}" for (d, a), t in texts.items()))


def title_fingerprint(chunks: Iterable[Chunk], embeddings: Embeddings) -> str:
    """The fingerprint title vectors made from these chunks by these embeddings record."""
    return fingerprint(title_texts(chunks), model_id(embeddings))


@dataclass(frozen=True)
class TitlesReport:
    articles: int
    embedded: int
    seconds: float
    unchanged: bool = False


def build_titles(
    settings: Settings, chunks: Sequence[Chunk], embeddings: Embeddings, *, progress: bool = False
) -> TitlesReport:
    """Embed the headings (cache first) and write the folder, meta.json last; nothing when the one on disk was made
    from these headings by this model and is whole."""
    start = time.perf_counter()
    folder = settings.index_dir / FOLDER
    texts = title_texts(chunks)
    model = model_id(embeddings)
    print_ = fingerprint(texts, model)
    if _unchanged(folder, print_):
        return TitlesReport(len(texts), 0, time.perf_counter() - start, unchanged=True)
    vectors, embedded = embed(settings, embeddings, list(texts.values()), progress, "Embedding titles")
    matrix = np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "meta.json").unlink(missing_ok=True)
    digest = atomic_write(folder / VECTORS_FILE, lambda f: np.save(f, matrix, allow_pickle=False))
    meta = {
        "version": VERSION,
        "model": model,
        "fingerprint": print_,
        "articles": [list(key) for key in texts],
        "files": {VECTORS_FILE: digest.model_dump()},
    }
    atomic_write(folder / "meta.json", json.dumps(meta, ensure_ascii=False))
    seconds = time.perf_counter() - start
    logger.info("Title vectors: %d articles (%d embedded now) in %s, %.0f s", len(texts), embedded, folder, seconds)
    return TitlesReport(len(texts), embedded, seconds)


def read_titles(folder: Path, expected: str | None = None) -> TitleVectors | None:
    """The title vectors in `folder`: None when not built, or (given the `expected` fingerprint) made from other
    headings or by another model; DamagedFile when meta.json or vectors.npy is not what the build wrote."""
    meta = read_meta(folder)
    if not meta or meta.get("version") != VERSION or (expected is not None and meta.get("fingerprint") != expected):
        return None
    path = folder / VECTORS_FILE
    if (digest := recorded_digest(folder, meta, VECTORS_FILE)) is None:
        raise DamagedFile(folder / "meta.json", f"its entry for {VECTORS_FILE} is missing or garbled")
    check_file(path, digest)
    keys = _keys(meta.get("articles"), folder)
    try:
        matrix = np.load(path, allow_pickle=False)
    except ValueError:
        raise DamagedFile(path, "not a NumPy array file") from None
    if matrix.dtype != np.float32 or matrix.ndim != 2 or matrix.shape[0] != len(keys):
        raise DamagedFile(path, f"holds {matrix.dtype} {matrix.shape}, its meta.json lists {len(keys)} articles")
    return TitleVectors({k: i for i, k in enumerate(keys)}, matrix)


def load_titles(settings: Settings, chunks: Sequence[Chunk], embeddings: Embeddings) -> TitleVectors | None:
    """The built title vectors when made from these chunks' headings by these embeddings, else None (logged: the
    title rerank waits for `ingest_adilet index`); DamagedFile when a file of them is damaged."""
    folder = settings.index_dir / FOLDER
    titles = read_titles(folder, title_fingerprint(chunks, embeddings))
    if titles is None:
        logger.info("No title vectors for this corpus and model in %s: the title rerank is off until built", folder)
    return titles


def _keys(articles: Any, folder: Path) -> list[ArticleKey]:
    ok = isinstance(articles, list) and len(articles) <= MAX_ROWS
    keys = [tuple(a) for a in articles] if ok else []
    if not ok or not all(len(k) == 2 and all(isinstance(p, str) for p in k) for k in keys):
        raise DamagedFile(folder / "meta.json", "its list of articles is garbled")
    return [(str(d), str(a)) for d, a in keys]


def _unchanged(folder: Path, print_: str) -> bool:
    try:
        return read_titles(folder, print_) is not None
    except DamagedFile as err:
        logger.warning("%s is damaged (%s): embedding the titles again", err.path, err.problem)
        return False
