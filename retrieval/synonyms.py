"""The packaged synonym map (everyday phrases in Russian and Kazakh → the articles a lawyer would cite) and the
crime vocabulary, matched in a question by stems in any word order."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TypeVar

from pydantic import BaseModel, ConfigDict

from corpus.legal import Mention
from corpus.legal.registry import CRIMINAL_CODE_ID
from corpus.records import Lang
from index.lexicon import KK_PRIVATIVE
from retrieval.analyzer import analyze, has_kazakh_letters, tokenize

logger = logging.getLogger(__name__)

# --- synonyms file (outside data: validated) ---------------------------------------------------


PackagedT = TypeVar("PackagedT", bound=BaseModel)


class SynonymRef(BaseModel):
    """An article a synonym entry points to; title is the corpus heading, checked by the tests."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    doc_id: str
    article: str
    title: str = ""


class SynonymEntry(BaseModel):
    """Everyday phrases (ru/kk) and the articles a lawyer would cite for them."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    topic: str
    phrases_ru: list[str] = []
    phrases_kk: list[str] = []
    refs: list[SynonymRef]
    criminal: bool = False


class SynonymMap(BaseModel):
    """retrieval/data/synonyms.json."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    entries: list[SynonymEntry]


def load_packaged(name: str, model: type[PackagedT]) -> PackagedT:
    """A JSON file of retrieval/data, validated by its model."""
    text = resources.files("retrieval").joinpath(f"data/{name}").read_text(encoding="utf-8")
    return model.model_validate(json.loads(text))


@cache
def load_synonyms() -> SynonymMap:
    """The packaged synonym map."""
    return load_packaged("synonyms.json", SynonymMap)


@dataclass(frozen=True)
class _Phrase:
    stems: tuple[str, ...]
    entry: int
    lang: Lang
    kazakh_only: bool  # has a Kazakh letter, so it can be matched in any question
    starts: str | None = None  # a short Russian noun's: what the question's word must begin with (`_word_start`)


SHORT_STEM = 4  # a one-word Russian noun cut to a stem this short also meets other words' stems (`_word_start`)
_VERB_END = re.compile(r"(?:л|ла|ли|ло|ть|ти|ться|лся|лась|лись)$")


def _word_start(phrase: str, stems: Sequence[str], lang: Lang) -> str | None:
    """For a one-word Russian noun whose stem has at most SHORT_STEM letters, the word less its last letter: the
    stemmer cuts «разбой» (robbery) and «разбил» (broke) alike to «разб», so «разбил витрину» was read as a
    robbery; the noun's own forms (разбоя, разбоем) keep its first letters. A verb phrase («украл», «избили»)
    keeps the stem's match: its forms differ past its last letter (уволили, уволен). None: match by the stem."""
    words = tokenize(phrase, lang)
    if lang != "ru" or len(words) != 1 or len(stems) != 1 or len(stems[0]) > SHORT_STEM:
        return None
    word = words[0]
    return None if _VERB_END.search(word) or len(word) <= len(stems[0]) else word[:-1]


@cache
def _phrases() -> tuple[_Phrase, ...]:
    out = []
    for i, entry in enumerate(load_synonyms().entries):
        by_lang: tuple[tuple[Lang, Sequence[str]], ...] = (("ru", entry.phrases_ru), ("kk", entry.phrases_kk))
        for lang, phrases in by_lang:
            for phrase in phrases:
                stems = tuple(analyze(phrase, lang))
                if stems:
                    starts = _word_start(phrase, stems, lang)
                    out.append(_Phrase(stems, i, lang, has_kazakh_letters(phrase), starts))
    return tuple(out)


def _phrase_key(phrase: _Phrase) -> str:
    """What a question must hold for the phrase to match at all: its first stem (a Kazakh one's first four
    letters, as `_phrase_span` compares them loosely)."""
    return phrase.stems[0][:4] if phrase.lang == "kk" else phrase.stems[0]


