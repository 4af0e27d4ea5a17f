"""Article-level evaluation of retrieval on gold questions: hit@k, recall@k, MRR, nDCG@10 and latency.

Run: `python -m retrieval.evaluate --questions FILE.jsonl [--data-dir DIR] [--k 20] [--out rankings.jsonl]`.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, ValidationError

from config import Settings
from corpus.errors import UserError

if TYPE_CHECKING:
    from retrieval.pipeline import Retrieval

logger = logging.getLogger(__name__)

Key = tuple[str, str]  # (doc_id, article)
Ranked = list[tuple[str, str, float]]  # (doc_id, article, score), best first


class GoldArticle(BaseModel):
    """One relevant article of a gold question."""

    model_config = ConfigDict(extra="ignore")  # gold files come from elsewhere and carry extra keys

    doc_id: str
    article: str


class GoldQuestion(BaseModel):
    """One line of a gold JSONL file."""

    model_config = ConfigDict(extra="ignore")

    id: str
    query: str
    lang: str | None = None
    relevant: list[GoldArticle]

    @property
    def relevant_keys(self) -> set[Key]:
        return {(r.doc_id, r.article) for r in self.relevant}


def read_questions(path: Path) -> list[GoldQuestion]:
    """Gold questions of a JSONL file, with the line number of the first bad line in the error."""
    if not path.is_file():
        raise UserError(
            f"No question file at {path}: pass a JSONL file of {{id, query, relevant: [...]}} lines."
        )
    questions: list[GoldQuestion] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            questions.append(GoldQuestion.model_validate_json(line))
        except ValidationError as err:
            raise UserError(
                f"{path}:{n} is not a gold question ({err.errors()[0]['msg']}): fix or remove it."
            ) from err
    if not questions:
        raise UserError(f"{path} holds no questions.")
    return questions


# --- metrics on one ranking (binary relevance) ------------------------------------------------


def hit_at(ranked: Sequence[Key], relevant: set[Key], k: int) -> float:
    """1.0 when any relevant article is in the top k."""
    return 1.0 if any(key in relevant for key in ranked[:k]) else 0.0


def recall_at(ranked: Sequence[Key], relevant: set[Key], k: int) -> float:
    """Share of the relevant articles found in the top k."""
    return len(relevant.intersection(ranked[:k])) / len(relevant) if relevant else 0.0


def reciprocal_rank(ranked: Sequence[Key], relevant: set[Key]) -> float:
    """1 / rank of the first relevant article (0 when none is ranked)."""
    return next((1.0 / i for i, key in enumerate(ranked, start=1) if key in relevant), 0.0)


def ndcg_at(ranked: Sequence[Key], relevant: set[Key], k: int) -> float:
    """Binary-relevance nDCG@k."""
    dcg = sum(1.0 / math.log2(i + 1) for i, key in enumerate(ranked[:k], start=1) if key in relevant)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(relevant), k) + 1))
    return dcg / ideal if ideal else 0.0


# --- reports -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuestionResult:
    """What the pipeline ranked for one gold question."""

    id: str
    lang: str
    explicit: bool  # the question names articles itself («ст. 188 УК», «статьи 120-135»)
    relevant: frozenset[Key]
    ranked: Ranked
    latency_ms: float

    @property
    def keys(self) -> list[Key]:
        return [(d, a) for d, a, _ in self.ranked]


@dataclass(frozen=True)
class Metrics:
    """Mean metrics over a set of questions."""

    n: int
    hit1: float
    hit5: float
    hit10: float
    recall5: float
    recall10: float
    recall20: float
    mrr: float
    ndcg10: float

    @classmethod
    def of(cls, results: Sequence[QuestionResult]) -> Metrics:
        def mean(f: Callable[[list[Key], set[Key]], float]) -> float:
            return statistics.fmean(f(r.keys, set(r.relevant)) for r in results) if results else 0.0

        return cls(
            n=len(results),
            hit1=mean(lambda r, g: hit_at(r, g, 1)),
            hit5=mean(lambda r, g: hit_at(r, g, 5)),
            hit10=mean(lambda r, g: hit_at(r, g, 10)),
            recall5=mean(lambda r, g: recall_at(r, g, 5)),
            recall10=mean(lambda r, g: recall_at(r, g, 10)),
            recall20=mean(lambda r, g: recall_at(r, g, 20)),
            mrr=mean(reciprocal_rank),
            ndcg10=mean(lambda r, g: ndcg_at(r, g, 10)),
        )


@dataclass(frozen=True)
class EvalReport:
    """Metrics of one question file: overall, per subset (lang, explicit references), and latency."""

    name: str
    k: int
    overall: Metrics
    subsets: dict[str, Metrics]
    latency_p50_ms: float
    latency_p95_ms: float
    results: list[QuestionResult] = field(repr=False)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def make_report(name: str, k: int, results: list[QuestionResult]) -> EvalReport:
    """Aggregate per-question results into a report."""
    subsets: dict[str, Metrics] = {}
    for lang in sorted({r.lang for r in results}):
        subsets[f"lang={lang}"] = Metrics.of([r for r in results if r.lang == lang])
    explicit = [r for r in results if r.explicit]
    if explicit:
        subsets["explicit refs"] = Metrics.of(explicit)
        subsets["no explicit refs"] = Metrics.of([r for r in results if not r.explicit])
    latencies = [r.latency_ms for r in results]
    return EvalReport(
        name=name,
        k=k,
        overall=Metrics.of(results),
        subsets=subsets,
        latency_p50_ms=percentile(latencies, 50),
        latency_p95_ms=percentile(latencies, 95),
        results=results,
    )


def evaluate(
    retrieval: Retrieval, questions: Sequence[GoldQuestion], k: int = 20, *, name: str = "questions"
) -> EvalReport:
    """Rank every question with the pipeline (after one warm-up query) and score the rankings."""
    if questions:
        retrieval.rank_articles(questions[0].query, k)  # warm-up: lazy model loads do not count as latency
    retrieval.forget_questions()  # a question seen before (warm-up, an earlier run) would be timed cached
    results: list[QuestionResult] = []
    for q in questions:
        start = time.perf_counter()
        ranked = retrieval.rank_articles(q.query, k)
        elapsed = (time.perf_counter() - start) * 1000
        info = retrieval.analyze(q.query)
        results.append(
            QuestionResult(
                id=q.id,
                lang=q.lang or info.lang,
                explicit=bool(info.refs),
                relevant=frozenset(q.relevant_keys),
                ranked=ranked,
                latency_ms=elapsed,
            )
        )
    return make_report(name, k, results)


def write_rankings(path: Path, results: Sequence[QuestionResult]) -> None:
    """One JSON line per question: {"id", "hits": [{"doc_id", "article", "score"}, ...]} best first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for r in results:
            hits = [{"doc_id": d, "article": a, "score": round(s, 6)} for d, a, s in r.ranked]
            f.write(json.dumps({"id": r.id, "hits": hits}, ensure_ascii=False) + "\n")


