"""Helpers for ingest tests: a source directory built from a slice of the shared corpus, file digests."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

SITE_DIRS = ("rus", "kaz")


def make_source_dir(root: Path, shared_dir: Path, doc_ids: list[str]) -> Path:
    """A --from-dir layout (rus/ID.txt, kaz/ID.txt) holding only `doc_ids`, copied from ../shared."""
    root.mkdir(parents=True, exist_ok=True)
    for site in SITE_DIRS:
        (root / site).mkdir(exist_ok=True)
        for doc_id in doc_ids:
            src = shared_dir / "corpus" / site / f"{doc_id}.txt"
            if src.exists():
                shutil.copyfile(src, root / site / f"{doc_id}.txt")
    return root


def digests(directory: Path) -> dict[str, str]:
    """sha256 of every file in a directory (temporary files included, so leftovers show up)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


def read_lines(path: Path, doc_id: str, lang: str = "ru") -> list[str]:
    """The raw JSONL lines of one document in one language, byte for byte."""
    needle = f'"doc_id": "{doc_id}", "lang": "{lang}"'
    return [line for line in path.read_text(encoding="utf-8").splitlines(keepends=True) if needle in line]
