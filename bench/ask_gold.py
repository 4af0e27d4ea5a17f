"""Ask every question of a gold file through invoke_qa() and count the answers that cite a gold article.

    python -m bench.ask_gold [--data-dir DIR] [--questions FILE.jsonl ...]

Prints one table per file: questions, answers citing a gold article, backend and template counts, and the time per
answer (after one warm-up question, so the chain's load time is not counted).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

from config import Settings
from rag_chain import invoke_qa
from retrieval.gold import read_questions

SHARED = Path(__file__).resolve().parents[2] / "shared"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--questions", type=Path, action="append")
    args = parser.parse_args(argv)
    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    files = args.questions or [SHARED / "eval" / "citizen_dev.jsonl"]
    console = Console()

    invoke_qa("Что будет за кражу?", settings)  # warm-up: loads the chain
    for path in files:
        questions = read_questions(path)
        cited, seconds, backends, templates, misses = 0, [], Counter(), Counter(), []
        for q in questions:
            started = time.perf_counter()
            result = invoke_qa(q.query, settings)
            seconds.append(time.perf_counter() - started)
            gold = {(r.doc_id, r.article) for r in q.relevant}
            if gold & {(s.doc_id, s.article) for s in result.sources}:
                cited += 1
            else:
                misses.append(f"{q.id}: {[(s.code, s.article) for s in result.sources]}")
            backends[result.backend] += 1
            templates[result.template] += 1
        table = Table(title=f"{path.name}: invoke_qa() answers")
        for col in ("questions", "cite a gold article", "p50 s", "p95 s", "max s", "backends", "templates"):
            table.add_column(col)
        seconds.sort()
        table.add_row(
            str(len(questions)),
            f"{cited} ({cited / len(questions):.0%})",
            f"{statistics.median(seconds):.2f}",
            f"{seconds[int(0.95 * (len(seconds) - 1))]:.2f}",
            f"{seconds[-1]:.2f}",
            ", ".join(f"{k} {v}" for k, v in backends.items()),
            ", ".join(f"{k} {v}" for k, v in templates.items()),
        )
        console.print(table)
        for miss in misses:
            console.print(f"  no gold article cited: {miss}", markup=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
