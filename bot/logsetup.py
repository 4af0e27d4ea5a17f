"""Logging for the bot's entry point: quiet HTTP request lines (their URLs hold the token), redact secrets."""

from __future__ import annotations

import logging
from collections.abc import Iterable

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# httpx logs every request at INFO as "HTTP Request: POST https://api.telegram.org/bot<TOKEN>/getUpdates".
NOISY_LOGGERS = ("httpx", "httpcore", "apscheduler")


class RedactingFormatter(logging.Formatter):
    """Replaces each secret in the formatted record, tracebacks included."""

    def __init__(self, fmt: str, secrets: Iterable[str]) -> None:
        super().__init__(fmt)
        self.secrets = [s for s in secrets if s]

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        for secret in self.secrets:
            text = text.replace(secret, "[REDACTED]")
        return text


def quiet_noisy_loggers() -> None:
    """Raise the HTTP client loggers to WARNING so request URLs (and the token in them) are not logged."""
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def configure_logging(verbose: bool, secrets: Iterable[str] = ()) -> None:
    """INFO (DEBUG with `verbose`, which also logs users' texts) to stderr, with secrets redacted."""
    handler = logging.StreamHandler()
    handler.setFormatter(RedactingFormatter(FORMAT, secrets))
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[handler])
    if not verbose:
        quiet_noisy_loggers()
