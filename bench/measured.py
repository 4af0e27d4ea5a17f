"""What the benches time: a child process run to its end with its own time and usage (the start benches), and
rankings under several variants of one retrieval (the ranking benches)."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.table import Table

if TYPE_CHECKING:
    from retrieval.gold import GoldQuestion
    from retrieval.pipeline import Retrieval


@dataclass(frozen=True)
class Measured:
    code: int  # the exit status
    seconds: float  # wall time from the start to the end
    out: str
    err: str
    usage: resource.struct_rusage  # the child's own (wait4), not this process's

    @property
    def peak_mb(self) -> float:
        return self.usage.ru_maxrss / 1024

    @property
    def cpu_seconds(self) -> float:
        return self.usage.ru_utime + self.usage.ru_stime


def run_measured(argv: list[str], **popen: Any) -> Measured:
    """Run `argv`, reading its output while wait4 reaps it with its own usage."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
    with ThreadPoolExecutor(2) as pool:  # drain both pipes, or a chatty child blocks on a full one
        out, err = pool.submit(proc.stdout.read), pool.submit(proc.stderr.read)  # type: ignore[union-attr]
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        return Measured(os.waitstatus_to_exitcode(status), seconds, out.result(), err.result(), usage)


def ranking_times(variants: dict[str, Retrieval], sets: dict[str, list[GoldQuestion]], k: int, title: str) -> Table:
    """p50 / p95 ms of each set's rankings under each variant, the variants taking turns question by question and
    forgetting what they remember per question, so that neither is timed warm."""
    table = Table(title=title)
    for col in ("set", "n", "variant", "p50", "p95"):
        table.add_column(col, justify="right" if col != "set" else "left")
    for name, qs in sets.items():
        ms: dict[str, list[float]] = {label: [] for label in variants}
        for v in variants.values():
            v.warm_up()  # lazy loads do not count
        for q in qs:
            for label, v in variants.items():
                v.forget_questions()
                start = time.perf_counter()
                v.rank_articles(q.query, k)
                ms[label].append((time.perf_counter() - start) * 1000)
        for label, times in ms.items():
            p95 = statistics.quantiles(times, n=20)[-1] if len(times) > 1 else times[0]
            table.add_row(name, str(len(qs)), label, f"{statistics.median(times):.0f}", f"{p95:.0f}")
    return table
