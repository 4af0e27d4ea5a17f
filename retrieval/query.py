"""Query understanding: explicit article references, named codes, crime check and synonym articles."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from config import ADILET_SOURCES, CRIMINAL_CODE_ID, SOURCES_BY_ID
from retrieval.analyzer import analyze, detect_lang, has_kazakh_letters, normalize, stem_kk, stem_ru

logger = logging.getLogger(__name__)

CIVIL_GENERAL_ID = "K940001000_"
CIVIL_SPECIAL_ID = "K990000409_"
# The general part of the Civil Code ends with article 405; the special part goes on from 406.
CIVIL_GENERAL_LAST_ARTICLE = 405
MAX_RANGE = 40  # "статьи 1-400" is not a range anyone wants every article of


@dataclass(frozen=True)
class ArticleRef:
    """An article of a document; doc_id "" means "this number in any document"."""

    doc_id: str
    article: str


@dataclass(frozen=True)
class QueryInfo:
    """What a question asks for, read from the question as the user wrote it."""

    text: str
    lang: Literal["ru", "kk"]
    refs: tuple[ArticleRef, ...]
    is_range: bool
    is_criminal: bool
    codes: tuple[str, ...]
    synonym_refs: tuple[ArticleRef, ...]
    augmented: str


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
    lang: Literal["ru", "kk"]
    kazakh_only: bool  # has a Kazakh letter, so it can be matched in any question


@cache
def _phrases() -> tuple[_Phrase, ...]:
    out = []
    for i, entry in enumerate(load_synonyms().entries):
        for lang, phrases in (("ru", entry.phrases_ru), ("kk", entry.phrases_kk)):
            for phrase in phrases:
                stems = tuple(analyze(phrase, lang))
                if stems:
                    out.append(_Phrase(stems, i, lang, has_kazakh_letters(phrase)))
    return tuple(out)


# --- crime vocabulary beyond the synonym entries flagged criminal ------------------------------

_CRIME_RU = """
преступление преступлением преступник уголовный уголовная уголовное уголовную уголовной уголовного уголовка
лишение свободы лишения свободы посадят посадить сяду сесть в тюрьму тюрьма тюрьмы колония судимость
подозреваемый обвиняемый потерпевший приговор
"""
_CRIME_KK = """
қылмыс қылмыстық қылмыскер түрме түрмеге бас бостандығынан айыру сотталған сотталу күдікті айыпталушы
жәбірленуші үкім
"""
# Words that ask about a sanction: criminal unless the question is administrative or clearly of another field.
_WEAK_RU = "наказание наказать накажут грозит"
_WEAK_KK = "жаза жазасы жазаланады"
_ADMIN_RU = "административный административная административное административного административную штраф коап"
_ADMIN_KK = "әкімшілік айыппұл"


@cache
def _stem_sets() -> dict[str, frozenset[str]]:
    def stems(words: str, lang: Literal["ru", "kk"]) -> frozenset[str]:
        return frozenset(analyze(words, lang))

    return {
        "crime": stems(_CRIME_RU, "ru") | stems(_CRIME_KK, "kk"),
        "weak": stems(_WEAK_RU, "ru") | stems(_WEAK_KK, "kk"),
        "admin": stems(_ADMIN_RU, "ru") | stems(_ADMIN_KK, "kk"),
    }


# --- code names ---------------------------------------------------------------------------------

_WORD_RE = re.compile(r"\d+|[^\W\d_]+")
# Abbreviations that also mean other things in everyday Russian (УК = управляющая компания, ЖК = жилой
# комплекс, ТК = торговый центр): they name a code only next to an article number or "статья"/"кодекс".
_AMBIGUOUS_ALIASES = frozenset({"ук", "тк", "жк", "ак", "ек", "нк", "зк", "апк", "әк", "гк", "пк"})
_REF_WORD_STEMS = frozenset({"стат", "ст", "бап", "кодекс", "заң", "закон"})


def _word_stem(word: str) -> str:
    return stem_kk(word) if has_kazakh_letters(word) else stem_ru(word)


@dataclass(frozen=True)
class _Token:
    stem: str
    start: int
    end: int


def _tokens(norm: str) -> list[_Token]:
    return [_Token(_word_stem(m.group()), m.start(), m.end()) for m in _WORD_RE.finditer(norm)]


@dataclass(frozen=True)
class _Alias:
    stems: tuple[str, ...]
    doc_ids: tuple[str, ...]
    ambiguous: bool


@cache
def _aliases() -> tuple[_Alias, ...]:
    names: dict[tuple[str, ...], list[str]] = {}
    for src in ADILET_SOURCES:
        for alias in src.aliases:
            key = tuple(_word_stem(w) for w in _WORD_RE.findall(_normalize(alias)))
            if key and src.doc_id not in names.setdefault(key, []):
                names[key].append(src.doc_id)
    out = [_Alias(k, tuple(v), len(k) == 1 and k[0] in _AMBIGUOUS_ALIASES) for k, v in names.items()]
    return tuple(sorted(out, key=lambda a: -len(a.stems)))


@cache
def _aliases_by_first_stem() -> dict[str, tuple[_Alias, ...]]:
    """The aliases by their first stem, longest first: a token is checked against a few, not all."""
    out: dict[str, list[_Alias]] = {}
    for alias in _aliases():
        out.setdefault(alias.stems[0], []).append(alias)
    return {k: tuple(v) for k, v in out.items()}


@dataclass(frozen=True)
class _Mention:
    start: int
    end: int
    doc_ids: tuple[str, ...]
    ambiguous: bool

    @property
    def group(self) -> str:
        """Documents that are one code to a reader (the two Civil Code parts) share a group."""
        return SOURCES_BY_ID[self.doc_ids[0]].short_ru


def _find_mentions(tokens: list[_Token]) -> list[_Mention]:
    out: list[_Mention] = []
    i = 0
    while i < len(tokens):
        for alias in _aliases_by_first_stem().get(tokens[i].stem, ()):
            n = len(alias.stems)
            if tuple(t.stem for t in tokens[i : i + n]) == alias.stems:
                out.append(_Mention(tokens[i].start, tokens[i + n - 1].end, alias.doc_ids, alias.ambiguous))
                i += n
                break
        else:
            i += 1
    return out


# --- article references ---------------------------------------------------------------------------

_NUM = r"\d{1,4}(?:-\d{1,3})?"
_SEP = r"\s*(?:,|;|и|или|а также|-|–|—|по|және|мен)\s*"
_LIST = rf"{_NUM}(?:{_SEP}{_NUM})*"
# a whole word: «стало 2027» is not «ст. 2027» with a code «ало»
_KEYWORD_RU = r"(?<![^\W\d_])(?:ст\.?\s*ст|ст|стат(?:ья|ьи|ье|ью|ьей|ей|ьям|ьями|ьях))(?![^\W\d_])\.?"
# "ст. 188", "статьи 190-192", "статьей с 120 по 125", "статья УК РК 188"
_RU_AFTER = re.compile(
    rf"{_KEYWORD_RU}\s*(?:№\s*)?(?:(?P<code>[^\W\d_]{{2,5}}(?:\s+(?:рк|қр))?)\s+)?(?:с\s+)?(?P<nums>{_LIST})(?![\d])"
)
# "по 188 статье", "188-й статьи" (but not "части 2 статьи 188")
_RU_BEFORE = re.compile(
    rf"(?<![\w-])(?P<nums>{_LIST})(?:-?[а-я]{{1,3}})?\s+стат(?:ья|ьи|ье|ью|ьей)(?![^\W\d_])(?!\s*\.?\s*\d)"
)
# "188-бап", "188-1-бабы", "120-125 баптары", "188 бабында"
_KK_BAP = re.compile(rf"(?<![\w-])(?P<nums>{_LIST})\s*-?\s*(?:бап|баб[ыі])[^\W\d_]*")
_PART_BEFORE = re.compile(r"(?:часть|части|ч|пункт|пункта|п|пп|подпункт|подпункта|абзац)\.?\s*$")
_GAP_WORDS = frozenset(
    "рк қр республики казахстан қазақстан республикасының закона закон заңы заңының о об от нің ның дің дың "
    "тің тың кодекса кодекс кодексі кодексінің".split()
)
_ARTICLE_WORDS = re.compile(r"^\W*(?:статья|статьи|статье|ст|бап|бабы)?\W*$")


@dataclass(frozen=True)
class _RefMatch:
    start: int
    end: int
    numbers: tuple[str, ...]
    is_range: bool
    code: str = ""  # an abbreviation written between the keyword and the number


def _expand(nums: str) -> tuple[tuple[str, ...], bool]:
    """Numbers of a list like "190, 191", "120-125", "с 120 по 125", "188-1"; and whether it held a range."""
    out: list[str] = []
    is_range = False
    tokens = re.findall(rf"{_NUM}|по|–|—|-", nums)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not tok[0].isdigit():
            i += 1
            continue
        low, _, tail = tok.partition("-")
        # "120-125": a range when the second number is larger; "188-1" is an article of its own.
        if tail and int(tail) > int(low):
            hi = int(tail)
            if hi - int(low) <= MAX_RANGE:
                out.extend(str(n) for n in range(int(low), hi + 1))
                is_range = True
            else:
                out.extend((low, tail))
            i += 1
            continue
        if i + 2 < len(tokens) and tokens[i + 1] in ("по", "–", "—", "-") and tokens[i + 2][0].isdigit():
            hi_tok = tokens[i + 2]
            plain = "-" not in hi_tok and "-" not in tok
            if plain and 0 < int(hi_tok) - int(tok) <= MAX_RANGE:
                out.extend(str(n) for n in range(int(tok), int(hi_tok) + 1))
                is_range = True
                i += 3
                continue
        out.append(tok)
        i += 1
    return tuple(dict.fromkeys(out)), is_range


def _find_refs(norm: str, mentions: list[_Mention]) -> list[_RefMatch]:
    found: list[_RefMatch] = []
    for m in _RU_AFTER.finditer(norm):
        nums, rng = _expand(m.group("nums"))
        found.append(_RefMatch(m.start(), m.end("nums"), nums, rng, m.group("code") or ""))
    for m in _RU_BEFORE.finditer(norm):
        if not _PART_BEFORE.search(norm[: m.start()]):
            nums, rng = _expand(m.group("nums"))
            found.append(_RefMatch(m.start(), m.end(), nums, rng))
    for m in _KK_BAP.finditer(norm):
        nums, rng = _expand(m.group("nums"))
        found.append(_RefMatch(m.start(), m.end(), nums, rng))
    # "136 УК": a bare number right before a code name
    for mention in mentions:
        m = re.search(rf"(?<![\w.,-])(?P<nums>{_NUM})\s*$", norm[: mention.start])
        if m and not _PART_BEFORE.search(norm[: m.start()]) and int(m.group("nums").split("-")[0]) < 2000:
            nums, rng = _expand(m.group("nums"))
            found.append(_RefMatch(m.start(), m.end(), nums, rng))
    found.sort(key=lambda r: (r.start, -r.end))
    out: list[_RefMatch] = []
    for ref in found:
        if out and ref.start < out[-1].end:
            continue  # the same numbers seen by two patterns
        out.append(ref)
    return out


def _only_filler(gap: str) -> bool:
    words = _WORD_RE.findall(gap)
    return len(gap) <= 48 and all(w in _GAP_WORDS for w in words) and not re.search(r"\d", gap)


def _attached(ref: _RefMatch, mentions: list[_Mention], norm: str) -> _Mention | None:
    """The code written right after the reference ("ст. 188 УК") or right before it ("ҚК-нің 188-бабы")."""
    after = [m for m in mentions if m.start >= ref.end and _only_filler(norm[ref.end : m.start])]
    if after:
        return min(after, key=lambda m: m.start)
    before = [m for m in mentions if m.end <= ref.start and _only_filler(norm[m.end : ref.start])]
    if before:
        return max(before, key=lambda m: m.end)
    return None


def _civil_part(article: str) -> str:
    return CIVIL_GENERAL_ID if int(article.split("-")[0]) <= CIVIL_GENERAL_LAST_ARTICLE else CIVIL_SPECIAL_ID


def _doc_for(doc_ids: tuple[str, ...], article: str) -> str:
    if CIVIL_GENERAL_ID in doc_ids or CIVIL_SPECIAL_ID in doc_ids:
        return _civil_part(article)
    return doc_ids[0]


def _normalize(text: str) -> str:
    """Lowercase with ё → е, keeping every character's position (spans map back to the question)."""
    return normalize("".join((c.lower() or c)[0] for c in text))


