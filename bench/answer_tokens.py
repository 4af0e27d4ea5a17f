"""What an answer costs in prompt tokens on the gold questions, and whether the gold articles' matching parts reach it.

    python -m bench.answer_tokens [--data-dir DIR] [--gold FILE.jsonl ...] [--budgets 0 600 900 1200] [--bm25-only]

For every gold question: the real retrieval, the real sources (answer/context.py `to_sources`) and the exact
messages the chat model would receive, rendered by the real prompt template (answer/templates.py). Each budget is
a `prompt_source_chars` setting; 0 is the old prompt (each source's first context_max_chars characters).

Tokens: no tokenizer vocabulary is installed offline (tiktoken fetches its files from the network; no Llama
tokenizer is packaged), so prompt tokens are estimated as characters / 3.5 (Cyrillic text with Llama 3's
tokenizer; not calibrated here). A question retrieval declines (its verdict is not "answered") costs no model
call and is left out of the token figures.

Gold in prompt: of the gold articles among the sources, the share whose matching part is in the prompt. The
matching part is the part of the full article text (every chunk of it, parts as answer/context.py `parts_of`
splits them) with the highest BM25 score (k1 1.5, b 0.75, IDF over the article's parts; exact stems of the
question, retrieval/analyzer.py) — ties go to the earlier part; it is in the prompt when the first 60 characters
of the part (spaces normalized) appear in that source's text. An article none of whose parts share a term with
the question counts its first part as the matching one.
`--bm25-only` measures without the vector and latent-term searches (an index still being built).
"""

from __future__ import annotations

import argparse
import logging
import math
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from answer.context import format_context, parts_of, to_sources
from answer.templates import load_template, select_template
from config import PROJECT_DIR, Settings
from retrieval.analyzer import analyze
from retrieval.gold import read_questions
from retrieval.pipeline import Retrieval, Stages

GOLD_DIR = PROJECT_DIR.parent / "shared" / "eval"
DEFAULT_GOLD = [GOLD_DIR / f"{name}.jsonl" for name in ("jurhelp_dev", "jurhelp_train", "citizen_dev")]
CHARS_PER_TOKEN = 3.5
PROBE = 60


def bm25_best(parts: list[str], question: str, lang: str) -> int:
    """The index of the part with the highest BM25 score for the question (IDF over these parts)."""
    docs = [Counter(analyze(p, lang)) for p in parts]  # type: ignore[arg-type]
    avg = sum(sum(d.values()) for d in docs) / len(docs) or 1.0
    terms = set(analyze(question, lang))  # type: ignore[arg-type]
    n = len(docs)

    def score(d: Counter) -> float:
        total, length = 0.0, sum(d.values())
        for t in terms:
            if f := d.get(t, 0):
                df = sum(1 for o in docs if t in o)
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                total += idf * f * 2.5 / (f + 1.5 * (0.25 + 0.75 * length / avg))
        return total

    scores = [score(d) for d in docs]
    return max(range(n), key=lambda i: (scores[i], -i))


def squeezed(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Tally:
    tokens: list[float] = field(default_factory=list)
    gold_seen: int = 0
    gold_in: int = 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.answer_tokens", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="data directory (corpus and index); default DATA_DIR")
    parser.add_argument("--gold", type=Path, nargs="+", default=DEFAULT_GOLD)
    parser.add_argument("--budgets", type=int, nargs="+", default=[0, 600, 900, 1200])
    parser.add_argument("--bm25-only", action="store_true", help="no vector and latent-term searches")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    started = time.perf_counter()
    stages = Stages(dense=False, sparse=False) if args.bm25_only else Stages()
    retrieval = Retrieval.load(settings, stages=stages)
    console = Console(width=150)
    console.print(
        f"loaded in {time.perf_counter() - started:.1f} s; searches: {', '.join(retrieval.searches)}; "
        f"tokens ≈ characters / {CHARS_PER_TOKEN}; completion capped at llm_max_tokens = {settings.llm_max_tokens}"
    )
    variants = {b: settings.model_copy(update={"prompt_source_chars": b}) for b in args.budgets}
    table = Table(title="Prompt tokens per answer and gold-in-prompt share, by prompt_source_chars (0: old prompt)")
    for name in ("file", "budget", "answered", "mean", "p50", "p95", "max out", "gold in top 8", "gold in prompt"):
        table.add_column(name, justify="left" if name == "file" else "right")
    for path in args.gold:
        tallies = {b: Tally() for b in args.budgets}
        questions = read_questions(path)
        for q in questions:
            found = retrieval.retrieve(q.query)
            if not found.docs:
                continue
            info = found.query
            template = select_template(info.is_range, info.is_criminal)
            for budget, s in variants.items():
                sources = to_sources(found.docs, s, question=q.query)
                prompt = load_template(s, template, info.lang)
                messages = prompt.format_messages(question=q.query, context=format_context(sources, s))
                chars = sum(len(str(m.content)) for m in messages)
                tally = tallies[budget]
                tally.tokens.append(chars / CHARS_PER_TOKEN)
                for src in sources:
                    if (src.doc_id, src.article) not in q.relevant_keys:
                        continue
                    positions = retrieval.articles.positions((src.doc_id, src.article), src.lang)
                    docs = retrieval.articles.documents
                    full = "\n".join(docs[p].page_content.partition("\n")[2].strip() for p in positions)
                    parts = parts_of(full)
                    if not parts:
                        continue
                    part = parts[bm25_best(parts, q.query, src.lang)]
                    tally.gold_seen += 1
                    tally.gold_in += squeezed(part)[:PROBE] in squeezed(src.snippet)
        for budget, t in tallies.items():
            if not t.tokens:
                continue
            ordered = sorted(t.tokens)
            p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
            share = f"{t.gold_in / t.gold_seen:.3f} ({t.gold_in}/{t.gold_seen})" if t.gold_seen else "-"
            table.add_row(
                path.stem,
                str(budget) if budget else f"old ({settings.context_max_chars})",
                f"{len(t.tokens)}/{len(questions)}",
                f"{statistics.fmean(t.tokens):.0f}",
                f"{statistics.median(t.tokens):.0f}",
                f"{p95:.0f}",
                str(settings.llm_max_tokens),
                str(t.gold_seen),
                share,
            )
        table.add_section()
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
