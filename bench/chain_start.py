"""Where a replica's start goes: from a new process to the first question retrieved, stage by stage.

    python -m bench.chain_start --data-dir /root/kzlaw/data --runs 3

Each run is a fresh subprocess (nothing warm but the OS's file cache) that imports `rag_chain`, loads the chain
as every face does (`QAChain.load`, what `get_chain` and a hot swap call) and retrieves one question. The loading
functions the chain calls are wrapped with timers, so the stages are the product's own calls, not a copy of them;
"other" is what the load spends outside them (composing the pipeline, the follow-up rule). The table gives the
median of the runs per stage, the wall time from the subprocess's start to its first retrieval, and its peak RSS.
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
CPU = "cpu:"  # the key prefix of a stage's CPU seconds (all threads of the process)

# (module, attribute, stage): the loading calls QAChain.load makes (retrieval/loading.py, rag_chain.py). An
# attribute a version lacks is skipped, so the same bench measures the code before and after a change.
STAGES = (
    ("index.build", "read_chunks", "corpus: chunks.jsonl"),
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


def child(data_dir: Path, question: str) -> None:
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
    chain = rag_chain.QAChain.load(settings)
    spent["load (total)"], spent[CPU + "load (total)"] = time.perf_counter() - loading, time.process_time() - cpu
    asked, cpu = time.perf_counter(), time.process_time()
    chain.retrieval.retrieve(question)
    spent["first retrieval"], spent[CPU + "first retrieval"] = time.perf_counter() - asked, time.process_time() - cpu
    spent["searches"] = "+".join(chain.retrieval.searches)  # type: ignore[assignment]
    spent["peak RSS MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(spent))


def run(data_dir: Path, question: str) -> dict[str, Any]:
    """One child process: its stages plus the wall time from its start to the line it prints."""
    run = run_measured(
        [sys.executable, "-m", "bench.chain_start", "--child", "--data-dir", str(data_dir), "--question", question]
    )
    if run.code != 0:
        raise SystemExit(f"the child failed ({run.code}):\n{run.err[-3000:]}")
    result: dict[str, Any] = json.loads(run.out.strip().splitlines()[-1])
    result["start → first retrieval"] = run.seconds
    result[CPU + "start → first retrieval"] = run.cpu_seconds
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chain_start", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="a data dir with a corpus (only read)")
    parser.add_argument("--runs", type=int, default=3, help="fresh processes; the table shows their medians")
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.data_dir, args.question)
        return 0
    from rich.console import Console
    from rich.table import Table

    load = os.getloadavg()[0]
    runs = [run(args.data_dir, args.question) for _ in range(args.runs)]
    stages = ["imports", *dict.fromkeys(s for _, _, s in STAGES)]
    measured = [s for s in stages if any(s in r for r in runs)]
    other = "other (compose, follow-up rule)"
    for r in runs:
        for pre in ("", CPU):
            r[pre + other] = r[pre + "load (total)"] - sum(r.get(pre + s, 0.0) for s in measured[1:])
    rows = [*measured, other, "load (total)", "first retrieval", "start → first retrieval"]
    table = Table(
        title=f"chain start on {args.data_dir} ({runs[0]['searches']}; median of {args.runs} runs; "
        f"{os.cpu_count()} CPUs, load {load:.1f} → {os.getloadavg()[0]:.1f})"
    )
    table.add_column("stage")
    table.add_column("wall s", justify="right")
    table.add_column("CPU s", justify="right")
    for stage in rows:
        table.add_row(stage, *(f"{statistics.median(r.get(pre + stage, 0.0) for r in runs):.2f}" for pre in ("", CPU)))
    table.add_row("peak RSS MB", f"{max(r['peak RSS MB'] for r in runs):.0f}", "")
    Console(width=120).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
