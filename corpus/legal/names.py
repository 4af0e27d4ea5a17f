"""The registry's names of each code: matching them in a text by stems, naming an article with them
(«УК РК. Статья 188. Кража»), and which document of a code holds an article (the Civil Code's two parts)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from corpus.lang import has_kazakh_letters, normalize, stem_kk, stem_ru
from corpus.legal.registry import ADILET_SOURCES, SOURCES_BY_ID, source
from corpus.records import Lang

logger = logging.getLogger(__name__)

CIVIL_GENERAL_ID = "K940001000_"
CIVIL_SPECIAL_ID = "K990000409_"
# The general part of the Civil Code ends with article 405; the special part goes on from 406.
CIVIL_GENERAL_LAST_ARTICLE = 405


@dataclass(frozen=True)
class ArticleRef:
    """An article of a document; doc_id "" means "this number in any document"."""

    doc_id: str
    article: str


# --- naming an article ------------------------------------------------------------------------------------------


def code_name(doc_id: str, lang: Lang) -> str:
    """The short name citations print («УК РК», «ҚР ҚК»); the id itself for a document the registry lacks."""
    entry = SOURCES_BY_ID.get(doc_id)
    return entry.short(lang) if entry else doc_id


def source_url(doc_id: str, lang: Lang) -> str:
    """The document's page on adilet.zan.kz in `lang` (an article's own URL adds its #zN anchor)."""
    return source(doc_id).url(lang)


def article_label(number: str, lang: Lang) -> str:
    """«Статья 188» / «188-бап»."""
    return f"{number}-бап" if lang == "kk" else f"Статья {number}"


def heading(code: str, number: str, title: str, lang: Lang) -> str:
    """«УК РК. Статья 188. Кража» / «ҚР ҚК. 188-бап. Ұрлық»; without a title «УК РК. Статья 188»."""
    head = f"{code}. {article_label(number, lang)}"
    return f"{head}. {title}" if title else head


def citation(code: str, number: str, title: str, lang: Lang) -> str:
    """«УК РК, Статья 188. Кража» / «ҚР ҚК, 188-бап. Ұрлық»: a source in an answer."""
    return f"{code}, {article_label(number, lang)}. {title}"


# --- code names -------------------------------------------------------------------------------------------------

WORD_RE = re.compile(r"\d+|[^\W\d_]+")
# Abbreviations that also mean other things in everyday Russian (УК = управляющая компания, ЖК = жилой
# комплекс, ТК = торговый центр): they name a code only next to an article number or "статья"/"кодекс".
_AMBIGUOUS_ALIASES = frozenset({"ук", "тк", "жк", "ак", "ек", "нк", "зк", "апк", "әк", "гк", "пк"})
_REF_WORD_STEMS = frozenset({"стат", "ст", "бап", "кодекс", "заң", "закон"})


def _word_stem(word: str) -> str:
    return stem_kk(word) if has_kazakh_letters(word) else stem_ru(word)


def _word_stems(word: str) -> tuple[str, ...]:
    """The stems a word of a name may have: the Kazakh one for a word with a Kazakh letter; else the Russian one and
    the Kazakh one, since many Kazakh forms have no letter of their own («кодекске», «кодексте», «конституция»)."""
    if has_kazakh_letters(word):
        return (stem_kk(word),)
    ru, kk = stem_ru(word), stem_kk(word)
    return (ru,) if ru == kk else (ru, kk)


# The state's name, which may stand inside a document's name: «… туралы Қазақстан Республикасының Заңы», «Кодекс
# Республики Казахстан о браке и семье».
_STATE_WORDS = "рк қр республики казахстан қазақстан республикасының республикасы"
_MAX_STATE_WORDS = 2


def normalize_in_place(text: str) -> str:
    """Lowercase with ё → е, keeping every character's position (spans map back to the text)."""
    return normalize("".join((c.lower() or c)[0] for c in text))


@dataclass(frozen=True)
class _Token:
    stems: tuple[str, ...]  # see _word_stems
    start: int
    end: int


def name_tokens(norm: str) -> list[_Token]:
    return [_Token(_word_stems(m.group()), m.start(), m.end()) for m in WORD_RE.finditer(norm)]


