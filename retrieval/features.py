"""The learned stage's candidates and their features: one function, `candidate_pool`, used by training
(retrieval/train.py) and at query time (retrieval/learned.py), so that the model scores what it learned from.

question ─ first stage (fused, law-aware; every search's top `pool_k`) ─┬─ candidate articles ─ features
           remedy route of the question (retrieval/remedies.py) ────────┘

A candidate's features: per search (BM25, e5 vectors, latent terms) its rank in that search's list, its best and
mean chunk score and the best relative to the pool's best; the fused rank and score; the share of its code among
the best fused candidates; whether the question names its code or is about a crime; its length, number, status,
the overlap of its title with the question; remedy-route membership. A search that is off gives NaN (absent),
which LightGBM treats as missing.

The pipeline (retrieval/pipeline.py) composes the learned stage over these features, so it is above them: they
read it through `Pipeline`, the part of it they need, and import nothing of it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from config import Settings
from corpus.legal.registry import CRIMINAL_CODE_ID
from retrieval.analyzer import analyze
from retrieval.articles import ArticleChunks, ArticleKey, key_of
from retrieval.bm25 import ChunkBM25Retriever
from retrieval.query import QueryInfo
from retrieval.records import Query
from retrieval.remedies import pick_route
from retrieval.searches import dense_query
from retrieval.stages import Stages

logger = logging.getLogger(__name__)

FEATURE_SCHEMA = 1  # bump when a feature's meaning changes: a model of another schema is not loaded
SEARCHES = ("bm25", "dense", "latent")
CODE_WINDOW = 20  # the best fused candidates a code's share is measured on
SEARCH_WINDOW = 10  # each search's best articles its code share is measured on

FEATURE_NAMES: tuple[str, ...] = (
    *(f"{s}_{f}" for s in SEARCHES for f in ("rank", "best", "rel", "mean", "code_top")),
    "fused_rank",
    "fused_score",
    "fused_rel",
    "n_lists",
    "law_aware",
    "code_share",
    "code_best_rank",
    "code_mass",
    "named_code",
    "criminal_question",
    "criminal_code",
    "remedy",
    "route",
    "length",
    "chunks",
    "number",
    "number_rel",
    "repealed",
    "title_overlap",
    "title_hits",
    "question_length",
    "question_kk",
)
COLUMN = {name: i for i, name in enumerate(FEATURE_NAMES)}


class Pipeline(Protocol):
    """What the features read of a loaded pipeline (retrieval.pipeline.Retrieval, which composes the learned stage
    over them): its settings and recipe, its corpus and searches, its question analysis and its first stage."""

    @property
    def settings(self) -> Settings: ...
    @property
    def stages(self) -> Stages: ...
    @property
    def articles(self) -> ArticleChunks: ...
    @property
    def bm25(self) -> ChunkBM25Retriever | None: ...
    @property
    def vector_store(self) -> VectorStore | None: ...
    @property
    def latent(self) -> ChunkBM25Retriever | None: ...
    def analyze(self, question: str) -> QueryInfo: ...
    def candidates(self, question: str) -> list[Document]: ...


@dataclass(frozen=True)
class Pool:
    """The candidate articles of one question (fused order), a Document for each, and their feature rows."""

    keys: list[ArticleKey]
    docs: list[Document]
    matrix: np.ndarray  # len(keys) × len(FEATURE_NAMES), float32; NaN = absent
    remedy: frozenset[ArticleKey]


@dataclass(frozen=True)
class _Static:
    """Per-article facts and each search's rows per article, computed once per loaded corpus."""

    index: dict[ArticleKey, int]
    facts: np.ndarray  # per article: length, chunks, number, number_rel, repealed
    title_stems: list[frozenset[str]]
    rows: dict[str, list[np.ndarray]]  # search → per article, the rows of that search's score vector
    vectors: np.ndarray | None  # dense: the index's vectors (rows as in rows["dense"])


_STATIC: dict[tuple[int, ...], tuple[object, _Static]] = {}


def article_number(article: str) -> float:
    """An article's number as a float («188-1» → 188.0), NaN when it has none."""
    head = article.split("-")[0].split(".")[0]
    return float(head) if head.isdigit() else math.nan


def _static(retrieval: Pipeline) -> _Static:
    """The per-corpus part, shared by every variant of one loaded pipeline."""
    parts = (retrieval.articles, retrieval.bm25, retrieval.vector_store, retrieval.latent)
    key = tuple(id(p) for p in parts)
    cached = _STATIC.get(key)
    if cached is None:
        cached = (parts, _build_static(retrieval))  # the parts are kept so their ids stay theirs
        _STATIC.clear()  # one pipeline at a time: a test session builds several, each once
        _STATIC[key] = cached
    return cached[1]


