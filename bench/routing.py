"""Law routing (retrieval/routing.py) and the remedy routes' rank, chosen out of fold: every gold question's
first-stage candidates computed once, then the ranking after them (routing, repealed last, explicit first,
remedy routes) composed at each point of a grid, and a grouped k-fold cross-validation over all the files.

    python -m bench.routing --data-dir DIR --questions FILE.jsonl [--questions ...] [--folds 4]
        [--profile 0,0.5,1,2] [--mass 0,0.5,1] [--diversity 1,0.8] [--remedy-rank 3,5,10,none]

Prints, for every file: today's settings (ROUTING off, remedy routes at REMEDY_RANK), the point the pooled
files choose, and the out-of-fold figures (each fold's questions ranked with the point the other folds chose by
the mean over files of hit@1, hit@5, hit@10 and MRR, among the points that lose no more than 0.01 of any of them
on any file against today's). Folds keep a file's questions citing the same articles
together (citizen_dev asks most questions twice, in Russian and in Kazakh). `--timing` instead times the ranking
of every question with routing off and on, in turn, nothing remembered, and prints p50 / p95 per file.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import logging
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from langchain_core.documents import Document
from rich.console import Console
from rich.table import Table

from bench.measured import ranking_times
from config import Settings
from retrieval.articles import key_of
from retrieval.explicit import ExplicitFirst
from retrieval.gold import GoldQuestion, read_questions
from retrieval.metrics import hit_at, reciprocal_rank
from retrieval.pipeline import Retrieval
from retrieval.ranking import DemoteRepealed
from retrieval.records import Query
from retrieval.remedies import RemedyRoutes
from retrieval.routing import routed

K = 100
Scores = tuple[float, float, float, float]  # hit@1, hit@5, hit@10, reciprocal rank


@dataclass(frozen=True)
class Point:
    """One setting of the grid."""

    profile: float
    mass: float
    max_chars: int  # only shorter questions are routed (0: all)
    diversity: float
    short_rank: int | None  # remedy rank of a question shorter than REMEDY_SHORT_CHARS (None: no routes for it)

    def label(self) -> str:
        rr = "off" if self.short_rank is None else str(self.short_rank)
        return (
            f"profile {self.profile:g}, mass {self.mass:g}, max chars {self.max_chars}, "
            f"diversity {self.diversity:g}, short remedy rank {rr}"
        )


@dataclass(frozen=True)
class Case:
    """A gold question with its first-stage candidates and its laws' gaps by each routing signal."""

    file: str
    question: GoldQuestion
    query: Query
    candidates: list[Document]
    signals: dict[str, dict[str, float]]


def mean(rows: Sequence[Scores]) -> Scores:
    n = max(len(rows), 1)
    return tuple(sum(r[i] for r in rows) / n for i in range(4))  # type: ignore[return-value]


def fold_of(case: Case, folds: int) -> int:
    """A file's questions citing the same articles share a fold."""
    group = case.file + "|" + "|".join(sorted(f"{d}:{a}" for d, a in case.question.relevant_keys))
    return hashlib.sha256(group.encode()).digest()[0] % folds


def ranking(retrieval: Retrieval, case: Case, point: Point) -> list[tuple[str, str]]:
    """The ranking of `retrieval.rank_articles` (no reranker) with this point's routing and remedy ranks; the
    same steps as `LawRouting.compress_documents` on the signals computed once."""
    info, s = case.query.info, retrieval.settings
    docs = list(case.candidates)
    if not (info.refs or info.codes) and not 0 < point.max_chars <= len(info.text):
        weighted = [(point.profile, case.signals["profile"]), (point.mass, case.signals["mass"])]
        docs = routed(docs, weighted, point.diversity)
    docs = list(DemoteRepealed().compress_documents(docs, case.query))
    docs = list(ExplicitFirst(explicit=retrieval.explicit).compress_documents(docs, case.query))
    short = len(info.text) < s.remedy_short_chars
    if s.remedies and not (short and point.short_rank is None):
        remedies = RemedyRoutes(
            articles=retrieval.articles,
            rank=point.short_rank if short and point.short_rank is not None else s.remedy_rank,
            analyze=retrieval.analyze,
        )
        docs = list(remedies.compress_documents(docs, case.query))
    return [key_of(d) for d in docs[:K]]


