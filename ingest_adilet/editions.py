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


# A document repealed as a whole says so in the footnote at its head (adilet keeps the text online): «Сноска. Закон
# утратил силу Законом РК от 16.01.2026 № 258-VIII (…), за исключением …», Kazakh «Ескерту. … қоспағанда, Заңның
# күші жойылды – ҚР 16.01.2026 № 258-VIII (…) Заңымен.» An article repealed alone says «Статья 117 исключена» or
# «…-бап алып тасталды» instead, and a transitional provision «признать утратившим силу»: neither matches.
_ACT = r"(?:от\s+)?\d{2}\.\d{2}\.\d{4}\s*(?:г\.\s*)?[№N]\s*[\w-]+"
_REPEALED_RU = re.compile(
    rf"(?P<what>Закон|Кодекс|Конституционный закон)\s+утратил\s+силу\s+(?P<by>(?:[\w-]+\s+){{0,4}}?{_ACT})", re.I
)
_REPEALED_KK = re.compile(rf"(?P<what>Заңның|Кодекстің)\s+күші\s+жойылды\s*[–-]\s*(?P<by>ҚР\s+{_ACT})")
_HEAD_CHARS = 4000  # the head footnotes of a document (its text before them is at most a title)


def repealed_by(text: str, lang: str) -> str | None:
    """The document's own note that it was repealed as a whole, in adilet's words and the text's language («Закон
    утратил силу Законом РК от 16.01.2026 № 258-VIII (кроме отдельных норм)» / «Заңның күші жойылды – ҚР 16.01.2026
    № 258-VIII Заңымен (жекелеген нормаларын қоспағанда)»), read from the head of its text; None when in force."""
    head = " ".join(text[:_HEAD_CHARS].split())
    m = (_REPEALED_KK if lang == "kk" else _REPEALED_RU).search(head)
    if m is None:
        return None
    if lang == "kk":
        # the exceptions come first: «Ескерту. … -баптарды … қоспағанда, Заңның күші жойылды – ҚР … Заңымен»
        note = f"{m.group('what')} күші жойылды – {m.group('by')} Заңымен"
        outlived = "қоспағанда" in head[head.rfind("Ескерту", 0, m.start()) : m.start()]
        return note + (" (жекелеген нормаларын қоспағанда)" if outlived else "")
    note = f"{m.group('what')} утратил силу {m.group('by')}"
    end = head.find("Сноска", m.end())  # the footnote's end: the next one
    outlived = "за исключением" in head[m.end() : end if end >= 0 else None]
    return note + (" (кроме отдельных норм)" if outlived else "")
