"""Follow-up understanding on gold dialogues: the last turn searched alone, all turns glued, and with history.

    python -m bench.followup [--data-dir DIR] [--dialogues FILE.jsonl ...] [--k 20] [--bm25-only]
                             [--focus 0.4 0.6 0.8]

The earlier turns are answered through the chain with no LLM (extractive answers) and passed as history, as
`python -m rag_chain eval --dialogues` does; `--focus` also measures the rule with other focus shares (how much of
a follow-up's own top 5 must lie in one document, not cited before, for it to count as a new subject).
`--bm25-only` measures without the vector and latent-term searches (an index still being built).
Defaults to ../shared/eval/followup_dev.jsonl.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import time
from pathlib import Path

from cli import WITH_HISTORY, dialogue_chain, evaluate_dialogues, format_comparison
from config import PROJECT_DIR, Settings
from retrieval.gold import read_dialogues
from retrieval.pipeline import Retrieval, Stages

DEFAULT_GOLD = [PROJECT_DIR.parent / "shared" / "eval" / "followup_dev.jsonl"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.followup", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="data directory (corpus and index); default DATA_DIR")
    parser.add_argument("--dialogues", type=Path, nargs="+", default=DEFAULT_GOLD)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--bm25-only", action="store_true", help="no vector and latent-term searches")
    parser.add_argument("--focus", type=float, nargs="*", default=[], help="other focus shares to measure")
    parser.add_argument("-v", "--verbose", action="store_true", help="print how each last turn was understood")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    gold = {path: read_dialogues(path) for path in args.dialogues}
    started = time.perf_counter()
    stages = Stages(dense=False, sparse=False) if args.bm25_only else Stages()
    retrieval = Retrieval.load(settings, stages=stages)
    chain = dialogue_chain(settings, retrieval)
    print(
        f"loaded in {time.perf_counter() - started:.1f} s; searches: {'BM25 only' if args.bm25_only else 'all built'}\n"
    )
    default = chain.followup.rule
    for path, dialogues in gold.items():
        reports = evaluate_dialogues(chain, dialogues, args.k, name=path.stem)
        print(format_comparison(path.stem, reports))
        print(f"with history: latency p50 {reports[WITH_HISTORY].latency_p50_ms:.0f} ms (understanding + search)\n")
        if args.verbose:
            for d, r in zip(dialogues, reports[WITH_HISTORY].results, strict=True):
                history = []
                from answer.records import Exchange

                for turn in d.turns[:-1]:
                    history.append(Exchange.of(chain.invoke(turn, history)))
                u = chain.understand(d.turns[-1], history)
                rank = next((i for i, k in enumerate(r.keys, 1) if k in r.relevant), None)
                prefer = ", ".join(u.followup.prefer_docs)
                print(f"{d.id}: gold rank {rank}; {u.how} (prefer {prefer or '-'}): {u.search_question}")
        variants = [(f"focus {f}", {"focus": f}) for f in args.focus]
        for label, change in variants:
            chain.followup.rule = dataclasses.replace(default, **change)
            m = evaluate_dialogues(chain, dialogues, args.k, name=path.stem)[WITH_HISTORY].overall
            print(f"{label}: hit@1 {m.hit1:.3f} hit@5 {m.hit5:.3f} hit@10 {m.hit10:.3f} MRR {m.mrr:.3f}")
        chain.followup.rule = default
    return 0


if __name__ == "__main__":
    sys.exit(main())
