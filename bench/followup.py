"""Follow-up understanding on gold dialogues: the last turn searched alone, all turns glued, and with history.

    python -m bench.followup [--data-dir DIR] [--dialogues FILE.jsonl ...] [--k 20] [--bm25-only] [--cv FOLDS]
                             [-v]

The earlier turns are answered through the chain with no LLM (extractive answers) and passed as history, as
`python -m rag_chain eval --dialogues` does. `--cv FOLDS` chooses the rule's settings (answer/followup.py: lean,
new_subject, new_weight, own_best_at) by cross-validation over the dialogues of all the files given, grouped by
dialogue: each dialogue's last turn is ranked with the setting chosen on the folds it is not in, and each file gets
an out-of-fold "with history" row. `--bm25-only` measures without the vector and latent-term searches (an index
still being built). `-v` prints how each last turn was understood and where its gold article ranks (alone and glued
too).
Defaults to ../shared/eval/followup_dev.jsonl.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import logging
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from answer.followup import FollowupRule, Reading, Understood
from answer.records import Exchange
from cli import WITH_HISTORY, dialogue_chain, evaluate_dialogues, format_comparison
from config import PROJECT_DIR, Settings
from rag_chain import QAChain
from retrieval.gold import GoldDialogue, read_dialogues
from retrieval.metrics import Metrics, QuestionResult
from retrieval.pipeline import Retrieval, Stages

DEFAULT_GOLD = [PROJECT_DIR.parent / "shared" / "eval" / "followup_dev.jsonl"]

# The settings cross-validation chooses among (the shipped one first: it wins ties). new_subject 1.01: never a new
# subject; new_weight None: a new subject searched alone; own_best_at None: the message's own best article where
# the fusion puts it.
GRID: dict[str, tuple[float | None, ...]] = {
    "lean": (0.25, 0.35, 0.5, 0.75, 1.0),
    "new_subject": (0.4, 0.3, 0.5, 0.6, 1.01),
    "new_weight": (1.0, None, 1.5, 3.0),
    "own_best_at": (4, None, 2, 3, 5),
}


@dataclass(frozen=True)
class LastTurn:
    """A dialogue's last turn after its earlier turns were answered: what the rule reads (or its fixed answer)."""

    dialogue: GoldDialogue
    history: tuple[Exchange, ...]
    fixed: Understood | None  # no reading needed: a topic change said in words, an own article
    reading: Reading | None


def last_turns(chain: QAChain, dialogues: Sequence[GoldDialogue]) -> list[LastTurn]:
    """Answer each dialogue's earlier turns through the chain, then read its last turn."""
    rule = chain.followup.rule
    out = []
    for d in dialogues:
        history: list[Exchange] = []
        for turn in d.turns[:-1]:
            history.append(Exchange.of(chain.invoke(turn, history)))
        turns = chain.settings.history_turns
        history = history[-turns:] if turns else []
        understood = rule(d.turns[-1], history)
        if understood.how in ("continues", "refines", "new subject"):
            out.append(LastTurn(d, tuple(history), None, rule.read(d.turns[-1], history)))
        else:
            out.append(LastTurn(d, tuple(history), understood, None))
    return out


def understood_by(turn: LastTurn, rule: FollowupRule) -> Understood:
    """What a rule setting makes of a last turn."""
    if turn.fixed is not None:
        return turn.fixed
    assert turn.reading is not None
    return rule.decide(turn.reading)


def gold_rank(result: QuestionResult) -> int | None:
    """Rank of the first gold article (None: not in the top k)."""
    return next((i for i, key in enumerate(result.keys, 1) if key in result.relevant), None)


class Ranker:
    """Ranks what a rule setting makes of a last turn, remembering each distinct search."""

    def __init__(self, retrieval: Retrieval, k: int) -> None:
        self.retrieval, self.k = retrieval, k
        self.seen: dict[tuple, QuestionResult] = {}

    def result(self, turn: LastTurn, rule: FollowupRule) -> QuestionResult:
        return self.ranked(turn, understood_by(turn, rule))

    def ranked(self, turn: LastTurn, understood: Understood) -> QuestionResult:
        d = turn.dialogue
        key = (d.id, understood.search_question, understood.followup)
        if key not in self.seen:
            ranked = self.retrieval.rank_articles(understood.search_question, self.k, understood.followup)
            lang = d.lang or self.retrieval.analyze(d.turns[-1]).lang
            self.seen[key] = QuestionResult(d.id, lang, False, frozenset(d.relevant_keys), ranked, 0.0)
        return self.seen[key]


