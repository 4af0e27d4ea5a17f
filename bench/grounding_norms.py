"""False alarms of the norm check (answer.norms, part of answer.grounding): answers that state the law as their
sources do must not be flagged as contradicting them.

    python -m bench.grounding_norms [--shared ../shared]

Two sets, both from ../shared:
- extractive: for each gold question (citizen_dev, jurhelp_dev, jurhelp_train) the extractive answer over its
  relevant articles (parsed from ../shared/corpus as the tests do), as if a model had written it;
- restated: every numbered part of every Criminal Code article that sets a punishment, restated as a model
  would («Согласно части N, …»), its number words written in digits («до трех лет» → «до 3 лет», «одной тысячи»
  → «1000»), «месячных расчетных показателей» as «МРП», cited as [S1] against the article.
Prints, per set, the answers and sentences judged and how many the check flags, with the first few flagged;
then how many of the restated parts it catches once changed as a model might: the punishment negated («не
наказывается»), the death penalty added, a term of years one longer.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import tempfile
from pathlib import Path

from answer.context import to_sources
from answer.extractive import extractive_answer, units
from answer.grounding import check_grounding
from answer.norms import NUMBER_WORDS  # the reader's own table: digits for words
from config import Settings
from corpus.legal.registry import CRIMINAL_CODE_ID
from tests.support.answer import articles, docs

logger = logging.getLogger(__name__)

GOLD_FILES = ["citizen_dev", "jurhelp_dev", "jurhelp_train"]
SHOW = 5


def _gold(shared: Path) -> list[dict]:
    rows = []
    for name in GOLD_FILES:
        with (shared / "eval" / f"{name}.jsonl").open(encoding="utf-8") as f:
            rows += [json.loads(line) for line in f if line.strip()]
    return rows


def _in_digits(text: str) -> str:
    """Number words as digits, a run of them as one number («одной тысячи двухсот» → «1200»)."""

    def run(m: re.Match[str]) -> str:
        total = current = 0
        for word in m.group(0).split():
            value = NUMBER_WORDS[word.lower()]
            if value >= 1000:
                total += (current or 1) * value
                current = 0
            else:
                current += value
        return str(total + current)

    words = "|".join(sorted((re.escape(w) for w in NUMBER_WORDS if not w.isascii()), key=len, reverse=True))
    return re.sub(rf"(?<!\w)(?:{words})(?:\s+(?:{words}))*(?!\w)", run, text)


def _restate(part: str) -> str:
    number = part.split(".", 1)[0]
    body = part.split(".", 1)[1].strip() if "." in part[:6] else part
    body = _in_digits(body).replace("месячных расчетных показателей", "МРП")
    return f"Согласно части {number}: {' '.join(body.split())} [S1]."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    settings = Settings(data_dir=Path(tempfile.mkdtemp()) / "data", _env_file=None)

    rows: list[tuple[str, int, int, int, list[str]]] = []

    answers = sentences = flagged_answers = 0
    flagged: list[str] = []
    for q in _gold(args.shared):
        by_doc: dict[str, list[str]] = {}
        for rel in q["relevant"]:
            by_doc.setdefault(rel["doc_id"], []).append(rel["article"])
        documents = []
        for doc_id, numbers in by_doc.items():
            lang = q["lang"] if (args.shared / "corpus" / "kaz" / f"{doc_id}.txt").exists() else "ru"
            found = articles(args.shared, doc_id, lang)
            documents += docs(args.shared, doc_id, [n for n in numbers if n in found], lang)
        if not documents:
            continue
        sources = to_sources(documents, settings)
        crime = any(s.doc_id == CRIMINAL_CODE_ID for s in sources)
        text = extractive_answer(q["query"], sources, lang=q["lang"], is_criminal=crime, settings=settings).text
        g = check_grounding(text, sources, lang=q["lang"], is_criminal=crime, settings=settings, question=q["query"])
        answers += 1
        sentences += len([s for s in re.split(r"(?<=[.!?…])\s+|\n+", text) if s.strip()])
        if g.contradicting:
            flagged_answers += 1
            flagged += [f"{q['id']}: {n}" for n in g.notes if "contradict" in n]
    rows.append(("extractive answers to gold questions", answers, sentences, flagged_answers, flagged))

    answers = flagged_answers = 0
    flagged = []
    changes = {
        "negated («не наказывается»)": lambda t: t.replace("наказывается", "не наказывается", 1),
        "death penalty added": lambda t: t.replace("наказывается ", "наказывается смертной казнью либо ", 1),
        "a term one year longer": lambda t: re.sub(
            r"\b(\d+) (лет|года)\b", lambda m: f"{int(m[1]) + 1} лет", t, count=1
        ),
    }
    caught = dict.fromkeys(changes, 0)
    changed = dict.fromkeys(changes, 0)
    samples: list[str] = []
    uk = articles(args.shared, CRIMINAL_CODE_ID, "ru")
    for number, article in uk.items():
        parts = [u for u in units(article.text) if "наказыва" in u and re.match(r"\d+\.", u)]
        if not parts or article.status == "repealed":
            continue
        sources = to_sources(docs(args.shared, CRIMINAL_CODE_ID, [number]), settings)
        for part in parts:
            if part not in sources[0].snippet:
                continue  # past the context's clip: the model would not have seen it
            text = _restate(part)
            g = check_grounding(text, sources, lang="ru", is_criminal=True, settings=settings)
            answers += 1
            if len(samples) < 2:
                samples.append(text[:200])
            if g.contradicting:
                flagged_answers += 1
                flagged += [f"УК {number}: {n} | {text[:160]}" for n in g.notes if "contradict" in n]
            for name, change in changes.items():
                wrong = change(text)
                if wrong == text:
                    continue
                changed[name] += 1
                caught[name] += bool(
                    check_grounding(wrong, sources, lang="ru", is_criminal=True, settings=settings).contradicting
                )
    rows.append(("Criminal Code parts restated in digits", answers, answers, flagged_answers, flagged))

    print("| set | answers | sentences | flagged as contradicting |")
    print("|---|---:|---:|---:|")
    for name, n, s, f, _ in rows:
        print(f"| {name} | {n} | {s} | {f} |")
    print()
    print("| restated part changed | changed | caught |")
    print("|---|---:|---:|")
    for name in changes:
        print(f"| {name} | {changed[name]} | {caught[name]} |")
    print()
    for sample in samples:
        print(f"restated, e.g.: {sample}")
    for name, _, _, _, examples in rows:
        for example in examples[:SHOW]:
            print(f"{name}: {example}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
