"""Retrieval time of this code against another commit's, on one data dir: what "p50 within +25 ms of today's"
is measured with.

    git worktree add /tmp/before e1798d5
    python -m bench.latency --data-dir /root/kzlaw/data --tree /tmp/before --tree . --rounds 3 \
        --questions ../shared/eval/citizen_dev.jsonl --questions bench/data/kk_dev.jsonl

One p50 over twenty questions moves by ±20 ms from run to run on 2 cores (another process, the CPU's clock), more
than the difference it is asked to show. So each tree's code runs in a fresh process per round, the trees taking
turns, and each round ranks every question twice (`rank_articles`, k=100, what `eval` times; what the pipeline
remembers per question forgotten before each pass). A question's time is the median of its timings over all
rounds; the table gives the p50 and p95 of those over a file's questions, and each tree's p50 against the first's.
The child (this file run by path, `-P`: not the tree's bench/) imports only the tree's `config` and `retrieval`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

K = 100
PASSES = 2  # per round and question


def child(data_dir: Path, files: list[Path]) -> None:
    """One round in the tree on PYTHONPATH: {file stem: {question id: [ms, ...]}} as JSON."""
    from config import Settings
    from retrieval.gold import read_questions
    from retrieval.pipeline import Retrieval

    retrieval = Retrieval.load(Settings(data_dir=data_dir))
    out: dict[str, dict[str, list[float]]] = {}
    for path in files:
        questions = read_questions(path)
        # lazy loads do not count: the tree's warm-up (as a served chain's, where it has one), then a question
        getattr(retrieval, "warm_up", lambda: None)()
        retrieval.rank_articles(questions[0].query, K)
        times: dict[str, list[float]] = {q.id: [] for q in questions}
        for _ in range(PASSES):
            retrieval.forget_questions()
            for q in questions:
                started = time.perf_counter()
                retrieval.rank_articles(q.query, K)
                times[q.id].append((time.perf_counter() - started) * 1000)
        out[path.stem] = times
    print(json.dumps(out))


def one_round(tree: Path, data_dir: Path, files: list[Path]) -> dict[str, dict[str, list[float]]]:
    from bench.measured import run_measured

    argv = [sys.executable, "-P", str(Path(__file__).resolve()), "--child", "--data-dir", str(data_dir)]
    argv += [arg for f in files for arg in ("--questions", str(f))]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    run = run_measured(argv, cwd=tree, env=env)
    if run.code != 0:
        raise SystemExit(f"the round in {tree} failed ({run.code}):\n{run.err[-3000:]}")
    result: dict[str, dict[str, list[float]]] = json.loads(run.out.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.latency", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="a built data dir (only read)")
    parser.add_argument("--tree", type=Path, action="append", default=[], help="a source tree (repeatable)")
    parser.add_argument("--questions", type=Path, action="append", required=True, help="gold JSONL (repeatable)")
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per tree, the trees in turn")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    files = [f.resolve() for f in args.questions]
    data_dir = args.data_dir.resolve()
    if args.child:
        child(data_dir, files)
        return 0
    from rich.console import Console
    from rich.table import Table

    trees = [t.resolve() for t in args.tree] or [Path.cwd()]
    times: dict[Path, dict[str, dict[str, list[float]]]] = {t: {} for t in trees}
    load = os.getloadavg()[0]
    for _ in range(args.rounds):
        for tree in trees:
            for name, per in one_round(tree, data_dir, files).items():
                for qid, ms in per.items():
                    times[tree].setdefault(name, {}).setdefault(qid, []).extend(ms)
    table = Table(
        title=f"ranking time per question (ms; median of {args.rounds} × {PASSES} per question; "
        f"{os.cpu_count()} CPUs, load {load:.1f} → {os.getloadavg()[0]:.1f})"
    )
    for col in ("set", "n", "tree", "p50", "p95", "p50 − first tree's"):
        table.add_column(col, justify="left" if col in ("set", "tree") else "right")
    for f in files:
        first: float | None = None
        for tree in trees:
            medians = sorted(statistics.median(ms) for ms in times[tree][f.stem].values())
            p50, p95 = statistics.median(medians), medians[min(len(medians) - 1, int(0.95 * len(medians)))]
            first = p50 if first is None else first
            table.add_row(f.stem, str(len(medians)), str(tree), f"{p50:.1f}", f"{p95:.1f}", f"{p50 - first:+.1f}")
        table.add_section()
    Console(width=140, color_system=None).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
