"""BM25 on the full corpus: the hand-written `SparseBM25` (rank-bm25's BM25Okapi) against bm25s's variants.

    python -m bench.bm25_bench [--data-dir DIR] [--questions FILE.jsonl ...] [--k 100] [--pipeline NAME ...]

For each scorer: build time over every chunk (analysis done once beforehand, not counted), query latency
(scores of every chunk + the top k·8 the retriever asks for) over the gold questions, and how its chunk rankings
compare with the hand-written scorer's: questions whose top k chunks are the same in the same order, and the
largest score difference. With --pipeline, the named scorers also rank the gold questions through the whole
retrieval pipeline (same loaded vectors, latent terms, reranker and learned ranker; only BM25 swapped):
hit@k and MRR per gold file. The data dir is only read.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import bm25s
import numpy as np
from rich.console import Console
from rich.table import Table
from scipy import sparse

from config import PROJECT_DIR, Settings
from retrieval.analyzer import analyze, analyze_phrases
from retrieval.articles import ArticleChunks
from retrieval.bm25 import SparseBM25, SparseScorer
from retrieval.evaluate import evaluate
from retrieval.gold import read_questions
from retrieval.metrics import percentile

logger = logging.getLogger(__name__)

GOLD = [PROJECT_DIR.parent / "shared" / "eval" / f"{n}.jsonl" for n in ("citizen_dev", "jurhelp_dev", "jurhelp_train")]


class BM25sScorer(SparseScorer):
    """bm25s's index of the same analyzed chunks, scored by bm25s (`get_scores`: its CSC columns summed)."""

    def __init__(self, corpus: Sequence[Sequence[str]], *, method: str, idf_method: str | None = None) -> None:
        self.model = bm25s.BM25(k1=1.5, b=0.75, method=method, idf_method=idf_method)
        self.model.index([list(t) for t in corpus], show_progress=False)
        s = self.model.scores
        self.vocab = self.model.vocab_dict
        self.n_docs = int(s["num_docs"])
        shape = (self.n_docs, len(s["indptr"]) - 1)
        self.matrix = sparse.csc_matrix((s["data"], s["indices"], s["indptr"]), shape=shape)

    def get_scores(self, query: Sequence[str]) -> np.ndarray:
        terms = [t for t in query if t in self.vocab]
        if not terms:
            return np.zeros(self.n_docs, dtype=np.float32)
        return self.model.get_scores(terms)


# name → how to build it from the analyzed chunks
SCORERS: dict[str, Callable[[Sequence[Sequence[str]]], SparseScorer]] = {
    "hand (BM25Okapi)": SparseBM25,
    "bm25s atire/idf robertson": lambda c: BM25sScorer(c, method="atire", idf_method="robertson"),
    "bm25s lucene": lambda c: BM25sScorer(c, method="lucene"),
    "bm25s robertson": lambda c: BM25sScorer(c, method="robertson"),
    "bm25s atire": lambda c: BM25sScorer(c, method="atire"),
    "bm25s bm25l": lambda c: BM25sScorer(c, method="bm25l"),
    "bm25s bm25+": lambda c: BM25sScorer(c, method="bm25+"),
}
HAND = next(iter(SCORERS))


