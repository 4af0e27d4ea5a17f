"""A question's references to articles («ст. 188 УК», «статьи 187-190», «188-бап», «ҚК-нің 9999-бабы»,
«136 УК») and the arguments of /article («ТК РК ст. 22»), each number resolved to its document."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from corpus.lang import has_kazakh_letters
from corpus.legal.names import (
    WORD_RE,
    ArticleRef,
    Mention,
    doc_for,
    find_mentions,
    in_context,
    name_tokens,
    normalize_in_place,
)
from corpus.records import Lang

logger = logging.getLogger(__name__)

MAX_RANGE = 40  # "статьи 1-400" is not a range anyone wants every article of
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


@dataclass(frozen=True)
class RefMatch:
    """A written reference: its span, the article numbers it names, and whether they came from a range."""

    start: int
    end: int
    numbers: tuple[str, ...]
    is_range: bool
    code: str = ""  # an abbreviation written between the keyword and the number


def expand_numbers(nums: str) -> tuple[tuple[str, ...], bool]:
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


def _find_refs(norm: str, mentions: list[Mention]) -> list[RefMatch]:
    found: list[RefMatch] = []
    for m in _RU_AFTER.finditer(norm):
        nums, rng = expand_numbers(m.group("nums"))
        found.append(RefMatch(m.start(), m.end("nums"), nums, rng, m.group("code") or ""))
    for m in _RU_BEFORE.finditer(norm):
        if not _PART_BEFORE.search(norm[: m.start()]):
            nums, rng = expand_numbers(m.group("nums"))
            found.append(RefMatch(m.start(), m.end(), nums, rng))
    for m in _KK_BAP.finditer(norm):
        nums, rng = expand_numbers(m.group("nums"))
        found.append(RefMatch(m.start(), m.end(), nums, rng))
    # "136 УК": a bare number right before a code name
    for mention in mentions:
        bare = re.search(rf"(?<![\w.,-])(?P<nums>{_NUM})\s*$", norm[: mention.start])
        if bare and not _PART_BEFORE.search(norm[: bare.start()]) and int(bare.group("nums").split("-")[0]) < 2000:
            nums, rng = expand_numbers(bare.group("nums"))
            found.append(RefMatch(bare.start(), bare.end(), nums, rng))
    found.sort(key=lambda r: (r.start, -r.end))
    out: list[RefMatch] = []
    for ref in found:
        if out and ref.start < out[-1].end:
            continue  # the same numbers seen by two patterns
        out.append(ref)
    return out


def _only_filler(gap: str) -> bool:
    words = WORD_RE.findall(gap)
    return len(gap) <= 48 and all(w in _GAP_WORDS for w in words) and not re.search(r"\d", gap)


def _attached(ref: RefMatch, mentions: list[Mention], norm: str) -> Mention | None:
    """The code written right after the reference ("ст. 188 УК") or right before it ("ҚК-нің 188-бабы")."""
    after = [m for m in mentions if m.start >= ref.end and _only_filler(norm[ref.end : m.start])]
    if after:
        return min(after, key=lambda m: m.start)
    before = [m for m in mentions if m.end <= ref.start and _only_filler(norm[m.end : ref.start])]
    if before:
        return max(before, key=lambda m: m.end)
    return None


@dataclass(frozen=True)
class References:
    """The article references and code names written in a text."""

    matches: tuple[RefMatch, ...]
    codes_at: tuple[Mention | None, ...]  # the code each match names, one per match
    mentions: tuple[Mention, ...]  # every code named (an ambiguous abbreviation only in context)

    @property
    def is_range(self) -> bool:
        return any(r.is_range for r in self.matches)

    @property
    def codes(self) -> tuple[str, ...]:
        """The documents named, in the order they are written."""
        return tuple(dict.fromkeys(d for m in sorted(self.mentions, key=lambda m: m.start) for d in m.doc_ids))

    def names_code(self, doc_id: str) -> bool:
        """Whether a reference names this document («ст. 188 УК»)."""
        return any(m is not None and doc_id in m.doc_ids for m in self.codes_at)

    def articles(self, default_doc: str = "") -> list[ArticleRef]:
        """Each number with its document: the code it names, else the only code the text names, else
        `default_doc` when the text names no code, else "" (any document)."""
        groups = {m.group: m.doc_ids for m in self.mentions}
        refs: list[ArticleRef] = []
        for ref, mention in zip(self.matches, self.codes_at, strict=True):
            for number in ref.numbers:
                if mention is not None:
                    doc_id = doc_for(mention.doc_ids, number)
                elif len(groups) == 1:
                    doc_id = doc_for(next(iter(groups.values())), number)
                elif not groups and default_doc:
                    doc_id = default_doc
                else:
                    doc_id = ""
                refs.append(ArticleRef(doc_id, number))
        return list(dict.fromkeys(refs))


def read_references(text: str) -> References:
    """The references and code names of a question as the user wrote it."""
    norm = normalize_in_place(text)
    raw_mentions = find_mentions(name_tokens(norm))
    matches = _find_refs(norm, raw_mentions)
    attached: dict[int, Mention] = {}
    for i, ref in enumerate(matches):
        mention = _attached(ref, raw_mentions, norm)
        if mention is not None:
            attached[i] = mention
    mentions = [m for m in raw_mentions if not m.ambiguous or in_context(m, attached.values(), norm)]
    for i, ref in enumerate(matches):
        if ref.code and i not in attached:
            inline = [m for m in raw_mentions if m.start >= ref.start and m.end <= ref.end]
            if inline:
                attached[i] = inline[0]
                mentions.append(inline[0])
    return References(tuple(matches), tuple(attached.get(i) for i in range(len(matches))), tuple(mentions))


# --- /article arguments -----------------------------------------------------------------------------------------

_ARTICLE_ARG_WORDS = {"ст", "ст.", "статья", "статьи", "бап", "бабы", "article", "art", "art.", "№"}
# «часть 2», «ч. 2», «ч.2», «п. 3», «2-бөлік», «3-тармағы»: a part of the article, not the article
_PART_WORD_RE = re.compile(r"(?i)^(?:часть|части|ч\.?|пункт|пункта|п\.?|подпункт|пп\.?|абзац|бөлік\w*|тармақ\w*)$")
_PART_GLUED_RE = re.compile(r"(?i)^(?:(?:ч|п|пп)\.\s*\d+\S*|\d+\)?-?\s*(?:бөлі|тармақ|тармағ)\w*)$")
_ARTICLE_NUMBER_RE = re.compile(r"\d+(?:[-.]\d+)*")


@dataclass(frozen=True)
class ArticleArgs:
    """What /article was asked: the code as written, the article number, and the words it did not use."""

    code: str
    number: str
    ignored: str = ""  # «часть 2», «189»: a part or a second number; the article is shown whole, once


def _article_number(word: str) -> str | None:
    number = re.sub(r"(?i)-?(бап|бабы)$", "", word.strip(".,;:"))
    return number if _ARTICLE_NUMBER_RE.fullmatch(number) else None


def read_article_args(args: list[str]) -> ArticleArgs | None:
    """/article УК 188, /article ТК РК ст. 22, /article ҚК 188-бап: the code's words, then the first number;
    a part («часть 2», «ч. 2», «2-бөлік») wherever it is written and anything after the number are ignored
    and named. None when no code or no number is given."""
    words = [w for w in args if w.lower() not in _ARTICLE_ARG_WORDS]
    code: list[str] = []
    ignored: list[str] = []
    number: str | None = None
    i = 0
    while i < len(words):
        word = words[i]
        if _PART_GLUED_RE.match(word):
            ignored.append(word)
        elif _PART_WORD_RE.match(word) and i + 1 < len(words) and words[i + 1][:1].isdigit():
            ignored.append(f"{word} {words[i + 1]}")
            i += 1
        elif number is None and code and (found := _article_number(word)) is not None:
            number = found
        elif number is None:
            code.append(word)
        else:
            ignored.append(word)
        i += 1
    if number is None or not code:
        return None
    return ArticleArgs(" ".join(code), number, " ".join(ignored))


def split_article_args(args: list[str]) -> tuple[str, str] | None:
    """("УК", "188") from /article УК 188, /article ТК РК ст. 22, /article ҚК 188-бап (read_article_args)."""
    read = read_article_args(args)
    return (read.code, read.number) if read else None


def article_ref(code: str, number: str) -> ArticleRef | None:
    """The article `number` of the code people call `code` («УК», «ҚК», «КоАП РК», «ГК» by its part); None when
    `code` names no code of the registry."""
    for ref in read_references(f"статья {number.strip().rstrip('.')} {code}").articles()[:1]:
        return ref if ref.doc_id else None
    return None


def article_lang(code: str, ui_lang: Lang) -> Lang:
    """Kazakh text for a code named in Kazakh («ҚК», «ӘҚБтК»), else the user's language."""
    return "kk" if has_kazakh_letters(code.lower()) else ui_lang
