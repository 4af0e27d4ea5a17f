"""Where "no legal content" begins: retrieval's relevance signals on every gold question and on off-topic probes.

    python -m bench.abstain [--data-dir DIR] [--gold-dir ../shared/eval]

For each search mode the product may run (BM25 only; BM25 + dense when the vectors exist), prints each signal's
distribution over the gold questions (citizen_dev, jurhelp_dev, jurhelp_train, and every turn of the follow-up
dialogues as the chain searches it: `search_question`, read in the context of the earlier turns) and over the
probes (no legal content: greetings, small talk, weather, recipes, digits, emoji, gibberish in Russian, Kazakh and
English); the highest threshold that keeps every gold answer and the probes it alone catches; then, with the
current settings (OFF_TOPIC_BM25 / OFF_TOPIC_DENSE, any one below is off-topic), the gold
questions that would lose their answer (must be 0), the probes caught and the margin of each threshold (lowest
gold value over it).
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
FOLLOWUP_FILE = "followup_dev"
PROBES = [
    # Russian: greetings, small talk, weather, food, leisure, gibberish
    "привет всем", "привет", "здравствуйте", "добрый вечер", "как дела", "ок спасибо", "спасибо большое", "пока",
    "какая завтра погода в Алматы", "будет ли дождь в выходные", "рецепт борща", "как приготовить плов",
    "посоветуй фильм на вечер", "кто выиграл чемпионат мира по футболу", "расскажи анекдот", "сколько будет 2+2",
    "люблю котиков", "асдфыва", "ыыыыы",
    # Kazakh
    "сәлем", "сәлеметсіз бе", "қалың қалай", "ауа райы қандай", "рахмет", "палау қалай пісіріледі",
    # English (the assistant answers in Russian and Kazakh)
    "hi", "Hello, how are you?", "thanks a lot", "what's the weather like today",
    "What is the penalty for theft in Kazakhstan?", "The quick brown fox jumps over the lazy dog",
    # digits, emoji, keyboard mash
    "12345", "999", "👍", "😀😀😀", "asdfgh qwerty",
]
SIGNALS = ("bm25", "dense")


def gold_questions(gold_dir: Path, retrieval: Retrieval, settings: Settings) -> list[tuple[str, str]]:
    """(set, question searched) of every gold question, and of every turn of every follow-up dialogue as the
    chain searches it (the earlier turns answered with no LLM and passed as history)."""
    from answer.records import Exchange
    from retrieval.evaluate import dialogue_chain, read_dialogues

    out = []
    for name in GOLD_FILES:
        for line in (gold_dir / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                out.append((name, json.loads(line)["query"]))
    chain = dialogue_chain(settings, retrieval)
    for dialogue in read_dialogues(gold_dir / f"{FOLLOWUP_FILE}.jsonl"):
        history: list[Exchange] = []
        for i, turn in enumerate(dialogue.turns):
            last = i == len(dialogue.turns) - 1
            out.append(("followup_last" if last else "followup_turn", chain.understand(turn, history).search_question))
            if not last:
                history.append(Exchange.of(chain.invoke(turn, history)))
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
    checked = [r for r in gold if r["checked"]]  # a question naming an article or code is never off-topic
    floors = {"bm25": settings.off_topic_bm25, "dense": settings.off_topic_dense}
    for signal in SIGNALS:
        if signal not in rows[0]:
            continue
        floor = floors[signal]
        print(f"\n## {mode}: signal {signal} (threshold {floor}{', no say' if floor <= 0 else ''})")
        print(f"{'set':<16}{'n':>5}{'min':>9}{'p5':>9}{'p50':>9}{'max':>9}")
        for name in [*GOLD_FILES, "followup_turn", "followup_last", "probe"]:
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
            high = max(r[signal] for r in probes)
            alone = sum(1 for r in probes if r[signal] < low)
            print(f"highest threshold keeping every gold answer: just below {low:.3f} (it alone catches {alone} "
                  f"of {len(probes)} probes; highest probe {high:.3f}, gap {low - high:+.3f})")
            if floor > 0:
                print(f"threshold {floor}: margin to the lowest gold {low - floor:+.3f} ({(low - floor) / low:+.0%}),"
                      f" catches {sum(1 for r in probes if r[signal] < floor)} of {len(probes)} probes")
    lost = [r for r in gold if r["status"] != "answered"]
    caught = [r for r in probes if r["status"] == "off_topic"]
    print(f"\n{mode}, current settings: gold losing their answer {len(lost)} of {len(gold)}; probes caught "
          f"{len(caught)} of {len(probes)}; missed: {', '.join(r['q'] for r in probes if r not in caught) or 'none'}")
    for r in lost:
        print(f"  LOST {r['set']} {r['status']} {r['q'][:80]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.abstain", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, help="a built data dir (default: DATA_DIR or ./data)")
    parser.add_argument("--gold-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "eval")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    from index.build import IndexNotReady

    try:
        full = Retrieval.load(settings, stages=Stages(rerank=False))
    except IndexNotReady as err:
        print(f"(no vectors: {err}; measuring BM25 only)", file=sys.stderr)
        full = Retrieval.load(settings, stages=Stages(dense=False, rerank=False))
    lexical = full.variant(Stages(dense=False, rerank=False)) if full.vector_store is not None else full
    # follow-ups are understood as the product understands them: with every search it runs
    questions = [*gold_questions(args.gold_dir, full, settings), *(("probe", p) for p in PROBES)]
    report("BM25 only", measure(lexical, questions), settings)
    if full.vector_store is not None:
        report("BM25 + dense", measure(full, questions), settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
