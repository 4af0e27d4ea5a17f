"""Does a model's answer rest on its sources? Citations, the Criminal Code, language, and lexical support.

Decisions (documented in the report and tested):
- Every [S#] must name a given source, and every written article reference («статья 188 УК», «ст. 188»,
  «188-бап», «ҚК-нің 188-бабы») must be an article among the sources (of the named code when one is named).
  A reference the sources only mention inside their text is still not a source: it fails.
- The answer must cite at least one source when there are sources.
- A crime question must cite at least one Criminal Code article.
- The answer (without quotes «…», citations and the disclaimer) must be in the question's language.
- A sentence of three or more terms is unsupported when less than `grounding_min_overlap` of its stemmed
  terms occur in its cited sources (all sources when it cites none), the question, or the prompt's
  instructions. Sentences are judged only against sources in the answer's language. The check fails when
  more than half of the judged sentences are unsupported: one loose sentence is a note, a mostly invented
  answer is a failure.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from answer.lexical import TermSet, coverage
from answer.records import Source
from answer.templates import TEMPLATE_NAMES, load_phrases
from config import ADILET_SOURCES, CRIMINAL_CODE_ID, Settings
from retrieval.analyzer import analyze, detect_lang, normalize

logger = logging.getLogger(__name__)

MIN_JUDGED_TERMS = 3  # shorter sentences (headings, «Наказание:») are not judged
MAX_UNSUPPORTED_SHARE = 0.5

_NUM = r"\d+(?:-\d+)?"
_RU_LIST = rf"{_NUM}(?:\s*(?:,|и|или|–|—)\s*{_NUM})*"
_KK_LIST = rf"{_NUM}(?:\s*(?:,|және|мен|–|—)\s*{_NUM})*"
# «статья 188», «статьей 188-1», «статьи 188 и 190», «ст. 188», «ст.188».
_RU_REF_RE = re.compile(rf"\b(?:стать(?:я|и|ю|ей|е|ях|ям|ями)|ст\.)\s*({_RU_LIST})")
# «188-бап», «188-1-бабы», «188, 189-баптар».
_KK_REF_RE = re.compile(rf"(?<![\d-])({_KK_LIST})\s*-\s*ба[пб]")
_NUM_RE = re.compile(_NUM)
_SID_RE = re.compile(r"\[\s*(S\s*\d+(?:\s*[,;]\s*S\s*\d+)*)\s*\]", re.I)
_QUOTE_RE = re.compile(r"«[^»]*»|\"[^\"]*\"|“[^”]*”")
_SENTENCE_RE = re.compile(r"(?<=[.!?…])\s+|\n+")
_INFLECTED_NAME = 6
_CODE_WINDOW = 30  # characters between a reference and the code it names («статья 188 Уголовного кодекса»)


@dataclass(frozen=True)
class Grounding:
    """The verdict on one answer, and what it is based on."""

    ok: bool
    notes: tuple[str, ...]
    cited: tuple[str, ...]  # source ids the answer cites, directly or by article reference
    unknown_citations: tuple[str, ...]  # «[S9]», «статья 190 УК»: cited but not among the sources
    unsupported_sentences: tuple[str, ...]


@dataclass(frozen=True)
class _Ref:
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
    alternatives = "|".join(
        re.escape(n) + (r"\w*" if len(n) >= _INFLECTED_NAME else r"(?!\w)") for n in ordered
    )
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


def article_refs(text: str) -> list[_Ref]:
    """Written references to articles, with the code each names when it names one."""
    norm = normalize(text)
    refs = []
    for regex, kazakh in ((_RU_REF_RE, False), (_KK_REF_RE, True)):
        for m in regex.finditer(norm):
            docs = _code_near(norm, m.start(), m.end(), before_first=kazakh)
            refs.append(_Ref(text[m.start() : m.end()].strip(), tuple(_NUM_RE.findall(m.group(1))), docs))
    return refs


def _sids(text: str) -> list[str]:
    """Source ids cited as [S1], [S1, S2], [s 3], in order."""
    return [
        sid.replace(" ", "").upper()
        for m in _SID_RE.finditer(text)
        for sid in re.split(r"\s*[,;]\s*", m.group(1))
    ]


def _resolve(ref: _Ref, sources: Sequence[Source]) -> tuple[list[Source], list[str]]:
    """The sources a reference names, and the numbers it names that no source has."""
    pool = [s for s in sources if ref.docs is None or s.doc_id in ref.docs]
    by_number: dict[str, list[Source]] = {}
    for s in pool:
        by_number.setdefault(s.article, []).append(s)
    hit: list[Source] = []
    missing: list[str] = []
    for number in ref.numbers:
        if number in by_number:
            hit += by_number[number]
            continue
        # «188-190» is a range when the second number is larger: both ends must be sources.
        first, _, second = number.partition("-")
        if second and int(second) > int(first) and first in by_number and second in by_number:
            hit += by_number[first] + by_number[second]
            continue
        missing.append(number)
    return hit, missing


@lru_cache(maxsize=4)
def _instruction_terms(prompts_dir: Path, lang: str) -> TermSet:
    """Words the prompt asked the model to use («объект», «субъективная сторона»): not invented by it."""
    names = ["rules", *TEMPLATE_NAMES]
    text = "\n".join((prompts_dir / f"{n}.{lang}.txt").read_text(encoding="utf-8") for n in names)
    return TermSet.of(text, lang)  # type: ignore[arg-type]


def strip_disclaimer(text: str, disclaimer: str) -> str:
    """The text without the disclaimer, however its whitespace was changed."""
    words = re.sub(r"\s+", " ", disclaimer).strip().split(" ")
    return re.sub(r"\s+".join(map(re.escape, words)), " ", text, flags=re.I)


def check_grounding(
    answer_text: str,
    sources: Sequence[Source],
    *,
    lang: str,
    is_criminal: bool,
    settings: Settings,
    question: str = "",
) -> Grounding:
    """Check a model's answer against its sources (see the module docstring for the rules)."""
    body = strip_disclaimer(answer_text, load_phrases(settings, lang).disclaimer)
    by_id = {s.source_id: s for s in sources}
    notes: list[str] = []
    failed = False
    cited: dict[str, None] = {}
    unknown: list[str] = []

    for sid in _sids(body):
        if sid in by_id:
            cited[sid] = None
        else:
            unknown.append(f"[{sid}]")
    for ref in article_refs(body):
        hit, missing = _resolve(ref, sources)
        cited.update((s.source_id, None) for s in hit)
        if missing:
            unknown.append(ref.text)
    if unknown:
        failed = True
        notes.append(f"cites what is not among the sources: {', '.join(dict.fromkeys(unknown))}")
    if sources and not cited:
        failed = True
        notes.append("cites no source")
    if is_criminal and not any(by_id[sid].doc_id == CRIMINAL_CODE_ID for sid in cited):
        failed = True
        has_uk = any(s.doc_id == CRIMINAL_CODE_ID for s in sources)
        notes.append(f"crime question: no Criminal Code source{' is cited' if has_uk else ''}")

    plain = _SID_RE.sub(" ", _QUOTE_RE.sub(" ", body))
    if plain.strip() and (answer_lang := detect_lang(plain)) != lang:
        failed = True
        notes.append(f"answer is in {answer_lang!r}, the question in {lang!r}")

    unsupported, judged = _unsupported(body, sources, by_id, lang=lang, question=question, settings=settings)
    if unsupported:
        notes.append(f"{len(unsupported)} of {judged} sentences have little support in the sources")
        if len(unsupported) > judged * MAX_UNSUPPORTED_SHARE:
            failed = True
    if judged == 0 and sources and not any(s.lang == lang for s in sources):
        notes.append("lexical support not checked: no source in the answer's language")

    return Grounding(
        not failed, tuple(notes), tuple(cited), tuple(dict.fromkeys(unknown)), tuple(unsupported)
    )


