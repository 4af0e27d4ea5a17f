"""One writer at a time per data dir (index.publish.writing): ingest, index, refresh, unpack and the bot's
background build all take the same lock, so an index built from an older corpus never lands over a newer one."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import cli
from config import Settings
from corpus.store import load_chunks
from index.build import build_index
from index.publish import LOCK_FILE, DataDirBusy, writing
from ingest_adilet.pipeline import ingest
from tests.support.index import KeywordEmbeddings

DIGITAL_ASSETS = "Z2300000193"  # 14 articles, 20 chunks: the smallest law of the registry


@pytest.fixture
def slice_settings(shared_dir: Path, tmp_path: Path) -> Settings:
    settings = Settings(data_dir=tmp_path / "data", _env_file=None, learned_ranker=False, sparse_weight=0)
    ingest(settings, source_dir=shared_dir / "corpus", doc_ids=[DIGITAL_ASSETS], langs=["ru"], progress=False)
    return settings


def test_an_ingest_is_refused_while_an_index_build_holds_the_data_dir(
    slice_settings: Settings, shared_dir: Path
) -> None:
    manifest = (slice_settings.corpus_dir / "manifest.json").read_bytes()
    with writing(slice_settings.data_dir, "index"):
        with pytest.raises(DataDirBusy, match=r"being written by index \(pid \d+\)"):
            ingest(slice_settings, source_dir=shared_dir / "corpus", doc_ids=[DIGITAL_ASSETS], progress=False)
    assert (slice_settings.corpus_dir / "manifest.json").read_bytes() == manifest


def test_an_index_build_is_refused_while_an_ingest_holds_the_data_dir(slice_settings: Settings) -> None:
    with writing(slice_settings.data_dir, "ingest"):
        with pytest.raises(DataDirBusy, match="being written by ingest"):
            build_index(slice_settings, embeddings=KeywordEmbeddings(["актив", "цифров"]), progress=False)
    assert not slice_settings.index_dir.exists()
    # released: the same build goes through
    report = build_index(slice_settings, embeddings=KeywordEmbeddings(["актив", "цифров"]), progress=False)
    assert report.chunks == len(load_chunks(slice_settings.corpus_dir)) and report.embedded > 0


def test_ask_answers_from_the_corpus_it_has_while_another_process_writes(
    slice_settings: Settings, shared_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with writing(slice_settings.data_dir, "refresh"):
        cli._prepare(slice_settings, shared_dir / "corpus")
    err = capsys.readouterr().err
    assert "The corpus was not re-read:" in err and "being written by refresh" in err


# --- the lock's file and its holder -----------------------------------------------------------------------------------

HOLD = """
import fcntl, sys, time
fd = open(sys.argv[1], "rb")  # read access is all flock needs
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(120)
"""
WRITE = """
import sys, time
from index.publish import writing
with writing(sys.argv[1], "index"):
    print("held", flush=True)
    time.sleep(120)
"""


@contextmanager
def holding(script: str, path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process running `script` with `path`, until it says it holds the lock."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen([sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_live_writer_is_named_with_its_pid(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with holding(WRITE, data) as proc:
        with pytest.raises(DataDirBusy, match=rf"being written by index \(pid {proc.pid}\): try again when it ends"):
            with writing(data, "refresh"):
                pass


def test_a_lock_held_by_another_process_is_not_blamed_on_the_dead_writer_it_names(tmp_path: Path) -> None:
    # Any process that can read the lock file can flock it; the record still names a writer that has ended.
    data = tmp_path / "data"
    data.mkdir()
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(ended.stdout)
    lock = data / LOCK_FILE
    with writing(data, "refresh"):
        pass
    lock.write_text(f"refresh pid={dead} started=1\n")  # what a writer that ended left (as it was recorded)
    with holding(HOLD, lock):
        with pytest.raises(DataDirBusy) as busy:
            with writing(data, "index"):
                pass
    message = str(busy.value)
    assert "being written by" not in message and f"pid {dead}), which has ended" in message
    assert "another process holds it" in message and f"fuser -v {lock}" in message


def test_a_reused_pid_is_not_taken_for_the_writer(tmp_path: Path) -> None:
    # The recorded pid runs (this test's own) but started at another time: a later process given the same pid.
    data = tmp_path / "data"
    with writing(data, "refresh"):
        pass
    lock = data / LOCK_FILE
    lock.write_text(f"refresh pid={os.getpid()} started=1\n")
    with holding(HOLD, lock), pytest.raises(DataDirBusy, match="another process holds it"):
        with writing(data, "index"):
            pass


def test_the_lock_file_is_owner_only_and_never_a_link(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with writing(data, "ingest"):
        assert stat.S_IMODE((data / LOCK_FILE).stat().st_mode) == 0o600
    (data / LOCK_FILE).unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("precious\n")
    (data / LOCK_FILE).symlink_to(elsewhere)
    with pytest.raises(DataDirBusy, match="is a symbolic link"):
        with writing(data, "ingest"):
            pass
    assert elsewhere.read_text() == "precious\n"


def test_a_lock_file_of_another_user_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with writing(data, "ingest"):
        pass
    other = 65534 if os.geteuid() != 65534 else 65533
    try:
        os.chown(data / LOCK_FILE, other, -1)
    except PermissionError:
        pytest.skip("only root can give a file to another user")
    with pytest.raises(DataDirBusy, match=rf"belongs to uid {other}, not to this user"):
        with writing(data, "ingest"):
            pass
