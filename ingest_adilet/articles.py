"""Build an `Article` from the raw lines of one article: law kept, footnotes and editor's notes moved out.

The lines are what BeautifulSoup's `get_text("\\n")` gives for the article's body (the plain-text snapshots
are exactly that): a blank line or an indented line (adilet indents paragraphs with &nbsp;) starts a new
paragraph, and any other line continues the previous one — `get_text("\\n")` broke it around a link
(«от 02.07.2021 \\n№ 62-VII\\n (вводится …)»), so the pieces are joined back as they are.
An element of `lines` may hold several lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from corpus.records import Article, Lang, Status
from ingest_adilet.headings import clean

# «Сноска. Статья 188 с изменениями …» (also «Сноска:», «Сноска ,»); Kazakh «Ескерту. 8-бапқа өзгеріс …».
# «Ескертулер.»/«Ескертпе.» are Kazakh law notes («Примечания.»), not footnotes: the marker must be
# followed by punctuation.
FOOTNOTE = re.compile(r"^(?:Сноска|Ескерту)\s*[.,:]|^Сноска\s+[А-ЯЁ]")
# Editor's notes in red: «Примечание ИЗПИ!» / «Примечание РЦПИ!» (Russian), «ЗҚАИ-ның ескертпесі!» /
# «РҚАО-ның ескертпесі!» (Kazakh), each governing the paragraph after it; «Вниманию пользователей!» likewise.
EDITOR_NOTE = re.compile(
    r"^(?:Примечание\s+(?:ИЗПИ|РЦПИ)|(?:ЗҚАИ|РҚАО)\s*-\s*ның\s+ескертпесі|Вниманию\s+пользователей"
    r"|Қолданушылар\s+назарына)\s*!?"
)
# «Примечание. См. нормативное постановление Конституционного Суда …» is the editor's pointer to case law,
# not a note of the law itself (which «Примечание.»/«Примечания.» otherwise are, and are kept); so is the
# red «Нормативным постановлением Конституционного Суда РК от … признан …» (Kazakh «ҚР Конституциялық Сотының
# … нормативтік қаулысымен …»).
EDITOR_POINTER = re.compile(
    r"^Примечани[ея]\s*[.:]\s*См\.|^Нормативным\s+постановлением\s+Конституционного\s+Суда"
    r"|^(?:ҚР\s+)?Конституциялық\s+Сотының\s.{0,60}?нормативтік\s+қаулысымен"
)
REPEAL = re.compile(
    r"исключен[аоы]?\b|утратил[аои]?\s+силу|действовал[аои]?\s+до\b|алып\s+тасталды|алынып\s+тасталды"
    r"|күші\s+жойылды",
    re.IGNORECASE,
)
# A repeal note closing a heading: «Статья 23. Особые условия … (исключена Законом РК от 7 мая 2007 …)».
_TITLE_REPEAL = re.compile(
    r"\s*\(\s*(?:исключен[аоы]?\b|утратил[аои]?\s+силу|алып\s+тасталды|алынып\s+тасталды)[^()]*\)?\s*$",
    re.IGNORECASE,
)
# A paragraph that is only a repeal note: «(исключена Законом РК от …)», «Статья 117 исключена …»,
# «Алып тасталды …».
_REPEAL_ONLY = re.compile(
    r"^\(?\s*(?:(?:Статья|Статьи)\s+[\d\s,\-–и]+\s+)?(?:исключен[аоы]?\b|утратил[аои]?\s+силу)"
    r"|^\(?\s*(?:[\d\-–\s]+-(?:бап|баптар)\s+)?(?:алып\s+тасталды|алынып\s+тасталды|күші\s+жойылды)",
    re.IGNORECASE,
)
# The article an editor's note speaks of: «Статья 214 предусматривается …», «29-1-бап жаңа редакцияда …».
_ABOUT_ARTICLE = re.compile(r"^(?:Стать[яюи]\s+(\d+(?:-\d+)*)|(\d+(?:-\d+)*)-бап)(?![\d-])")
_MARKER = re.compile(r"^(?:Сноска|Ескерту)\s*[.,:]?\s*")


def raw_lines(lines: Iterable[str]) -> list[str]:
    """Split elements that hold several lines; the result has one text line per element."""
    return [piece for line in lines for piece in line.split("\n")]


def starts_paragraph(line: str) -> bool:
    """Whether a non-blank raw line begins a paragraph of its own (it is indented) or continues one."""
    return line.startswith("\xa0") or line.startswith("  ") or line.startswith("\t")


def paragraphs(lines: Iterable[str]) -> list[str]:
    """Group raw lines into clean paragraphs, joining the pieces of a paragraph that links broke apart."""
    out: list[str] = []
    current: list[str] = []
    for line in raw_lines(lines):
        if not line.strip():
            if current:
                out.append(clean("".join(current)))
                current = []
            continue
        if current and starts_paragraph(line):
            out.append(clean("".join(current)))
            current = []
        current.append(line)
    if current:
        out.append(clean("".join(current)))
    return [p for p in out if p]


def is_footnote(paragraph: str) -> bool:
    """An amendment footnote («Сноска. …», «Ескерту. …»): history, not law."""
    return bool(FOOTNOTE.match(clean(paragraph)))


def is_editor_note(paragraph: str) -> bool:
    """An editor's note header («Примечание ИЗПИ!», «ЗҚАИ-ның ескертпесі!») or pointer («Примечание. См.»)."""
    text = clean(paragraph)
    return bool(EDITOR_NOTE.match(text) or EDITOR_POINTER.match(text))


