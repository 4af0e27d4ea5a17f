"""Progress of long work (corpus/progress.py): off a terminal, log lines every 5 % or 30 s with done/total, rate and
time left, on a real ingest and index build run by the CLI with its output in a file; none with --no-progress."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from config import PROJECT_DIR
from corpus.progress import ProgressLog, duration, in_logs_only, track

DOC = "Z2300000193"  # the smallest law: 20 Russian chunks, embedded in one batch; latent terms one by one
# «Latent terms: 3/20 (15%), 4.1/s, about 4 s left»
LINE = re.compile(r"^[\w ]+: (?P<done>\d+)/(?P<total>\d+) \((?P<pct>\d+)%\)(, [^,]+)?, [\d.e+]+/s, about .+ left$")


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "corpus.progress"]


def test_a_fast_job_logs_every_5_percent(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="corpus.progress")
    clock = Clock()
    log = ProgressLog("Job", 1000, clock=clock)
    for _ in range(1000):
        clock.now += 0.1  # 10 a second: 5 % (50 steps) every 5 s, well within 30 s
        log.advance()
    log.finish()
    lines = _messages(caplog)
    assert lines[0] == "Job: 1000 to do"
    assert lines[1] == "Job: 50/1000 (5%), 10/s, about 1 min 35 s left"
    assert lines[-2] == "Job: 950/1000 (95%), 10/s, about 5 s left"
    assert lines[-1] == "Job: 1000/1000 done in 1 min 40 s, 10/s"
    assert len(lines) == 1 + 19 + 1


def test_a_slow_job_logs_every_30_seconds(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="corpus.progress")
    clock = Clock()
    log = ProgressLog("Job", 1000, clock=clock)
    for _ in range(9):
        clock.now += 10.0  # 5 % would take 500 s: a line every 30 s instead
        log.advance(current="K1400000226 ru")
    assert _messages(caplog)[1:] == [
        "Job: 3/1000 (0%), K1400000226 ru, 0.1/s, about 2 h 46 min left",  # 997 left at 0.1/s: 9970 s
        "Job: 6/1000 (0%), K1400000226 ru, 0.1/s, about 2 h 45 min left",
        "Job: 9/1000 (0%), K1400000226 ru, 0.1/s, about 2 h 45 min left",
    ]


def test_durations_read_as_people_say_them() -> None:
    assert [duration(s) for s in (0.4, 59, 61, 599, 601, 3599, 3600, 4830)] == [
        "0 s",
        "59 s",
        "1 min 01 s",
        "9 min 59 s",
        "10 min",
        "60 min",
        "1 h 00 min",
        "1 h 20 min",
    ]


def test_a_terminal_gets_a_bar_and_no_lines_unless_in_logs_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="corpus.progress")
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich takes stderr for a terminal
    assert list(track(range(40), total=40, description="Latent terms", show=True)) == list(range(40))
    assert "Latent terms" in capsys.readouterr().err and _messages(caplog) == []
    with in_logs_only():  # the bot's background build: its logs share the terminal
        assert len(list(track(range(40), total=40, description="Latent terms", show=True))) == 40
    assert "Latent terms" not in capsys.readouterr().err
    assert _messages(caplog)[0] == "Latent terms: 40 to do" and _messages(caplog)[-1].startswith("Latent terms: 40/40")


def _cli(*args: str, cwd: Path, log: Path) -> subprocess.CompletedProcess[str]:
    """The real CLI with stdout and stderr written to `log`, as under a service manager (not a terminal)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATA_DIR", "SOURCE_DIR", "COLUMNS")}
    with log.open("w", encoding="utf-8") as out:
        done = subprocess.run(
            [sys.executable, "-m", "ingest_adilet", *args],
            cwd=cwd,
            env={**env, "PYTHONPATH": str(PROJECT_DIR)},
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=600,
        )
    assert done.returncode == 0, log.read_text(encoding="utf-8")
    return done


def _progress(log: Path, job: str) -> list[str]:
    return [line for line in log.read_text(encoding="utf-8").splitlines() if f" corpus.progress: {job}: " in line]


def test_the_cli_logs_the_progress_of_an_ingest_and_an_index_build(shared_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / ("a-data-dir-under-a-long-temporary-path-" * 3) / "data"
    source = ["--from-dir", str(shared_dir / "corpus"), "--docs", DOC, "--lang", "ru", "--data-dir", str(data)]
    log = tmp_path / "ingest.log"
    _cli(*source, cwd=tmp_path, log=log)
    assert [line.split("corpus.progress: ")[1] for line in _progress(log, "ingest")][:1] == ["ingest: 1 to do"]
    assert re.search(r"ingest: 1/1 done in \d+ s", _progress(log, "ingest")[-1])

    quiet = tmp_path / "quiet.log"
    _cli("index", "--data-dir", str(data), "--no-progress", cwd=tmp_path, log=quiet)  # accepted after the command
    assert "latent_encoded" in quiet.read_text(encoding="utf-8") and "corpus.progress" not in quiet.read_text()

    shutil.rmtree(data / "index")
    shutil.rmtree(data / "cache")  # all to embed and encode again
    log = tmp_path / "index.log"
    _cli("index", "--data-dir", str(data), cwd=tmp_path, log=log)
    for job in ("Embedding", "Latent terms"):
        lines = [line.split("corpus.progress: ")[1] for line in _progress(log, job)]
        assert lines[0] == f"{job}: 20 to do"
        assert re.fullmatch(rf"{job}: 20/20 done in [\w ]+ s, [\d.]+/s", lines[-1]), lines[-1]
    steps = [LINE.match(line.split("corpus.progress: ")[1]) for line in _progress(log, "Latent terms")[1:-1]]
    assert all(steps) and [int(m["done"]) for m in steps if m] == list(range(1, 20))  # every 5 %: each of 20
    assert all(m["total"] == "20" and int(m["pct"]) == 5 * int(m["done"]) for m in steps if m)

    again = tmp_path / "again.log"
    _cli("--no-progress", "index", "-v", "--data-dir", str(data), cwd=tmp_path, log=again)  # and before it
    text = again.read_text(encoding="utf-8")
    assert "corpus.progress" not in text
    # a log record naming a long path is one line, whatever the width
    up_to_date = f"Vector index in {data / 'index' / 'faiss'} is up to date (20 vectors): nothing to do"
    assert any(line.endswith(f" index.faiss_build: {up_to_date}") for line in text.splitlines()), text
