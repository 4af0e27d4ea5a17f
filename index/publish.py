"""Who may write a build of the data dir, and (re-exported from index/publication.py) which build is current.

Every writer of the corpus and index (ingest, index, refresh, unpack, the bot's background build) holds
`writing()`: one at a time per data dir, so an index built from an older corpus never lands over a newer one.
"""

from __future__ import annotations

import fcntl
import functools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from config import Settings
from corpus.errors import UserError
from index.publication import FILE_NAME, LOCK_FILE, Publication, publication_path, publish, published, read_publication
from index.stage import recover

__all__ = [
    "FILE_NAME",
    "LOCK_FILE",
    "DataDirBusy",
    "Publication",
    "publication_path",
    "publish",
    "published",
    "read_publication",
    "writes_data_dir",
    "writing",
]

P = ParamSpec("P")
R = TypeVar("R")


class DataDirBusy(UserError):
    """Another process is writing this data dir's corpus or index."""


@contextmanager
def writing(data_dir: Path, what: str) -> Iterator[None]:
    """Hold the data dir's write lock while `what` (e.g. "refresh") changes its corpus or index; DataDirBusy
    naming the holder when another process holds it. An advisory lock on a file: the kernel releases it when the
    holder ends, killed or not. Holding it, a writer first resolves what a killed writer left
    (index/stage.py: `recover`), so every writer finds the published build in place, or refuses."""
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / LOCK_FILE, "a+", encoding="utf-8") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            raise DataDirBusy(f"{data_dir} is being written by {holder}: try again when it ends.") from None
        try:
            f.truncate(0)
            f.write(f"{what} (pid {os.getpid()})\n")
            f.flush()
            recover(data_dir)
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def writes_data_dir(
    what: str,
) -> Callable[[Callable[Concatenate[Settings, P], R]], Callable[Concatenate[Settings, P], R]]:
    """Decorate a function taking the settings first so that it runs holding `writing(settings.data_dir, what)`."""

    def decorate(fn: Callable[Concatenate[Settings, P], R]) -> Callable[Concatenate[Settings, P], R]:
        @functools.wraps(fn)
        def held(settings: Settings, *args: P.args, **kwargs: P.kwargs) -> R:
            with writing(Path(settings.data_dir), what):
                return fn(settings, *args, **kwargs)

        return held

    return decorate
