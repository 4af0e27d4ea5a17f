"""Which build of the data dir is current, and who may write one.

A build publishes itself by writing `published.json` last. A process holding a loaded chain compares the
generation it loaded with `published()` (one small read) and loads the newer build beside the old one; nothing
else tells it that the corpus or index changed under it.

Every writer of the corpus and index (ingest, index, refresh, unpack, the bot's background build) holds
`writing()`: one at a time per data dir, so an index built from an older corpus never lands over a newer one.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from config import Settings
from corpus.errors import UserError
from corpus.files import atomic_write

P = ParamSpec("P")
R = TypeVar("R")

FILE_NAME = "published.json"
LOCK_FILE = ".write.lock"


class DataDirBusy(UserError):
    """Another process is writing this data dir's corpus or index."""


class Publication(BaseModel):
    """One published build: its generation id, when, and what published it (ingest, index, refresh, unpack)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    generation: str
    published_at: str
    by: str


def publication_path(settings: Settings) -> Path:
    return Path(settings.data_dir) / FILE_NAME


def publish(settings: Settings, by: str, *, generation: str | None = None) -> Publication:
    """Mark the data dir's current files as a new build; call it after every file of the build is in place.
    `generation`: the id a staged swap recorded before moving its build in (index/stage.py)."""
    record = Publication(
        generation=generation or uuid.uuid4().hex,
        published_at=datetime.now(UTC).isoformat(timespec="seconds"),
        by=by,
    )
    atomic_write(publication_path(settings), record.model_dump_json(indent=1) + "\n")
    return record


def published(settings: Settings) -> Publication | None:
    """The current publication, or None when nothing was published yet (or the marker is unreadable: a reader
    then keeps what it has loaded, and the next publish rewrites the marker)."""
    return read_publication(Path(settings.data_dir))


def read_publication(data_dir: Path) -> Publication | None:
    """`published()` for a data dir."""
    try:
        return Publication.model_validate(json.loads((Path(data_dir) / FILE_NAME).read_text(encoding="utf-8")))
    except (OSError, ValueError, ValidationError):
        return None


@contextmanager
def writing(data_dir: Path, what: str) -> Iterator[None]:
    """Hold the data dir's write lock while `what` (e.g. "refresh") changes its corpus or index; DataDirBusy
    naming the holder when another process holds it. An advisory lock on a file: the kernel releases it when the
    holder ends, killed or not. Holding it, a writer first resolves what a killed writer left
    (index/stage.py: `recover`), so every writer finds the published build in place, or refuses."""
    from index.stage import recover

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
