"""A child process run to its end with its own time and resource usage: what the start benches measure."""

from __future__ import annotations

import os
import resource
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any


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