def _unsupported(
    body: str,
    sources: Sequence[Source],
    by_id: dict[str, Source],
    *,
    lang: str,
    question: str,
    settings: Settings,
) -> tuple[list[str], int]:
    """Sentences whose terms the sources hardly contain, and how many sentences were judged."""
    same_lang = [s for s in sources if s.lang == lang]
    if not same_lang:
        return [], 0
    terms_of = {s.source_id: TermSet.of(f"{s.citation()}\n{s.snippet}", s.lang) for s in same_lang}  # type: ignore[arg-type]
    given = _instruction_terms(settings.prompts_dir, lang) | TermSet.of(question, lang)  # type: ignore[arg-type]
    everything = given
    for t in terms_of.values():
        everything = everything | t
    unsupported: list[str] = []
    judged = 0
    for sentence in _SENTENCE_RE.split(body):
        terms = [t for t in analyze(_SID_RE.sub(" ", sentence), lang) if not t.isdigit()]  # type: ignore[arg-type]
        if len(set(terms)) < MIN_JUDGED_TERMS:
            continue
        cited = [by_id[i] for i in _sids(sentence) if i in by_id]
        if cited and not any(s.source_id in terms_of for s in cited):
            continue  # cites only sources in another language: cannot be judged lexically
        reference = everything
        if cited:
            reference = given
            for s in cited:
                if s.source_id in terms_of:
                    reference = reference | terms_of[s.source_id]
        judged += 1
        if coverage(terms, reference) < settings.grounding_min_overlap:
            unsupported.append(sentence.strip())
    return unsupported, judged
