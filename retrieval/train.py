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
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from config import PROJECT_DIR, Settings
from corpus.errors import UserError
from retrieval.evaluate import evaluate
from retrieval.explicit import ExplicitRetriever
from retrieval.features import FEATURE_NAMES, FEATURE_SCHEMA, SEARCHES, Pool, candidate_pool
from retrieval.gold import GoldQuestion, Key
from retrieval.learned import LearnedRanker, RankerMeta, packaged_path
from retrieval.metrics import Metrics, QuestionResult
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
    """One gold question, the file it came from, its candidate pool, the articles it names (ranked first
    whatever the model says), and the ranking of the pipeline without the learned stage (the fusion)."""

    question: GoldQuestion
    source: str
    pool: Pool
    named: tuple[Key, ...]
    numbers: tuple[str, ...]  # article numbers named with no code: lifted among the found
    fusion: tuple[Key, ...]

    def labels(self) -> np.ndarray:
        return np.asarray([k in self.question.relevant_keys for k in self.pool.keys], dtype=np.int32)

    def ranking(self, scores: np.ndarray) -> list[Key]:
        """The pipeline's ranking with a model giving these scores (named first, as ExplicitFirst orders it)."""
        found = [self.pool.keys[j] for j in sorted(range(len(self.pool.keys)), key=lambda j: -scores[j])]
        lifted = [k for k in found if k[1] in self.numbers and k not in self.named]
        return list(dict.fromkeys([*self.named, *lifted, *found]))


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
    return retrieval.variant(dataclasses.replace(retrieval.stages, learned=False, rerank=False), first_stage_k=pool_k)


def collect(
    retrieval: Retrieval, gold: dict[str, list[GoldQuestion]], pool_k: int, *, rank_k: int = 100
) -> list[Sample]:
    """Every question's candidate pool, computed as the pipeline computes it at query time, and the fusion's
    ranking (right after: the question's encodings are remembered, so it costs only the searches)."""
    pipeline = pool_pipeline(retrieval, pool_k)
    fusion = retrieval.variant(dataclasses.replace(retrieval.stages, learned=False, rerank=False))
    samples = []
    total = sum(len(q) for q in gold.values())
    for source, questions in gold.items():
        for q in questions:
            info = pipeline.analyze(q.query)
            named = tuple(pipeline.explicit.keys(info)) if pipeline.stages.explicit else ()
            numbers = tuple(ExplicitRetriever.unresolved(info)) if pipeline.stages.explicit else ()
            pool = candidate_pool(pipeline, q.query)
            ranked = tuple((d, a) for d, a, _ in fusion.rank_articles(q.query, rank_k))
            samples.append(Sample(q, source, pool, named, numbers, ranked))
            if len(samples) % 50 == 0:
                logger.info("candidates of %d / %d questions", len(samples), total)
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


def fold_groups(samples: Sequence[Sample]) -> list[str]:
    """Each sample's group: its gold file and the articles it cites (a question and its translation share one)."""
    return [f"{s.source}|{sorted(s.question.relevant_keys)}" for s in samples]


def folds_of(samples: Sequence[Sample], k: int, seed: int = SEED) -> list[list[int]]:
    """k folds of sample indices, shuffled with a fixed seed. Questions of one gold file citing the same articles
    share a fold: citizen_dev asks most questions twice, in Russian and in Kazakh, and a model that has seen one
    twin would be scored on the other as if it were held out."""
    from sklearn.model_selection import GroupKFold

    groups = fold_groups(samples)
    split = GroupKFold(n_splits=k, shuffle=True, random_state=seed).split(np.zeros(len(samples)), groups=groups)
    return [sorted(int(i) for i in held) for _, held in split]


@dataclass(frozen=True)
class CrossValidation:
    """Per question (sample order): its fold, the out-of-fold learned ranking and the fusion's ranking."""

    samples: Sequence[Sample]
    fold: list[int]
    learned: list[list[Key]]

    @property
    def fusion(self) -> list[tuple[Key, ...]]:
        return [s.fusion for s in self.samples]

    def metrics(self, which: str, picked: Sequence[int]) -> Metrics:
        return ranking_metrics(self.samples, self.learned if which == "learned" else self.fusion, picked)


