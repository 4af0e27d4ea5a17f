"""Loading what retrieval runs on, once: the corpus by article, BM25, the vector store, the latent terms, the
reranker and the learned ranker — and which of the index's searches are not there yet (`pending`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.vectorstores import VectorStore

from config import Settings
from corpus.errors import DataDamaged, IndexNotReady
from corpus.files import DamagedFile
from corpus.records import Chunk
from index.documents import index_command
from index.lexicon import Lexicon, load_lexicon
from index.sparse import sparse_enabled
from index.status import IndexPending, index_pending
from index.titles import TitleVectors, load_titles
from retrieval.articles import ArticleChunks
from retrieval.bm25 import ChunkBM25Retriever
from retrieval.bm25_index import load_bm25
from retrieval.crosslang import with_glossary
from retrieval.learned import LearnedRanker
from retrieval.rerank import FloatFlashrankRerank, load_reranker
from retrieval.searches import build_latent
from retrieval.stages import Stages

logger = logging.getLogger(__name__)

OUT_OF_DATE = "out of date (the corpus or the settings changed since they were built)"


@dataclass(frozen=True)
class Loaded:
    """Everything a retrieval pipeline is composed from."""

    articles: ArticleChunks
    bm25: ChunkBM25Retriever | None
    vector_store: VectorStore | None
    latent: ChunkBM25Retriever | None
    reranker: FloatFlashrankRerank | None
    learned: LearnedRanker | None
    pending: IndexPending | None
    lexicon: Lexicon | None = None
    titles: TitleVectors | None = None


def load(
    settings: Settings,
    stages: Stages,
    *,
    chunks: Sequence[Chunk] | None = None,
    vector_store: VectorStore | None = None,
    latent_index: tuple[object, list[str]] | None = None,
) -> Loaded:
    """Load the corpus, BM25 (from the analysis the index build kept, else analysing every chunk), open the vector
    store and the latent-term index (`latent_index` if given, else the built one), and load the reranker when its
    model folder exists — each only if `stages` has it.

    A vector or latent-term index that is not built, or was built from another corpus, is left out and recorded
    in `pending` (what is missing, the command that builds it, an estimate): the lexical searches answer
    meanwhile. A damaged one (DataDamaged, naming the file and the repair command) is an error."""
    from index.build import index_command, load_latent_index, load_vector_store, read_chunks_and_stat
    from index.embeddings import make_embeddings

    start = time.perf_counter()
    chunks, read_at = (list(chunks), None) if chunks is not None else read_chunks_and_stat(settings)
    articles = ArticleChunks.from_chunks(chunks)
    loaded = time.perf_counter()
    bm25 = _bm25(articles, settings) if stages.bm25 else None
    lexicon = None
    if bm25 is not None and (settings.crosslang_weight > 0 or settings.crosslang_ru_weight > 0):
        try:
            lexicon = load_lexicon(settings, chunks)
            if settings.crosslang_glossary:
                lexicon = with_glossary(lexicon)
        except DamagedFile as err:
            raise DataDamaged(err.path, err.problem, index_command(settings)) from None
    indexed = time.perf_counter()
    missing: list[str] = []
    reason = "not built yet"
    embeddings = None
    if stages.dense and vector_store is None:
        embeddings = make_embeddings(settings)
        try:
            vector_store = load_vector_store(settings, embeddings=embeddings, chunks=chunks, read_at=read_at)
        except DataDamaged:
            raise
        except IndexNotReady as err:
            logger.info("Dense search left out until the index is built: %s", err)
            missing.append("dense")
            if settings.vector_store == "faiss" and (settings.index_dir / "faiss" / "meta.json").exists():
                reason = OUT_OF_DATE
    titles = None
    if stages.titles and settings.title_weight > 0 and vector_store is not None and vector_store.embeddings:
        try:
            titles = load_titles(settings, chunks, vector_store.embeddings)
        except DamagedFile as err:
            raise DataDamaged(err.path, err.problem, index_command(settings)) from None
    latent = None
    if stages.sparse and sparse_enabled(settings):
        # Not looked for when never built: load_sparse would log a second line about the same thing.
        if latent_index is None and (settings.index_dir / "sparse" / "meta.json").exists():
            latent_index = load_latent_index(settings, chunks)
            if latent_index is None:
                reason = OUT_OF_DATE
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
        + (", title rerank on" if titles else "")
        + (", learned ranker on" if learned else "")
        + (", reranker on" if reranker else ""),
    )
    return Loaded(articles, bm25, vector_store, latent, reranker, learned, pending, lexicon, titles)


def _bm25(articles: ArticleChunks, settings: Settings) -> ChunkBM25Retriever:
    """BM25 from the analysis the index build kept (retrieval/bm25_index.py), else analysing the chunks;
    DataDamaged (naming the file and the command that rebuilds it) when a kept file is damaged."""
    try:
        return load_bm25(articles.documents, settings)
    except DamagedFile as err:
        raise DataDamaged(err.path, err.problem, index_command(settings)) from None