def _build_static(retrieval: Pipeline) -> _Static:
    articles: ArticleChunks = retrieval.articles
    keys = list(articles.by_article)
    index = {k: i for i, k in enumerate(keys)}
    last: dict[str, float] = {}
    for doc_id, article in keys:
        n = article_number(article)
        if not math.isnan(n):
            last[doc_id] = max(last.get(doc_id, 0.0), n)
    facts = np.zeros((len(keys), 5), dtype=np.float32)
    titles: list[frozenset[str]] = []
    for i, k in enumerate(keys):
        positions = articles.positions(k, "ru")
        first = articles.documents[positions[0]]
        n = article_number(k[1])
        facts[i] = (
            math.log1p(sum(len(articles.documents[p].page_content) for p in positions)),
            len(positions),
            n,
            n / last[k[0]] if k[0] in last else math.nan,
            first.metadata.get("status") == "repealed",
        )
        titles.append(frozenset(analyze(first.metadata.get("title") or "")))
    rows: dict[str, list[np.ndarray]] = {}
    position = {d.id: i for i, d in enumerate(articles.documents)}

    def by_article(doc_ids: Sequence[str | None]) -> list[np.ndarray]:
        grouped: list[list[int]] = [[] for _ in keys]
        for row, cid in enumerate(doc_ids):
            if cid in position:
                grouped[index[key_of(articles.documents[position[cid]])]].append(row)
        return [np.asarray(g, dtype=np.int64) for g in grouped]

    if retrieval.bm25 is not None:
        rows["bm25"] = by_article([d.id for d in retrieval.bm25.docs])
    if retrieval.latent is not None:
        rows["latent"] = by_article([d.id for d in retrieval.latent.docs])
    vectors = None
    store = retrieval.vector_store
    if store is not None and hasattr(store, "index") and hasattr(store, "index_to_docstore_id"):
        n = store.index.ntotal
        vectors = store.index.reconstruct_n(0, n) if n else np.zeros((0, 1), dtype=np.float32)
        rows["dense"] = by_article([store.index_to_docstore_id.get(i) for i in range(n)])
    return _Static(index, facts, titles, rows, vectors)


def _search_scores(retrieval: Pipeline, info: QueryInfo, static: _Static) -> dict[str, np.ndarray]:
    """Each search's score of every row it has (chunks), for the question as that search reads it. The
    encodings are the ones the first stage just made (remembered), so this costs a few milliseconds."""
    out: dict[str, np.ndarray] = {}
    if retrieval.bm25 is not None:
        out["bm25"] = retrieval.bm25.chunk_scores(info.augmented)
    if retrieval.latent is not None:
        out["latent"] = retrieval.latent.chunk_scores(info.text[: retrieval.settings.sparse_query_max_chars])
    if static.vectors is not None and retrieval.vector_store is not None:
        embeddings = retrieval.vector_store.embeddings
        if embeddings is None:  # LangChain types it Optional; our stores are always built with their embeddings
            raise ValueError("the vector store has no embeddings to encode the question with")
        text = dense_query(info.augmented, retrieval.settings.dense_query_max_chars)
        query = embeddings.embed_query(text)
        out["dense"] = np.asarray(query, dtype=np.float32)  # rows are scored on demand (pool only)
    return out


