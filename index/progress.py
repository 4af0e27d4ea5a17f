"""Progress of the index builds (rich), and embedding through the embedding cache with that progress shown.

The build logs the size of the job and, once the first batch is timed, an estimate of the rest; with `progress`
it also draws a rich bar on the terminal (the CLIs' library; `--no-progress` for cron logs).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from langchain_core.embeddings import Embeddings

from config import Settings
from index.cache import CachedEmbeddings, EmbeddingCache

logger = logging.getLogger(__name__)

T = TypeVar("T")


@contextmanager
def progress_bar(show: bool) -> Iterator[Any]:
    """A rich Progress with a bar, count, elapsed time and ETA; None when not shown."""
    if not show:
        yield None
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
        yield bar


def track(items: Iterable[T], *, total: int, description: str, show: bool) -> Iterator[T]:
    """The items, advancing a progress bar by one for each (no bar when not shown or nothing to do)."""
    with progress_bar(show and total > 0) as bar:
        task = bar.add_task(description, total=total) if bar is not None else None
        for item in items:
            yield item
            if bar is not None:
                bar.advance(task)


class Advance:
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
def cached_embeddings(
    settings: Settings, embeddings: Embeddings, texts: list[str], progress: bool
) -> Iterator[CachedEmbeddings]:
    """`embeddings` behind the data dir's embedding cache, for a build that will embed `texts`: the job's size
    is logged first, then each embedded batch (and drawn when `progress`)."""
    cache = EmbeddingCache(settings.cache_dir / "embeddings.sqlite")
    try:
        with progress_bar(progress) as bar:
            advance = Advance(bar)
            cached = CachedEmbeddings(embeddings, cache, on_batch=advance.batch)
            advance.start(len(cached.missing(texts)), len(texts))
            yield cached
    finally:
        cache.close()


def embed(
    settings: Settings, embeddings: Embeddings, texts: list[str], progress: bool
) -> tuple[list[list[float]], int]:
    """Vectors for `texts` (cache first) and how many were embedded now."""
    with cached_embeddings(settings, embeddings, texts, progress) as cached:
        vectors = cached.embed_documents(texts)
    return vectors, cached.misses
