"""Errors whose message is safe to show to the user and says how to fix the problem."""


class UserError(Exception):
    """Base class: `str(err)` is shown to the user as it is."""


class IngestError(UserError):
    """A document could not be fetched or parsed; the message names the document."""


class IndexNotReady(UserError):
    """The corpus or index is missing or stale; the message says which command builds it."""


class QAError(UserError):
    """The question could not be answered; the message is safe to show to the user."""