def objective(results: Sequence[QuestionResult]) -> float:
    """What a setting is chosen by: hit@5 + MRR (+ hit@1 / 4)."""
    m = Metrics.of(list(results))
    return m.hit5 + m.mrr + m.hit1 / 4


def cross_validate(
    ranker: Ranker, turns: Sequence[LastTurn], rule: FollowupRule, folds: int, seed: int = 0
) -> tuple[dict[str, QuestionResult], list[dict[str, float]]]:
    """Out-of-fold result per dialogue id, and the setting each fold chose (on the other folds)."""
    settings = [dict(zip(GRID, values, strict=True)) for values in itertools.product(*GRID.values())]
    order = list(range(len(turns)))
    random.Random(seed).shuffle(order)
    fold_of = {i: n % folds for n, i in enumerate(order)}
    out: dict[str, QuestionResult] = {}
    chosen = []
    for f in range(folds):
        train = [t for i, t in enumerate(turns) if fold_of[i] != f]
        test = [t for i, t in enumerate(turns) if fold_of[i] == f]

        def score(s: dict[str, float], train: list[LastTurn] = train) -> float:
            changed = dataclasses.replace(rule, **s)
            return objective([ranker.result(t, changed) for t in train])

        best = max(settings, key=score)
        chosen.append(best)
        for t in test:
            out[t.dialogue.id] = ranker.result(t, dataclasses.replace(rule, **best))
    return out, chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.followup", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="data directory (corpus and index); default DATA_DIR")
    parser.add_argument("--dialogues", type=Path, nargs="+", default=DEFAULT_GOLD)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--bm25-only", action="store_true", help="no vector and latent-term searches")
    parser.add_argument("--cv", type=int, metavar="FOLDS", help="choose the rule's settings by grouped folds")
    parser.add_argument("-v", "--verbose", action="store_true", help="print how each last turn was understood")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    gold = {path: read_dialogues(path) for path in args.dialogues}
    started = time.perf_counter()
    stages = Stages(dense=False, sparse=False) if args.bm25_only else Stages()
    retrieval = Retrieval.load(settings, stages=stages)
    chain = dialogue_chain(settings, retrieval)
    print(f"loaded in {time.perf_counter() - started:.1f} s; searches: {', '.join(retrieval.searches)}\n")
    rule = chain.followup.rule
    ranker = Ranker(retrieval, args.k)
    turns = {path: last_turns(chain, dialogues) for path, dialogues in gold.items()}
    for path, dialogues in gold.items():
        reports = evaluate_dialogues(chain, dialogues, args.k, name=path.stem)
        print(format_comparison(path.stem, reports))
        print(f"with history: latency p50 {reports[WITH_HISTORY].latency_p50_ms:.0f} ms (understanding + search)\n")
        if args.verbose:
            for t in turns[path]:
                d = t.dialogue
                u = understood_by(t, rule)
                rank = gold_rank(ranker.result(t, rule))
                alone = gold_rank(ranker.ranked(t, Understood(d.turns[-1], False, "alone")))
                glued = gold_rank(ranker.ranked(t, Understood(" ".join(d.turns), True, "glued")))
                share = f"{t.reading.share:.2f}" if t.reading and t.reading.share is not None else "-"
                print(
                    f"{d.id}: gold rank {rank} (alone {alone}, glued {glued}); {u.how} (share {share}): "
                    f"{u.search_question}"
                )
            print()
    if args.cv:
        pooled = [t for ts in turns.values() for t in ts]
        out, chosen = cross_validate(ranker, pooled, rule, args.cv)
        print(f"cross-validation over {len(pooled)} dialogues, {args.cv} folds grouped by dialogue; chosen per fold:")
        for f, s in enumerate(chosen):
            print(f"  fold {f}: " + ", ".join(f"{k} {v}" for k, v in s.items()))
        for path, ts in turns.items():
            m = Metrics.of([out[t.dialogue.id] for t in ts])
            print(
                f"{path.stem}: with history, out of fold (n {m.n}): hit@1 {m.hit1:.3f} hit@5 {m.hit5:.3f} "
                f"hit@10 {m.hit10:.3f} MRR {m.mrr:.3f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