def score(ranked: list[tuple[str, str]], relevant: set[tuple[str, str]]) -> Scores:
    return (
        hit_at(ranked, relevant, 1),
        hit_at(ranked, relevant, 5),
        hit_at(ranked, relevant, 10),
        reciprocal_rank(ranked, relevant),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.routing", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--questions", type=Path, action="append", required=True, help="gold JSONL (repeatable)")
    parser.add_argument("--folds", type=int, default=4)
    parser.add_argument("--profile", default="0,0.5,1,2,4", help="PROFILE weights of the grid")
    parser.add_argument("--mass", default="0,0.5,1,2", help="mass weights of the grid")
    parser.add_argument("--max-chars", default="0,150,300", help="ROUTING_MAX_CHARS of the grid (0: no limit)")
    parser.add_argument("--diversity", default="1,0.8", help="diversity factors of the grid")
    parser.add_argument(
        "--short-rank", default="3,4,5,10", help="REMEDY_SHORT_RANK of the grid (none: no routes for short questions)"
    )
    parser.add_argument("--timing", action="store_true", help="time the rankings instead (see above)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    base = Retrieval.load(settings)
    sets = {path.stem: read_questions(path) for path in args.questions}
    if args.timing:
        return timing(base, sets)
    router = base.router.model_copy(update={"profile_weight": 1.0, "mass_weight": 1.0})
    cases: list[Case] = []
    for name, qs in sets.items():
        for q in qs:
            query = base.query(q.query)
            candidates = base.first_stage.invoke(query)
            cases.append(Case(name, q, query, candidates, router.signals(query.info, candidates)))
    profile, mass, diversity = ([float(x) for x in s.split(",")] for s in (args.profile, args.mass, args.diversity))
    max_chars = [int(x) for x in args.max_chars.split(",")]
    ranks = [None if r == "none" else int(r) for r in args.short_rank.split(",")]
    grid = [Point(*p) for p in itertools.product(profile, mass, max_chars, diversity, ranks)]
    today = Point(0.0, 0.0, 0, 1.0, settings.remedy_rank)
    if today not in grid:
        grid.append(today)
    per = {point: [score(ranking(base, c, point), c.question.relevant_keys) for c in cases] for point in grid}
    folds = [fold_of(c, args.folds) for c in cases]

    def objective(point: Point, keep: Sequence[bool]) -> float:
        """Mean over files of the mean of hit@1, hit@5, hit@10 and MRR on the kept questions; -1 for a point
        that loses more than 0.01 of any of them on any file against today's."""
        by_file = [[i for i, c in enumerate(cases) if keep[i] and c.file == name] for name in sets]
        got = [mean([per[point][i] for i in idx]) for idx in by_file if idx]
        was = [mean([per[today][i] for i in idx]) for idx in by_file if idx]
        if any(g < w - 0.01 - 1e-9 for gs, ws in zip(got, was, strict=True) for g, w in zip(gs, ws, strict=True)):
            return -1.0
        return statistics.mean(statistics.mean(m) for m in got)

    everything = [True] * len(cases)
    pooled = max(grid, key=lambda p: (round(objective(p, everything), 6), p == today))
    chosen: dict[int, Point] = {}
    oof: list[Scores] = [(0.0, 0.0, 0.0, 0.0)] * len(cases)
    for f in range(args.folds):
        train = [fold != f for fold in folds]
        chosen[f] = max(grid, key=lambda p: (round(objective(p, train), 6), p == today))
        for i, fold in enumerate(folds):
            if fold == f:
                oof[i] = per[chosen[f]][i]
    console = Console(width=160, color_system=None)
    for f, point in chosen.items():
        console.print(f"fold {f} ({folds.count(f)} questions) chose: {point.label()}")
    console.print(f"all files pooled choose: {pooled.label()}")
    table = Table(title=f"hit@1 / hit@5 / hit@10 / MRR (k={K}); today: {today.label()}")
    for col in ("file", "n", "today", "pooled choice (in sample)", f"out of fold ({args.folds} folds)"):
        table.add_column(col, justify="right" if col == "n" else "left")
    for name in sets:
        idx = [i for i, c in enumerate(cases) if c.file == name]
        row = [mean([per[today][i] for i in idx]), mean([per[pooled][i] for i in idx]), mean([oof[i] for i in idx])]
        table.add_row(name, str(len(idx)), *(" / ".join(f"{v:.3f}" for v in m) for m in row))
    console.print(table)
    return 0


def timing(base: Retrieval, sets: dict[str, list[GoldQuestion]]) -> int:
    """p50 / p95 ms of each file's rankings with routing off and on, taking turns question by question."""
    variants = {"off": base.variant(routing=False), "on": base.variant(routing=True)}
    title = "Ranking time per question (ms), routing off and on in turn"
    Console(width=140, color_system=None).print(ranking_times(variants, sets, K, title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
