"""One file-mode policy for the data dir (corpus/files.py DIR_MODE, FILE_MODE, LOCK_MODE), whichever writer made
the files and whatever the umask: the real commands (ingest, index, refresh, pack → unpack) run on one law, and
after each the corpus, index and cache folders are 0755, their files 0644, the write lock 0600."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from index.publish import LOCK_FILE
from ingest_adilet.cli import main as ingest_main

DIGITAL_ASSETS = "Z2300000193"  # the smallest law of the registry: 14 articles in Russian, 20 chunks
DIR_MODE, FILE_MODE, LOCK_MODE = 0o755, 0o644, 0o600  # the policy (docs/offline.md), stated, not imported


@pytest.fixture
def strict_umask(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """umask 077 (an operator's private default): the policy must not depend on it."""
    monkeypatch.chdir(tmp_path)
    for var in ("DATA_DIR", "GROQ_API_KEY", "PINECONE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SPARSE_WEIGHT", "0")
    monkeypatch.setenv("LEARNED_RANKER", "false")
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def modes(data_dir: Path) -> dict[str, str]:
    """Every path of the data dir whose mode is not the policy's, with its mode (empty: all as the policy says)."""
    wrong = {}
    for path in sorted(data_dir.rglob("*")):
        rel = path.relative_to(data_dir)
        mode = stat.S_IMODE(path.lstat().st_mode)
        if rel.parts[0] not in ("corpus", "index", "cache", LOCK_FILE, "published.json"):
            continue
        want = LOCK_MODE if path.name == LOCK_FILE else DIR_MODE if path.is_dir() else FILE_MODE
        if mode != want:
            wrong[str(rel)] = oct(mode)
    return wrong


def test_every_writer_leaves_the_same_modes(strict_umask: None, tmp_path: Path, shared_dir: Path) -> None:
    data, source = tmp_path / "data", str(shared_dir / "corpus")
    common = ["--data-dir", str(data), "--no-progress"]
    assert ingest_main(["--from-dir", source, "--docs", DIGITAL_ASSETS, "--lang", "ru", *common]) == 0
    assert (data / "corpus").is_dir() and modes(data) == {}, "after ingest"
    assert stat.S_IMODE(data.stat().st_mode) == DIR_MODE  # created by the writer

    assert ingest_main(["index", *common]) == 0
    assert (data / "index" / "faiss").is_dir() and modes(data) == {}, "after index"

    refresh = ["refresh", "--from-dir", source, "--docs", DIGITAL_ASSETS, "--lang", "ru", "kk", *common]
    assert ingest_main(refresh) == 0
    assert modes(data) == {}, "after refresh"

    out = tmp_path / "kz-law.pack.tar.gz"
    assert ingest_main(["pack", str(out), "--data-dir", str(data)]) == 0
    target = tmp_path / "office"
    assert ingest_main(["unpack", str(out), "--data-dir", str(target)]) == 0
    assert (target / "index" / "faiss").is_dir() and modes(target) == {}, "after unpack"


def test_an_older_lock_file_is_made_owner_only(tmp_path: Path) -> None:
    from index.publish import writing

    data = tmp_path / "data"
    data.mkdir()
    (data / LOCK_FILE).write_text("")
    os.chmod(data / LOCK_FILE, 0o644)  # as an older version left it
    with writing(data, "index"):
        assert stat.S_IMODE((data / LOCK_FILE).stat().st_mode) == LOCK_MODE
