"""Headings of adilet texts: article headings («Статья 188. Кража», «188-бап. Ұрлық») and structural headings.

Shared by the plain-text and the HTML parser. Every function takes one line (or one heading element's text)
and says what it is; an inline reference («в соответствии со статьей 52», «31-баптан») is never a heading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Level = Literal["part", "section", "chapter", "paragraph", "subsection"]

# Outermost first: a new heading of one level closes every deeper one.
LEVELS: tuple[Level, ...] = ("part", "section", "chapter", "paragraph", "subsection")

_WS = re.compile(r"\s+")
_HAS_LATIN = re.compile(r"[A-Za-z]")
_NUM = r"\d+(?:-\d+)*"  # "188", "188-1", "27-3"
_UPPER = "А-ЯЁӘІҢҒҮҰҚӨҺA-Z"

# Russian: «Статья 188. Кража», «Статья 188-1. …», «Статья 1» (the Constitution, no title), «Статья 2 Закон…»
# (no dot, title capitalised). A lowercase word after the number («Статья 285 с изменениями») is a note.
_RU_ARTICLE = re.compile(
    rf"^(?:Статья|СТАТЬЯ)\s+(?P<num>{_NUM})\s*(?:\.\s*(?P<t1>.*)|\s(?P<t2>[{_UPPER}«\"(].*)|$)", re.S
)
# Kazakh: «188-бап. Ұрлық», «188-1-бап. …», «2-бап Заңды …», «31-бап» (title on the next line). «31-баптан»,
# «44-баптың», «62-68-баптар» are references: «бап» must not be followed by a letter.
_KK_ARTICLE = re.compile(
    rf"^(?P<num>{_NUM})\s*-\s*(?:бап|БАП)(?![^\W\d_])\s*(?:\.\s*(?P<t1>.*)|(?P<t2>[{_UPPER}«\"(].*)|$)", re.S
)

_I = "[іiІI]"  # Kazakh «і» is often typed as a Latin «i»
_ROMAN = "[IVXLCІ]+"
_STRUCTURAL: tuple[tuple[Level, re.Pattern[str]], ...] = (
    ("part", re.compile(r"^(?:ОБЩАЯ\s+ЧАСТЬ|ОСОБЕННАЯ\s+ЧАСТЬ|Общая\s+часть|Особенная\s+часть)\s*$")),
    ("part", re.compile(rf"^(?:ЖАЛПЫ|ЕРЕКШЕ|Жалпы|Ерекше)\s+(?:БӨЛ{_I}М|бөл{_I}м)\s*$")),
    ("section", re.compile(rf"^(?:Раздел|РАЗДЕЛ)\s+(?:{_NUM}|{_ROMAN})\b\s*(?:[.:]|$|[А-ЯЁ«\"(])")),
    ("section", re.compile(rf"^(?:{_NUM}|{_ROMAN})\s*-?\s*(?:бөл{_I}м|Бөл{_I}м|БӨЛ{_I}М)(?![^\W\d_])")),
    ("chapter", re.compile(rf"^(?:Глава|ГЛАВА)\s+(?:{_NUM}|{_ROMAN})\b\s*(?:[.:]|$|[А-ЯЁ«\"(])")),
    ("chapter", re.compile(rf"^(?:{_NUM}|{_ROMAN})\s*-?\s*(?:тарау|ТАРАУ)(?![^\W\d_])")),
    ("paragraph", re.compile(rf"^(?:Параграф|ПАРАГРАФ|§)\s*{_NUM}\b\s*(?:[.:]|$|[А-ЯЁ«\"(])")),
    ("paragraph", re.compile(rf"^{_NUM}\s*-?\s*(?:параграф|ПАРАГРАФ)(?![^\W\d_])")),
    # The Civil Code numbers the subdivisions of a paragraph with Roman numerals: «I. Общие положения».
    ("subsection", re.compile(rf"^{_ROMAN}\.\s+[А-ЯЁ]")),
)


@dataclass(frozen=True)
class ArticleHeading:
    """An article heading: its number as a string ("188-1") and its title ("" when the heading has none)."""

    number: str
    title: str


@dataclass(frozen=True)
class StructuralHeading:
    """A part, section, chapter or paragraph heading, e.g. level "chapter", text «Глава 6. Кража»."""

    level: Level
    text: str


_CYR = "А-Яа-яЁёӘәІіҢңҒғҮүҰұҚқӨөҺһ"
# Kazakh pages often type «і» as a Latin «i» inside Cyrillic words («мемлекеттiк»): the embedding model's
# tokenizer then cuts such words into many pieces (a 1500-character chunk grows past 512 tokens).
# Roman numerals written with a Cyrillic «І» («№ 300-VІ») are left as they stand.
_LATIN_WORD = re.compile(r"\w*[A-Za-z]\w*")
_HAS_CYRILLIC = re.compile(rf"[{_CYR}]")
_TO_CYRILLIC = str.maketrans("iIaceopxyABCEHKMOPTXY", "іІасеорхуАВСЕНКМОРТХУ")
_LOOKALIKES = frozenset("iIaceopxyABCEHKMOPTXY")


def _one_script(m: re.Match[str]) -> str:
    word = m.group(0)
    if not _HAS_CYRILLIC.search(word):
        return word
    if all(ch in _LOOKALIKES for ch in word if ch.isascii() and ch.isalpha()):
        return word.translate(_TO_CYRILLIC)
    return word  # a real mix («ТОО KazMunai», «300-VІ») is left alone


def clean(text: str) -> str:
    """Collapse whitespace (adilet indents with &nbsp;), strip, and put look-alike letters in their script."""
    text = _WS.sub(" ", text.replace("\xa0", " ")).strip()
    return _LATIN_WORD.sub(_one_script, text) if _HAS_LATIN.search(text) else text


def match_article_heading(line: str) -> ArticleHeading | None:
    """The article heading a line (or a heading element's text) holds, or None for anything else."""
    text = clean(line)
    m = _RU_ARTICLE.match(text) or _KK_ARTICLE.match(text)
    if not m:
        return None
    title = (m.group("t1") or m.group("t2") or "").strip()
    return ArticleHeading(m.group("num"), title)


def is_article_heading(line: str) -> bool:
    """Whether a line is an article heading («Статья 188. Кража», «188-бап. Ұрлық»), not a reference."""
    return match_article_heading(line) is not None


def match_structural_heading(line: str) -> StructuralHeading | None:
    """The part/section/chapter/paragraph heading a line holds, or None."""
    text = clean(line)
    for level, pattern in _STRUCTURAL:
        if pattern.match(text):
            return StructuralHeading(level, text)
    return None


def is_structural_heading(line: str) -> bool:
    """Whether a line is a part, section, chapter or paragraph heading («Глава 2. …», «3-тарау. …»)."""
    return match_structural_heading(line) is not None


def level_rank(level: Level) -> int:
    """0 for the outermost level (part); deeper levels rank higher."""
    return LEVELS.index(level)


class HeadingPath:
    """The current part/section/chapter titles while a document is read top to bottom."""

    def __init__(self) -> None:
        self._titles: dict[Level, str] = {}

    def enter(self, heading: StructuralHeading) -> None:
        """Open a heading: it replaces the one of its level and closes every deeper level."""
        rank = level_rank(heading.level)
        self._titles = {lv: t for lv, t in self._titles.items() if level_rank(lv) < rank}
        self._titles[heading.level] = heading.text

    def extend(self, level: Level, text: str) -> None:
        """Append a continuation line to the title of an open heading (titles broken over several lines)."""
        if level in self._titles:
            self._titles[level] = clean(f"{self._titles[level]} {text}")

    def current(self) -> tuple[str, ...]:
        return tuple(self._titles[lv] for lv in LEVELS if lv in self._titles)
