"""Links in a model's text: every URL, bare domain, e-mail address, markdown link or @username a Telegram
client would make clickable, and which of them are the sources' own adilet links.

A model's answer is untrusted: a link it writes may lead anywhere («adilet-zan.kz», «adilet.zan.kz.evil.com»,
«[adilet](https://evil.com)»). Only the exact link of a source, or the bare site «adilet.zan.kz» the disclaimer
names, is kept.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

logger = logging.getLogger(__name__)

ADILET_HOST = "adilet.zan.kz"

_CLOSE = r"[.,;:!?»)\]'\"…]+$"  # punctuation after a link ends the sentence, not the link
_SCHEME = r"[a-z][a-z0-9+.-]{1,15}://[^\s<>«»\"]+"
# Any letters in the labels (a Cyrillic «а» in «аdilet.zan.kz» is still a link to a client); a Latin top-level
# domain, or one of the Cyrillic ones.
_CYRILLIC_TLD = "рф|рус|қаз|каз|бел|укр|срб|мкд|мон|орг|ком|онлайн|сайт|дети|москва"
_DOMAIN = rf"(?:[\w-]+\.)+(?:[a-z]{{2,24}}|{_CYRILLIC_TLD})(?![\w-])(?::\d{{1,5}})?(?:[/?#][^\s<>«»\"]*)?"
_EMAIL = r"[\w.+-]+@(?:[\w-]+\.)+[a-z]{2,24}(?![\w-])"
_MENTION = r"(?<![\w@.])@[a-z][a-z0-9_]{3,31}(?![\w@])"
_LINK_RE = re.compile(rf"(?<![\w@.-])(?:{_SCHEME}|{_EMAIL}|{_DOMAIN})|{_MENTION}", re.I)
_MARKDOWN_RE = re.compile(r"\[([^\]\n]{0,300})\]\(\s*([^()\s]+)\s*\)")
# Where a sentence ends (as grounding splits them), keeping what separates them.
_SENTENCE_SPLIT_RE = re.compile(r"((?<=[.!?…])\s+|\n+)")


def links(text: str) -> list[str]:
    """The links in `text` as a client would see them, trailing punctuation cut off."""
    found = [m.group(0) for m in _LINK_RE.finditer(text)]
    return [cut for link in found if (cut := re.sub(_CLOSE, "", link))]


def is_allowed(link: str, allowed: Iterable[str], *, site: bool = False) -> bool:
    """Exactly one of the `allowed` links, or the bare site «adilet.zan.kz» (with https:// and "/" or not);
    with `site`, any https page of adilet.zan.kz."""
    if link in set(allowed):
        return True
    bare = re.sub(r"^https?://", "", link, flags=re.I).rstrip("/")
    if bare.lower() == ADILET_HOST:
        return True
    if not site:
        return False
    try:
        parts = urlsplit(link)
        return parts.scheme == "https" and parts.netloc.lower() == ADILET_HOST and parts.port is None
    except ValueError:
        return False


def foreign_links(text: str, allowed: Iterable[str]) -> list[str]:
    """The links in `text` that are not among `allowed` (a markdown link counts by its target)."""
    allowed = tuple(allowed)
    return [link for link in links(text) if not is_allowed(link, allowed)]


def drop_foreign_sentences(text: str, allowed: Iterable[str]) -> tuple[str, tuple[str, ...]]:
    """`text` without the sentences (or lines) that carry a foreign link, and the links dropped."""
    allowed = tuple(allowed)
    kept: list[str] = []
    dropped: list[str] = []
    pieces = _SENTENCE_SPLIT_RE.split(text)
    for i in range(0, len(pieces), 2):
        sentence, sep = pieces[i], pieces[i + 1] if i + 1 < len(pieces) else ""
        if foreign := foreign_links(sentence, allowed):
            dropped += foreign
            # keep a line break that followed the dropped sentence, not its spaces
            kept.append("\n" * min(sep.count("\n"), 2))
            continue
        kept.append(sentence + sep)
    if not dropped:
        return text, ()
    cleaned = re.sub(r"[^\S\n]+\n", "\n", "".join(kept))
    return re.sub(r"\n{3,}", "\n\n", cleaned).strip(), tuple(dict.fromkeys(dropped))


def unlink(text: str, allowed: Iterable[str], mark: str, *, site: bool = False) -> str:
    """`text` with every foreign link replaced by `mark` (a markdown link keeps its label); with `site`, pages
    of adilet.zan.kz are not foreign."""
    allowed = tuple(allowed)

    def markdown(m: re.Match[str]) -> str:
        return m.group(0) if is_allowed(m.group(2), allowed, site=site) else f"{m.group(1)} {mark}"

    def bare(m: re.Match[str]) -> str:
        link = m.group(0)
        cut = re.sub(_CLOSE, "", link)
        return link if is_allowed(cut, allowed, site=site) else mark + link[len(cut) :]

    return _LINK_RE.sub(bare, _MARKDOWN_RE.sub(markdown, text))
