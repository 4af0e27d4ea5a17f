"""Remedy routes: the articles on where and how to defend a right, which a lawyer cites beside the substance.

Asked «продавец не возвращает деньги за бракованный телефон, что делать?», a lawyer cites the consumer-law
article and, with it, how to go to court: ГК РК 9 (защита гражданских прав), ГПК РК 148 and 149 (the claim and
what to attach), 29 (which court). No word of the question names them, so neither BM25 nor dense search finds
them. A route (retrieval/data/remedies.json) names the documents of its branch of law and its articles; it
applies to a question that is not about a crime, names no article, and whose best found articles mostly come
from that branch. Its articles then enter the ranking at a fixed rank, below the best substantive matches.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from pydantic import BaseModel, ConfigDict

from retrieval.query import QueryInfo, SynonymRef, load_packaged

FOUND_WINDOW = 10  # the best found articles a route's branch is judged on


class RemedyRoute(BaseModel):
    """The articles on defending a right in one branch of law, and the documents of that branch."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    topic: str
    domain_docs: list[str]
    refs: list[SynonymRef]
    min_found: int = 3


class RemedyMap(BaseModel):
    """retrieval/data/remedies.json."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    about: str = ""
    routes: list[RemedyRoute]


@cache
def load_remedies() -> RemedyMap:
    """The packaged remedy routes."""
    return load_packaged("remedies.json", RemedyMap)


def pick_route(info: QueryInfo, found_doc_ids: Sequence[str]) -> RemedyRoute | None:
    """The route whose documents give most of the best found articles (at least its min_found of the first
    FOUND_WINDOW), for a question that is not about a crime and names no article; else None."""
    if info.is_criminal or info.refs or info.is_range:
        return None
    window = list(found_doc_ids[:FOUND_WINDOW])
    best: tuple[int, RemedyRoute] | None = None
    for route in load_remedies().routes:
        n = sum(1 for d in window if d in route.domain_docs)
        if n >= route.min_found and (best is None or n > best[0]):
            best = (n, route)
    return best[1] if best else None