# --- synonyms and crime ---------------------------------------------------------------------------


def _match_phrases(question: str, lang: Literal["ru", "kk"]) -> list[tuple[int, frozenset[int], int]]:
    """(entry, matched token positions, first position) for every phrase found, in any word order."""
    streams = {"ru": analyze(question, "ru"), "kk": analyze(question, "kk")}
    where = {name: _stem_positions(stream) for name, stream in streams.items()}
    starts = {name: _stem_positions([stem[:4] for stem in stream]) for name, stream in streams.items()}
    hits: list[tuple[int, frozenset[int], int]] = []
    for phrase in _phrases():
        if phrase.lang == "kk" and lang != "kk" and not phrase.kazakh_only:
            continue
        stream = streams[phrase.lang]
        loose = phrase.lang == "kk"
        index = starts[phrase.lang] if loose else where[phrase.lang]
        span = _phrase_span(stream, phrase.stems, loose=loose, where=index)
        if span is not None:
            hits.append((phrase.entry, span, min(span)))
    # A phrase inside a longer phrase of another entry ("украли" in "украли невесту") gives way to it.
    kept = [h for h in hits if not any(o[0] != h[0] and h[1] < o[1] for o in hits)]
    return kept


def _same_stem(a: str, b: str) -> bool:
    """Kazakh stems of one word can differ by a stripped ending or two («пирами» from «пирамида», «пирамидас»
    from «пирамидасын»): the shorter, of four letters or more, starts the longer, which is at most 4 longer."""
    if a == b:
        return True
    if a[:4] != b[:4]:  # most pairs part here, cheaply
        return False
    short, long = sorted((a, b), key=len)
    return len(short) >= 4 and len(long) - len(short) <= 4 and long.startswith(short)


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
    `loose` lets Kazakh stems match across an ending the stemmer left or took (see _same_stem). `where`
    saves scanning the stream per stem: stem → its positions, or with `loose` a stem's first four letters →
    positions (stems that match loosely share them)."""
    if where is not None:
        if loose:
            positions = [[i for i in where.get(stem[:4], []) if _same_stem(stream[i], stem)] for stem in stems]
        else:
            positions = [where.get(stem, []) for stem in stems]
    else:
        same = _same_stem if loose else str.__eq__
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


def _criminal_vocabulary(question: str, entries: list[SynonymEntry], mentions: list[_Mention]) -> bool:
    sets = _stem_sets()
    stems = set(analyze(question, "ru")) | set(analyze(question, "kk"))
    if stems & sets["crime"] or any(e.criminal for e in entries):
        return True
    if any(CRIMINAL_CODE_ID in m.doc_ids for m in mentions):
        return True
    other_field = any(not e.criminal for e in entries)
    other_field = other_field or any(CRIMINAL_CODE_ID not in m.doc_ids for m in mentions)
    return bool(stems & sets["weak"]) and not stems & sets["admin"] and not other_field


# --- the analysis ---------------------------------------------------------------------------------


def analyze_query(question: str, *, titles: Callable[[ArticleRef], str | None] | None = None) -> QueryInfo:
    """Read explicit references, named codes, the crime check and synonym articles from the question."""
    lang = detect_lang(question)
    norm = _normalize(question)
    tokens = _tokens(norm)
    raw_mentions = _find_mentions(tokens)
    ref_matches = _find_refs(norm, raw_mentions)

    attached: dict[int, _Mention] = {}
    for i, ref in enumerate(ref_matches):
        mention = _attached(ref, raw_mentions, norm)
        if mention is not None:
            attached[i] = mention
    mentions = [m for m in raw_mentions if not m.ambiguous or _in_context(m, attached.values(), norm)]
    for i, ref in enumerate(ref_matches):
        if ref.code and i not in attached:
            inline = [m for m in raw_mentions if m.start >= ref.start and m.end <= ref.end]
            if inline:
                attached[i] = inline[0]
                mentions.append(inline[0])

    hits = _match_phrases(question, lang)
    entries_all = load_synonyms().entries
    matched_entries = [entries_all[e] for e, _, _ in sorted(hits, key=lambda h: (h[2], -len(h[1])))]
    matched_entries = list({id(e): e for e in matched_entries}.values())

    criminal = _criminal_vocabulary(question, matched_entries, mentions)
    if any(CRIMINAL_CODE_ID in m.doc_ids for m in attached.values()):
        criminal = True

    groups = {m.group: m.doc_ids for m in mentions}
    refs: list[ArticleRef] = []
    for i, ref in enumerate(ref_matches):
        mention = attached.get(i)
        for number in ref.numbers:
            if mention is not None:
                doc_id = _doc_for(mention.doc_ids, number)
            elif len(groups) == 1:
                doc_id = _doc_for(next(iter(groups.values())), number)
            elif not groups and criminal:
                doc_id = CRIMINAL_CODE_ID
            else:
                doc_id = ""
            refs.append(ArticleRef(doc_id, number))
    refs = list(dict.fromkeys(refs))

    codes = tuple(dict.fromkeys(d for m in sorted(mentions, key=lambda m: m.start) for d in m.doc_ids))
    suggested = (ArticleRef(r.doc_id, r.article) for e in matched_entries for r in e.refs)
    synonym_refs = tuple(r for r in dict.fromkeys(suggested) if r not in refs)
    augmented = augment(question, lang, [*refs, *synonym_refs], titles)
    return QueryInfo(
        text=question,
        lang=lang,
        refs=tuple(refs),
        is_range=any(r.is_range for r in ref_matches),
        is_criminal=criminal,
        codes=codes,
        synonym_refs=synonym_refs,
        augmented=augmented,
    )


def _in_context(mention: _Mention, attached: Iterable[_Mention], norm: str) -> bool:
    """An ambiguous abbreviation counts when it sits next to a reference or after "статья"/"кодекс"."""
    if any(m is mention for m in attached):
        return True
    before = _WORD_RE.findall(norm[max(0, mention.start - 24) : mention.start])
    return bool(before) and _word_stem(before[-1]) in _REF_WORD_STEMS


def augment(
    question: str,
    lang: Literal["ru", "kk"],
    refs: Iterable[ArticleRef],
    titles: Callable[[ArticleRef], str | None] | None = None,
) -> str:
    """The question, then a line per article: code short name, "статья N" and the title when known.

    Headings are Russian (most codes exist only in Russian in the corpus); a Kazakh question also gets
    "ҚР ҚК N-бап" on a line of its own, so that the analyzer stems each line in its own language.
    """
    lines = [question.strip()]
    for ref in refs:
        title = (titles(ref) if titles is not None else None) or ""
        src = SOURCES_BY_ID.get(ref.doc_id)
        ru = [src.short_ru if src else "", f"статья {ref.article}"]
        kk = [src.short_kk if src else "", f"{ref.article}-бап"]
        (kk if has_kazakh_letters(title) else ru).append(title)
        if lang == "kk":
            lines.append(" ".join(w for w in kk if w))
        lines.append(" ".join(w for w in ru if w))
    return "\n".join(lines)
