"""What an operator sees when the data dir cannot be written (index/publish.py `writable_data_dir`, `writing`) or
`pack` is given a folder: one `error:` line saying what to do and exit 2, never a traceback, from both command
lines. Read-only is a real read-only bind mount (we run as root, whom file modes do not stop), made in a mount
namespace of the command's own (`unshare -m`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from config import Settings
from ingest_adilet.pipeline import ingest

REPO = Path(__file__).resolve().parents[1]
DIGITAL_ASSETS = "Z2300000193"  # 14 articles: the smallest law of the registry


def _can_mount_read_only(tmp: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", f"mount --bind -o ro {tmp} {tmp} && ! touch {tmp}/x"], capture_output=True
    )
    return probe.returncode == 0


def _run(args: list[str], cwd: Path, read_only: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`python ARGS` as a process; with `read_only`, that folder is a read-only mount for it (and only for it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GROQ_", "DATA_DIR"))}
    env["PYTHONPATH"] = str(REPO)
    command = [sys.executable, *args]
    if read_only is not None:
        script = f'mount --bind -o ro "{read_only}" "{read_only}" && exec "$@"'
        command = ["unshare", "-m", "sh", "-c", script, "sh", *command]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _assert_one_error_line(proc: subprocess.CompletedProcess[str], *words: str) -> str:
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    for word in words:
        assert word in errors[0]
    return errors[0]


@pytest.fixture(scope="module")
def built(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir with a one-law corpus (ingested, published)."""
    data = tmp_path_factory.mktemp("built") / "data"
    ingest(
        Settings(data_dir=data, _env_file=None),
        source_dir=shared_dir / "corpus",
        doc_ids=[DIGITAL_ASSETS],
        langs=["ru"],
        progress=False,
    )
    return data


def _writers(data: Path, shared_dir: Path, pack: Path) -> dict[str, list[str]]:
    source = str(shared_dir / "corpus")
    return {
        "ingest": ["-m", "ingest_adilet", "--data-dir", str(data), "--from-dir", source, "--docs", DIGITAL_ASSETS],
        "index": ["-m", "ingest_adilet", "index", "--data-dir", str(data), "--no-progress"],
        "refresh": ["-m", "ingest_adilet", "refresh", "--data-dir", str(data), "--from-dir", source],
        "unpack": ["-m", "ingest_adilet", "unpack", str(pack), "--data-dir", str(data)],
        "ask (first run)": ["-m", "rag_chain", "ask", "--data-dir", str(data), "--from-dir", source, "кража"],
    }


WRITERS = ["ingest", "index", "refresh", "unpack", "ask (first run)"]


@pytest.mark.parametrize("writer", WRITERS)
def test_a_data_dir_that_is_a_file_is_one_error_line(writer: str, tmp_path: Path, shared_dir: Path) -> None:
    not_a_dir = tmp_path / "data"
    not_a_dir.write_text("notes\n")
    proc = _run(_writers(not_a_dir, shared_dir, not_a_dir)[writer], tmp_path)
    _assert_one_error_line(proc, str(not_a_dir), "is not a folder", "--data-dir")
    assert not_a_dir.read_text() == "notes\n"


@pytest.mark.parametrize("writer", WRITERS)
def test_a_read_only_data_dir_is_one_error_line(writer: str, tmp_path: Path, shared_dir: Path, built: Path) -> None:
    if not _can_mount_read_only(tmp_path):
        pytest.skip("no mount namespace here (unshare -m) to make a read-only data dir")
    data = tmp_path / "data"
    if writer == "ask (first run)":
        data.mkdir()  # empty: ask builds the corpus first
    else:
        shutil.copytree(built, data)
    before = sorted((p.relative_to(data), p.stat().st_mtime_ns) for p in data.rglob("*"))
    pack = tmp_path / "some.pack.tar.gz"
    pack.write_bytes(b"\0" * 1024)
    proc = _run(_writers(data, shared_dir, pack)[writer], tmp_path, read_only=data)
    _assert_one_error_line(proc, str(data), "Read-only file system", "another folder")
    assert sorted((p.relative_to(data), p.stat().st_mtime_ns) for p in data.rglob("*")) == before


def test_a_read_only_corpus_folder_in_a_writable_data_dir_is_one_error_line(
    tmp_path: Path, shared_dir: Path, built: Path
) -> None:
    # The data dir passes the first check; the corpus write itself is refused by the file system.
    if not _can_mount_read_only(tmp_path):
        pytest.skip("no mount namespace here (unshare -m) to make a read-only folder")
    data = tmp_path / "data"
    shutil.copytree(built, data)
    ingest_kk = ["-m", "ingest_adilet", "--data-dir", str(data), "--from-dir", str(shared_dir / "corpus"),
                 "--docs", DIGITAL_ASSETS, "--lang", "ru", "kk", "--no-progress"]  # fmt: skip
    proc = _run(ingest_kk, tmp_path, read_only=data / "corpus")
    _assert_one_error_line(proc, str(data / "corpus"), "Read-only file system")


def test_pack_to_an_existing_folder_is_one_error_line(tmp_path: Path, built: Path) -> None:
    out = tmp_path / "packs"
    out.mkdir()
    proc = _run(["-m", "ingest_adilet", "pack", str(out), "--data-dir", str(built)], tmp_path)
    _assert_one_error_line(proc, str(out), "is a folder", "kz-law.pack.tar.gz")
    assert list(out.iterdir()) == []
