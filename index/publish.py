"""Who may write a build of the data dir, and (re-exported from index/publication.py) which build is current.

Every writer of the corpus and index (ingest, index, refresh, unpack, the bot's background build) holds
`writing()`: one at a time per data dir, so an index built from an older corpus never lands over a newer one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import logging
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from config import Settings
from corpus.errors import UserError
from corpus.files import DIR_MODE, LOCK_MODE
from index.publication import (
    FILE_NAME,
    LOCK_FILE,
    Publication,
    check_format,
    publication_path,
    publish,
    published,
    read_publication,
)
from index.stage import recover

__all__ = [
    "FILE_NAME",
    "LOCK_FILE",
    "DataDirBusy",
    "DataDirUnwritable",
    "Publication",
    "publication_path",
    "publish",
    "published",
    "read_publication",
    "writable_data_dir",
    "writes_data_dir",
    "writing",
]

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


class DataDirBusy(UserError):
    """Another process is writing this data dir's corpus or index."""


class DataDirUnwritable(UserError):
    """The data dir is not a folder this process can write (a file, a read-only mount, no space, no permission)."""


# What a file system answers a writer that cannot write there; anything else (a network error, a bug) is not this.
_UNWRITABLE = frozenset(
    {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT, errno.EEXIST, errno.ENOTDIR, errno.EISDIR}
)
_FIND = "find it with `fuser -v {path}` (or `lsof {path}`)"


def writable_data_dir(data_dir: Path, what: str) -> None:
    """Check (creating it if need be) that `data_dir` is a folder `what` can write; DataDirUnwritable saying what to
    do when it is not. Every writer runs it first (`writing`)."""
    data_dir = Path(data_dir)
    if data_dir.exists() and not data_dir.is_dir():
        raise DataDirUnwritable(
            f"{data_dir} is not a folder: give --data-dir (or DATA_DIR) the folder that holds, or is to hold, the "
            "corpus and index."
        )
    try:
        if not data_dir.exists():
            data_dir.mkdir(parents=True)
            os.chmod(data_dir, DIR_MODE)
        with tempfile.TemporaryFile(dir=data_dir, prefix=".write-check-"):
            pass
    except OSError as err:
        raise _unwritable(err, data_dir, what, where=data_dir) from None


def _unwritable(err: OSError, data_dir: Path, what: str, where: object = None) -> DataDirUnwritable:
    if where is None and err.filename:  # a temporary file a writer was making: name its folder
        name = Path(os.fsdecode(err.filename))
        where = name.parent if name.name.startswith(".") else name
    where = where or data_dir
    return DataDirUnwritable(
        f"{what} cannot write {where} ({err.strerror or err}): the data dir must be a folder this user can write, "
        f"on a writable file system with free space; fix {data_dir} or give --data-dir (DATA_DIR) another folder."
    )


@dataclass(frozen=True)
class Holder:
    """What the lock file says of the writer holding it: its command, pid, and the pid's start time (clock ticks
    since boot, /proc/PID/stat field 22), which tells that process from a later one given the same pid."""

    what: str
    pid: int
    started: int

    def line(self) -> str:
        return f"{self.what} pid={self.pid} started={self.started}\n"

    @classmethod
    def parse(cls, text: str) -> Holder | None:
        match = re.fullmatch(r"(.+?) pid=(\d+) started=(\d+)", text.strip())
        return cls(match[1], int(match[2]), int(match[3])) if match else None

    def alive(self) -> bool:
        """The recorded process still runs (the same one: its start time matches)."""
        return process_start(self.pid) == self.started


def process_start(pid: int) -> int | None:
    """The start time of process `pid` (/proc/PID/stat field 22), None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces or ")": count fields after the last ")"
    return int(stat[stat.rindex(b")") + 2 :].split()[19])


def _open_lock(path: Path) -> int:
    """The lock file, opened read-write: created owner-only (LOCK_MODE), never through a symbolic link, and only
    when this user owns it (another user's file would let that user hold the lock)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, LOCK_MODE)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise DataDirBusy(f"{path} is a symbolic link, not the write lock: remove it and run again.") from None
        raise
    info = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(info.st_mode):
        problem = f"{path} is not a regular file: remove it and run again."
    elif info.st_uid != os.geteuid():
        problem = (
            f"{path} belongs to uid {info.st_uid}, not to this user (uid {os.geteuid()}), who writes this data dir: "
            "another user could hold it to block the writers; remove it (it only holds the lock) and run again."
        )
    if problem:
        os.close(fd)
        raise DataDirBusy(problem)
    if stat.S_IMODE(info.st_mode) != LOCK_MODE:  # an older version's 0644
        os.fchmod(fd, LOCK_MODE)
    return fd


def _busy(path: Path, fd: int, data_dir: Path) -> DataDirBusy:
    """The message when the lock is taken: the recorded writer if it is alive and is that process, else say that
    someone else holds the lock and how to find them."""
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 4096).decode("utf-8", "replace")
    holder = Holder.parse(text)
    if holder is not None and holder.alive():
        return DataDirBusy(f"{data_dir} is being written by {holder.what} (pid {holder.pid}): try again when it ends.")
    named = f"names {holder.what} (pid {holder.pid}), which has ended" if holder else "names no writer"
    return DataDirBusy(
        f"{data_dir}'s write lock {path} is held, but not by a writer of this program (the lock {named}): another "
        f"process holds it; {_FIND.format(path=path)}, and end it or wait for it."
    )


@contextmanager
def writing(data_dir: Path, what: str) -> Iterator[None]:
    """Hold the data dir's write lock while `what` (e.g. "refresh") changes its corpus or index; DataDirBusy
    naming the holder when another process holds it (verified: the recorded pid runs and started when it says).
    An advisory lock on an owner-only file: the kernel releases it when the holder ends, killed or not. Holding
    it, a writer first resolves what a killed writer left (index/stage.py: `recover`), so every writer finds the
    published build in place, or refuses; a build published by a newer program is refused (NewerDataFormat). A
    data dir that is not a writable folder, or a write the file system refuses (read-only, full, no permission),
    is DataDirUnwritable saying what to do."""
    data_dir = Path(data_dir)
    writable_data_dir(data_dir, what)
    path = data_dir / LOCK_FILE
    try:
        fd = _open_lock(path)
    except DataDirBusy:
        raise
    except OSError as err:
        raise _unwritable(err, data_dir, what) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _busy(path, fd, data_dir) from None
        try:
            started = process_start(os.getpid())
            os.ftruncate(fd, 0)
            os.pwrite(fd, Holder(what, os.getpid(), started or 0).line().encode(), 0)
            recover(data_dir)
            check_format(read_publication(data_dir), data_dir)
            yield
        except OSError as err:
            if err.errno not in _UNWRITABLE:
                raise
            logger.debug("%s failed", what, exc_info=True)
            raise _unwritable(err, data_dir, what) from err
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


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
