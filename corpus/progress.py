"""Progress of long work (ingest, embedding, latent terms): a rich bar on a terminal, log lines otherwise.

Off a terminal (a service manager, output to a file) a bar draws nothing useful, so the work logs one line at INFO
(logger `corpus.progress`, which the CLIs show) every `EVERY_SECONDS` or every `EVERY_FRACTION` of the job, whichever
comes first: done/total, rate and time left; a line when it starts and one when it is done. With `show=False`
(`--no-progress`) nothing at all. Work run beside other logging on the same terminal (the bot's background index
build) runs `in_logs_only()`: lines, never a bar.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from corpus.console import make_console

logger = logging.getLogger(__name__)

T = TypeVar("T")

EVERY_SECONDS = 30.0
EVERY_FRACTION = 0.05
_logs_only: ContextVar[bool] = ContextVar("progress_in_logs_only", default=False)


def duration(seconds: float) -> str:
    """«12 s», «4 min 05 s», «1 h 07 min»."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 600:
        return f"{s // 60} min {s % 60:02d} s"
    if s < 3600:
        return f"{round(s / 60)} min"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class ProgressLog:
    """Logs the progress of a job of `total` steps when a line is due (see the module docstring)."""

    def __init__(
        self,
        description: str,
        total: int,
        *,
        every_seconds: float = EVERY_SECONDS,
        every_fraction: float = EVERY_FRACTION,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.description, self.total, self.clock = description, total, clock
        self.every_seconds = every_seconds
        self.step = max(1, math.ceil(total * every_fraction))
        self.done = 0
        self.current = ""
        self.began = self.last = clock()
        self.next_done = self.step
        logger.info("%s: %d to do", description, total)

    def advance(self, n: int = 1, current: str = "") -> None:
        self.done += n
        self.current = current or self.current
        now = self.clock()
        if self.done >= self.total or (self.done < self.next_done and now - self.last < self.every_seconds):
            return  # the last line is written by `finish`
        self.last, self.next_done = now, (self.done // self.step + 1) * self.step
        elapsed = now - self.began
        rate = self.done / elapsed if elapsed > 0 else 0.0
        left = f"about {duration((self.total - self.done) / rate)} left" if rate > 0 else "time left unknown"
        logger.info(
            "%s: %d/%d (%d%%)%s, %s/s, %s",
            self.description,
            self.done,
            self.total,
            100 * self.done // self.total,
            f", {self.current}" if self.current else "",
            f"{rate:.3g}",
            left,
        )

    def finish(self) -> None:
        elapsed = self.clock() - self.began
        rate = f", {self.done / elapsed:.3g}/s" if elapsed > 0 else ""
        how = "done in" if self.done >= self.total else "stopped after"
        logger.info("%s: %d/%d %s %s%s", self.description, self.done, self.total, how, duration(elapsed), rate)


class Tracker:
    """Advances a rich bar task, or a ProgressLog, or nothing."""

    def __init__(self, bar: Any = None, task: Any = None, log: ProgressLog | None = None) -> None:
        self.bar, self.task, self.log = bar, task, log

    def advance(self, n: int = 1, current: str = "") -> None:
        """`n` more steps done; `current` names what is being worked on (shown on the bar and in log lines)."""
        if self.bar is not None:
            self.bar.update(self.task, advance=n, **({"description": current} if current else {}))
        if self.log is not None:
            self.log.advance(n, current)


@contextmanager
def tracker(description: str, total: int, *, show: bool, transient: bool = False) -> Iterator[Tracker]:
    """A Tracker for a job of `total` steps: a rich bar (on stderr) on a terminal, log lines otherwise, nothing
    when not `show` or there is nothing to do."""
    if not show or total <= 0:
        yield Tracker()
        return
    console = make_console(stderr=True)
    if not console.is_terminal or _logs_only.get():
        log = ProgressLog(description, total)
        yield Tracker(log=log)
        log.finish()
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn(f"[bold]{description}[/bold] {{task.description}}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=transient) as bar:
        yield Tracker(bar, bar.add_task("", total=total))


@contextmanager
def in_logs_only() -> Iterator[None]:
    """Within it (in this thread), progress is shown as log lines even on a terminal."""
    token = _logs_only.set(True)
    try:
        yield
    finally:
        _logs_only.reset(token)


def track(items: Iterable[T], *, total: int, description: str, show: bool) -> Iterator[T]:
    """The items, each counted as one step of the job's progress."""
    with tracker(description, total, show=show) as progress:
        for item in items:
            yield item
            progress.advance()