def _best_and_mean(
    scores: np.ndarray, rows: list[np.ndarray], ids: Sequence[int], vectors: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate, its best and mean chunk score (NaN when the search has no chunk of it)."""
    best = np.full(len(ids), np.nan, dtype=np.float32)
    mean = np.full(len(ids), np.nan, dtype=np.float32)
    have = [j for j, a in enumerate(ids) if len(rows[a])]
    if not have:
        return best, mean
    parts = [rows[ids[j]] for j in have]
    flat = np.concatenate(parts)
    values = vectors[flat] @ scores if vectors is not None else scores[flat]
    starts = np.cumsum([0, *(len(p) for p in parts[:-1])])
    best[have] = np.maximum.reduceat(values, starts)
    mean[have] = np.add.reduceat(values, starts) / np.asarray([len(p) for p in parts])
    return best, mean


def candidate_pool(retrieval: Pipeline, question: str, candidates: Sequence[Document] | None = None) -> Pool:
    """The candidate articles of a question (a `Query` carries its analysis) and their features. `candidates`
    are the first stage's fused articles (`retrieval.candidates(question)`, computed here when not given); the
    remedy route's articles join them."""
    info = question.info if isinstance(question, Query) else retrieval.analyze(question)
    if candidates is None:
        candidates = retrieval.candidates(question)
    static = _static(retrieval)
    first: dict[ArticleKey, Document] = {}
    for d in candidates:
        if key_of(d) in static.index:
            first.setdefault(key_of(d), d)
    keys = list(first)
    docs = list(first.values())
    on = retrieval.stages.remedies and retrieval.settings.remedies
    route = pick_route(info, [k[0] for k in keys]) if on else None
    remedy = frozenset((r.doc_id, r.article) for r in route.refs) if route else frozenset()
    n_fused = len(keys)
    for k in sorted(remedy - set(keys)):
        if k in static.index:
            keys.append(k)
            docs.append(retrieval.articles.documents[retrieval.articles.positions(k, "ru")[0]])
    ids = [static.index[k] for k in keys]
    m = np.full((len(keys), len(FEATURE_NAMES)), np.nan, dtype=np.float32)
    if not keys:
        return Pool(keys, docs, m, remedy)

    searches = [
        s
        for s, on in zip(SEARCHES, (retrieval.bm25, retrieval.vector_store, retrieval.latent), strict=True)
        if on is not None
    ]
    for j, d in enumerate(docs[:n_fused]):
        ranks = d.metadata.get("ranks") or []
        for s, r in zip(searches, ranks, strict=False):
            if r is not None:
                m[j, COLUMN[f"{s}_rank"]] = r
        m[j, COLUMN["n_lists"]] = sum(r is not None for r in ranks)
        m[j, COLUMN["fused_score"]] = d.metadata.get("score", 0.0)
        m[j, COLUMN["fused_rank"]] = j + 1
        m[j, COLUMN["law_aware"]] = bool(d.metadata.get("law_aware"))
    m[n_fused:, COLUMN["n_lists"]] = 0
    m[n_fused:, COLUMN["law_aware"]] = 0
    top = float(m[0, COLUMN["fused_score"]]) if n_fused else 0.0
    if top > 0:
        m[:n_fused, COLUMN["fused_rel"]] = m[:n_fused, COLUMN["fused_score"]] / top

    for s, scores in _search_scores(retrieval, info, static).items():
        vectors = static.vectors if s == "dense" else None
        best, mean = _best_and_mean(scores, static.rows[s], ids, vectors)
        m[:, COLUMN[f"{s}_best"]] = best
        m[:, COLUMN[f"{s}_mean"]] = mean
        peak = np.nanmax(best) if np.isfinite(best).any() else 0.0
        if peak > 0:
            m[:, COLUMN[f"{s}_rel"]] = best / peak

    codes = np.asarray([k[0] for k in keys])
    for s in searches:  # the share of the candidate's code among each search's best articles
        ranks = m[:, COLUMN[f"{s}_rank"]]
        top_codes = codes[np.nan_to_num(ranks, nan=np.inf) <= SEARCH_WINDOW]
        if len(top_codes):
            counts = zip(*np.unique(top_codes, return_counts=True), strict=True)
            shares = {c: n / len(top_codes) for c, n in counts}
            m[:, COLUMN[f"{s}_code_top"]] = [shares.get(c, 0.0) for c in codes]
    fused = np.nan_to_num(m[:n_fused, COLUMN["fused_score"]])
    mass = {c: float(fused[codes[:n_fused] == c].sum()) for c in set(codes[:n_fused])}
    total = sum(mass.values())
    window = [k[0] for k in keys[: min(CODE_WINDOW, n_fused)]]
    first_rank: dict[str, int] = {}
    for j, k in enumerate(keys[:n_fused]):
        first_rank.setdefault(k[0], j + 1)
    question_stems = set(analyze(info.text))
    for j, k in enumerate(keys):
        m[j, COLUMN["code_share"]] = window.count(k[0]) / len(window) if window else 0.0
        m[j, COLUMN["code_best_rank"]] = first_rank.get(k[0], n_fused + 1)
        m[j, COLUMN["code_mass"]] = mass.get(k[0], 0.0) / total if total > 0 else 0.0
        m[j, COLUMN["named_code"]] = k[0] in info.codes
        m[j, COLUMN["criminal_code"]] = k[0] == CRIMINAL_CODE_ID
        m[j, COLUMN["remedy"]] = k in remedy
        title = static.title_stems[ids[j]]
        hits = len(title & question_stems)
        m[j, COLUMN["title_hits"]] = hits
        m[j, COLUMN["title_overlap"]] = hits / len(title) if title else 0.0
    facts = static.facts[ids]
    for c, name in enumerate(("length", "chunks", "number", "number_rel", "repealed")):
        m[:, COLUMN[name]] = facts[:, c]
    m[:, COLUMN["criminal_question"]] = info.is_criminal
    m[:, COLUMN["route"]] = route is not None
    m[:, COLUMN["question_length"]] = math.log1p(len(info.text))
    m[:, COLUMN["question_kk"]] = info.lang == "kk"
    return Pool(keys, docs, m, remedy)
