"""Owner-only files for personal data, and an SQLite database file that is damaged.

The bot's folder is made 0700 and its database 0600 — with SQLite's side files (`-wal`, `-shm`, `-journal`) —
whatever the umask or the mode an older install left. A file SQLite cannot read is recognised by its error (not a
locked or unopenable one) or by its integrity check, and moved aside with its side files, owner-only still.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path

logger = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600
SIDE_FILES = ("-wal", "-shm", "-journal")  # SQLite's companions of a database file


def restrict(path: Path, mode: int) -> None:
    """chmod `path` to `mode` if it is not already; say so when that is not allowed (someone else owns it)."""
    current = path.stat().st_mode & 0o777
    if current == mode:
        return
    try:
        os.chmod(path, mode)
    except PermissionError as err:
        logger.warning(
            "%s is %o, not %o, and cannot be changed (%s): run chmod %o %s", path, current, mode, err, mode, path
        )


def private_dir(path: Path) -> Path:
    """Create `path` (and its parents) and make it owner-only (0700), whatever the umask or its old mode."""
    path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    restrict(path, DIR_MODE)
    return path


def private_file(path: Path) -> None:
    """Create `path` owner-only (0600) before SQLite does (which would use the umask), or tighten it."""
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, FILE_MODE))
    restrict(path, FILE_MODE)


def side_files(path: Path) -> list[Path]:
    return [p for p in (path.with_name(path.name + s) for s in SIDE_FILES) if p.exists()]


class DamagedDatabase(sqlite3.DatabaseError):
    """The file is not a database, or SQLite's integrity check fails on it."""


def is_damage(err: sqlite3.DatabaseError) -> bool:
    # "database is locked" or "unable to open" (OperationalError) say nothing about the file's content.
    return isinstance(err, DamagedDatabase) or getattr(err, "sqlite_errorname", "") in (
        "SQLITE_CORRUPT",
        "SQLITE_NOTADB",
    )


def check_integrity(db: sqlite3.Connection) -> None:
    """DamagedDatabase when SQLite's quick check finds the open database damaged."""
    check = [row[0] for row in db.execute("PRAGMA quick_check(3)")]
    if check != ["ok"]:
        raise DamagedDatabase("; ".join(check))


def move_aside(path: Path) -> Path:
    """Rename the damaged file (and its -wal/-shm) to `<name>.corrupt-<timestamp>`; returns the new path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    for side in side_files(path):
        moved = target.with_name(target.name + side.name[len(path.name) :])
        side.rename(moved)
        restrict(moved, FILE_MODE)
    path.rename(target)
    restrict(target, FILE_MODE)
    return target
