"""BM25 over every chunk, as a LangChain `BM25Retriever` backed by a precomputed sparse matrix.

rank-bm25 (BM25Retriever's default vectorizer) scores each query term against every document in a Python loop:
on the full corpus (~18k chunks) a long citizen question costs hundreds of milliseconds. `SparseBM25`
computes the same Okapi weights once at build time: a query is one sparse column slice and a sum (~1 ms).

bm25s does the same with a sparse matrix, but none of its variants has BM25Okapi's floor for terms in over half
the chunks («стат», «рк», «1», «2»: idf 0.25 × the mean idf here, 0 in bm25s), so it ranks 112 of the 360 gold
questions differently; measured by bench/bm25_bench.py (docs/evaluation.md, "BM25"): no faster per query, twice
as slow to build, and not at least equal on every gold set, so this scorer stays.
"""

from __future__ import annotations

import bisect
import itertools
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from langchain_community.retrievers import BM25Retriever
from langchain_community.retrievers.bm25 import default_preprocessing_func
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from pydantic import PrivateAttr
from scipy import sparse

logger = logging.getLogger(__name__)


class SparseScorer:
    """Documents × features weights in a CSC matrix: a query scores as a column slice times its weights (~1 ms
    over the corpus). Subclasses say how a query becomes (feature ids, weights)."""

    matrix: sparse.csc_matrix
    n_docs: int

    def get_scores(self, query: Any) -> np.ndarray:
        raise NotImplementedError

    def _scores(self, ids: Sequence[int] | np.ndarray, weights: np.ndarray) -> np.ndarray:
        if len(ids) == 0:
            return np.zeros(self.n_docs, dtype=np.float32)
        return np.asarray(self.matrix[:, ids] @ weights).ravel()

    def top_n(self, query: Any, n: int, mask: np.ndarray | None = None) -> list[tuple[int, float]]:
        """(document index, score) of the n best documents with a positive score, optionally within a mask."""
        scores = self.get_scores(query)
        if mask is not None:
            scores = np.where(mask, scores, 0.0)
        n = min(n, int(np.count_nonzero(scores > 0)))
        if n <= 0:
            return []
        best = np.argpartition(-scores, n - 1)[:n]
        best = best[np.argsort(-scores[best], kind="stable")]
        return [(int(i), float(scores[i])) for i in best]

    def get_top_n(self, query: Any, documents: Sequence[Any], n: int = 5) -> list[Any]:
        """rank-bm25's interface, as BM25Retriever calls it."""
        return [documents[i] for i, _ in self.top_n(query, n)]


class SparseBM25(SparseScorer):
    """Okapi BM25 (rank-bm25's BM25Okapi formula) with per-term weights precomputed in a sparse matrix."""

    vocab: Mapping[str, int]
    """Term → its column in `matrix`."""

    def __init__(self, corpus: Sequence[Sequence[str]], *, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25):
        """Args: corpus: the analyzed terms of each document; k1, b, epsilon: as in rank_bm25.BM25Okapi."""
        vocab: dict[str, int] = {}
        self.vocab = vocab
        rows: list[int] = []
        cols: list[int] = []
        tfs: list[int] = []
        lengths = np.zeros(len(corpus), dtype=np.float32)
        for i, terms in enumerate(corpus):
            lengths[i] = len(terms)
            for term, tf in Counter(terms).items():
                rows.append(i)
                cols.append(vocab.setdefault(term, len(vocab)))
                tfs.append(tf)
        n_docs = len(corpus)
        tf = sparse.csc_matrix((np.asarray(tfs, dtype=np.float32), (rows, cols)), shape=(n_docs, len(vocab)))
        df = np.diff(tf.indptr).astype(np.float32)  # documents per term (csc: nonzeros per column)
        idf = np.log(n_docs - df + 0.5) - np.log(df + 0.5)
        # rank-bm25 floors negative idf (terms in over half the documents) at epsilon × the mean idf.
        idf = np.where(idf < 0, epsilon * float(idf.mean()) if len(idf) else 0.0, idf)
        avgdl = float(lengths.mean()) if n_docs else 1.0
        norm = k1 * (1 - b + b * lengths / max(avgdl, 1e-9))
        coo = tf.tocoo()
        weights = idf[coo.col] * coo.data * (k1 + 1) / (coo.data + norm[coo.row])
        self.matrix = sparse.csc_matrix((weights.astype(np.float32), (coo.row, coo.col)), shape=tf.shape)
        self.n_docs = n_docs

    @classmethod
    def from_weights(cls, matrix: sparse.csc_matrix, terms: SortedTerms) -> SparseBM25:
        """The scorer over weights computed before (kept by the index build, retrieval/bm25_index.py): `matrix`,
        documents × terms, its columns in the order of `terms`. It scores exactly as the scorer they were taken
        from: a document's score adds its query terms' weights in the query's order, whatever their columns."""
        scorer = cls.__new__(cls)
        scorer.matrix, scorer.n_docs, scorer.vocab = matrix, matrix.shape[0], terms
        return scorer

    @property
    def terms(self) -> list[str]:
        """The term of each column of `matrix`, in order."""
        return list(self.vocab)  # the analysis gave ids in insertion order; SortedTerms iterates in its order

    def get_scores(self, query: Sequence[str]) -> np.ndarray:
        """BM25 score of every document; a term repeated in the query counts as often as it appears."""
        counts = Counter(t for t in query if t in self.vocab)
        ids = [self.vocab[t] for t in counts]
        return self._scores(ids, np.fromiter(counts.values(), np.float32, len(ids)))