@cache
def _phrases_by_key() -> dict[tuple[Lang, str], tuple[int, ...]]:
    """(language, `_phrase_key`) → positions in `_phrases()`: a question is checked only against the phrases
    whose first stem it has (a short question: 3 or 4 of the 1,346)."""
    out: dict[tuple[Lang, str], list[int]] = {}
    for n, phrase in enumerate(_phrases()):
        out.setdefault((phrase.lang, _phrase_key(phrase)), []).append(n)
    return {key: tuple(ns) for key, ns in out.items()}


# --- crime vocabulary beyond the synonym entries flagged criminal ------------------------------
# Each vocabulary is a list of words and phrases, comma-separated: a phrase counts only with its words in a row
# (`question_stems`), so «лишение свободы» (prison) is not any «лишение» (of parental rights, of a bonus) and «бас
# бостандығынан айыру» not any «бас» («бас тартты», refused).

_CRIME_RU = """
преступление, преступлением, преступник, уголовный, уголовная, уголовное, уголовную, уголовной, уголовного,
уголовка, лишение свободы, лишения свободы, посадят, посадить, сяду, сесть в тюрьму, тюрьма, тюрьмы, колония,
судимость, подозреваемый, обвиняемый, потерпевший, приговор
"""
_CRIME_KK = """
қылмыс, қылмыстық, қылмыскер, түрме, түрмеге, бас бостандығынан айыру, сотталған, сотталу, күдікті, айыпталушы,
жәбірленуші, үкім
"""
# Words that ask about a sanction: criminal unless the question is administrative or clearly of another field.
_WEAK_RU = "наказание, наказать, накажут, грозит"
_WEAK_KK = "жаза, жазасы, жазаланады"
_ADMIN_RU = "административный, административная, административное, административного, административную, штраф, коап"
_ADMIN_KK = "әкімшілік, айыппұл"
# Words that ask who answers for an act, with no word of punishment.
_LIABILITY_RU = """
ответственность, ответственности, ответственностью, привлечь, привлекут, привлечен, оштрафовать, оштрафуют
"""
_LIABILITY_KK = "жауапкершілік, жауапкершілігі, жауапкершілікке тарту, жауапқа тарту, жауапқа тарта"


@cache
def _stem_sets() -> dict[str, frozenset[str]]:
    def stems(phrases: str, lang: Lang) -> frozenset[str]:
        return frozenset(" ".join(analyze(phrase, lang)) for phrase in phrases.split(",") if phrase.strip())

    return {
        "crime": stems(_CRIME_RU, "ru") | stems(_CRIME_KK, "kk"),
        "weak": stems(_WEAK_RU, "ru") | stems(_WEAK_KK, "kk"),
        "admin": stems(_ADMIN_RU, "ru") | stems(_ADMIN_KK, "kk"),
        "liability": stems(_LIABILITY_RU, "ru") | stems(_LIABILITY_KK, "kk"),
    }


# --- synonyms and crime ---------------------------------------------------------------------------


def match_phrases(question: str, lang: Lang) -> list[tuple[int, frozenset[int], int]]:
    """(entry, matched token positions, first position) for every phrase found, in any word order."""
    streams = {"ru": analyze(question, "ru"), "kk": analyze(question, "kk")}
    words = tokenize(question, "ru")  # one per stem of the Russian stream (a Russian noun's `starts` reads them)
    where = {name: _stem_positions(stream) for name, stream in streams.items()}
    starts = {name: _stem_positions([stem[:4] for stem in stream]) for name, stream in streams.items()}
    phrases, by_key = _phrases(), _phrases_by_key()
    keys: list[tuple[Lang, str]] = [("ru", stem) for stem in where["ru"]] + [("kk", start) for start in starts["kk"]]
    hits: list[tuple[int, frozenset[int], int]] = []
    for phrase in (phrases[n] for n in sorted(n for key in keys for n in by_key.get(key, ()))):
        if phrase.lang == "kk" and lang != "kk" and not phrase.kazakh_only:
            continue
        stream = streams[phrase.lang]
        loose = phrase.lang == "kk"
        index = starts[phrase.lang] if loose else where[phrase.lang]
        span = _phrase_span(stream, phrase.stems, loose=loose, where=index)
        if span is not None and phrase.starts is not None:
            span = next((frozenset((i,)) for i in index[phrase.stems[0]] if words[i].startswith(phrase.starts)), None)
        if span is not None:
            hits.append((phrase.entry, span, min(span)))
    # A phrase inside a longer phrase of another entry ("украли" in "украли невесту") gives way to it.
    kept = [h for h in hits if not any(o[0] != h[0] and h[1] < o[1] for o in hits)]
    return kept


