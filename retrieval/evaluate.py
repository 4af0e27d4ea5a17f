"""Article-level evaluation of retrieval on gold questions and dialogues: hit@k, recall@k, MRR, nDCG@10, latency.

Run: `python -m rag_chain eval --questions FILE.jsonl [--dialogues FILE.jsonl] [--data-dir DIR] [--k 20]
[--out rankings.jsonl]`.

A dialogue line is `{"id", "lang", "turns": [...], "relevant": [...]}`, gold for the last turn: the earlier turns
are answered in order through the chain (no LLM) and passed to it as history, and the last turn is ranked as the
chain searches it, beside the two baselines (the last turn searched alone, all turns glued together).
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
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from config import Settings
from corpus.errors import UserError

if TYPE_CHECKING:
    from rag_chain import QAChain
    from retrieval.pipeline import Retrieval

logger = logging.getLogger(__name__)

Key = tuple[str, str]  # (doc_id, article)
Ranked = list[tuple[str, str, float]]  # (doc_id, article, score), best first
T = TypeVar("T", bound=BaseModel)


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


class GoldDialogue(BaseModel):
    """One line of a gold dialogue file: the turns of a conversation, gold for the last one."""

    model_config = ConfigDict(extra="ignore")

    id: str
    lang: str | None = None
    turns: list[str] = Field(min_length=1)
    relevant: list[GoldArticle]

    @property
    def relevant_keys(self) -> set[Key]:
        return {(r.doc_id, r.article) for r in self.relevant}


def _read_jsonl(path: Path, model: type[T], what: str, shape: str) -> list[T]:
    """Validated lines of a JSONL file, with the line number of the first bad line in the error."""
    if not path.is_file():
        raise UserError(f"No {what} file at {path}: pass a JSONL file of {shape} lines.")
    items: list[T] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(model.model_validate_json(line))
        except ValidationError as err:
            raise UserError(f"{path}:{n} is not a gold {what} ({err.errors()[0]['msg']}): fix or remove it.") from err
    if not items:
        raise UserError(f"{path} holds no {what}s.")
    return items


def read_questions(path: Path) -> list[GoldQuestion]:
    """Gold questions of a JSONL file, with the line number of the first bad line in the error."""
    return _read_jsonl(path, GoldQuestion, "question", "{id, query, relevant: [...]}")


def read_dialogues(path: Path) -> list[GoldDialogue]:
    """Gold dialogues of a JSONL file, with the line number of the first bad line in the error."""
    return _read_jsonl(path, GoldDialogue, "dialogue", "{id, lang, turns: [...], relevant: [...]}")


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


# How the last turn of a dialogue is searched: as the chain does with the earlier turns as history, and the two
# baselines it is measured against.
WITH_HISTORY, ALONE, GLUED = "with history", "last turn alone", "all turns glued"


def evaluate_dialogues(
    chain: QAChain, dialogues: Sequence[GoldDialogue], k: int = 20, *, name: str = "dialogues"
) -> dict[str, EvalReport]:
    """Answer each dialogue's earlier turns in order through the chain, each with the ones before as history,
    then rank its last turn three ways (WITH_HISTORY, ALONE, GLUED); one report per way."""
    from answer.records import Exchange
    from retrieval.pipeline import Followup

    retrieval = chain.retrieval
    if dialogues:
        retrieval.rank_articles(dialogues[0].turns[-1], k)  # warm-up, as in `evaluate`
    retrieval.forget_questions()
    results: dict[str, list[QuestionResult]] = {WITH_HISTORY: [], ALONE: [], GLUED: []}
    for d in dialogues:
        history: list[Exchange] = []
        for turn in d.turns[:-1]:
            history.append(Exchange.of(chain.invoke(turn, history)))
        last = d.turns[-1]
        start = time.perf_counter()
        understood = chain.understand(last, history)
        searches = {WITH_HISTORY: understood.search_question, ALONE: last, GLUED: " ".join(d.turns)}
        for way, text in searches.items():
            ranked = retrieval.rank_articles(text, k, understood.followup if way == WITH_HISTORY else Followup())
            elapsed = (time.perf_counter() - start) * 1000
            info = retrieval.analyze(text)
            results[way].append(
                QuestionResult(d.id, d.lang or info.lang, bool(info.refs), frozenset(d.relevant_keys), ranked, elapsed)
            )
            start = time.perf_counter()
    return {way: make_report(name if way == WITH_HISTORY else f"{name} ({way})", k, r) for way, r in results.items()}


def format_comparison(name: str, reports: dict[str, EvalReport]) -> str:
    """One row per way of searching a dialogue's last turn: hit@1/5/10 and MRR."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{name}: the last turn searched three ways")
    table.add_column("last turn")
    for col in ("n", "hit@1", "hit@5", "hit@10", "MRR"):
        table.add_column(col, justify="right")
    for way in (ALONE, GLUED, WITH_HISTORY):
        m = reports[way].overall
        table.add_row(way, str(m.n), *(f"{v:.3f}" for v in (m.hit1, m.hit5, m.hit10, m.mrr)))
    buf = io.StringIO()
    Console(file=buf, width=120, color_system=None).print(table)
    return buf.getvalue()


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