def ranking_metrics(
    samples: Sequence[Sample], rankings: Mapping[int, Sequence[Key]] | Sequence[Sequence[Key]], picked: Sequence[int]
) -> Metrics:
    """The metrics of the picked samples ranked as `rankings` (by sample index) says."""
    return Metrics.of(
        [
            QuestionResult(
                id=samples[i].question.id,
                lang="",
                explicit=bool(samples[i].named),
                relevant=frozenset(samples[i].question.relevant_keys),
                ranked=[(d, a, 0.0) for d, a in rankings[i]],
                latency_ms=0.0,
            )
            for i in picked
        ]
    )


def cross_validate(samples: Sequence[Sample], config: TrainConfig, k: int = 5) -> CrossValidation:
    """Each fold's questions ranked by a model trained on the other folds only."""
    fold = [0] * len(samples)
    learned: list[list[Key]] = [[] for _ in samples]
    for n, held in enumerate(folds_of(samples, k), start=1):
        out = set(held)
        model = fit([s for i, s in enumerate(samples) if i not in out], config, {}, [])
        for i in held:
            fold[i] = n
            learned[i] = samples[i].ranking(model.scores(samples[i].pool.matrix))
    return CrossValidation(samples, fold, learned)


def _both(cv: CrossValidation, picked: Sequence[int]) -> str:
    cells = [getattr(cv.metrics(w, picked), f) for w in ("fusion", "learned") for f in ("hit1", "hit5", "hit10", "mrr")]
    return " | ".join(f"{v:.3f}" for v in cells)


def fold_table(cv: CrossValidation) -> list[str]:
    """Markdown: per fold, the fusion's and the learned stage's hit@1/5/10 and MRR (all gold files together)."""
    out = ["| fold | n | fusion hit@1 | hit@5 | hit@10 | MRR | learned hit@1 | hit@5 | hit@10 | MRR |"]
    out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in sorted(set(cv.fold)):
        picked = [i for i, f in enumerate(cv.fold) if f == n]
        out.append(f"| {n} | {len(picked)} | {_both(cv, picked)} |")
    return out


def set_table(cv: CrossValidation) -> list[str]:
    """Markdown: per gold file (and the jurhelp files together), out-of-fold metrics of both rankings."""
    out = ["| gold file | n | fusion hit@1 | hit@5 | hit@10 | MRR | learned hit@1 | hit@5 | hit@10 | MRR |"]
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    sources = list(dict.fromkeys(s.source for s in cv.samples))
    groups = {name: [name] for name in sources}
    jurhelp = [n for n in sources if n.startswith("jurhelp")]
    if len(jurhelp) > 1:
        groups["jurhelp (" + " + ".join(jurhelp) + ")"] = jurhelp
    for label, names in groups.items():
        picked = [i for i, s in enumerate(cv.samples) if s.source in names]
        out.append(f"| {label} | {len(picked)} | {_both(cv, picked)} |")
    return out


def latency_table(retrieval: Retrieval, ranker: LearnedRanker, questions: Sequence[GoldQuestion]) -> list[str]:
    """Markdown: p50 / p95 of the pipeline with and without the learned stage (nothing remembered per question)."""
    fusion = retrieval.variant(dataclasses.replace(retrieval.stages, learned=False))
    learned = retrieval.variant(dataclasses.replace(retrieval.stages, learned=True), learned=ranker)
    out = ["| pipeline | questions | p50 ms | p95 ms |", "|---|---:|---:|---:|"]
    for label, pipeline in (("fusion", fusion), ("learned stage", learned)):
        report = evaluate(pipeline, questions, 10, name=label)
        out.append(f"| {label} | {report.overall.n} | {report.latency_p50_ms:.0f} | {report.latency_p95_ms:.0f} |")
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
    parser.add_argument("--latency", type=int, default=0, metavar="N", help="time N questions with and without it")
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
            cv = cross_validate(samples, config, args.folds)
            lines = ["Out-of-fold, per gold file:", "", *set_table(cv), "", "Per fold:", "", *fold_table(cv)]
            print("\n".join(lines))  # noqa: T201 (CLI output)
        ranker = fit(samples, config, {n: len(q) for n, q in gold.items()}, searches_of(retrieval))
        if args.latency:
            questions = [s.question for s in samples][:: max(1, len(samples) // args.latency)][: args.latency]
            print("\n".join(["", *latency_table(retrieval, ranker, questions)]))  # noqa: T201
        if not args.cv_only:
            ranker.save(args.out)
            print(f"Wrote {args.out} and {args.out.with_suffix('.json').name}")  # noqa: T201
    except UserError as err:
        print(f"Error: {err}", file=sys.stderr)  # noqa: T201
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
