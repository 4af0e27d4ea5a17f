"""Files the product writes and reads back: one atomic writer, and the digest that proves a file is whole.

Every build records the size and sha256 of each file it writes (in its manifest or meta.json); every load and
every "unchanged?" decision checks them, so a truncated or overwritten file is named as damaged instead of
failing deep inside a parser or being taken for up to date.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field

Content = bytes | str | Iterable[str] | Callable[[BinaryIO], object]

_BLOCK = 1 << 20

# The data dir's file modes, one policy for every writer (ingest, index, refresh, unpack, the bot's background
# build), whatever the umask or a pack's own modes: the corpus and index hold public law texts and what is derived
# from them, readable by every local user (the bot may run as another user than the operator) and writable by
# the owner only: folders DIR_MODE, files FILE_MODE. The write lock is the owner's alone (LOCK_MODE: no other user
# can open it to block the writers, index/publish.py). The bot's own folder holds personal data: 0700, its
# databases 0600 (bot/private_files.py).
DIR_MODE = 0o755
FILE_MODE = 0o644
LOCK_MODE = 0o600
# The largest JSON file (a manifest, a meta.json, pack.json) any loader reads whole: ~10× that of the full corpus.
JSON_MAX_BYTES = 32 << 20


class FileDigest(BaseModel):
    """Size and sha256 of a file, as recorded in a manifest."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    size: int = Field(ge=0)
    sha256: str


class DamagedFile(Exception):
    """A file does not match what its build recorded, or cannot be parsed; callers add the command that
    rebuilds it (corpus.errors.DataDamaged)."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = Path(path)
        self.problem = problem


def file_digest(path: Path) -> FileDigest:
    """Size and sha256 of a file, read in 1 MB blocks (~0.2 s for 100 MB)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            h.update(block)
        size = f.tell()
    return FileDigest(size=size, sha256=h.hexdigest())


def check_file(path: Path, expected: FileDigest | None, *, full: bool = True) -> None:
    """DamagedFile when `path` is missing or differs from `expected` (size always; sha256 when `full`).
    Nothing recorded (a build older than the checksums): only that it exists."""
    path = Path(path)
    if not path.is_file():
        raise DamagedFile(path, "missing")
    if expected is None:
        return
    size = path.stat().st_size
    if size != expected.size:
        raise DamagedFile(path, f"{size} bytes, its build wrote {expected.size}")
    if full and file_digest(path).sha256 != expected.sha256:
        raise DamagedFile(path, "its content differs from what its build wrote (sha256 mismatch)")


def read_json(path: Path, *, max_bytes: int = JSON_MAX_BYTES) -> Any:
    """A JSON file read in a bounded way: at most `max_bytes` are read; DamagedFile when it is larger, not JSON, or
    nested deeper than pydantic-core's parser goes (200 levels, where json.loads ends in a RecursionError)."""
    path = Path(path)
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    return parse_json(data, path, max_bytes=max_bytes)


def read_meta(folder: Path) -> dict[str, Any]:
    """An index folder's meta.json, {} when there is none; DamagedFile when it does not parse or is not an object."""
    path = Path(folder) / "meta.json"
    try:
        meta = read_json(path)
    except FileNotFoundError:
        return {}
    if not isinstance(meta, dict):
        raise DamagedFile(path, "not a JSON object")
    return meta


def recorded_digest(folder: Path, meta: dict[str, Any], name: str) -> FileDigest | None:
    """The size and sha256 an index folder's meta.json records for its file `name`; None when it records none (a
    build older than the checksums); DamagedFile when the entry is garbled."""
    files = meta.get("files") or {}
    try:
        recorded = files.get(name)
        return FileDigest.model_validate(recorded) if recorded is not None else None
    except (AttributeError, ValueError):  # `files` not an object, or the entry not a digest
        raise DamagedFile(Path(folder) / "meta.json", f"its entry for {name} is garbled") from None