@dataclass(frozen=True)
class _Alias:
    words: tuple[tuple[str, ...], ...]  # each word's stems
    doc_ids: tuple[str, ...]
    ambiguous: bool


@cache
def _aliases() -> tuple[_Alias, ...]:
    names: dict[tuple[tuple[str, ...], ...], list[str]] = {}
    for src in ADILET_SOURCES:
        for alias in src.aliases:
            key = tuple(_word_stems(w) for w in WORD_RE.findall(normalize_in_place(alias)))
            if key and src.doc_id not in names.setdefault(key, []):
                names[key].append(src.doc_id)
    out = [_Alias(k, tuple(v), len(k) == 1 and k[0][0] in _AMBIGUOUS_ALIASES) for k, v in names.items()]
    return tuple(sorted(out, key=lambda a: -len(a.words)))


@cache
def _aliases_by_first_stem() -> dict[str, tuple[_Alias, ...]]:
    """The aliases by each stem of their first word, longest first: a token is checked against a few, not all."""
    out: dict[str, list[_Alias]] = {}
    for alias in _aliases():
        for stem in alias.words[0]:
            out.setdefault(stem, []).append(alias)
    return {k: tuple(v) for k, v in out.items()}


@cache
def _state_stems() -> frozenset[str]:
    return frozenset(s for w in _STATE_WORDS.split() for s in _word_stems(w))


@dataclass(frozen=True)
class Mention:
    """A code named in a text: where, and the documents the name stands for."""

    start: int
    end: int
    doc_ids: tuple[str, ...]
    ambiguous: bool

    @property
    def group(self) -> str:
        """Documents that are one code to a reader (the two Civil Code parts) share a group."""
        return SOURCES_BY_ID[self.doc_ids[0]].short_ru


def _last_token(alias: _Alias, tokens: list[_Token], i: int) -> int | None:
    """The index of the last token of `alias` written from token `i` on, or None; after its first word the
    state's name may stand inside it («… туралы Қазақстан Республикасының Заңы»)."""
    j = i
    for k, stems in enumerate(alias.words):
        for _ in range(_MAX_STATE_WORDS if k else 0):
            if j >= len(tokens) or not _differ(stems, tokens[j].stems):
                break
            if _state_stems().isdisjoint(tokens[j].stems):
                return None
            j += 1
        if j >= len(tokens) or _differ(stems, tokens[j].stems):
            return None
        j += 1
    return j - 1


def _differ(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Whether two words share no stem."""
    return set(a).isdisjoint(b)


def find_mentions(tokens: list[_Token]) -> list[Mention]:
    by_first = _aliases_by_first_stem()
    out: list[Mention] = []
    i = 0
    while i < len(tokens):
        candidates = dict.fromkeys(a for stem in tokens[i].stems for a in by_first.get(stem, ()))
        for alias in sorted(candidates, key=lambda a: -len(a.words)):
            last = _last_token(alias, tokens, i)
            if last is not None:
                out.append(Mention(tokens[i].start, tokens[last].end, alias.doc_ids, alias.ambiguous))
                i = last + 1
                break
        else:
            i += 1
    return out


def in_context(mention: Mention, attached: Iterable[Mention], norm: str) -> bool:
    """An ambiguous abbreviation counts when it sits next to a reference or after "статья"/"кодекс"."""
    if any(m is mention for m in attached):
        return True
    before = WORD_RE.findall(norm[max(0, mention.start - 24) : mention.start])
    return bool(before) and _word_stem(before[-1]) in _REF_WORD_STEMS


def _civil_part(article: str) -> str:
    return CIVIL_GENERAL_ID if int(article.split("-")[0]) <= CIVIL_GENERAL_LAST_ARTICLE else CIVIL_SPECIAL_ID


def doc_for(doc_ids: tuple[str, ...], article: str) -> str:
    """The document of `doc_ids` that holds article `article`: the Civil Code's part by number, else the first."""
    if CIVIL_GENERAL_ID in doc_ids or CIVIL_SPECIAL_ID in doc_ids:
        return _civil_part(article)
    return doc_ids[0]
