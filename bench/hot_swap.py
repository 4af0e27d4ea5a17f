"""What picking up a newly published build costs a running process: the background load, the questions answered
meanwhile (and how slow they get), and the memory of two chains side by side.

    cp -a data /tmp/hot-swap-data && python -m bench.hot_swap --data-dir /tmp/hot-swap-data

DATA_DIR gets a new `published.json` (nothing else is written): give it a copy, never a data dir in use. The chain
is loaded through `rag_chain.get_chain` as every face does; then a build is published and questions are asked one
after another (as a single busy user would) until the chain has swapped, then a few more.
"""

from __future__ import annotations

import argparse
import logging
import resource
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

import rag_chain
from config import Settings
from index.publish import publish

QUESTION = "Что будет за кражу телефона?"


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _ask(settings: Settings, question: str) -> float:
    started = time.perf_counter()
    rag_chain.invoke_qa(question, settings)
    return (time.perf_counter() - started) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hot_swap", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="a COPY of a built data dir")
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--after", type=int, default=5, help="questions asked after the swap")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    settings = Settings(data_dir=args.data_dir, reload_check_seconds=0.0)

    started = time.perf_counter()
    first = rag_chain.get_chain(settings)
    load_s = time.perf_counter() - started
    baseline = [_ask(settings, args.question) for _ in range(5)]
    rss_one = _rss_mb()

    generation = publish(settings, "bench").generation
    published_at = time.perf_counter()
    during: list[float] = []
    while rag_chain.get_chain(settings).generation != generation:
        during.append(_ask(settings, args.question))
    swap_s = time.perf_counter() - published_at
    after = [_ask(settings, args.question) for _ in range(args.after)]
    rss_two = _rss_mb()
    assert rag_chain.get_chain(settings) is not first

    table = Table(title=f"hot swap on {args.data_dir} ({', '.join(first.retrieval.searches)})")
    table.add_column("")
    table.add_column("value", justify="right")
    rows = [
        ("first load (get_chain), s", f"{load_s:.1f}"),
        ("publication → swapped (background load), s", f"{swap_s:.1f}"),
        ("questions answered during the load", str(len(during))),
        ("latency before, p50 ms", f"{statistics.median(baseline):.0f}"),
        (
            "latency during the load, p50 / max ms",
            f"{statistics.median(during):.0f} / {max(during):.0f}" if during else "—",
        ),
        ("latency after, p50 ms", f"{statistics.median(after):.0f}" if after else "—"),
        ("peak RSS with one chain, MB", f"{rss_one:.0f}"),
        ("peak RSS through the swap, MB", f"{rss_two:.0f}"),
    ]
    for row in rows:
        table.add_row(*row)
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