def parse_json(data: bytes, path: Path, *, max_bytes: int = JSON_MAX_BYTES) -> Any:
    """`data` (at most `max_bytes` + 1 bytes read from `path`) as JSON; DamagedFile naming `path` when it is not."""
    if len(data) > max_bytes:
        raise DamagedFile(path, f"larger than {max_bytes >> 20} MiB, which no such file is")
    try:
        return pydantic_core.from_json(data)
    except ValueError as err:
        raise DamagedFile(path, f"not JSON ({str(err)[:80]})") from None


@dataclass(frozen=True)
class Staged:
    """A file written and fsynced beside its destination, not yet moved into place."""

    path: Path
    tmp: Path
    digest: FileDigest

    def publish(self) -> None:
        """Move it into place (atomic on one file system) and make the rename durable."""
        os.replace(self.tmp, self.path)
        _fsync_dir(self.path.parent)

    def discard(self) -> None:
        self.tmp.unlink(missing_ok=True)


def stage_file(path: Path, content: Content, *, mode: int = FILE_MODE) -> Staged:
    """Write `content` (bytes, text, lines of text, or a function given the open binary file) to a temporary
    file in `path`'s folder and fsync it; `publish()` moves it into place. Several files staged first and
    published together keep a reader from seeing a half-written set."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as f:
            if isinstance(content, bytes):
                f.write(content)
            elif isinstance(content, str):
                f.write(content.encode("utf-8"))
            elif callable(content):
                content(f)
            else:
                for piece in content:
                    f.write(piece.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)  # mkstemp makes 0600; the data dir is meant to be read by the other tools
        return Staged(path, tmp, file_digest(tmp))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write(path: Path, content: Content, *, mode: int = FILE_MODE) -> FileDigest:
    """Write a file so that a reader sees the old one or the new one, never half of it; returns its digest."""
    staged = stage_file(path, content, mode=mode)
    try:
        staged.publish()
    finally:
        staged.discard()
    return staged.digest


def make_folder(parent: Path, prefix: str) -> Path:
    """A new temporary folder in `parent` (a build's stage) with DIR_MODE, not mkdtemp's 0700: it is moved in."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    os.chmod(folder, DIR_MODE)
    return folder


def apply_modes(root: Path) -> None:
    """Give every folder under `root` (itself included) DIR_MODE and every file FILE_MODE, changing only those
    that differ; links are left alone (a build writes none). Run on a build before it is published."""
    root = Path(root)
    if not root.is_dir() or root.is_symlink():
        return
    _set_mode(str(root), DIR_MODE)
    for folder, dirs, names in os.walk(root):
        for name in dirs:
            _set_mode(os.path.join(folder, name), DIR_MODE)
        for name in names:
            _set_mode(os.path.join(folder, name), FILE_MODE)


def _set_mode(path: str, mode: int) -> None:
    info = os.lstat(path)
    if not stat.S_ISLNK(info.st_mode) and stat.S_IMODE(info.st_mode) != mode:
        os.chmod(path, mode)


def swap_folders(data_dir: Path, new: Path, aside: Path, names: Iterable[str]) -> None:
    """Move each folder `new/NAME` to `data_dir/NAME`, the current one to `aside/NAME` first (all on one file
    system); if a move fails, put back what was moved, so `data_dir` keeps a whole set (the new folders go back to
    `new`). The renames are made durable."""
    aside.mkdir(parents=True, exist_ok=True)
    done: list[str] = []
    try:
        for name in names:
            if not (new / name).exists():
                continue
            if (data_dir / name).exists():
                os.replace(data_dir / name, aside / name)
            done.append(name)
            os.replace(new / name, data_dir / name)
    except BaseException:
        for name in reversed(done):
            if (aside / name).exists():
                if (data_dir / name).exists():
                    os.replace(data_dir / name, new / name)
                os.replace(aside / name, data_dir / name)
        raise
    _fsync_dir(data_dir)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