def _note_header_only(paragraph: str) -> bool:
    m = EDITOR_NOTE.match(paragraph)
    return m is not None and not paragraph[m.end() :].strip()


def split_notes(paras: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """Sort paragraphs into (law, footnotes, editor's notes); a bare note header takes the next paragraph."""
    law: list[str] = []
    footnotes: list[str] = []
    notes: list[str] = []
    i = 0
    while i < len(paras):
        p = paras[i]
        if is_footnote(p):
            footnotes.append(p)
        elif EDITOR_POINTER.match(p):
            notes.append(p)
        elif EDITOR_NOTE.match(p):
            if _note_header_only(p) and i + 1 < len(paras) and not _is_note_start(paras[i + 1]):
                i += 1
                p = f"{p} {paras[i]}"
            notes.append(p)
        else:
            law.append(p)
        i += 1
    return law, footnotes, notes


def _is_note_start(paragraph: str) -> bool:
    return is_footnote(paragraph) or is_editor_note(paragraph)


def trailing_editor_note(lines: Sequence[str], next_number: str) -> int:
    """Index in `lines` where a trailing editor's note about article `next_number` begins, else len(lines).

    On adilet a note about article N+1 («Примечание ИЗПИ! Статья 214 предусматривается в редакции …») stands
    just before N+1's heading, so it arrives at the end of article N's lines; the parser hands it to N+1.
    A note about N itself («Статью 213 предусматривается дополнить …») stays.
    """
    raw = raw_lines(lines)
    end = len(raw)
    while end and not raw[end - 1].strip():
        end -= 1
    # Walk back over at most two paragraphs: the note's header and the paragraph it governs.
    starts: list[int] = []
    i = end - 1
    while i >= 0 and len(starts) < 2:
        if raw[i].strip() and (i == 0 or not raw[i - 1].strip() or starts_paragraph(raw[i])):
            starts.append(i)
        i -= 1
    for start in starts:
        m = EDITOR_NOTE.match(clean(raw[start]))
        if m:
            note = clean(clean(raw[start])[m.end() :] + " " + " ".join(raw[start + 1 : end]))
            about = _ABOUT_ARTICLE.match(note)
            return start if about and next_number in about.groups() else len(raw)
    return len(raw)


def repeal_note(paragraph: str) -> str:
    """A repeal footnote without its «Сноска.» marker: «Статья 47 исключена Законом РК от …»."""
    return _MARKER.sub("", paragraph, count=1)


def build_article(
    doc_id: str,
    lang: Lang,
    number: str,
    title: str,
    lines: Iterable[str],
    path: Sequence[str] = (),
    url: str = "",
    edition_date: str | None = None,
) -> Article:
    """One `Article` from its heading parts and raw body lines (see the module docstring), with its hash."""
    title = clean(title)
    law, footnotes, notes = split_notes(paragraphs(lines))
    status: Status = "in_force"
    # A heading whose title is the repeal note: «Статья 95. (Статья 95 исключена - Законом РК от …)».
    if title and _REPEAL_ONLY.match(title.lstrip("(")) or title.startswith("(") and REPEAL.search(title):
        law.insert(0, title.strip("() ").strip())
        title = ""
    elif m := _TITLE_REPEAL.search(title):
        law.insert(0, m.group(0).strip(" ()"))
        title = title[: m.start()].strip()
    if not law:
        repeals = [repeal_note(f) for f in footnotes if REPEAL.search(f)]
        if repeals:
            status = "repealed"
            law = repeals[:1]
    elif all(_REPEAL_ONLY.match(p) for p in law):
        status = "repealed"
    return Article(
        doc_id=doc_id,
        lang=lang,
        number=number,
        title=title,
        text="\n".join(law),
        path=tuple(path),
        status=status,
        footnotes=tuple(footnotes),
        editor_notes=tuple(notes),
        url=url,
        edition_date=edition_date,
    ).with_hash()
