"""The publication record: which build of the data dir is current.

A build publishes itself by writing `published.json` last. A process holding a loaded chain compares the
generation it loaded with `published()` (one small read) and loads the newer build beside the old one; nothing
else tells it that the corpus or index changed under it. Who may write a build is index/publish.py's lock.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from config import Settings
from corpus.files import apply_modes, atomic_write

FILE_NAME = "published.json"
LOCK_FILE = ".write.lock"  # held by every writer (index/publish.py `writing`)
# What the writers write, given the data dir's modes at each publish (the bot's own folder is private: not these).
WRITTEN_FOLDERS = ("corpus", "index", "cache")


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
    `generation`: the id a staged swap recorded before moving its build in (index/stage.py). The build's folders
    and files get the data dir's modes first (corpus/files.py DIR_MODE, FILE_MODE), whichever writer made them."""
    for name in WRITTEN_FOLDERS:
        apply_modes(Path(settings.data_dir) / name)
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
