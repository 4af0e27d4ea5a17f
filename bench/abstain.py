"""Where "no legal content" begins: retrieval's relevance signal on every gold question and on off-topic probes.

    python -m bench.abstain [--data-dir DIR] [--gold-dir ../shared/eval]

For each search mode the product may run (BM25 only; BM25 + dense when the vectors exist), prints each signal's
distribution over the gold questions (citizen_dev, jurhelp_dev, jurhelp_train, follow-up last turns) and the
probes with the highest threshold that keeps every gold answer, then the verdicts with the current settings
(off_topic_bm25 / off_topic_dense): gold questions that would lose their answer (must be 0) and probes caught.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import numpy as np

from config import Settings
from retrieval.pipeline import Retrieval, Stages

GOLD_FILES = ["citizen_dev", "jurhelp_dev", "jurhelp_train"]
PROBES = [
    "привет всем", "12345", "999", "как дела", "ок спасибо", "hi", "Hello, how are you?",
    "What is the penalty for theft in Kazakhstan?", "The quick brown fox jumps over the lazy dog",
    "какая завтра погода в Алматы", "рецепт борща", "как приготовить плов", "посоветуй фильм на вечер",
    "кто выиграл чемпионат мира по футболу", "расскажи анекдот", "сколько будет 2+2", "асдфыва",
    "сәлем", "қалың қалай", "ауа райы қандай",
]


def gold_questions(gold_dir: Path) -> list[tuple[str, str]]:
    """(set, question) of every gold question, and the last turn of every follow-up dialogue."""
    out = []
    for name in GOLD_FILES:
        for line in (gold_dir / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                out.append((name, json.loads(line)["query"]))
    for line in (gold_dir / "followup_dev.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            out.append(("followup_last", json.loads(line)["turns"][-1]))
    return out


def measure(retrieval: Retrieval, questions: list[tuple[str, str]]) -> list[dict]:
    """Each question's signals and the verdict the current settings give it."""
    rows = []
    for group, q in questions:
        info = retrieval.analyze(q)
        rows.append({"set": group, "q": q, "status": retrieval.verdict(info).status,
                     "checked": not info.refs and not info.codes, **dict(retrieval.relevance(info))})
    return rows


def report(mode: str, rows: list[dict], settings: Settings) -> None:
    gold = [r for r in rows if r["set"] != "probe"]
    probes = [r for r in rows if r["set"] == "probe"]
    checked = [r for r in gold if r["checked"]]
    for signal in ("bm25", "dense"):
        if signal not in rows[0]:
            continue
        floor = settings.off_topic_bm25 if signal == "bm25" else settings.off_topic_dense
        print(f"\n## {mode}: signal {signal} (threshold {floor}{', not used' if floor <= 0 else ''})")
        print(f"{'set':<16}{'n':>5}{'min':>9}{'p5':>9}{'p50':>9}{'max':>9}")
        for name in [*GOLD_FILES, "followup_last", "probe"]:
            vals = np.array([r[signal] for r in rows if r["set"] == name])
            if len(vals):
                print(f"{name:<16}{len(vals):>5}{vals.min():>9.3f}{np.percentile(vals, 5):>9.3f}"
                      f"{np.median(vals):>9.3f}{vals.max():>9.3f}")
        lowest = sorted(checked, key=lambda r: r[signal])[:5]
        print("lowest gold (no article or code named):",
              "; ".join(f"{r[signal]:.3f} «{r['q'][:40]}»" for r in lowest))
        print("probes:", "; ".join(f"{r[signal]:.3f} «{r['q'][:30]}»" for r in sorted(probes, key=lambda r: r[signal])))
        if checked:
            low = min(r[signal] for r in checked)
            alone = sum(1 for r in probes if r[signal] < low)
            print(f"highest threshold keeping every gold answer: just below {low:.3f} (it alone catches {alone} "
                  f"of {len(probes)} probes)")
    lost = [r for r in gold if r["status"] != "answered"]
    caught = [r for r in probes if r["status"] == "off_topic"]
    print(f"\n{mode}, current settings: gold losing their answer {len(lost)} of {len(gold)}; probes caught "
          f"{len(caught)} of {len(probes)}: {', '.join(r['q'] for r in caught)}")
    for r in lost:
        print(f"  LOST {r['set']} {r['status']} {r['q'][:80]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.abstain", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, help="a built data dir (default: DATA_DIR or ./data)")
    parser.add_argument("--gold-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "eval")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    questions = [*gold_questions(args.gold_dir), *(("probe", p) for p in PROBES)]
    from index.build import IndexNotReady

    try:
        full = Retrieval.load(settings, stages=Stages(rerank=False))
    except IndexNotReady as err:
        print(f"(no vectors: {err}; measuring BM25 only)", file=sys.stderr)
        full = Retrieval.load(settings, stages=Stages(dense=False, rerank=False))
    lexical = full.variant(Stages(dense=False, rerank=False)) if full.vector_store is not None else full
    report("BM25 only", measure(lexical, questions), settings)
    if full.vector_store is not None:
        report("BM25 + dense", measure(full, questions), settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
