"""Article-level evaluation of retrieval on gold questions: rank each question with the pipeline, score the
rankings (retrieval/metrics.py), write them as JSONL and print the report as a table.

Run: `python -m rag_chain eval --questions FILE.jsonl [--dialogues FILE.jsonl] [--data-dir DIR] [--k 20]
[--out rankings.jsonl]` (the CLI, and the evaluation of dialogues through the chain, are in cli.py).
"""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from config import Settings
from retrieval.gold import GoldQuestion, read_questions
from retrieval.metrics import EvalReport, QuestionResult, make_report

if TYPE_CHECKING:
    from retrieval.pipeline import Retrieval

logger = logging.getLogger(__name__)


def evaluate(
    retrieval: Retrieval, questions: Sequence[GoldQuestion], k: int = 20, *, name: str = "questions"
) -> EvalReport:
    """Rank every question with the pipeline (warmed up first, as a served chain is) and score the rankings."""
    retrieval.warm_up()  # lazy model loads and routing's headings do not count as latency
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
            *(f"{v:.3f}" for v in (m.hit1, m.hit5, m.hit10, m.recall5, m.recall10, m.recall20, m.mrr, m.ndcg10)),
        )
    table.caption = f"latency p50 {report.latency_p50_ms:.0f} ms, p95 {report.latency_p95_ms:.0f} ms"
    buf = io.StringIO()
    Console(file=buf, width=120, color_system=None).print(table)
    return buf.getvalue()
