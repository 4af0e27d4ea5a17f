"""Secrets never reach a log: one filter, installed by every entry point (python -m bot, python -m rag_chain / cli,
python -m ingest_adilet) on each of its log handlers.

A filter on a handler sees every record that handler writes, whichever library's logger made it (PTB's setWebhook
debug line, an HTTP client's error, a model server's error body echoing the key), and rewrites its message, its
arguments and its exception text before any formatter runs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

REDACTED = "[REDACTED]"


class RedactSecrets(logging.Filter):
    """Replaces each secret in a record's message (arguments merged in), exception text and stack."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        # longest first: a secret that contains another (a URL and its password) is replaced whole
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.secrets:
            return True
        record.msg, record.args = self.redact(record.getMessage()), None
        if record.exc_info and not record.exc_text:  # formatted here once; formatters reuse exc_text
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return True


def redact_logs(secrets: Iterable[str], handlers: Iterable[logging.Handler]) -> None:
    """Install one RedactSecrets on each of an entry point's handlers (replacing one installed before)."""
    redacting = RedactSecrets(secrets)
    for handler in handlers:
        handler.filters = [f for f in handler.filters if not isinstance(f, RedactSecrets)]
        handler.addFilter(redacting)
