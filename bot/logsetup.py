"""Logging for the bot's entry point: quiet HTTP request lines (their URLs hold the token), redact secrets."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from corpus.redact import redact_logs

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# httpx logs every request at INFO as "HTTP Request: POST https://api.telegram.org/bot<TOKEN>/getUpdates".
NOISY_LOGGERS = ("httpx", "httpcore", "apscheduler")


def quiet_noisy_loggers() -> None:
    """Raise the HTTP client loggers to WARNING so request URLs (and the token in them) are not logged."""
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def configure_logging(verbose: bool, secrets: Iterable[str] = ()) -> None:
    """INFO (DEBUG with `verbose`, which also logs users' texts) to stderr, with secrets redacted."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(FORMAT))
    redact_logs(secrets, [handler])  # on the root handler, which every library's records reach
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[handler])
    if not verbose:
        quiet_noisy_loggers()
