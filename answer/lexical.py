"""Stemmed lexical overlap, shared by the extractive answer (scoring) and the grounding check (support)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from corpus.records import Lang
from retrieval.analyzer import analyze

logger = logging.getLogger(__name__)

# Stems of one word in different forms can still differ in their ends («наказан» / «наказыва»,
# «жаза» / «жазалан»); a shared five-letter start, or a four-letter stem starting the other, is a match.
_PREFIX = 5
_SHORT = 4


class TermSet:
    """The stemmed terms of a text, with the prefixes that let inflected forms match."""

    def __init__(self, terms: Iterable[str]) -> None:
        self.terms = frozenset(terms)
        self._prefixes = frozenset(t[:k] for t in self.terms for k in (_SHORT, _PREFIX) if len(t) >= k)

    @classmethod
    def of(cls, text: str, lang: Lang | None = None) -> TermSet:
        return cls(analyze(text, lang))

    def __contains__(self, term: object) -> bool:
        if not isinstance(term, str):
            return False
        if term in self.terms:
            return True
        if term[0].isdigit():  # article and part numbers match exactly or not at all
            return False
        if len(term) >= _PREFIX:
            return term[:_PREFIX] in self._prefixes
        return len(term) == _SHORT and term in self._prefixes

    def __len__(self) -> int:
        return len(self.terms)

    def __or__(self, other: TermSet) -> TermSet:
        return TermSet(self.terms | other.terms)


def coverage(terms: Iterable[str], reference: TermSet) -> float:
    """Share of `terms` (distinct) found in `reference`; 0.0 when there are none."""
    distinct = set(terms)
    if not distinct:
        return 0.0
    return sum(t in reference for t in distinct) / len(distinct)
