"""Data packs on a real data dir: pack size and time, unpack time, and unpack + first answer on a fresh data dir.

    python -m bench.pack_bench --data-dir data --work /tmp/pack-bench

SOURCE (`--data-dir`) is only read. Everything is written under `--work`: the packs, and fresh data dirs the
packs are unpacked into. "unpack + first answer" is what an office runs: a subprocess
`python -m rag_chain ask --pack PACK --data-dir FRESH "question"`, timed from start to exit (target < 60 s).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from config import Settings
from ingest_adilet.pack import pack
from ingest_adilet.unpack import unpack

QUESTION = "Что будет за кражу телефона?"


def _first_answer(pack_file: Path, data_dir: Path, question: str) -> tuple[float, str]:
    """Seconds for `rag_chain ask --pack` on a fresh data dir, and the first source line it printed."""
    shutil.rmtree(data_dir, ignore_errors=True)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "rag_chain", "ask", "--pack", str(pack_file), "--data-dir", str(data_dir), question],
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"rag_chain ask --pack failed ({done.returncode}):\n{done.stderr[-2000:]}")
    lines = done.stdout.splitlines()
    first = next((ln.strip() for ln in lines if ln.strip().startswith("[S1]")), "")
    return seconds, first


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pack_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path("data"), help="SOURCE data dir (read only)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/pack-bench"), help="where packs and targets go")
    parser.add_argument("--compress", nargs="+", default=["gz", "none"], choices=["gz", "xz", "none"])
    parser.add_argument("--question", default=QUESTION)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    source = Settings(data_dir=args.data_dir)
    args.work.mkdir(parents=True, exist_ok=True)
    table = Table(title=f"data packs of {args.data_dir.resolve()}")
    for column in ("pack", "size MB", "pack s", "unpack s", "unpack + first answer s", "first source"):
        table.add_column(column, justify="left" if column in ("pack", "first source") else "right")
    for compression in args.compress:
        suffix = {"gz": ".tar.gz", "xz": ".tar.xz", "none": ".tar"}[compression]
        out = args.work / f"kz-law.pack{suffix}"
        packed = pack(source, out, compression=compression)
        target = args.work / f"unpacked-{compression}"
        shutil.rmtree(target, ignore_errors=True)
        unpacked = unpack(source.model_copy(update={"data_dir": target}), out)
        seconds, first = _first_answer(out, args.work / f"office-{compression}", args.question)
        table.add_row(
            out.name,
            f"{packed.size_bytes / 1e6:.1f}",
            f"{packed.seconds:.1f}",
            f"{unpacked.seconds:.1f}",
            f"{seconds:.1f}",
            first[:60],
        )
        shutil.rmtree(target, ignore_errors=True)
    Console(width=160).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
