"""Where "no legal content" begins: retrieval's relevance signals on every gold question and on off-topic probes.

    python -m bench.abstain [--data-dir DIR] [--gold-dir ../shared/eval]

For each search mode the product may run (BM25 only; BM25 + dense when the vectors exist), prints each signal's
distribution over the gold questions (citizen_dev, jurhelp_dev, jurhelp_train, and every turn of the follow-up
dialogues as the chain searches it: `search_question`, read in the context of the earlier turns, and alone),
over the probes (no legal content: greetings, small talk, weather, recipes, digits, emoji, gibberish in Russian,
Kazakh and English) and over short legal questions (one or two words a citizen may type: «штраф», «зарплата»;
not gold, but they must keep their answer too); the highest threshold that keeps every gold answer and the probes
it alone catches; then, with the current settings (retrieval.pipeline.off_topic: BM25 below OFF_TOPIC_BM25 unless
the best cosine reaches OFF_TOPIC_DENSE_RESCUE, or BM25 below OFF_TOPIC_WEAK_BM25 with the best cosine below
OFF_TOPIC_DENSE), the gold and short legal questions that would lose their answer (must be 0), the probes caught,
and the margin of each threshold to the questions that keep their answer.
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
    "привет всем",
    "привет",
    "здравствуйте",
    "добрый вечер",
    "как дела",
    "ок спасибо",
    "спасибо большое",
    "пока",
    "какая завтра погода в Алматы",
    "будет ли дождь в выходные",
    "рецепт борща",
    "как приготовить плов",
    "посоветуй фильм на вечер",
    "кто выиграл чемпионат мира по футболу",
    "расскажи анекдот",
    "сколько будет 2+2",
    "люблю котиков",
    "асдфыва",
    "ыыыыы",
    # Kazakh
    "сәлем",
    "сәлеметсіз бе",
    "қалың қалай",
    "ауа райы қандай",
    "рахмет",
    "палау қалай пісіріледі",
    # English (the assistant answers in Russian and Kazakh)
    "hi",
    "Hello, how are you?",
    "thanks a lot",
    "what's the weather like today",
    "What is the penalty for theft in Kazakhstan?",
    "The quick brown fox jumps over the lazy dog",
    # digits, emoji, keyboard mash
    "12345",
    "999",
    "👍",
    "😀😀😀",
    "asdfgh qwerty",
]
# Short legal questions: not gold (nobody cited articles for them), but a verdict that silences them is wrong.
LEGAL_SHORT = [
    "штраф",
    "алименты",
    "отпуск",
    "наследство",
    "развод",
    "кража",
    "увольнение",
    "пенсия",
    "налог",
    "ипотека",
    "виза",
    "ДТП",
    "меня уволили",
    "долг",
    "залог",
    "аренда",
    "дарение",
    "пособие",
    "зарплата",
    "декрет",
    "больничный",
    "прописка",
    "неустойка",
    "опека",
    "взятка",
    "побои",
    "клевета",
    "самооборона",
    "возврат товара",
    "материнский капитал",
    "ұрлық",
    "жалақы",
    "ажырасу",
    "мұра",
    "зейнетақы",
    "айыппұл",
]
SIGNALS = ("bm25", "dense")


def gold_questions(gold_dir: Path, retrieval: Retrieval, settings: Settings) -> list[tuple[str, str]]:
    """(set, question searched) of every gold question, and of every turn of every follow-up dialogue as the
    chain searches it (the earlier turns answered with no LLM and passed as history)."""
    from answer.records import Exchange
    from cli import dialogue_chain
    from retrieval.gold import read_dialogues

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
            out.append(("turn_alone", turn))  # as the rule searches a turn that changes the topic
            if not last:
                history.append(Exchange.of(chain.invoke(turn, history)))
    return out


def measure(retrieval: Retrieval, questions: list[tuple[str, str]]) -> list[dict]:
    """Each question's signals and the verdict the current settings give it."""
    rows = []
    for group, q in questions:
        info = retrieval.analyze(q)
        rows.append(
            {
                "set": group,
                "q": q,
                "status": retrieval.verdict(info).status,
                "checked": not info.refs and not info.codes,
                **dict(retrieval.relevance(info)),
            }
        )
    return rows


