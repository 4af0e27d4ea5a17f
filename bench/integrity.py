"""What checking a data dir's files costs: size and sha256 of each file the product reads, and the embedding
cache's `PRAGMA quick_check`. Reads only.

Run: `python -m bench.integrity [--data-dir DIR]`
"""

from __future__ import annotations

import argparse
import sqlite3
import time
from pathlib import Path

from config import Settings
from corpus.files import file_digest

FILES = (
    "corpus/articles.jsonl",
    "corpus/chunks.jsonl",
    "index/faiss/index.faiss",
    "index/faiss/docstore.jsonl",
    "index/sparse/matrix.npz",
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.integrity", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, help="default: DATA_DIR")
    args = parser.parse_args(argv)
    data = args.data_dir or Settings().data_dir
    print(f"| file ({data}) | MB | sha256 s | MB/s |")
    print("|---|---:|---:|---:|")
    for name in FILES:
        path = data / name
        if not path.is_file():
            print(f"| {name} | absent | | |")
            continue
        started = time.perf_counter()
        digest = file_digest(path)
        seconds = time.perf_counter() - started
        print(f"| {name} | {digest.size / 1e6:.1f} | {seconds:.3f} | {digest.size / 1e6 / max(seconds, 1e-9):.0f} |")
    cache = data / "cache" / "embeddings.sqlite"
    if cache.is_file():
        db = sqlite3.connect(f"file:{cache}?mode=ro", uri=True)
        started = time.perf_counter()
        verdict = db.execute("PRAGMA quick_check").fetchone()[0]
        seconds = time.perf_counter() - started
        db.close()
        print(
            f"| cache/embeddings.sqlite quick_check ({verdict}) | {cache.stat().st_size / 1e6:.1f} | {seconds:.3f} | |"
        )


if __name__ == "__main__":
    main()