def dialogue_chain(settings: Settings, retrieval: Retrieval) -> QAChain:
    """The chain over this retrieval with no LLM, as dialogues are evaluated (extractive answers, offline rule)."""
    from corpus.store import load_articles
    from rag_chain import QAChain

    offline = settings.model_copy(update={"llm_backends": []})
    return QAChain(offline, retrieval, load_articles(settings.corpus_dir))


def main(argv: Sequence[str] | None, settings: Settings) -> int:
    """CLI: evaluate question and dialogue files and print their tables; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m rag_chain eval", description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=Path, action="append", default=[], help="gold JSONL (repeatable)")
    parser.add_argument(
        "--dialogues",
        type=Path,
        action="append",
        default=[],
        help="gold dialogues JSONL, {id, lang, turns, relevant} per line, gold for the last turn (repeatable)",
    )
    parser.add_argument("--data-dir", type=Path, help="data directory (corpus and index); default DATA_DIR")
    parser.add_argument("--k", type=int, default=20, help="articles ranked per question")
    parser.add_argument("--out", type=Path, help="write rankings as JSONL (with several files: FILE.<name>.jsonl)")
    args = parser.parse_args(argv)
    if not args.questions and not args.dialogues:
        parser.error("give --questions FILE.jsonl and/or --dialogues FILE.jsonl")
    if args.data_dir:
        settings = settings.model_copy(update={"data_dir": args.data_dir})
    try:
        from retrieval.pipeline import Retrieval

        # bad files fail before the long load
        files = {path: read_questions(path) for path in args.questions}
        dialogues = {path: read_dialogues(path) for path in args.dialogues}
        retrieval = Retrieval.load(settings)
        if retrieval.pending is not None:  # the figures are not the full pipeline's: say so
            note = f"Note: searches that ran: {', '.join(retrieval.searches)}. {retrieval.pending.message()}"
            print(note, file=sys.stderr)  # noqa: T201
        several = len(files) + len(dialogues) > 1

        def out_for(path: Path) -> Path | None:
            out = args.out
            return out.with_suffix(f".{path.stem}{out.suffix}") if out is not None and several else out

        for path, questions in files.items():
            report = evaluate(retrieval, questions, args.k, name=path.stem)
            if (out := out_for(path)) is not None:
                write_rankings(out, report.results)
            print(format_report(report))  # noqa: T201 (CLI output)
        if dialogues:
            chain = dialogue_chain(settings, retrieval)
            for path, gold in dialogues.items():
                reports = evaluate_dialogues(chain, gold, args.k, name=path.stem)
                if (out := out_for(path)) is not None:
                    write_rankings(out, reports[WITH_HISTORY].results)
                print(format_report(reports[WITH_HISTORY]))  # noqa: T201
                print(format_comparison(path.stem, reports))  # noqa: T201
    except UserError as err:
        print(f"Error: {err}", file=sys.stderr)  # noqa: T201
        return 1
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    sys.exit(main(sys.argv[1:], Settings()))
