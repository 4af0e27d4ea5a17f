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
- A sentence must state the norms of the sources it cites (all sources when it cites none) as they do
  (answer.norms): a predicate it negates that they state («не наказывается» for «наказывается», «жазаланбайды»
  for «жазаланады») or the reverse, a punishment they do not name («смертной казнью»), or a figure with a unit
  they do not give («до 12 лет», «1200 МРП»; numbers of the question aside) contradicts them, and one such
  sentence fails the check: a reversed or harsher norm is worse than a loose sentence. Polarity is judged
  against sources in the sentence's language; punishments and figures against any.
- A sentence (or line) with a link that is not exactly a given source's adilet link (answer.links: URLs, bare
  domains, e-mail addresses, markdown links, @usernames) is dropped from the text shown (`Grounding.text`), and
  the rest is checked as if the model had not written it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from answer.lexical import TermSet, coverage
from answer.links import drop_foreign_sentences
from answer.norms import NormFacts, conflicts
from answer.records import Source
from answer.templates import TEMPLATE_NAMES, load_phrases
from config import Settings
from corpus.legal import CitedRef, cited_refs
from corpus.legal.registry import CRIMINAL_CODE_ID
from corpus.records import Lang
from retrieval.analyzer import analyze, detect_lang

logger = logging.getLogger(__name__)

MIN_JUDGED_TERMS = 3  # shorter sentences (headings, «Наказание:») are not judged
MAX_UNSUPPORTED_SHARE = 0.5

_SID_RE = re.compile(r"\[\s*(S\s*\d+(?:\s*[,;]\s*S\s*\d+)*)\s*\]", re.I)
_QUOTE_RE = re.compile(r"«[^»]*»|\"[^\"]*\"|“[^”]*”")
_SENTENCE_RE = re.compile(r"(?<=[.!?…])\s+|\n+")


@dataclass(frozen=True)
class Grounding:
    """The verdict on one answer, and what it is based on."""

    ok: bool
    notes: tuple[str, ...]
    cited: tuple[str, ...]  # source ids the answer cites, directly or by article reference
    unknown_citations: tuple[str, ...]  # «[S9]», «статья 190 УК»: cited but not among the sources
    unsupported_sentences: tuple[str, ...]
    contradicting: tuple[str, ...] = ()  # sentences that reverse a norm or add a punishment or figure
    text: str = ""  # the answer as it may be shown: without the sentences that carry a foreign link
    dropped_links: tuple[str, ...] = ()  # links the model wrote that are not a source's


def _sids(text: str) -> list[str]:
    """Source ids cited as [S1], [S1, S2], [s 3], in order."""
    return [sid.replace(" ", "").upper() for m in _SID_RE.finditer(text) for sid in re.split(r"\s*[,;]\s*", m.group(1))]


def _resolve(ref: CitedRef, sources: Sequence[Source]) -> tuple[list[Source], list[str]]:
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
def _instruction_terms(prompts_dir: Path, lang: Lang) -> TermSet:
    """Words the prompt asked the model to use («объект», «субъективная сторона»): not invented by it."""
    names = ["rules", *TEMPLATE_NAMES]
    text = "\n".join((prompts_dir / f"{n}.{lang}.txt").read_text(encoding="utf-8") for n in names)
    return TermSet.of(text, lang)


def strip_disclaimer(text: str, disclaimer: str) -> str:
    """The text without the disclaimer, however its whitespace was changed."""
    words = re.sub(r"\s+", " ", disclaimer).strip().split(" ")
    return re.sub(r"\s+".join(map(re.escape, words)), " ", text, flags=re.I)


def check_grounding(
    answer_text: str,
    sources: Sequence[Source],
    *,
    lang: Lang,
    is_criminal: bool,
    settings: Settings,
    question: str = "",
) -> Grounding:
    """Check a model's answer against its sources (see the module docstring for the rules)."""
    shown, dropped = drop_foreign_sentences(answer_text, (s.url for s in sources if s.url))
    body = strip_disclaimer(shown, load_phrases(settings, lang).disclaimer)
    by_id = {s.source_id: s for s in sources}
    notes: list[str] = []
    failed = False
    cited: dict[str, None] = {}
    unknown: list[str] = []
    if dropped:
        notes.append(f"dropped the sentences with links that are not a source's: {', '.join(dropped)}")

    for sid in _sids(body):
        if sid in by_id:
            cited[sid] = None
        else:
            unknown.append(f"[{sid}]")
    for ref in cited_refs(body):
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
    contradicting, reasons = _contradicting(body, sources, by_id, lang=lang, question=question)
    if contradicting:
        failed = True
        notes.append(f"{len(contradicting)} sentences contradict their sources: {'; '.join(reasons)}")
    if judged == 0 and sources and not any(s.lang == lang for s in sources):
        notes.append("lexical support not checked: no source in the answer's language")

    return Grounding(
        not failed,
        tuple(notes),
        tuple(cited),
        tuple(dict.fromkeys(unknown)),
        tuple(unsupported),
        tuple(contradicting),
        shown,
        dropped,
    )


def _contradicting(
    body: str, sources: Sequence[Source], by_id: dict[str, Source], *, lang: Lang, question: str
) -> tuple[list[str], list[str]]:
    """Sentences that state a norm otherwise than the sources they cite, and how (answer.norms.conflicts)."""
    if not sources:
        return [], []
    facts = {s.source_id: NormFacts.of(f"{s.citation()}\n{s.snippet}", s.lang) for s in sources}
    asked = NormFacts.of(question, lang)
    out: list[str] = []
    reasons: list[str] = []
    for sentence in _SENTENCE_RE.split(body):
        text = _SID_RE.sub(" ", sentence)
        if not text.strip():
            continue
        cited = [by_id[i] for i in _sids(sentence) if i in by_id] or list(sources)
        every = same = None
        for s in cited:
            every = facts[s.source_id] if every is None else every | facts[s.source_id]
            if s.lang == lang:
                same = facts[s.source_id] if same is None else same | facts[s.source_id]
        assert every is not None
        if found := conflicts(NormFacts.of(text, lang, sentence=True), every, same_lang=same, question=asked):
            out.append(sentence.strip())
            reasons += found
    return out, list(dict.fromkeys(reasons))


def _unsupported(
    body: str,
    sources: Sequence[Source],
    by_id: dict[str, Source],
    *,
    lang: Lang,
    question: str,
    settings: Settings,
) -> tuple[list[str], int]:
    """Sentences whose terms the sources hardly contain, and how many sentences were judged."""
    same_lang = [s for s in sources if s.lang == lang]
    if not same_lang:
        return [], 0
    terms_of = {s.source_id: TermSet.of(f"{s.citation()}\n{s.snippet}", s.lang) for s in same_lang}
    given = _instruction_terms(settings.prompts_dir, lang) | TermSet.of(question, lang)
    everything = given
    for t in terms_of.values():
        everything = everything | t
    unsupported: list[str] = []
    judged = 0
    for sentence in _SENTENCE_RE.split(body):
        terms = [t for t in analyze(_SID_RE.sub(" ", sentence), lang) if not t.isdigit()]
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
