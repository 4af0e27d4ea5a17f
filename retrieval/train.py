"""Train the learned second stage (retrieval/learned.py) on gold questions, with k-fold cross-validation.

    python -m retrieval.train [--data-dir DIR] [--gold FILE.jsonl ...] [--pool-k 100] [--folds 5] [--out PATH]

Every question's candidates and features come from `retrieval.features.candidate_pool` on the loaded pipeline
(the same function the pipeline calls at query time). Cross-validation splits by question: each fold's model
is trained on the other folds and ranks the fold's questions through the real pipeline, beside the fusion it
replaces; then the shipped model is trained on every question and written as LightGBM text plus a JSON sidecar.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from config import PROJECT_DIR, Settings
from corpus.errors import UserError
from retrieval.evaluate import EvalReport, GoldQuestion, QuestionResult, evaluate, make_report
from retrieval.features import FEATURE_NAMES, FEATURE_SCHEMA, SEARCHES, Pool, candidate_pool
from retrieval.learned import LearnedRanker, RankerMeta, packaged_path
from retrieval.pipeline import Retrieval, Stages

logger = logging.getLogger(__name__)

GOLD_DIR = PROJECT_DIR.parent / "shared" / "eval"
DEFAULT_GOLD = ("jurhelp_dev", "jurhelp_train", "citizen_dev", "followup_dev")
SEED = 17


@dataclass(frozen=True)
class TrainConfig:
    """What shapes the model: candidate depth, boosting rounds and tree size."""

    pool_k: int = 100
    rounds: int = 150
    learning_rate: float = 0.05
    num_leaves: int = 15
    min_data_in_leaf: int = 20
    feature_fraction: float = 0.8

    def params(self) -> dict[str, float | int | str | bool]:
        """LightGBM parameters; single-threaded and seeded, so the same data gives the same model file."""
        return {
            "objective": "lambdarank",
            "learning_rate": self.learning_rate,
            "num_leaves": self.num_leaves,
            "min_data_in_leaf": self.min_data_in_leaf,
            "feature_fraction": self.feature_fraction,
            "lambdarank_truncation_level": 20,
            "seed": SEED,
            "deterministic": True,
            "force_row_wise": True,
            "num_threads": 1,
            "verbosity": -1,
        }


@dataclass(frozen=True)
class Sample:
    """One gold question, the file it came from, and its candidate pool."""

    question: GoldQuestion
    source: str
    pool: Pool

    def labels(self) -> np.ndarray:
        return np.asarray([k in self.question.relevant_keys for k in self.pool.keys], dtype=np.int32)


def read_gold(path: Path) -> list[GoldQuestion]:
    """Gold questions of a JSONL file; a dialogue line ({"turns": [...]}) counts as its last turn."""
    if not path.is_file():
        raise UserError(f"No gold file at {path}: pass JSONL lines of {{id, query, relevant: [...]}}.")
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        if "query" not in row and row.get("turns"):
            row["query"] = row["turns"][-1]
        try:
            out.append(GoldQuestion.model_validate(row))
        except ValueError as err:
            raise UserError(f"{path}:{n} is not a gold question ({err}): fix or remove it.") from err
    return out


def searches_of(retrieval: Retrieval) -> list[str]:
    on = (retrieval.bm25, retrieval.vector_store, retrieval.latent)
    return [s for s, part in zip(SEARCHES, on, strict=True) if part is not None]


def pool_pipeline(retrieval: Retrieval, pool_k: int) -> Retrieval:
    """The pipeline as the learned stage sees it: every search `pool_k` deep, no learned stage, no reranker."""
    return retrieval.variant(
        dataclasses.replace(retrieval.stages, learned=False, rerank=False), first_stage_k=pool_k
    )


def collect(retrieval: Retrieval, gold: dict[str, list[GoldQuestion]], pool_k: int) -> list[Sample]:
    """Every question's candidate pool, computed as the pipeline computes it at query time."""
    pipeline = pool_pipeline(retrieval, pool_k)
    samples = []
    for source, questions in gold.items():
        for q in questions:
            samples.append(Sample(q, source, candidate_pool(pipeline, q.query)))
    return samples


def fit(samples: Sequence[Sample], config: TrainConfig, gold_counts: dict[str, int], searches: list[str]):
    """A LearnedRanker trained on the samples (questions with no relevant candidate teach nothing: skipped)."""
    import lightgbm

    useful = [s for s in samples if s.labels().any()]
    if not useful:
        raise UserError("No gold question has a relevant article among its candidates: nothing to learn from.")
    x = np.vstack([s.pool.matrix for s in useful])
    y = np.concatenate([s.labels() for s in useful])
    data = lightgbm.Dataset(
        x, y, group=[len(s.pool.keys) for s in useful], feature_name=list(FEATURE_NAMES), free_raw_data=False
    )
    booster = lightgbm.train(config.params(), data, num_boost_round=config.rounds)
    meta = RankerMeta(
        feature_schema=FEATURE_SCHEMA,
        feature_names=list(FEATURE_NAMES),
        pool_k=config.pool_k,
        searches=searches,
        trained_on=gold_counts,
        params={**config.params(), "questions_used": len(useful)},
        rounds=config.rounds,
    )
    return LearnedRanker(booster, meta)


def folds_of(samples: Sequence[Sample], k: int) -> list[list[int]]:
    """k folds of sample indices, by question, shuffled with a fixed seed."""
    order = list(range(len(samples)))
    random.Random(SEED).shuffle(order)
    return [sorted(order[i::k]) for i in range(k)]


