"""The cross-language search: a Kazakh question searched with the Russian stems its words stand for (and a
Russian one with Kazakh stems), by BM25 over every chunk, fused as a search of its own.

Most codes exist here only in Russian: a Kazakh question's own words meet only the laws translated into Kazakh,
and only the dense vectors and the latent terms reached the rest. The stems come from the lexicon the index
build learns from the corpus's parallel laws (index/lexicon.py) and, for a Kazakh question, from the packaged
glossary (retrieval/data/glossary.json): the words citizens type and the law's own Russian terms for them («бастық»,
«жұмыс беруші» → работодатель; «бюллетень» → временная нетрудоспособность), which the 24 parallel laws — none of
them a code — teach too seldom or not at all. Its terms come first.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from pydantic import BaseModel, ConfigDict

from corpus.records import Lang
from index.lexicon import Lexicon
from retrieval.analyzer import analyze, clauses, has_kazakh_letters, tokenize
from retrieval.records import Query
from retrieval.synonyms import load_packaged

logger = logging.getLogger(__name__)

SHORT_ROOT = 4  # a one-word glossary form whose stem is shorter is matched by its own letters (`GlossaryTerms`)


class GlossaryEntry(BaseModel):
    """Kazakh forms of one concept (a word, or a phrase of up to three words) and the law's Russian terms."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kk: list[str]
    ru: list[str]


class Glossary(BaseModel):
    """retrieval/data/glossary.json."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    entries: list[GlossaryEntry]


def load_packaged_glossary() -> Glossary:
    """retrieval/data/glossary.json, validated."""
    return load_packaged("glossary.json", Glossary)


@dataclass(frozen=True)
class GlossaryTerms:
    """The glossary's Russian stems for a Kazakh text's words: each form's stems (a run of up to three) matched
    in the text's stems, each text stem the form's or the form's with an ending the stemmer left (`_carries`:
    «демалыста» carries «демалыс», «жұмыс» does not carry «жұмысшы»), the longest form at a place first (the most
    stems, then the most letters: «жалақы», a wage, before «жала», slander, which it also carries); forms
    of more than three stems are left out. A one-word form the stemmer cuts to a root shorter than four letters
    («жылу» → жыл, «шығын» → шық, «өтемақы» → өте) would meet every word of that root (жылына, шықтым, өте): it
    is matched by its own letters instead, at the start of a word («жылуы», «шығынды»)."""

    forms: dict[str, list[Form]]  # the first stem's first four letters → the forms starting so, longest first
    short: dict[str, list[Form]]  # a short root's form's first three letters → those forms
    phrases_of: dict[tuple[str, ...], tuple[str, ...]]  # an entry's Russian stems → its Russian terms as written

    @classmethod
    @cache
    def packaged(cls) -> GlossaryTerms:
        forms: dict[str, list[Form]] = {}
        short: dict[str, list[Form]] = {}
        phrases: dict[tuple[str, ...], tuple[str, ...]] = {}
        for entry in load_packaged_glossary().entries:
            ru = tuple(dict.fromkeys(stem for term in entry.ru for stem in analyze(term, "ru")))
            phrases[ru] = tuple(entry.ru)
            for kk in entry.kk:
                words = tokenize(kk, "kk")
                stems = tuple(analyze(kk, "kk"))
                if not ru or not 0 < len(stems) <= 3:
                    continue
                if len(stems) == 1 and len(stems[0]) < SHORT_ROOT and len(stems[0]) < len(words[0]):
                    short.setdefault(words[0][:3], []).append(Form(stems, ru, words[0]))
                else:
                    forms.setdefault(stems[0][:4], []).append(Form(stems, ru))
        for found in forms.values():  # the most specific first: «жалақы» (a wage) is not «жала» (slander)
            found.sort(key=lambda f: (-len(f.stems), -sum(map(len, f.stems))))
        return cls(forms, short, phrases)

    def __call__(self, stems: Sequence[str], words: Sequence[str]) -> list[str]:
        """The Russian stems for a Kazakh text's stems (`analyze`) and words (`tokenize`, one per stem), each
        once, in the order met."""
        return list(dict.fromkeys(stem for ru in self.matched(stems, words) for stem in ru))

    def phrases(self, text: str) -> list[str]:
        """The law's Russian terms (as written) of the entries a Kazakh text matches, each once; a phrase is read
        within its clause (`clauses`)."""
        matched = [ru for part in clauses(text) for ru in self.matched(analyze(part, "kk"), tokenize(part, "kk"))]
        return list(dict.fromkeys(term for ru in matched for term in self.phrases_of[ru]))

    def matched(self, stems: Sequence[str], words: Sequence[str]) -> list[tuple[str, ...]]:
        """The Russian stems of each entry the text matches, in the order met."""
        out: dict[tuple[str, ...], None] = {}
        i = 0
        while i < len(stems):
            found = (*self.forms.get(stems[i][:4], ()), *self.short.get(words[i][:3], ()))
            match = next((f for f in found if f.matches(stems, words, i)), None)
            if match is None:
                i += 1
                continue
            out.setdefault(match.ru, None)
            i += len(match.stems)
        return list(out)


@dataclass(frozen=True)
class Form:
    """One Kazakh form of a glossary entry: its stems, the entry's Russian stems, and for a one-word form cut to a
    short root its own word (matched by letters)."""

    stems: tuple[str, ...]
    ru: tuple[str, ...]
    word: str | None = None

    def matches(self, stems: Sequence[str], words: Sequence[str], i: int) -> bool:
        if self.word is not None:
            return words[i].startswith(self.word)
        return i + len(self.stems) <= len(stems) and all(
            _carries(stems[i + j], s, words[i + j]) for j, s in enumerate(self.stems)
        )


def _carries(text_stem: str, form_stem: str, word: str) -> bool:
    """The text's stem is the form's, or the form's with an ending the stemmer left (at most four letters:
    «демалыста» carries «демалыс»); never shorter — a longer form is another, derived word («жұмысшы», a worker,
    is not «жұмыс», work; «берешек», a debt, is not «бер», to give) — but where the stemmer took the word's last
    letter as an ending and left it in the form («жалақы» → жалақ, «жалақысы» → жалақы): the text's word itself
    starts with the form's stem."""
    if text_stem == form_stem:
        return True
    if len(form_stem) >= 4 and text_stem.startswith(form_stem) and len(text_stem) - len(form_stem) <= 4:
        return True
    cut = len(text_stem) >= 4 and len(form_stem) == len(text_stem) + 1 and form_stem.startswith(text_stem)
    return cut and word.startswith(form_stem)


