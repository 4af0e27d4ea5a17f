"""Embedding through the embedding cache, with the progress of the job shown (corpus/progress.py: a rich bar on a
terminal, log lines otherwise; `--no-progress` for none).

The build also logs (at INFO) the size of the job and, once the first batch is timed, an estimate of the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from langchain_core.embeddings import Embeddings

from config import Settings
from corpus.progress import Tracker, tracker
from index.cache import CachedEmbeddings, EmbeddingCache

logger = logging.getLogger(__name__)


class Advance:
    """Progress bookkeeping: logs the size of the job, then an estimate once the first batch is timed."""

    def __init__(self, todo: int, total: int, progress: Tracker) -> None:
        self.progress = progress
        self.todo = todo
        self.done = 0
        logger.info("%d texts to embed, %d of %d from the embedding cache", todo, total - todo, total)

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
        self.progress.advance(n)


@contextmanager
def cached_embeddings(
    settings: Settings, embeddings: Embeddings, texts: list[str], progress: bool, label: str = "Embedding"
) -> Iterator[CachedEmbeddings]:
    """`embeddings` behind the data dir's embedding cache, for a build that will embed `texts`: the job's size
    is logged first, then each embedded batch (and drawn, as `label`, when `progress`)."""
    cache = EmbeddingCache(settings.cache_dir / "embeddings.sqlite")
    try:
        cached = CachedEmbeddings(embeddings, cache)
        todo = len(cached.missing(texts))
        with tracker(label, todo, show=progress) as bar:
            cached.on_batch = Advance(todo, len(texts), bar).batch
            yield cached
    finally:
        cache.close()


def embed(
    settings: Settings, embeddings: Embeddings, texts: list[str], progress: bool, label: str = "Embedding"
) -> tuple[list[list[float]], int]:
    """Vectors for `texts` (cache first) and how many were embedded now."""
    with cached_embeddings(settings, embeddings, texts, progress, label) as cached:
        vectors = cached.embed_documents(texts)
    return vectors, cached.misses
