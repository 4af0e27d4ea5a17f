"""Errors whose message is safe to show to the user and says how to fix the problem."""


class UserError(Exception):
    """Base class: `str(err)` is shown to the user as it is."""


class IngestError(UserError):
    """A document could not be fetched or parsed; the message names the document."""


class IndexNotReady(UserError):
    """The corpus or index is missing or stale; the message says which command builds it."""


class QAError(UserError):
    """The question could not be answered; the message is safe to show to the user."""


class DataDamaged(IndexNotReady):
    """A file of the corpus, index or cache is truncated or overwritten; the message names it and the command
    that rebuilds it."""

    def __init__(self, path: object, problem: str, command: str) -> None:
        super().__init__(f"{path} is damaged ({problem}): run `{command}` to rebuild it.")
        self.path = path
        self.command = command


class AdiletUnreachable(IngestError):
    """No connection to adilet can be made (name resolution failed, connection refused): retrying will not help."""


class ChainUnavailable(UserError):
    """The chain could not be loaded (a damaged or missing build): the message is the operator's (what failed, what
    to run); faces that serve the public show their own plain sentence instead (bot/texts.py "unavailable").
    `new`: this failure was not reported before (faces log `detail` then, once); `retry_in`: seconds until the
    next load attempt."""

    def __init__(self, message: str, *, detail: str, retry_in: float, new: bool) -> None:
        super().__init__(message)
        self.detail = detail
        self.retry_in = retry_in
        self.new = new
