"""Where a replica's start goes: from a new process to the first question retrieved, stage by stage.

    python -m bench.chain_start --data-dir /root/kzlaw/data --runs 3 [--pause 2] [--tree /tmp/before --tree .]

Each run is a fresh subprocess (nothing warm but the OS's file cache) that imports `rag_chain`, loads the chain
as every face does (`get_chain`: `QAChain.load`, then the warm-up in a thread beside the first questions, where the
code has one) and retrieves one question, then another (the first is slower when it loads what the load left out;
the warm-up asks neither; `--pause` lets the warm-up end first, as when a citizen's first question comes a little
after the start). The loading functions the chain calls are wrapped with timers, so the stages are the product's
own calls, not a copy of them; "other" is what the load spends outside them (composing the pipeline, the follow-up
rule). The table gives the median of the runs per stage, the wall time from the subprocess's start to its chain
loaded, to its first retrieval and to its exit, and its peak RSS; with `--tree`, a column per source tree (a
`git worktree` of another commit: the child runs that tree's code), the trees taking turns run by run.
Only reads the data dir.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.measured import run_measured

QUESTION = "Что будет за кражу телефона?"
SECOND = "Сколько дней отпуска положено в год?"
SPAWNED = (
    "CHAIN_START_SPAWNED"  # the parent's clock when it starts the child (the child's own wall times count from it)
)
CPU = "cpu:"  # the key prefix of a stage's CPU seconds (all threads of the process)

# (module, attribute, stage): the loading calls QAChain.load makes (retrieval/loading.py, rag_chain.py). An
# attribute a version lacks is skipped, so the same bench measures the code before and after a change.
STAGES = (
    ("index.build", "read_chunks", "corpus: chunks.jsonl"),  # before 2026-11-28 (afternoon)
    ("index.build", "read_chunks_and_stat", "corpus: chunks.jsonl"),  # after: with the file's stat
    ("retrieval.loading", "ArticleChunks.from_chunks", "chunks → Documents by article"),
    ("retrieval.loading", "build_bm25", "BM25"),  # before: every chunk analysed at each start
    ("retrieval.loading", "load_bm25", "BM25"),  # after: the analysis the index build kept
    ("index.build", "load_vector_store", "vector store (FAISS)"),
    ("index.build", "load_latent_index", "latent terms: matrix"),
    ("retrieval.loading", "build_latent", "latent terms: search"),
    ("retrieval.loading", "index_pending", "pending-index estimate"),
    ("retrieval.loading", "load_reranker", "reranker (FlashRank)"),
    ("retrieval.loading", "LearnedRanker.load", "learned ranker"),
    ("rag_chain", "load_articles", "corpus: articles.jsonl"),
    ("rag_chain", "read_manifest", "corpus: manifest.json"),
    ("rag_chain", "build_chat_model", "chat model"),
)


def _wrap(owner: Any, name: str, stage: str, spent: dict[str, float]) -> None:
    """Replace owner.name by a version adding its time to spent[stage] (classmethods stay classmethods)."""
    raw = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name)
    fn: Callable[..., Any] = raw.__func__ if isinstance(raw, classmethod) else raw

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started, cpu = time.perf_counter(), time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[stage] = spent.get(stage, 0.0) + time.perf_counter() - started
            spent[CPU + stage] = spent.get(CPU + stage, 0.0) + time.process_time() - cpu

    setattr(owner, name, classmethod(timed) if isinstance(raw, classmethod) else timed)


def child(data_dir: Path, question: str, pause: float) -> None:
    """One start: import, load, retrieve; prints {stage: seconds} as JSON."""
    import importlib
    import resource

    started, cpu = time.perf_counter(), time.process_time()
    import rag_chain
    from config import Settings

    spent: dict[str, float] = {}
    for module, attr, stage in STAGES:
        owner: Any = importlib.import_module(module)
        *path, name = attr.split(".")
        for part in path:
            owner = getattr(owner, part)
        if name in (owner.__dict__ if isinstance(owner, type) else vars(owner)):
            _wrap(owner, name, stage, spent)
    # with the modules the load imports lazily (index.build)
    spent["imports"], spent[CPU + "imports"] = time.perf_counter() - started, time.process_time() - cpu
    settings = Settings(data_dir=data_dir)
    loading, cpu = time.perf_counter(), time.process_time()
    chain = rag_chain.get_chain(settings)  # and its warm-up beside the questions, if it has one
    spent["start → chain loaded"] = time.time() - float(os.environ[SPAWNED])
    spent["load (total)"], spent[CPU + "load (total)"] = time.perf_counter() - loading, time.process_time() - cpu
    time.sleep(pause)  # the first question comes a little later, as a citizen's does
    asked, cpu = time.perf_counter(), time.process_time()
    chain.retrieval.retrieve(question)
    spent["first retrieval"], spent[CPU + "first retrieval"] = time.perf_counter() - asked, time.process_time() - cpu
    spent["start → first retrieval"] = time.time() - float(os.environ[SPAWNED])
    asked, cpu = time.perf_counter(), time.process_time()
    chain.retrieval.retrieve(SECOND)
    spent["second retrieval"], spent[CPU + "second retrieval"] = time.perf_counter() - asked, time.process_time() - cpu
    spent["searches"] = "+".join(chain.retrieval.searches)  # type: ignore[assignment]
    spent["peak RSS MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(spent))


def run(tree: Path, data_dir: Path, question: str, pause: float) -> dict[str, Any]:
    """One child process running `tree`'s code: its stages plus the wall time from its start to its exit."""
    argv = [sys.executable, "-P", str(Path(__file__).resolve()), "--child", "--data-dir", str(data_dir)]
    argv += ["--question", question, "--pause", str(pause)]
    env = {**os.environ, "PYTHONPATH": str(tree), SPAWNED: repr(time.time())}
    run = run_measured(argv, cwd=tree, env=env)
    if run.code != 0:
        raise SystemExit(f"the child in {tree} failed ({run.code}):\n{run.err[-3000:]}")
    result: dict[str, Any] = json.loads(run.out.strip().splitlines()[-1])
    result["start → exit"] = run.seconds
    result[CPU + "start → exit"] = run.cpu_seconds
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chain_start", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="a data dir with a corpus (only read)")
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per tree; the table shows their medians")
    parser.add_argument("--tree", type=Path, action="append", default=[], help="a source tree (repeatable)")
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between the chain loaded and the question")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.data_dir, args.question, args.pause)
        return 0
    from rich.console import Console
    from rich.table import Table

    load = os.getloadavg()[0]
    trees = [t.resolve() for t in args.tree] or [Path.cwd()]
    runs: dict[Path, list[dict[str, Any]]] = {t: [] for t in trees}
    for _ in range(args.runs):  # the trees in turn, so that a machine's changing load falls on all alike
        for tree in trees:
            runs[tree].append(run(tree, args.data_dir, args.question, args.pause))
    stages = ["imports", *dict.fromkeys(s for _, _, s in STAGES)]
    measured = [s for s in stages if any(s in r for rs in runs.values() for r in rs)]
    other = "other (compose, follow-up rule)"
    for r in (r for rs in runs.values() for r in rs):
        for pre in ("", CPU):
            r[pre + other] = r[pre + "load (total)"] - sum(r.get(pre + s, 0.0) for s in measured[1:])
    rows = [*measured, other, "load (total)", "first retrieval", "second retrieval"]
    rows += ["start → chain loaded", "start → first retrieval", "start → exit"]
    table = Table(
        title=f"chain start on {args.data_dir} ({runs[trees[0]][0]['searches']}; median of {args.runs} runs per "
        f"tree; {os.cpu_count()} CPUs, load {load:.1f} → {os.getloadavg()[0]:.1f}; first question {args.pause:g} s "
        "after the load)"
    )
    table.add_column("stage")
    for tree in trees:
        table.add_column(f"{tree.name}: wall s", justify="right")
        table.add_column("CPU s", justify="right")

    def median(tree: Path, key: str) -> str:
        values = [r[key] for r in runs[tree] if key in r]
        return f"{statistics.median(values):.2f}" if values else ""

    for stage in rows:
        table.add_row(stage, *(median(tree, pre + stage) for tree in trees for pre in ("", CPU)))
    table.add_row("peak RSS MB", *(x for t in trees for x in (f"{max(r['peak RSS MB'] for r in runs[t]):.0f}", "")))
    Console(width=160).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