def run_eval(
    settings: Settings,
    questions: Path | Sequence[GoldQuestion],
    k: int = 20,
    out: Path | None = None,
    *,
    retrieval: Retrieval | None = None,
) -> EvalReport:
    """Load the pipeline (unless given), evaluate the questions, and write rankings to `out` when asked."""
    from retrieval.pipeline import Retrieval

    name = questions.stem if isinstance(questions, Path) else "questions"
    gold = read_questions(questions) if isinstance(questions, Path) else list(questions)
    retrieval = retrieval or Retrieval.load(settings)
    report = evaluate(retrieval, gold, k, name=name)
    if out is not None:
        write_rankings(out, report.results)
    return report


def format_report(report: EvalReport) -> str:
    """A rich table of the report, as plain text."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{report.name}: article-level retrieval (k={report.k})")
    table.add_column("subset")
    for col in ("n", "hit@1", "hit@5", "hit@10", "R@5", "R@10", "R@20", "MRR", "nDCG@10"):
        table.add_column(col, justify="right")
    for label, m in [("all", report.overall), *report.subsets.items()]:
        table.add_row(
            label,
            str(m.n),
            *(
                f"{v:.3f}"
                for v in (m.hit1, m.hit5, m.hit10, m.recall5, m.recall10, m.recall20, m.mrr, m.ndcg10)
            ),
        )
    table.caption = f"latency p50 {report.latency_p50_ms:.0f} ms, p95 {report.latency_p95_ms:.0f} ms"
    buf = io.StringIO()
    Console(file=buf, width=120, color_system=None).print(table)
    return buf.getvalue()


def main(argv: Sequence[str] | None, settings: Settings) -> int:
    """CLI: evaluate question files and print one table each; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m rag_chain eval", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--questions", type=Path, required=True, action="append", help="gold JSONL (repeatable)"
    )
    parser.add_argument("--data-dir", type=Path, help="data directory (corpus and index); default DATA_DIR")
    parser.add_argument("--k", type=int, default=20, help="articles ranked per question")
    parser.add_argument(
        "--out", type=Path, help="write rankings as JSONL (with several files: FILE.<name>.jsonl)"
    )
    args = parser.parse_args(argv)
    if args.data_dir:
        settings = settings.model_copy(update={"data_dir": args.data_dir})
    try:
        from retrieval.pipeline import Retrieval

        files = {path: read_questions(path) for path in args.questions}  # bad files fail before the long load
        retrieval = Retrieval.load(settings)
        for path, questions in files.items():
            out = args.out
            if out is not None and len(files) > 1:
                out = out.with_suffix(f".{path.stem}{out.suffix}")
            report = evaluate(retrieval, questions, args.k, name=path.stem)
            if out is not None:
                write_rankings(out, report.results)
            print(format_report(report))  # noqa: T201 (CLI output)
    except UserError as err:
        print(f"Error: {err}", file=sys.stderr)  # noqa: T201
        return 1
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    sys.exit(main(sys.argv[1:], Settings()))
