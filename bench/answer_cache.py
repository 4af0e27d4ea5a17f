"""What the answer cache saves, and how many answers the LLM budget lets through, on the gold questions.

    python -m bench.answer_cache [--data-dir DIR] [--gold FILE.jsonl ...] [--limit 40] [--bm25-only]

The real chain (rag_chain.QAChain: retrieval, answer stage, grounding check, answer cache) over --data-dir, read
only: the cache and the budget go to a temporary SQLite database (DATABASE_URL=sqlite:///…). The model is the
tests' local Groq server on 127.0.0.1 (tests/support/llm_servers.py), which answers each question with the first
sentence of its first source, cited — a grounded answer, so that it is kept — and sends Groq's x-ratelimit-*
headers. Each of the first --limit gold questions is asked twice, in file order: the first round fills the cache,
the second is answered from it. Per round: model calls the server received, cache hits, time to answer (p50, p95).

The budget table: what each answer reserves of Groq's free tier before its request is sent (the prompt's
characters / 3, answer/budget.py, plus LLM_MAX_TOKENS for the longest reply), and so how many answers a minute
and a day the defaults let through without a 429: at most 30 a minute, 12,000 tokens a minute, 1,000 a day;
the tokens per day count the reply's real usage afterwards, so their line assumes a 400-token reply.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pydantic import SecretStr
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from answer.budget import CHARS_PER_TOKEN  # noqa: E402
from config import PROJECT_DIR, Settings  # noqa: E402
from corpus.store import load_articles  # noqa: E402
from index.publication import published  # noqa: E402
from rag_chain import QAChain  # noqa: E402
from retrieval.gold import read_questions  # noqa: E402
from retrieval.pipeline import Retrieval, Stages  # noqa: E402
from tests.support.llm_servers import GroqServer  # noqa: E402

GOLD_DIR = PROJECT_DIR.parent / "shared" / "eval"
DEFAULT_GOLD = [GOLD_DIR / f"{name}.jsonl" for name in ("citizen_dev", "jurhelp_dev")]
REPLY_TOKENS = 400  # a typical answer's length, for the tokens-per-day line


def echo_first_source(body: dict) -> str:
    """A grounded reply: the first sentence of source S1, cited."""
    user = "\n".join(m["content"] for m in body["messages"] if m["role"] == "user")
    if "[S1]" not in user:
        return user.strip().splitlines()[-1]
    text = user.split("[S1]", 1)[1].split("\n", 1)[1].strip()
    return f"{text.split('. ', 1)[0].rstrip('.')}. [S1]"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.answer_cache", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="data directory (corpus and index); default DATA_DIR")
    parser.add_argument("--gold", type=Path, nargs="+", default=DEFAULT_GOLD)
    parser.add_argument("--limit", type=int, default=40, help="questions asked (twice each)")
    parser.add_argument("--bm25-only", action="store_true", help="no vector and latent-term searches")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    questions = [q.query for path in args.gold for q in read_questions(path)][: args.limit]
    console = Console(width=150)
    with tempfile.TemporaryDirectory() as tmp, GroqServer() as server:
        server.reply = echo_first_source
        settings = Settings(
            **({"data_dir": args.data_dir} if args.data_dir else {}),
            database_url=SecretStr(f"sqlite:///{tmp}/service.sqlite"),
            groq_api_key=SecretStr("gsk_local"),
            groq_base_url=server.url,
            llm_backends=["groq"],
            # the local server needs no budget: the figures below are computed from what it received
            groq_requests_per_minute=0,
            groq_requests_per_day=0,
            groq_tokens_per_minute=0,
            groq_tokens_per_day=0,
        )
        publication = published(settings)
        if publication is None:
            console.print("error: the data dir has no published build (published.json): nothing can be cached")
            return 2
        started = time.perf_counter()
        stages = Stages(dense=False, sparse=False) if args.bm25_only else Stages()
        retrieval = Retrieval.load(settings, stages=stages)
        chain = QAChain(settings, retrieval, load_articles(settings.corpus_dir), publication.generation)
        console.print(
            f"loaded in {time.perf_counter() - started:.1f} s; searches: {', '.join(retrieval.searches)}; "
            f"{len(questions)} gold questions, each asked twice"
        )
        rounds = Table(title="The answer cache: each question asked twice")
        for col in ("round", "questions", "model calls", "cache hits", "grounded model answers", "p50 ms", "p95 ms"):
            rounds.add_column(col, justify="right")
        prompts: list[int] = []
        for name in ("first (fills the cache)", "second (repeats)"):
            calls, times, hits, grounded = len(server.received), [], 0, 0
            for question in questions:
                t = time.perf_counter()
                result = chain.invoke(question)
                times.append((time.perf_counter() - t) * 1000)
                hits += result.cached
                grounded += result.backend == "groq" and result.grounded
            new = server.received[calls:]
            prompts += [sum(len(m.get("content", "")) for m in r.messages()) for r in new]
            rounds.add_row(
                name,
                str(len(questions)),
                str(len(new)),
                str(hits),
                str(grounded),
                f"{statistics.median(times):.0f}",
                f"{percentile(times, 0.95):.0f}",
            )
        console.print(rounds)

        if prompts:
            prompt_tokens = statistics.mean(prompts) / CHARS_PER_TOKEN
            reserved = prompt_tokens + settings.llm_max_tokens
            budget = Table(title="What an answer reserves of Groq's free tier (defaults), and the answers it allows")
            for col in ("prompt tokens (est.)", "reserved per answer", "answers/min", "answers/day"):
                budget.add_column(col, justify="right")
            per_minute = min(30, int(12000 // reserved))
            per_day = min(1000, int(100000 // (prompt_tokens + REPLY_TOKENS)))
            budget.add_row(f"{prompt_tokens:.0f}", f"{reserved:.0f}", str(per_minute), str(per_day))
            console.print(budget)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