def report(mode: str, rows: list[dict], settings: Settings) -> None:
    gold = [r for r in rows if r["set"] not in ("probe", "legal_short")]
    keep = [r for r in rows if r["set"] != "probe"]
    probes = [r for r in rows if r["set"] == "probe"]
    checked = [r for r in gold if r["checked"]]  # a question naming an article or code is never off-topic
    for signal in SIGNALS:
        if signal not in rows[0]:
            continue
        print(f"\n## {mode}: signal {signal}")
        print(f"{'set':<16}{'n':>5}{'min':>9}{'p5':>9}{'p50':>9}{'max':>9}")
        for name in [*GOLD_FILES, "followup_turn", "followup_last", "turn_alone", "legal_short", "probe"]:
            vals = np.array([r[signal] for r in rows if r["set"] == name])
            if len(vals):
                print(
                    f"{name:<16}{len(vals):>5}{vals.min():>9.3f}{np.percentile(vals, 5):>9.3f}"
                    f"{np.median(vals):>9.3f}{vals.max():>9.3f}"
                )
        lowest = sorted(checked, key=lambda r: r[signal])[:5]
        print("lowest gold (no article or code named):", "; ".join(f"{r[signal]:.3f} «{r['q'][:40]}»" for r in lowest))
        print("probes:", "; ".join(f"{r[signal]:.3f} «{r['q'][:30]}»" for r in sorted(probes, key=lambda r: r[signal])))
        if checked:
            low = min(r[signal] for r in checked)
            high = max(r[signal] for r in probes)
            alone = sum(1 for r in probes if r[signal] < low)
            print(
                f"highest threshold keeping every gold answer: just below {low:.3f} (it alone catches {alone} "
                f"of {len(probes)} probes; highest probe {high:.3f}, gap {low - high:+.3f})"
            )
    if "dense" in rows[0]:
        s = settings
        print(
            f"\n## {mode}: the rule (BM25 < {s.off_topic_bm25} and cosine < {s.off_topic_dense_rescue}, or "
            f"BM25 < {s.off_topic_weak_bm25} and cosine < {s.off_topic_dense})"
        )
        for lo, hi in ((0.0, s.off_topic_bm25), (s.off_topic_bm25, s.off_topic_weak_bm25)):
            inside = [r for r in rows if r["checked"] and lo <= r["bm25"] < hi]
            floor = s.off_topic_dense_rescue if hi == s.off_topic_bm25 else s.off_topic_dense
            kept = sorted((r for r in inside if r["set"] != "probe"), key=lambda r: r["dense"])
            caught = sorted((r for r in inside if r["set"] == "probe"), key=lambda r: -r["dense"])
            print(
                f"BM25 in [{lo}, {hi}), cosine threshold {floor}: to keep "
                + (", ".join(f"{r['dense']:.3f} «{r['q'][:25]}» ({r['set']})" for r in kept[:4]) or "none")
                + "; probes "
                + (", ".join(f"{r['dense']:.3f} «{r['q'][:20]}»" for r in caught[:4]) or "none")
            )
    lost = [r for r in keep if r["status"] != "answered"]
    caught = [r for r in probes if r["status"] == "off_topic"]
    print(
        f"\n{mode}, current settings: gold losing their answer {len([r for r in lost if r in gold])} of "
        f"{len(gold)}; short legal questions losing it {len([r for r in lost if r not in gold])} of "
        f"{len(keep) - len(gold)}; probes caught {len(caught)} of {len(probes)}; missed: "
        f"{', '.join(r['q'] for r in probes if r not in caught) or 'none'}"
    )
    for r in lost:
        print(f"  LOST {r['set']} {r['status']} {r['q'][:80]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.abstain", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, help="a built data dir (default: DATA_DIR or ./data)")
    parser.add_argument("--gold-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "eval")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    full = Retrieval.load(settings, stages=Stages(rerank=False))
    if full.vector_store is None:
        print("(no vectors in this data dir: measuring BM25 only)", file=sys.stderr)
    lexical = full.variant(Stages(dense=False, rerank=False)) if full.vector_store is not None else full
    # follow-ups are understood as the product understands them: with every search it runs
    questions = [
        *gold_questions(args.gold_dir, full, settings),
        *(("legal_short", q) for q in LEGAL_SHORT),
        *(("probe", p) for p in PROBES),
    ]
    report("BM25 only", measure(lexical, questions), settings)
    if full.vector_store is not None:
        report("BM25 + dense", measure(full, questions), settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