def with_glossary(lexicon: Lexicon) -> Lexicon:
    """The learned lexicon with the packaged glossary read first for a Kazakh text."""
    return dataclasses.replace(lexicon, glossary=GlossaryTerms.packaged())


def with_glossary_terms(lexicon: Lexicon | None, limit: int, query: Query) -> str:
    """The e5 query: the augmented question; for a Kazakh one without its Kazakh citation lines and followed by
    the glossary's Russian terms for its words that its lines do not say already (at most `limit` characters of
    them, whole terms; 0: none). The vectors are Russian and e5 reads the law's own words better than their Kazakh
    equivalents; every token costs ~1 ms of e5 on 2 cores."""
    glossary = lexicon.glossary if lexicon is not None else None
    if query.info.lang != "kk":
        return query.info.augmented
    # The vectors are Russian: the Kazakh citation lines («ҚР ЕК 88-бап») beside the Russian ones add only length.
    text, lines = query.info.augmented, query.info.added_lines
    if lines is not None:
        text = "\n".join([query.info.text.strip(), *(line for line in lines if not has_kazakh_letters(line.lower()))])
    if not limit or not isinstance(glossary, GlossaryTerms):
        return text
    said = set(analyze(text, "ru"))
    terms = ""
    for term in glossary.phrases(query.info.text):
        if said.issuperset(analyze(term, "ru")):
            continue  # a title line has its words already
        joined = f"{terms}; {term}" if terms else term
        if len(joined) > limit:
            break
        terms = joined
    return f"{text} ({terms})" if terms else text


def translated_terms(lexicon: Lexicon, text: str, lang: str) -> list[str]:
    """The other language's stems of the words of `text` (written in `lang`), each once, in the order met; a
    phrase is read within its clause (`clauses`)."""
    source: Lang = "kk" if lang == "kk" else "ru"
    terms = (lexicon.translate(analyze(part, source), source, tokenize(part, source)) for part in clauses(text))
    return list(dict.fromkeys(term for part in terms for term in part))


def translated_query(lexicon: Lexicon, query: Query) -> str:
    """The BM25 query of the cross-language search: the translated stems of the question as asked,
    space-separated (BM25 reads them with `str.split`: they are stems already)."""
    return " ".join(translated_terms(lexicon, query.info.text, query.info.lang))
