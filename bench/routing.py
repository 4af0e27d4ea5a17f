"""Law routing (retrieval/routing.py) and the remedy routes' rank, chosen out of fold: every gold question's
first-stage candidates computed once, then the ranking after them (routing, repealed last, explicit first,
remedy routes) composed at each point of a grid, and a grouped k-fold cross-validation over all the files.

    python -m bench.routing --data-dir DIR --questions FILE.jsonl [--questions ...] [--folds 4]
        [--profile 0,0.5,1,2] [--mass 0,0.5,1] [--diversity 1,0.8] [--remedy-rank 3,4] [--spacing 1,2,3]
        [--short-chars 0,150] [--short-rank 5,10,none] [--kind FILE,FILE] [--every-point]

Prints, for every file: today's ranking (no SANCTION_WEIGHT, ROUTING off, remedy routes together at
REMEDY_RANK), the point the pooled files choose, and the out-of-fold figures (each fold's questions ranked with
the point the other folds chose by the mean over kinds of hit@1, hit@5, hit@10 and MRR, among the points that lose
no more than 0.01 of any of them on any kind against today's; a file is a kind of its own unless `--kind` joins
it with others). Folds keep a file's questions citing the same articles together (citizen_dev asks most questions
twice, in Russian and in Kazakh). `--timing` instead times the ranking of every question before the laws of
sanctions and the spaced routes, with the defaults and with routing on, in turn, nothing remembered, and prints
p50 / p95 per file.
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
from retrieval.routing import SanctionLaws, routed

K = 100
Scores = tuple[float, float, float, float]  # hit@1, hit@5, hit@10, reciprocal rank


@dataclass(frozen=True)
class Point:
    """One setting of the grid."""

    sanction: float  # SANCTION_WEIGHT
    profile: float
    mass: float
    max_chars: int  # only shorter questions are routed (0: all)
    diversity: float
    langs: str  # ROUTING_LANGS, comma-separated
    rank: int  # REMEDY_RANK
    spacing: int  # REMEDY_SPACING
    short_chars: int  # REMEDY_SHORT_CHARS
    short_rank: int | None  # remedy rank of a question shorter than short_chars (None: no routes for it)

    def label(self) -> str:
        rr = "off" if self.short_rank is None else str(self.short_rank)
        return (
            f"sanction {self.sanction:g}, profile {self.profile:g}, mass {self.mass:g}, max chars {self.max_chars}, "
            f"diversity {self.diversity:g}, routing langs {self.langs}, "
            f"remedy rank {self.rank}, spacing {self.spacing}, under {self.short_chars} chars remedy rank {rr}"
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
    info = case.query.info
    docs = list(case.candidates)
    docs = list(SanctionLaws(laws=retrieval.sanction_laws, weight=point.sanction).compress_documents(docs, case.query))
    routed_lang = info.lang in point.langs.split(",")
    if routed_lang and not (info.refs or info.codes) and not 0 < point.max_chars <= len(info.text):
        weighted = [(point.profile, case.signals["profile"]), (point.mass, case.signals["mass"])]
        docs = routed(docs, weighted, point.diversity)
    docs = list(DemoteRepealed().compress_documents(docs, case.query))
    docs = list(ExplicitFirst(explicit=retrieval.explicit).compress_documents(docs, case.query))
    short = len(info.text) < point.short_chars
    if retrieval.settings.remedies and not (short and point.short_rank is None):
        remedies = RemedyRoutes(
            articles=retrieval.articles,
            rank=point.short_rank if short and point.short_rank is not None else point.rank,
            spacing=point.spacing,
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
    parser.add_argument("--sanction", default="0,0.7", help="SANCTION_WEIGHT of the grid")
    parser.add_argument("--profile", default="0,0.5,1,2,4", help="PROFILE weights of the grid")
    parser.add_argument("--mass", default="0,0.5,1,2", help="mass weights of the grid")
    parser.add_argument("--max-chars", default="0,150,300", help="ROUTING_MAX_CHARS of the grid (0: no limit)")
    parser.add_argument("--langs", default="ru,kk", help="ROUTING_LANGS of the grid, ';'-separated: ru,kk;kk")
    parser.add_argument("--diversity", default="1,0.8", help="diversity factors of the grid")
    parser.add_argument("--remedy-rank", default="3", help="REMEDY_RANK of the grid")
    parser.add_argument("--spacing", default="1", help="REMEDY_SPACING of the grid")
    parser.add_argument("--short-chars", default="0", help="REMEDY_SHORT_CHARS of the grid (0: off)")
    parser.add_argument(
        "--short-rank", default="5", help="REMEDY_SHORT_RANK of the grid (none: no routes for short questions)"
    )
    parser.add_argument(
        "--kind",
        action="append",
        default=[],
        help="FILE,FILE...: files of one kind of question, judged together by the 0.01 rule (repeatable)",
    )
    parser.add_argument("--every-point", action="store_true", help="also print every point's in-sample figures")
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
    sanction, profile, mass, diversity = (
        [float(x) for x in s.split(",")] for s in (args.sanction, args.profile, args.mass, args.diversity)
    )
    max_chars = [int(x) for x in args.max_chars.split(",")]
    remedy = [[int(x) for x in s.split(",")] for s in (args.remedy_rank, args.spacing, args.short_chars)]
    ranks = [None if r == "none" else int(r) for r in args.short_rank.split(",")]
    langs = args.langs.split(";")
    axes = (sanction, profile, mass, max_chars, diversity, langs, *remedy, ranks)
    grid = [Point(*p) for p in itertools.product(*axes)]
    grid = [p for p in grid if p.short_chars or p.short_rank == grid[0].short_rank]  # short_rank needs short_chars
    # The ranking before the laws of sanctions, routing and the spaced routes (the baseline of docs/evaluation.md).
    today = Point(0.0, 0.0, 0.0, 0, 1.0, "ru,kk", settings.remedy_rank, 1, 0, settings.remedy_short_rank)
    if today not in grid:
        grid.append(today)
    per = {point: [score(ranking(base, c, point), c.question.relevant_keys) for c in cases] for point in grid}
    folds = [fold_of(c, args.folds) for c in cases]
    kind_of = {name: name for name in sets} | {f: group for group in args.kind for f in group.split(",")}
    kinds = sorted(set(kind_of.values()))

    def objective(point: Point, keep: Sequence[bool]) -> float:
        """Mean over kinds of the mean of hit@1, hit@5, hit@10 and MRR on the kept questions; -1 for a point
        that loses more than 0.01 of any of them on any kind against today's."""
        by_file = [[i for i, c in enumerate(cases) if keep[i] and kind_of[c.file] == k] for k in kinds]
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
    joined = [(k, [i for i, c in enumerate(cases) if kind_of[c.file] == k]) for k in kinds if k not in sets]
    for name, idx in [*((n, [i for i, c in enumerate(cases) if c.file == n]) for n in sets), *joined]:
        row = [mean([per[today][i] for i in idx]), mean([per[pooled][i] for i in idx]), mean([oof[i] for i in idx])]
        table.add_row(name, str(len(idx)), *(" / ".join(f"{v:.3f}" for v in m) for m in row))
    console.print(table)
    if args.every_point:
        console.print("every point, in sample (hit@1 / hit@5 / hit@10 / MRR): " + ", ".join(sets))
        for point in grid:
            cells = [mean([per[point][i] for i, c in enumerate(cases) if c.file == name]) for name in sets]
            console.print(f"{point.label()}: " + " | ".join(" ".join(f"{v:.3f}" for v in m) for m in cells))
    return 0


def timing(base: Retrieval, sets: dict[str, list[GoldQuestion]]) -> int:
    """p50 / p95 ms of each file's rankings before the laws of sanctions and the spaced routes, with the
    defaults, and with routing on too, taking turns question by question."""
    variants = {
        "before": base.variant(sanction_weight=0.0, remedy_spacing=1, routing=False),
        "defaults": base,
        "routing on": base.variant(routing=True),
    }
    title = "Ranking time per question (ms): before, the defaults, routing on, in turn"
    Console(width=140, color_system=None).print(ranking_times(variants, sets, K, title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