def same_kazakh_stem(a: str, b: str) -> bool:
    """Kazakh stems of one word can differ by a stripped ending or two («пирами» from «пирамида», «пирамидас»
    from «пирамидасын»): the shorter, of four letters or more, starts the longer, which is at most 4 longer, unless
    what the longer adds holds the privative («шартсыз», without a contract, is no «шарт»; «өтеусіз», free of
    charge, no «өте(у)»)."""
    if a == b:
        return True
    if a[:4] != b[:4]:  # most pairs part here, cheaply
        return False
    short, long = sorted((a, b), key=len)
    return (
        len(short) >= 4
        and len(long) - len(short) <= 4
        and long.startswith(short)
        and not any(privative in long[len(short) :] for privative in KK_PRIVATIVE)
    )


def _stem_positions(stream: list[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, stem in enumerate(stream):
        out.setdefault(stem, []).append(i)
    return out


def _phrase_span(
    stream: list[str],
    stems: tuple[str, ...],
    *,
    loose: bool = False,
    where: dict[str, list[int]] | None = None,
) -> frozenset[int] | None:
    """Positions of the phrase's stems within a window a little longer than the phrase, in any order;
    `loose` lets Kazakh stems match across an ending the stemmer left or took (see same_kazakh_stem). `where`
    saves scanning the stream per stem: stem → its positions, or with `loose` a stem's first four letters →
    positions (stems that match loosely share them)."""
    if where is not None:
        if loose:
            positions = [[i for i in where.get(stem[:4], []) if same_kazakh_stem(stream[i], stem)] for stem in stems]
        else:
            positions = [where.get(stem, []) for stem in stems]
    else:
        same = same_kazakh_stem if loose else str.__eq__
        positions = [[i for i, s in enumerate(stream) if same(s, stem)] for stem in stems]
    if not all(positions):
        return None
    window = len(stems) + 3
    for first in positions[0]:
        chosen = {first}
        for options in positions[1:]:
            near = [p for p in options if abs(p - first) < window and p not in chosen]
            if not near:
                break
            chosen.add(min(near, key=lambda p: abs(p - first)))
        else:
            if max(chosen) - min(chosen) < window:
                return frozenset(chosen)
    return None


@cache
def _longest_phrase() -> int:
    """Stems in the vocabularies' longest phrase."""
    return max(len(phrase.split()) for vocabulary in _stem_sets().values() for phrase in vocabulary)


def question_stems(question: str) -> frozenset[str]:
    """The question's stems read as Russian and as Kazakh (a question may mix them), and each run of them as long
    as a vocabulary phrase, joined by a space: what the vocabularies below are matched against."""
    longest = _longest_phrase()
    out: set[str] = set()
    for stream in (analyze(question, "ru"), analyze(question, "kk")):
        for n in range(1, longest + 1):
            out.update(" ".join(stream[i : i + n]) for i in range(len(stream) - n + 1))
    return frozenset(out)


def sanction_vocabulary(stems: frozenset[str]) -> bool:
    """Whether the question (its `question_stems`) asks about a sanction or liability at all (a crime, a
    punishment, a fine, who answers for it), in either language."""
    sets = _stem_sets()
    return bool(stems & (sets["crime"] | sets["weak"] | sets["admin"] | sets["liability"]))


def criminal_vocabulary(stems: frozenset[str], entries: list[SynonymEntry], mentions: Iterable[Mention]) -> bool:
    """Whether the question (its `question_stems`, the synonym entries and code mentions found in it) is about a
    crime."""
    sets = _stem_sets()
    if stems & sets["crime"] or any(e.criminal for e in entries):
        return True
    if any(CRIMINAL_CODE_ID in m.doc_ids for m in mentions):
        return True
    other_field = any(not e.criminal for e in entries)
    other_field = other_field or any(CRIMINAL_CODE_ID not in m.doc_ids for m in mentions)
    return bool(stems & sets["weak"]) and not stems & sets["admin"] and not other_field
