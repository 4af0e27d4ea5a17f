"""README's first command on a fresh data dir: the time from the command to the answer, and what it answered,
against the same question on a data dir whose index is built.

    python -m bench.first_answer --from-dir ../shared/corpus --built data --work /tmp/first-answer

Each row is a subprocess `python -m rag_chain ask --json …`, timed from start to exit, with its peak RSS:
  * "fresh": `--from-dir DIR --data-dir WORK/fresh` (deleted first) — ingest, then the answer from the searches that
    need no index, and the one stderr line saying what is missing;
  * "built": `--data-dir BUILT` (only read) — the same question with the full index.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.measured import run_measured

QUESTION = "Что будет за кражу телефона?"


def _ask(args: list[str]) -> tuple[float, float, dict, str]:
    """Seconds, peak RSS (MB), the --json result and stderr of `rag_chain ask --json ARGS`."""
    run = run_measured([sys.executable, "-m", "rag_chain", "ask", "--json", *args])
    if run.code != 0:
        raise SystemExit(f"rag_chain ask {' '.join(args)} failed ({run.code}):\n{run.err[-2000:]}")
    return run.seconds, run.peak_mb, json.loads(run.out), run.err


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.first_answer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--from-dir", type=Path, default=Path("../shared/corpus"), help="the adilet texts")
    parser.add_argument("--built", type=Path, help="a data dir with the full index (only read); omit to skip")
    parser.add_argument("--work", type=Path, default=Path("/tmp/first-answer"), help="where the fresh data dir goes")
    parser.add_argument("--question", default=QUESTION)
    args = parser.parse_args(argv)
    fresh = args.work / "fresh"
    shutil.rmtree(fresh, ignore_errors=True)
    args.work.mkdir(parents=True, exist_ok=True)
    env_note = f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"

    runs = [("fresh", ["--from-dir", str(args.from_dir), "--data-dir", str(fresh), args.question])]
    if args.built:
        runs.append(("built", ["--data-dir", str(args.built), args.question]))
    table = Table(title=f"«{args.question}» — first answer ({env_note})")
    for column in ("data dir", "seconds", "peak RSS MB", "searches", "sources"):
        table.add_column(column, justify="right" if column in ("seconds", "peak RSS MB") else "left")
    notes = []
    for name, run_args in runs:
        seconds, rss, result, err = _ask(run_args)
        sources = ", ".join(f"{s['code']} {s['article']}" for s in result["sources"])
        table.add_row(name, f"{seconds:.1f}", f"{rss:.0f}", ", ".join(result["searches"]), sources)
        notes += [f"{name}: {line}" for line in err.splitlines() if "ingest_adilet index" in line]
    console = Console()
    console.print(table)
    for note in notes:
        console.print(note, markup=False, highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
