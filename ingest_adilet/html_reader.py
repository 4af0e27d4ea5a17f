"""Read an adilet page's law text into lines, in document order, each part tagged by what the page says it is.

Lines are cut at `<br>` and block elements; a part is law text, a link, an amendment footnote (`span.note`,
`p.note`) or a red editor's note (`<font color="#FF0000">`). Headings — `<h3>` elements and bold-only paragraphs —
become lines of their own holding the heading's text (several levels may share one element). Reading stops at the
site chrome after the law text; the President's signature block is skipped. `html_articles` assembles the lines
into articles.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Literal

from bs4 import NavigableString, Tag
from bs4.element import Comment, Declaration, Doctype, ProcessingInstruction

from ingest_adilet.headings import clean, match_article_heading

logger = logging.getLogger(__name__)

_RED = re.compile(r"^#?ff0000$", re.IGNORECASE)
_SIGNATURE = re.compile(r"^(?:Президент\s+Республики\s+Казахстан|Қазақстан\s+Республикасының\s+Президенті)\b")

_BLOCK = frozenset(
    {
        "p",
        "div",
        "table",
        "tr",
        "td",
        "th",
        "li",
        "ul",
        "ol",
        "h1",
        "h2",
        "h4",
        "h5",
        "h6",
        "blockquote",
        "section",
        "article",
        "center",
        "pre",
        "dl",
        "dt",
        "dd",
    }
)
_SKIP = frozenset({"script", "style", "noscript", "head", "title", "iframe", "svg", "button", "form"})

Kind = Literal["text", "link", "note", "editor"]


def read_lines(container: Tag) -> list[Line]:
    """The law text under `container` as lines, up to the site chrome."""
    reader = _Reader()
    reader.walk(container, "text")
    reader.flush()
    return reader.lines


def _is_chrome(tag: Tag) -> bool:
    """Site chrome after the law text: share buttons, latest and popular documents, footer."""
    classes = tag.get("class") or ()
    return ("container_omega" in classes) or tag.get("id") in ("footer", "footer_top")


def _is_red(tag: Tag) -> bool:
    if tag.name != "font":
        return False
    color = str(tag.get("color") or "").strip()
    return bool(_RED.match(color))


@dataclass
class Line:
    """One visual line of the law text: its tagged parts, the anchors on it, and whether it is a heading."""

    parts: list[tuple[str, Kind]] = field(default_factory=list)
    anchors: list[str] = field(default_factory=list)
    heading: list[str] | None = None  # the heading's own lines (split at <br>) when this is a heading

    def text(self, *kinds: Kind) -> str:
        """The text of the parts of the given kinds; the other parts leave a space so words stay apart."""
        return clean("".join(t if k in kinds else " " for t, k in self.parts))

    def has(self, kind: Kind) -> bool:
        return any(k == kind and t.strip() for t, k in self.parts)


class _Reader:
    """Walks the law container in document order and cuts it into `Line`s; stops at the site chrome."""

    def __init__(self) -> None:
        self.lines: list[Line] = []
        self.current = Line()
        self.stopped = False

    def flush(self) -> None:
        """End the current line; an empty one passes its anchors on (an anchor alone marks what follows)."""
        line = self.current
        if any(t.strip() for t, _ in line.parts):
            self.lines.append(line)
            self.current = Line()
        else:
            self.current = Line(anchors=line.anchors)

    def walk(self, node: Tag, kind: Kind) -> None:
        for child in node.children:
            if self.stopped:
                return
            if isinstance(child, (Comment, Declaration, Doctype, ProcessingInstruction)):
                continue
            if isinstance(child, NavigableString):
                self.current.parts.append((str(child), kind))
                continue
            if not isinstance(child, Tag) or child.name in _SKIP:
                continue
            if _is_chrome(child):
                self.stopped = True
                return
            if child.name == "br":
                self.flush()
                continue
            if child.name == "table" and _is_signature(child):
                continue
            if child.name == "h3" or (child.name == "p" and _is_bold_heading(child)):
                self.flush()
                self._heading(child)
                continue
            if child.name == "a" and child.get("name"):
                self.current.anchors.append(str(child["name"]))
            child_kind: Kind = kind
            if _is_red(child):
                child_kind = "editor"
            elif "note" in (child.get("class") or ()):
                child_kind = "note"
            elif child.name == "a" and kind == "text":
                child_kind = "link"
            block = child.name in _BLOCK
            if block:
                self.flush()
                if child.get("id"):
                    self.current.anchors.append(str(child["id"]))
            self.walk(child, child_kind)
            if block:
                self.flush()

    def _heading(self, tag: Tag) -> None:
        """A heading element: its lines (several levels may share one <h3>, parted by <br>) and anchors."""
        inner = _Reader()
        inner.walk(tag, "text")
        inner.flush()
        anchors = [str(tag["id"])] if tag.get("id") else []
        texts: list[str] = []
        for line in (*inner.lines, inner.current):
            anchors += line.anchors
            # a footnote or red note inside a heading is not part of it
            if text := line.text("text", "link"):
                texts.append(text)
        if texts:
            self.lines.append(Line(anchors=anchors + self.current.anchors, heading=texts))
            self.current = Line()
        elif anchors:
            self.current.anchors += anchors


def _is_signature(table: Tag) -> bool:
    """The President's signature block closing a law («Президент Республики Казахстан Н. НАЗАРБАЕВ»)."""
    text = clean(table.get_text(" "))
    return len(text) < 200 and _SIGNATURE.match(text) is not None


def _is_bold_heading(p: Tag) -> bool:
    """A paragraph that is a heading: all its text is bold, or it opens with a bold article heading."""
    bolds = [d for d in p.descendants if isinstance(d, Tag) and d.name in ("b", "strong")]
    if not bolds:
        return False
    bold_text = clean(" ".join(b.get_text(" ") for b in bolds))
    if not bold_text:
        return False
    if bold_text == clean(p.get_text(" ")):
        return True
    first = next((c for c in p.children if not (isinstance(c, NavigableString) and not c.strip())), None)
    return first is bolds[0] and match_article_heading(bold_text) is not None
