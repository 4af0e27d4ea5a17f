"""Text from outside (argv, Telegram updates, JSON) made safe for every component before it is used or stored."""

from __future__ import annotations

import re
import unicodedata

# C0/C1 controls but tab and newlines (a NUL would also cut the text short inside the C embedder), and invisible
# format characters that split words (soft hyphen, zero-width space and joiners, direction marks, BOM).
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]+")
_INVISIBLE_RE = re.compile(r"[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]+")


def clean_text(text: str) -> str:
    """Text from outside made safe for every component: unpaired surrogates (invalid UTF-8 that Python read
    from argv or JSON as "\\udcff") become U+FFFD, controls a space, invisible format characters nothing; NFC.

    A correctly paired surrogate (an emoji sent as two JSON escapes) becomes its character."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    text = _INVISIBLE_RE.sub("", _CONTROL_RE.sub(" ", text))
    return unicodedata.normalize("NFC", text)
