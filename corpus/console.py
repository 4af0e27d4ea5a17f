"""Where the commands write: a rich console and a log handler that never hard-wrap when the output is not a terminal.

rich wraps at the terminal's width, and at 80 columns when the output is a pipe or a file; a path or a command in an
error or log line read by a script or a log collector was then cut in two (`--data-dir \\nDIR`). Off a terminal a
line is as long as its content (tables as wide as their cells) and logs are plain timestamped records; on a
terminal the output stays rich.
"""

from __future__ import annotations

import logging

from rich.console import Console
from rich.logging import RichHandler

# Width off a terminal: wide enough for any table row, which rich lays out to its content, never padded to this.
UNWRAPPED_WIDTH = 100_000
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def make_console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr): rich on a terminal; otherwise no colour and no hard line breaks."""
    console = Console(stderr=stderr)
    if console.is_terminal:
        return console
    return Console(stderr=stderr, soft_wrap=True, width=UNWRAPPED_WIDTH)


def log_handler(console: Console) -> logging.Handler:
    """A RichHandler on `console` when it is a terminal, else one plain line per record on its stream."""
    if console.is_terminal:
        return RichHandler(console=console, show_time=False, show_path=False)
    handler = logging.StreamHandler(console.file)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    return handler
