"""Which edition of a document the corpus holds.

A saved adilet page says it in its footer («Документы по состоянию на: 20.03.2026», html_parser.py): the edition
"as of" that date. The plain-text snapshots have no such line, so the honest proxy is the latest amending act
their footnotes cite («Сноска. … с изменениями, внесенными Законом РК от 16.01.2026 № 259-VIII …», Kazakh
«Ескерту. … – ҚР 16.01.2026 № 259-VIII … Заңымен»): the text includes the amendments up to that date, and is
named as such — «редакция с изменениями по 16.01.2026», never «по состоянию на».

An act's date is the one written right before its number («от 05.11.2022 № 157-VII»); the other dates in a
footnote say when an act takes effect («вводится в действие с 01.01.2023») and are not amendments.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from corpus.records import Article

# DD.MM.YYYY (Kazakh footnotes also write YYYY.MM.DD) right before «№ NNN»: the date of an act.
_ACT_DATE = re.compile(
    r"(?<![\d.])(?:(\d{2})\.(\d{2})\.(\d{4})|(\d{4})\.(\d{2})\.(\d{2}))(?:\s*(?:г\.|ж\.))?\s*[№N]\s*\d"
)


def act_dates(text: str) -> list[tuple[int, int, int]]:
    """(year, month, day) of every act cited with its number in `text`."""
    out = []
    for m in _ACT_DATE.finditer(text):
        day, month, year = (m.group(1), m.group(2), m.group(3)) if m.group(1) else (m.group(6), m.group(5), m.group(4))
        if 1 <= int(month) <= 12 and 1 <= int(day) <= 31:
            out.append((int(year), int(month), int(day)))
    return out


def amended_through(articles: Iterable[Article]) -> str | None:
    """DD.MM.YYYY of the latest amending act the articles' footnotes cite, or None when they cite none."""
    latest = max((d for a in articles for note in a.footnotes for d in act_dates(note)), default=None)
    if latest is None:
        return None
    year, month, day = latest
    return f"{day:02d}.{month:02d}.{year:04d}"
