"""The cross-language search's weight, chosen out of fold: each gold set ranked with every weight of a grid, then a
two-fold cross-validation over the questions of the tuned language.

    python -m bench.crosslang --data-dir DIR --questions bench/data/kk_dev.jsonl [--questions ...]
        [--dialogues FILE.jsonl ...] [--held-out NAME ...] [--lang kk] [--weights 0,0.2,0.3,0.5,0.8]

Loads the retrieval once and composes a variant per weight (CROSSLANG_WEIGHT for `--lang kk`,
CROSSLANG_RU_WEIGHT for `--lang ru`); prints hit@1/5/10 and MRR of each set at each weight, then the folds: the
questions of `--lang` from every set, split in two by a hash of their id; the weight with the best MRR on one fold
is scored on the other, and the table shows those out-of-fold figures beside the weight 0 (no cross-language
search) and each fold's choice. `--dialogues` adds the last turns of the dialogues in `--lang` to the folds (their
earlier turns answered through the chain with no LLM at each weight, the last one understood by the offline rule
and ranked `DIALOGUE_K` deep, as `rag_chain eval --dialogues` does), so that the weight is chosen over single
questions and follow-ups together; `--setting NAME` varies another setting over the grid instead (e.g.
`crosslang_dense_chars`, or `title_weight` with `--lang all`, which tunes over the questions and dialogues of
both languages; ties go to the smaller value); a set named by `--held-out` (its file's stem) is ranked at
every weight and at each fold's choice, never chosen on. `--timing` instead times each question's ranking at each
weight, the weights taking turns question by question (so a machine's changing load falls on all of them alike),
every remembered question forgotten before each call, and prints p50 / p95 per set and weight.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.followup import Ranker, last_turns
from bench.measured import ranking_times
from cli import dialogue_chain
from config import Settings
from retrieval.gold import GoldDialogue, GoldQuestion, read_dialogues, read_questions
from retrieval.metrics import hit_at, reciprocal_rank
from retrieval.pipeline import Retrieval

K = 100
DIALOGUE_K = 20  # the issue's `rag_chain eval --dialogues FILE --k 20`

Scores = tuple[float, float, float, float]  # hit@1, hit@5, hit@10, reciprocal rank


def score(retrieval: Retrieval, question: GoldQuestion) -> Scores:
    ranked = [(d, a) for d, a, _ in retrieval.rank_articles(question.query, K)]
    return scores(ranked, set(question.relevant_keys))


def scores(ranked: Sequence[tuple[str, str]], relevant: set[tuple[str, str]]) -> Scores:
    return (
        hit_at(ranked, relevant, 1),
        hit_at(ranked, relevant, 5),
        hit_at(ranked, relevant, 10),
        reciprocal_rank(ranked, relevant),
    )


def dialogue_scores(retrieval: Retrieval, dialogues: Sequence[GoldDialogue]) -> list[Scores]:
    """Each dialogue's last turn, its earlier turns answered through this retrieval's chain (no LLM)."""
    chain = dialogue_chain(retrieval.settings, retrieval)
    ranker = Ranker(retrieval, DIALOGUE_K)
    rule = chain.followup.rule
    return [
        scores(ranker.result(turn, rule).keys, set(turn.dialogue.relevant_keys))
        for turn in last_turns(chain, dialogues)
    ]


def mean(rows: Sequence[Scores]) -> Scores:
    n = max(len(rows), 1)
    return tuple(sum(r[i] for r in rows) / n for i in range(4))  # type: ignore[return-value]


def fold_of(question_id: str) -> int:
    return hashlib.sha256(question_id.encode()).digest()[0] % 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.crosslang", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--questions", type=Path, action="append", required=True, help="gold JSONL (repeatable)")
    parser.add_argument("--dialogues", type=Path, action="append", default=[], help="gold dialogues (repeatable)")
    parser.add_argument(
        "--held-out", action="append", default=[], metavar="NAME", help="a set (file stem) ranked, never chosen on"
    )
    parser.add_argument(
        "--lang",
        choices=("kk", "ru", "all"),
        default="kk",
        help="the question language tuned (all: both, with --setting)",
    )
    parser.add_argument("--weights", default="0,0.2,0.3,0.5,0.8", help="the grid, comma-separated")
    parser.add_argument(
        "--setting",
        default=None,
        help="the setting the grid varies (e.g. crosslang_dense_chars); default: the cross-language weight of --lang",
    )
    parser.add_argument("--timing", action="store_true", help="time the rankings instead (see above)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    if args.lang == "all" and not args.setting:
        parser.error("--lang all tunes a --setting")
    key = args.setting or ("crosslang_weight" if args.lang == "kk" else "crosslang_ru_weight")
    tuned_lang = {"kk", "ru"} if args.lang == "all" else {args.lang}
    integral = isinstance(getattr(settings, key), int)
    weights = [int(w) if integral else float(w) for w in args.weights.split(",")]
    base = Retrieval.load(settings)
    sets = {path.stem: read_questions(path) for path in args.questions}
    if args.timing:
        return timing(base, sets, key, weights)
    dialogues = {
        path.stem: [d for d in read_dialogues(path) if (d.lang or "ru") in tuned_lang] for path in args.dialogues
    }
    # (set, id) → scores at each weight; the ids of each set, and those in the tuned language
    ids = {name: [q.id for q in qs] for name, qs in sets.items()} | {
        n: [d.id for d in ds] for n, ds in dialogues.items()
    }
    tuned_ids = {name: [q.id for q in qs if (q.lang or "ru") in tuned_lang] for name, qs in sets.items()}
    tuned_ids |= {name: ids[name] for name in dialogues}
    per: dict[float, dict[tuple[str, str], Scores]] = {}
    for w in weights:
        variant = base.variant(**{key: w})
        per[w] = {(name, q.id): score(variant, q) for name, qs in sets.items() for q in qs}
        for name, ds in dialogues.items():
            per[w] |= {(name, d.id): s for d, s in zip(ds, dialogue_scores(variant, ds), strict=True)}
    console = Console(width=140, color_system=None)
    table = Table(
        title=f"{key.upper()}: each set at each weight (questions k={K}, dialogues' last turns k={DIALOGUE_K})"
    )
    for col in ("set", "n", "weight", "hit@1", "hit@5", "hit@10", "MRR"):
        table.add_column(col, justify="right" if col != "set" else "left")
    for name, members in ids.items():
        for w in weights:
            m = mean([per[w][(name, i)] for i in members])
            table.add_row(name, str(len(members)), f"{w:g}", *(f"{v:.3f}" for v in m))
    console.print(table)

    tuned = [(name, i) for name, members in tuned_ids.items() if name not in args.held_out for i in members]
    folds = [[(n, i) for n, i in tuned if fold_of(i) == f] for f in (0, 1)]
    what = "questions and last turns" if dialogues else "questions"
    cv = Table(title=f"Two-fold cross-validation over the {len(tuned)} {what} in {args.lang} (chosen by MRR)")
    for col in ("fold", "n", "chosen", "hit@1", "hit@5", "hit@10", "MRR", "weight 0: hit@1", "hit@5", "hit@10", "MRR"):
        cv.add_column(col, justify="right")
    oof: dict[tuple[str, str], Scores] = {}
    zero: list[Scores] = []
    chosen: list[float] = []
    for f in (0, 1):
        train, test = folds[1 - f], folds[f]
        chosen.append(max(weights, key=lambda w: (round(mean([per[w][i] for i in train])[3], 6), -w)))
        got = [per[chosen[f]][i] for i in test]
        base_scores = [per[0.0][i] for i in test] if 0.0 in per else got
        oof |= dict(zip(test, got, strict=True))
        zero += base_scores
        cv.add_row(str(f), str(len(test)), f"{chosen[f]:g}", *(f"{v:.3f}" for v in (*mean(got), *mean(base_scores))))
    cv.add_row("all", str(len(oof)), "", *(f"{v:.3f}" for v in (*mean(list(oof.values())), *mean(zero))))
    console.print(cv)
    by_set = Table(title="Each set in the tuned language: out of fold (held-out sets: at each fold's choice)")
    for col in ("set", "n", "weight", "hit@1", "hit@5", "hit@10", "MRR"):
        by_set.add_column(col, justify="right" if col != "set" else "left")
    for name, members in tuned_ids.items():
        if name in args.held_out:
            for w in dict.fromkeys(chosen):
                by_set.add_row(
                    name, str(len(members)), f"{w:g}", *(f"{v:.3f}" for v in mean([per[w][(name, i)] for i in members]))
                )
        elif members:
            by_set.add_row(
                name, str(len(members)), "out of fold", *(f"{v:.3f}" for v in mean([oof[(name, i)] for i in members]))
            )
    console.print(by_set)
    return 0


def timing(base: Retrieval, sets: dict[str, list[GoldQuestion]], key: str, weights: list[float]) -> int:
    """p50 / p95 ms of each set's rankings at each weight, the weights taking turns question by question."""
    variants = {f"{w:g}": base.variant(**{key: w}) for w in weights}
    title = f"{key.upper()}: ranking time per question (ms), weights in turn"
    Console(width=140, color_system=None).print(ranking_times(variants, sets, K, title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