@dataclass(frozen=True)
class CrossValidation:
    """Out-of-fold results of the learned stage and of the fusion on the same questions, per gold file."""

    learned: dict[str, list[QuestionResult]]
    fusion: dict[str, list[QuestionResult]]
    per_fold: list[tuple[int, EvalReport, EvalReport]]  # fold, fusion, learned

    def reports(self, which: str) -> dict[str, EvalReport]:
        results = self.learned if which == "learned" else self.fusion
        return {name: make_report(name, 100, rs) for name, rs in results.items()}


def cross_validate(
    retrieval: Retrieval, samples: Sequence[Sample], config: TrainConfig, k: int = 5, *, rank_k: int = 100
) -> CrossValidation:
    """Each fold ranked by a model trained on the other folds, through the real pipeline; the fusion beside."""
    searches = searches_of(retrieval)
    fusion_pipeline = retrieval.variant(dataclasses.replace(retrieval.stages, learned=False))
    learned: dict[str, list[QuestionResult]] = {}
    fusion: dict[str, list[QuestionResult]] = {}
    per_fold = []
    for n, fold in enumerate(folds_of(samples, k), start=1):
        held = set(fold)
        model = fit([s for i, s in enumerate(samples) if i not in held], config, {}, searches)
        pipeline = retrieval.variant(dataclasses.replace(retrieval.stages, learned=True), learned=model)
        fold_results = {"fusion": [], "learned": []}
        for name, p, into in (("fusion", fusion_pipeline, fusion), ("learned", pipeline, learned)):
            for source in sorted({samples[i].source for i in fold}):
                questions = [samples[i].question for i in fold if samples[i].source == source]
                report = evaluate(p, questions, rank_k, name=source)
                into.setdefault(source, []).extend(report.results)
                fold_results[name].extend(report.results)
        reports = (make_report(name, rank_k, fold_results[name]) for name in ("fusion", "learned"))
        per_fold.append((n, *reports))
        logger.info("fold %d/%d: %d questions", n, k, len(fold))
    return CrossValidation(learned, fusion, per_fold)


def fold_table(cv: CrossValidation) -> list[str]:
    """Markdown: per fold, the fusion's and the learned stage's hit@1/5/10 and MRR (all gold files together)."""
    out = ["| fold | n | fusion hit@1 | hit@5 | hit@10 | MRR | learned hit@1 | hit@5 | hit@10 | MRR |"]
    out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, f, ln in cv.per_fold:
        a, b = f.overall, ln.overall
        cells = (a.hit1, a.hit5, a.hit10, a.mrr, b.hit1, b.hit5, b.hit10, b.mrr)
        out.append(f"| {n} | {a.n} | " + " | ".join(f"{v:.3f}" for v in cells) + " |")
    return out


def set_table(cv: CrossValidation) -> list[str]:
    """Markdown: per gold file, out-of-fold metrics of the fusion and of the learned stage, with latency."""
    out = ["| gold file | ranking | n | hit@1 | hit@5 | hit@10 | MRR | p50 ms | p95 ms |"]
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    fusion, learned = cv.reports("fusion"), cv.reports("learned")
    groups = {**{n: [n] for n in fusion}, "jurhelp (dev + train)": [n for n in fusion if n.startswith("jurhelp")]}
    for label, names in groups.items():
        if not names or (len(names) == 1 and label != names[0]):
            continue
        for which, reports in (("fusion", fusion), ("learned (out-of-fold)", learned)):
            r = make_report(label, 100, [q for n in names for q in reports[n].results])
            m = r.overall
            cells = (m.hit1, m.hit5, m.hit10, m.mrr)
            out.append(
                f"| {label} | {which} | {m.n} | " + " | ".join(f"{v:.3f}" for v in cells)
                + f" | {r.latency_p50_ms:.0f} | {r.latency_p95_ms:.0f} |"
            )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m retrieval.train", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="corpus and index (default: DATA_DIR or ./data)")
    parser.add_argument("--gold", type=Path, action="append", help="gold JSONL (repeatable); default ../shared/eval")
    parser.add_argument("--pool-k", type=int, default=TrainConfig.pool_k, help="each search's depth for candidates")
    parser.add_argument("--rounds", type=int, default=TrainConfig.rounds)
    parser.add_argument("--folds", type=int, default=5, help="cross-validation folds (0: none)")
    parser.add_argument("--out", type=Path, default=packaged_path(), help="model file (sidecar: .json beside it)")
    parser.add_argument("--cv-only", action="store_true", help="cross-validate, write no model")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    try:
        files = args.gold or [GOLD_DIR / f"{n}.jsonl" for n in DEFAULT_GOLD]
        gold = {p.stem: read_gold(p) for p in files}
        config = TrainConfig(pool_k=args.pool_k, rounds=args.rounds)
        retrieval = Retrieval.load(settings, stages=Stages(learned=False, rerank=False))
        start = time.perf_counter()
        samples = collect(retrieval, gold, config.pool_k)
        logger.info("candidates of %d questions in %.0f s", len(samples), time.perf_counter() - start)
        if args.folds > 1:
            cv = cross_validate(retrieval, samples, config, args.folds)
            print("\n".join([*fold_table(cv), "", *set_table(cv)]))  # noqa: T201 (CLI output)
        if not args.cv_only:
            ranker = fit(samples, config, {n: len(q) for n, q in gold.items()}, searches_of(retrieval))
            ranker.save(args.out)
            print(f"Wrote {args.out} and {args.out.with_suffix('.json').name}")  # noqa: T201
    except UserError as err:
        print(f"Error: {err}", file=sys.stderr)  # noqa: T201
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
