"""Article references in a model's answer («согласно статьям 188, 189 Уголовного кодекса», «Қылмыстық кодекстің
188-1-бабы»), with the code named near each."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from functools import lru_cache

from corpus.lang import normalize
from corpus.legal.registry import ADILET_SOURCES

logger = logging.getLogger(__name__)

# --- an answer's citations --------------------------------------------------------------------------------------

_CITED_NUM = r"\d+(?:-\d+)?"
_CITED_RU_LIST = rf"{_CITED_NUM}(?:\s*(?:,|и|или|–|—)\s*{_CITED_NUM})*"
_CITED_KK_LIST = rf"{_CITED_NUM}(?:\s*(?:,|және|мен|–|—)\s*{_CITED_NUM})*"
# «статья 188», «статьей 188-1», «статьи 188 и 190», «ст. 188», «ст.188».
_CITED_RU_RE = re.compile(rf"\b(?:стать(?:я|и|ю|ей|е|ях|ям|ями)|ст\.)\s*({_CITED_RU_LIST})")
# «188-бап», «188-1-бабы», «188, 189-баптар».
_CITED_KK_RE = re.compile(rf"(?<![\d-])({_CITED_KK_LIST})\s*-\s*ба[пб]")
_CITED_NUM_RE = re.compile(_CITED_NUM)
_INFLECTED_NAME = 6
_CODE_WINDOW = 30  # characters between a reference and the code it names («статья 188 Уголовного кодекса»)


@dataclass(frozen=True)
class CitedRef:
    """An article reference written in an answer."""

    text: str
    numbers: tuple[str, ...]
    docs: frozenset[str] | None  # the named code's documents; None when no code is named


@lru_cache(maxsize=1)
def _code_names() -> tuple[re.Pattern[str], dict[str, frozenset[str]]]:
    """A regex of every alias and short name of the registry, and the documents each one names."""
    names: dict[str, set[str]] = {}
    for s in ADILET_SOURCES:
        for name in (*s.aliases, s.short_ru, s.short_kk):
            names.setdefault(normalize(name), set()).add(s.doc_id)
    # Long names may take a Kazakh case ending («қылмыстық кодекс|тің»); short ones («ук», «ак») stand alone.
    ordered = sorted(names, key=len, reverse=True)
    alternatives = "|".join(re.escape(n) + (r"\w*" if len(n) >= _INFLECTED_NAME else r"(?!\w)") for n in ordered)
    return re.compile(rf"(?<!\w)(?:{alternatives})"), {k: frozenset(names[k]) for k in ordered}


def _code_near(text: str, start: int, end: int, *, before_first: bool) -> frozenset[str] | None:
    pattern, docs = _code_names()
    after = re.split(r"[.;!?\n]", text[end : end + _CODE_WINDOW + 30], maxsplit=1)[0]
    before = re.split(r"[.;!?\n]", text[max(0, start - _CODE_WINDOW - 30) : start])[-1]
    found_after = next((m for m in pattern.finditer(after) if m.start() <= _CODE_WINDOW), None)
    found_before = [m for m in pattern.finditer(before) if len(before) - m.end() <= _CODE_WINDOW]
    candidates = [found_before[-1] if found_before else None, found_after]
    if not before_first:
        candidates.reverse()
    for m in candidates:
        if m is not None:
            return next(v for k, v in docs.items() if m.group(0).startswith(k))  # longest name first
    return None


def cited_refs(text: str) -> list[CitedRef]:
    """Written references to articles in an answer, with the code each names when it names one."""
    norm = normalize(text)
    refs = []
    for regex, kazakh in ((_CITED_RU_RE, False), (_CITED_KK_RE, True)):
        for m in regex.finditer(norm):
            docs = _code_near(norm, m.start(), m.end(), before_first=kazakh)
            refs.append(CitedRef(text[m.start() : m.end()].strip(), tuple(_CITED_NUM_RE.findall(m.group(1))), docs))
    return refs
