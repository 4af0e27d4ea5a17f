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

from index.lexicon import Lexicon
from retrieval.analyzer import analyze
from retrieval.records import Query
from retrieval.synonyms import load_packaged, same_kazakh_stem

logger = logging.getLogger(__name__)


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
    """The glossary's Russian stems for a Kazakh text's stems: each form's stems (a run of up to three) matched
    in the text with the synonym map's loose Kazakh match (`same_kazakh_stem`: «ауыстыра» meets «ауыстыр»,
    «демалыста» meets «демалыс»), the longest form at a place first; forms of more than three stems are left
    out."""

    forms: dict[str, list[tuple[tuple[str, ...], tuple[str, ...]]]]  # first stem's head → (form stems, ru stems)

    @classmethod
    @cache
    def packaged(cls) -> GlossaryTerms:
        forms: dict[str, list[tuple[tuple[str, ...], tuple[str, ...]]]] = {}
        for entry in load_packaged_glossary().entries:
            ru = tuple(dict.fromkeys(stem for term in entry.ru for stem in analyze(term, "ru")))
            for form in entry.kk:
                stems = tuple(analyze(form, "kk"))
                if ru and 0 < len(stems) <= 3:
                    forms.setdefault(stems[0][:4], []).append((stems, ru))
        for found in forms.values():
            found.sort(key=lambda f: -len(f[0]))
        return cls(forms)

    def __call__(self, stems: Sequence[str]) -> list[str]:
        out: dict[str, None] = {}
        i = 0
        while i < len(stems):
            match = next(
                (
                    (form, ru)
                    for form, ru in self.forms.get(stems[i][:4], ())
                    if i + len(form) <= len(stems)
                    and all(same_kazakh_stem(stems[i + j], stem) for j, stem in enumerate(form))
                ),
                None,
            )
            if match is None:
                i += 1
                continue
            out.update(dict.fromkeys(match[1]))
            i += len(match[0])
        return list(out)


def with_glossary(lexicon: Lexicon) -> Lexicon:
    """The learned lexicon with the packaged glossary read first for a Kazakh text."""
    return dataclasses.replace(lexicon, glossary=GlossaryTerms.packaged())


def translated_terms(lexicon: Lexicon, text: str, lang: str) -> list[str]:
    """The other language's stems of the words of `text` (written in `lang`), each once, in the order met."""
    return lexicon.translate(analyze(text), "kk" if lang == "kk" else "ru")


def translated_query(lexicon: Lexicon, query: Query) -> str:
    """The BM25 query of the cross-language search: the translated stems of the question as asked,
    space-separated (BM25 reads them with `str.split`: they are stems already)."""
    return " ".join(translated_terms(lexicon, query.info.text, query.info.lang))
