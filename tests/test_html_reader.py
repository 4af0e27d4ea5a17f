"""html_reader alone: the real saved Criminal Code page read into tagged lines, before any article is assembled."""

from __future__ import annotations

from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from ingest_adilet.html_reader import Line, read_lines

UK = "K1400000226"


@pytest.fixture(scope="module")
def uk_lines(shared_dir: Path) -> list[Line]:
    html = (shared_dir / "corpus" / "html" / f"{UK}.html").read_text(encoding="utf-8")
    page = BeautifulSoup(html, "lxml")
    assert page.body is not None
    return read_lines(page.body)  # the whole page: the site's header, the law text, then the chrome after it


def test_headings_are_lines_of_their_own_with_their_anchor(uk_lines: list[Line]) -> None:
    [at] = [i for i, line in enumerate(uk_lines) if line.heading == ["Статья 188. Кража"]]
    heading, first = uk_lines[at], uk_lines[at + 1]
    assert heading.anchors == ["z701"] and not heading.parts
    assert (
        first.heading is None and first.text("text", "link") == "1. Кража, то есть тайное хищение чужого имущества, –"
    )
    before = uk_lines[at - 1]  # the footnote closing article 187: a `note` span with its law's link inside
    assert before.has("note") and before.has("link") and not before.has("text")
    assert before.text("note", "link").startswith("Сноска. Статья 187 с изменениями")


def test_every_part_is_tagged_and_reading_stops_at_the_site_chrome(uk_lines: list[Line]) -> None:
    kinds = {k for line in uk_lines for t, k in line.parts if t.strip()}
    assert kinds == {"text", "link", "note", "editor"}
    editor = [line.text("editor") for line in uk_lines if line.has("editor")]
    assert editor and any(t.startswith("Примечание ИЗПИ!") for t in editor)
    assert sum(line.heading is not None for line in uk_lines) > 503  # every article, and the parts and chapters
    last = uk_lines[-1]
    assert last.text("note", "link").startswith("Сноска. Статья 467 с изменениями")
    everything = " ".join(line.text("text", "link", "note", "editor") for line in uk_lines)
    for chrome in ("Последние документы", "Документы по состоянию на", "Совет: в браузере", "Н. НАЗАРБАЕВ"):
        assert chrome not in everything
