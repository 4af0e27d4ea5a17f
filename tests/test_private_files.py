"""private_files alone, on real SQLite files: what counts as a damaged database, and moving one aside privately."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from bot.private_files import DamagedDatabase, check_integrity, is_damage, move_aside, private_dir, private_file


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_private_dir_and_file_are_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        folder = private_dir(tmp_path / "a" / "bot")
        path = folder / "x.sqlite"
        private_file(path)
        loose = folder / "old.sqlite"
        loose.write_bytes(b"")
        loose.chmod(0o644)
        private_file(loose)
    finally:
        os.umask(old)
    assert (mode(folder), mode(path), mode(loose)) == (0o700, 0o600, 0o600)


def test_damage_is_told_from_a_busy_database(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not an SQLite database\n" * 200)
    with pytest.raises(sqlite3.DatabaseError) as err:
        sqlite3.connect(garbage).execute("SELECT 1 FROM sqlite_master")
    assert is_damage(err.value)

    busy = tmp_path / "busy.sqlite"
    holder = sqlite3.connect(busy)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(sqlite3.OperationalError) as locked:
            sqlite3.connect(busy, timeout=0).execute("SELECT * FROM t")
    finally:
        holder.rollback()
        holder.close()
    assert "locked" in str(locked.value) and not is_damage(locked.value)
    assert is_damage(DamagedDatabase("row 3 missing from index"))

    db = sqlite3.connect(busy)
    try:
        check_integrity(db)  # a sound database passes
    finally:
        db.close()


def test_a_damaged_database_moves_aside_with_its_side_files_owner_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("bot.private_files.time.strftime", lambda fmt: "20260101-120000")  # one second for both
    path = tmp_path / "feedback.sqlite"
    moved = []
    for content in (b"first", b"second"):  # twice in the same second: the second gets its own name
        path.write_bytes(content)
        for side in ("-wal", "-shm"):
            (tmp_path / f"feedback.sqlite{side}").write_bytes(content + side.encode())
        os.chmod(path, 0o644)
        moved.append(move_aside(path))
    first, second = moved
    assert (first.name, second.name) == (
        "feedback.sqlite.corrupt-20260101-120000",
        "feedback.sqlite.corrupt-20260101-120000-2",
    )
    assert first.read_bytes() == b"first" and second.read_bytes() == b"second"
    assert Path(f"{second}-wal").read_bytes() == b"second-wal" and Path(f"{first}-shm").read_bytes() == b"first-shm"
    assert not path.exists() and sorted(p.name for p in tmp_path.iterdir()) == sorted(
        n for m in moved for n in (m.name, f"{m.name}-wal", f"{m.name}-shm")
    )
    assert {mode(p) for p in tmp_path.iterdir()} == {0o600}
