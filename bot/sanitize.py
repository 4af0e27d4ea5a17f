"""Text from outside (Telegram updates, error messages) made safe to encode before it is used or stored."""

from __future__ import annotations

REPLACEMENT = "\ufffd"


def clean_text(text: str) -> str:
    """`text` with every unpaired surrogate replaced by U+FFFD, so it always encodes as UTF-8.

    Telegram's JSON may carry escapes like "\\udcff" that decode to lone surrogates (invalid UTF-8 read with
    surrogateescape looks the same); sqlite3, httpx and the embedder raise UnicodeEncodeError on them.
    A correctly paired surrogate (an emoji written as two escapes) becomes its character.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text