def scorer_table(
    corpus: list[list[str]], queries: list[list[str]], k: int, names: Sequence[str]
) -> tuple[Table, dict[str, SparseScorer]]:
    """Build the named scorers, time them and their queries, and compare their rankings with the hand-written
    one's."""
    table = Table(title=f"BM25 scorers over {len(corpus):,} chunks, {len(queries)} gold questions, top {k} chunks")
    for col in ("scorer", "build s", "query p50 ms", "query p95 ms", "same top-k", "max |Δscore|"):
        table.add_column(col, justify="left" if col == "scorer" else "right")
    built: dict[str, SparseScorer] = {}
    reference: list[list[tuple[int, float]]] = []
    for name in dict.fromkeys([HAND, *names]):
        make = SCORERS[name]
        start = time.perf_counter()
        scorer = make(corpus)
        build_s = time.perf_counter() - start
        built[name] = scorer
        times, tops = [], []
        for terms in queries:
            start = time.perf_counter()
            top = scorer.top_n(terms, k * 8)  # what ChunkBM25Retriever asks for when grouping by article
            times.append((time.perf_counter() - start) * 1000)
            tops.append(top[:k])
        if name == HAND:
            reference = tops
        same = sum([i for i, _ in a] == [i for i, _ in b] for a, b in zip(tops, reference, strict=True))
        delta = max(
            (float(np.max(np.abs(built[HAND].get_scores(q) - scorer.get_scores(q)))) for q in queries), default=0.0
        )
        table.add_row(
            name,
            f"{build_s:.2f}",
            f"{percentile(times, 50):.1f}",
            f"{percentile(times, 95):.1f}",
            f"{same}/{len(queries)}",
            f"{delta:.2g}",
        )
        logger.info("%s: built in %.1f s, %d/%d rankings identical", name, build_s, same, len(queries))
    return table, built


def pipeline_table(settings: Settings, built: dict[str, SparseScorer], names: list[str], files: list[Path], k: int):
    """hit@1/5/10 and MRR of the whole pipeline per gold file, with each named scorer as its BM25."""
    from retrieval.pipeline import Retrieval

    full = Retrieval.load(settings)
    assert full.bm25 is not None
    table = Table(title=f"Whole retrieval pipeline, article level (k={k}), BM25 scorer swapped")
    for col in ("scorer", "gold file", "n", "hit@1", "hit@5", "hit@10", "MRR", "p50 ms"):
        table.add_column(col, justify="left" if col in ("scorer", "gold file") else "right")
    for name in names:
        bm25 = full.bm25.model_copy(update={"vectorizer": built[name]})
        pipeline = Retrieval(
            full.settings,
            full.articles,
            bm25=bm25,
            vector_store=full.vector_store,
            latent=full.latent,
            reranker=full.reranker,
            learned=full.learned,
            stages=full.stages,
            pending=full.pending,
        )
        for path in files:
            report = evaluate(pipeline, read_questions(path), k, name=path.stem)
            m = report.overall
            table.add_row(
                name,
                path.stem,
                str(m.n),
                f"{m.hit1:.3f}",
                f"{m.hit5:.3f}",
                f"{m.hit10:.3f}",
                f"{m.mrr:.3f}",
                f"{report.latency_p50_ms:.0f}",
            )
            logger.info("%s %s: hit@10 %.3f MRR %.3f", name, path.stem, m.hit10, m.mrr)
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bm25_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="a built data dir (default: DATA_DIR or ./data); only read")
    parser.add_argument("--questions", type=Path, action="append", help="gold JSONL (default: the three dev/train)")
    parser.add_argument("--k", type=int, default=100, help="chunks compared per question; articles ranked")
    parser.add_argument(
        "--pipeline", action="append", default=[], choices=list(SCORERS), help="also measure through the pipeline"
    )
    parser.add_argument(
        "--only", action="store_true", help="build only the hand-written scorer and those given to --pipeline"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    files = args.questions or [p for p in GOLD if p.exists()]
    from index.build import read_chunks

    documents = ArticleChunks.from_chunks(read_chunks(settings)).documents
    preprocess = analyze_phrases if settings.bm25_phrases else analyze
    corpus = [preprocess(d.page_content) for d in documents]
    questions = [q.query for path in files for q in read_questions(path)]
    queries = [preprocess(q) for q in questions]
    console = Console(width=150)
    table, built = scorer_table(corpus, queries, args.k, args.pipeline if args.only else list(SCORERS))
    console.print(table)
    if args.pipeline:
        console.print(pipeline_table(settings, built, args.pipeline, files, args.k))
    console.print(f"bm25s {bm25s.__version__}; chunks analyzed once beforehand, not timed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
