"""Remedy routes: the articles on where and how to defend a right, which a lawyer cites beside the substance.

Asked «продавец не возвращает деньги за бракованный телефон, что делать?», a lawyer cites the consumer-law
article and, with it, how to go to court: ГК РК 9 (защита гражданских прав), ГПК РК 148 and 149 (the claim and
what to attach), 29 (which court). No word of the question names them, so neither BM25 nor dense search finds
them. A route (retrieval/data/remedies.json) names the documents of its branch of law and its articles; it
applies to a question that is not about a crime, names no article, and whose best found articles mostly come
from that branch. Its articles then enter the ranking at a fixed rank, below the best substantive matches
(`RemedyRoutes`, a document compressor over the ranking).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache

from langchain_core.callbacks import Callbacks
from langchain_core.documents import Document
from langchain_core.documents.compressor import BaseDocumentCompressor
from pydantic import BaseModel, ConfigDict

from retrieval.articles import ArticleChunks, key_of
from retrieval.query import QueryInfo, analyze_query
from retrieval.ranking import from_corpus, ranked_copy, score_of
from retrieval.records import as_query
from retrieval.synonyms import SynonymRef, load_packaged

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


class RemedyRoutes(BaseDocumentCompressor):
    """The ranking with the question's remedy route (`pick_route`) from `rank` (`short_rank` for a question shorter
    than `short_chars`), one article every `spacing` places: its articles not already above are moved (or, not
    found, inserted) there, with the score of the article before them and via "remedy"; one the search put above
    its slot keeps its place among the found articles.
    A follow-up's route articles the previous answer already gave (`Followup.given`) are left where they are."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    articles: ArticleChunks
    """The corpus by article (a route article must exist in it)."""
    rank: int = 4
    """The position the route's articles enter at (settings.remedy_rank)."""
    short_chars: int = 0
    """A question shorter than this gets them at `short_rank` instead (settings.remedy_short_chars); 0: never."""
    short_rank: int = 5
    spacing: int = 1
    """Places from one route article to the next (settings.remedy_spacing): 1 puts them together, 2 leaves
    a found article between each two."""
    analyze: Callable[[str], QueryInfo] = analyze_query
    """Question → QueryInfo, for a question given as a plain `str`."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        q = as_query(query, self.analyze)
        ranked = list(documents)
        route = pick_route(q.info, [key_of(d)[0] for d in ranked])
        if route is None:
            return ranked
        rank = self.short_rank if len(q.info.text) < self.short_chars else self.rank
        head = ranked[:rank]
        in_head = {key_of(d) for d in head}
        refs = [(r.doc_id, r.article) for r in route.refs]
        given = q.followup.given
        moved = [k for k in refs if k in self.articles and k not in in_head and k not in given]
        if not moved:
            return ranked
        # The route's articles the search found come first, in its order (the one it ranks higher is likelier the
        # one asked about: «сколько у меня времени, чтобы обратиться в суд» — ТК 160 before 159); then the rest.
        position = {key_of(d): i for i, d in enumerate(ranked)}
        pending = sorted(moved, key=lambda k: position.get(k, len(ranked)))
        out, queue = list(head), list(ranked[rank:])
        next_slot = rank  # the place of the next route article: `rank`, then `spacing` below the last one placed
        while pending:
            # Found articles fill the places before the next route slot; a route article the search put there
            # keeps its place (a route never lowers what the search found).
            while len(out) < next_slot and queue:
                doc = queue.pop(0)
                if key_of(doc) in pending:
                    pending.remove(key_of(doc))
                    doc = ranked_copy(doc, via="remedy")
                    next_slot = len(out) + self.spacing
                out.append(doc)
            if not pending:
                break
            k = pending.pop(0)
            score = score_of(out[-1]) if out else 1.0
            if k in position:
                queue = [d for d in queue if key_of(d) != k]
                out.append(ranked_copy(ranked[position[k]], score=score, via="remedy"))
            else:
                out.append(from_corpus(self.articles, k, score=score, via="remedy"))
            next_slot = len(out) - 1 + self.spacing
        return [*out, *queue]
