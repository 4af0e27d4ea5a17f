"""The publication record: which build of the data dir is current.

A build publishes itself by writing `published.json` last. A process holding a loaded chain compares the
generation it loaded with `published()` (one small read) and loads the newer build beside the old one; nothing
else tells it that the corpus or index changed under it. Who may write a build is index/publish.py's lock.

The record also says which version of the data dir's format the build was written in (`data_format`). Replicas
upgraded one by one share a data dir: a replica whose program is older than the build's format keeps answering from
the build it holds and says to upgrade it (`check_format`), and a writer refuses the data dir, instead of calling
the newer files damaged and rebuilding them in the old format.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from config import Settings
from corpus.errors import UserError
from corpus.files import apply_modes, atomic_write

FILE_NAME = "published.json"
LOCK_FILE = ".write.lock"  # held by every writer (index/publish.py `writing`)
# What the writers write, given the data dir's modes at each publish (the bot's own folder is private: not these).
WRITTEN_FOLDERS = ("corpus", "index", "cache")
# The data dir's files as this program writes them and reads them (and every older format). A change an older
# program could not read (a field in a model that forbids unknown ones, a new required file) bumps it.
# 1: a publication without the field; 2: the corpus manifest's `repealed_by`.
DATA_FORMAT = 2


class NewerDataFormat(UserError):
    """The data dir was published by a newer version of this program: the message says to upgrade this one."""


class Publication(BaseModel):
    """One published build: its generation id, when, and what published it (ingest, index, refresh, unpack)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    generation: str
    published_at: str
    by: str
    data_format: int = 1


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
        data_format=DATA_FORMAT,
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


def check_format(publication: Publication | None, data_dir: Path) -> None:
    """NewerDataFormat when `publication` was written in a format newer than this program reads."""
    if publication is not None and publication.data_format > DATA_FORMAT:
        raise NewerDataFormat(
            f"{data_dir} holds a build published by a newer version of this program (data format "
            f"{publication.data_format}; this one reads formats up to {DATA_FORMAT}): upgrade this program."
        )
