"""A Russian question's everyday words in the law's own terms: «декрет» → отпуск по беременности и родам,
«сломался» → недостатки товара, «кинули» → мошенничество.

The packaged glossary (retrieval/data/glossary_ru.json) pairs the words citizens type with the terms the laws use
for the same thing; a Russian question is also searched by BM25 with the law's terms its words stand for, fused as
a search of its own (`GLOSSARY_RU_WEIGHT`, retrieval/searches.py), as a Kazakh question is searched with the
Russian terms of the Kazakh glossary (retrieval/crosslang.py). Each form is matched by its Snowball stems, a run of
up to three in the question's stems, the longest form at a place first. A form of several words that leaves one stem
(«по статье» → стат, «нет работы» → работ) has lost the words that made it everyday and would match every question
with that word: it is not matched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from pydantic import BaseModel, ConfigDict

from retrieval.analyzer import analyze
from retrieval.synonyms import load_packaged

MAX_FORM_STEMS = 3


class EverydayEntry(BaseModel):
    """Everyday Russian forms of one concept (a word, or a phrase of up to three words) and the law's terms."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    ru_forms: list[str]
    ru: list[str]


class EverydayGlossary(BaseModel):
    """retrieval/data/glossary_ru.json."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    entries: list[EverydayEntry]


@dataclass(frozen=True)
class EverydayTerms:
    """The law's terms for the everyday words of a Russian text."""

    forms: dict[str, list[tuple[tuple[str, ...], int]]]  # a form's first stem → (its stems, its entry), longest first
    terms: tuple[tuple[str, ...], ...]  # per entry: the law's terms as written

    @classmethod
    @cache
    def packaged(cls) -> EverydayTerms:
        return cls.of(load_packaged("glossary_ru.json", EverydayGlossary))

    @classmethod
    def of(cls, glossary: EverydayGlossary) -> EverydayTerms:
        forms: dict[str, list[tuple[tuple[str, ...], int]]] = {}
        for i, entry in enumerate(glossary.entries):
            for form in entry.ru_forms:
                stems = tuple(analyze(form, "ru"))
                if len(stems) == 1 and len(form.split()) > 1:
                    continue
                if 0 < len(stems) <= MAX_FORM_STEMS:
                    forms.setdefault(stems[0], []).append((stems, i))
        for found in forms.values():
            found.sort(key=lambda f: -len(f[0]))
        return cls(forms, tuple(tuple(entry.ru) for entry in glossary.entries))

    def entries(self, stems: Sequence[str]) -> list[int]:
        """The entries whose forms the stems hold, each once, in the order met."""
        out: dict[int, None] = {}
        i = 0
        while i < len(stems):
            match = next(
                (f for f in self.forms.get(stems[i], ()) if tuple(stems[i : i + len(f[0])]) == f[0]),
                None,
            )
            if match is None:
                i += 1
                continue
            out.setdefault(match[1], None)
            i += len(match[0])
        return list(out)

    def phrases(self, text: str) -> list[str]:
        """The law's terms (as written) for the everyday words of a Russian text, each once, in the order met."""
        return list(dict.fromkeys(t for i in self.entries(analyze(text, "ru")) for t in self.terms[i]))

    def query(self, text: str) -> str:
        """The BM25 query of the everyday search: the stems of the law's terms for the text's words,
        space-separated, each once ("" when its words are the law's already)."""
        return " ".join(dict.fromkeys(stem for term in self.phrases(text) for stem in analyze(term, "ru")))