class SortedTerms(Mapping[str, int]):
    """Term → column, for columns in ascending term order, looked up by bisection: nothing to build when it is
    read back (a dict of the full corpus's ~400k terms takes ~0.25 s to hash, a quarter of a start)."""

    def __init__(self, terms: list[str]) -> None:
        """Args: terms: in strictly ascending order (`is_sorted` says whether they are)."""
        self._terms = terms

    def is_sorted(self) -> bool:
        return all(a < b for a, b in itertools.pairwise(self._terms))

    def __getitem__(self, term: str) -> int:
        i = bisect.bisect_left(self._terms, term)
        if i == len(self._terms) or self._terms[i] != term:
            raise KeyError(term)
        return i

    def __iter__(self) -> Iterator[str]:
        return iter(self._terms)

    def __len__(self) -> int:
        return len(self._terms)


class LatentScorer(SparseScorer):
    """Dot product of latent-term vectors (index/sparse.py); a query is (feature ids, weights)."""

    def __init__(self, matrix: sparse.spmatrix):
        self.matrix = sparse.csc_matrix(matrix, dtype=np.float32)
        self.n_docs = self.matrix.shape[0]

    def get_scores(self, query: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        ids, weights = query
        return self._scores(ids, np.asarray(weights, dtype=np.float32))


def title_weighted(preprocess: Callable[[str], list[str]], title_weight: int) -> Callable[[str], list[str]]:
    """A document analyzer counting the terms of the header line («УК РК. Статья 188. Кража») k times."""
    if title_weight <= 1:
        return preprocess

    def analyze_document(text: str) -> list[str]:
        head, _, body = text.partition("\n")
        return preprocess(head) * title_weight + preprocess(body)

    return analyze_document


class ChunkBM25Retriever(BM25Retriever):
    """BM25Retriever over chunks with a fast scorer; results are copies carrying their score in
    `metadata[score_key]` ("bm25_score"; the latent-term search, which shares this class, "latent_score").

    With `group_by="article_key"` it returns the best chunk of each of the k best articles (an article scores
    as its best chunk), so that one long article cannot fill the list and fusion works per article.
    """

    group_by: str | None = None
    """Metadata key to keep only the best document of (e.g. "article_key"); None returns chunks."""
    filter: dict[str, Any] | None = None
    """Only documents whose metadata equal these values, e.g. {"doc_id": "K1400000226"}."""
    score_key: str = "bm25_score"
    """The metadata key a result's score goes to."""
    preprocess_func: Callable[[str], Any] = default_preprocessing_func
    """The query as the vectorizer takes it: BM25's terms, or the latent terms' (feature ids, weights)."""
    _masks: dict[tuple[Any, ...], np.ndarray] = PrivateAttr(default_factory=dict)

    @classmethod
    def from_documents(
        cls,
        documents: Iterable[Document],
        *,
        bm25_params: dict[str, Any] | None = None,
        preprocess_func: Callable[[str], list[str]] = str.split,
        title_weight: int = 1,
        **kwargs: Any,
    ) -> ChunkBM25Retriever:
        """Analyze the documents (header line counted `title_weight` times) and precompute BM25 weights."""
        docs = list(documents)
        analyze_document = title_weighted(preprocess_func, title_weight)
        vectorizer = SparseBM25([analyze_document(d.page_content) for d in docs], **(bm25_params or {}))
        return cls(vectorizer=vectorizer, docs=docs, preprocess_func=preprocess_func, **kwargs)

    def _mask(self, where: dict[str, Any]) -> np.ndarray:
        key = tuple(sorted(where.items()))
        mask = self._masks.get(key)
        if mask is None:  # computed once per filter: scanning every chunk's metadata costs milliseconds
            mask = np.fromiter(
                (all(d.metadata.get(k) == v for k, v in where.items()) for d in self.docs),
                bool,
                len(self.docs),
            )
            self._masks[key] = mask
        return mask

    def chunk_scores(self, query: str) -> np.ndarray:
        """The score of every document (chunk) in `docs` for the query, in their order (0: no match)."""
        return self.vectorizer.get_scores(self.preprocess_func(query))

    def search(self, query: str, k: int | None = None, *, where: dict[str, Any] | None = None) -> list[Document]:
        """The k best documents (or articles, see group_by) for a query, optionally within a filter."""
        k = k or self.k
        where = {**(self.filter or {}), **(where or {})}
        mask = self._mask(where) if where else None
        terms = self.preprocess_func(query)
        # Grouping keeps one chunk per article: ask for enough chunks that k articles survive.
        hits = self.vectorizer.top_n(terms, k if self.group_by is None else k * 8, mask)
        out: list[Document] = []
        seen: set[Any] = set()
        for i, score in hits:
            doc = self.docs[i]
            if self.group_by is not None:
                key = doc.metadata.get(self.group_by)
                if key in seen:
                    continue
                seen.add(key)
            out.append(
                Document(page_content=doc.page_content, metadata={**doc.metadata, self.score_key: score}, id=doc.id)
            )
            if len(out) == k:
                break
        return out

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return self.search(query)
