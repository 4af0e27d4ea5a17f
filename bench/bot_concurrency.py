"""Benchmark of the bot's concurrency: N users ask at once, how long until the last one has an answer?

The real bot (PTB Application, long polling, AIORateLimiter) runs against the tests' local Bot API server; the
chain is a stand-in that takes `--delay` seconds, either sleeping (like waiting for the LLM's HTTP reply) or
burning CPU in Python (like embedding/reranking, which holds the GIL).

.venv/bin/python bench/bot_concurrency.py --delay 0.5 --users 1 10 20 --workers 1 16
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pydantic import SecretStr
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from answer.records import QAResult
from bot.app import build_application
from bot.logsetup import quiet_noisy_loggers
from config import Settings
from tests.support.bot import ScriptedQA
from tests.support.telegram_server import BotAPIServer, message_update, polling


def _spin(n: int) -> None:
    for _ in range(n):
        pass


def loops_per_second() -> float:
    """How many iterations of a bare Python loop one thread runs in a second here (taken once)."""
    n = 2_000_000
    t0 = time.perf_counter()
    _spin(n)
    return n / (time.perf_counter() - t0)


def cpu_chain(delay: float, rate: float) -> ScriptedQA:
    """A chain doing `delay` seconds' worth (measured alone) of pure-Python work, which holds the GIL."""
    inner = ScriptedQA()
    n = int(delay * rate)

    class Burn(ScriptedQA):
        def __call__(self, question: str, settings: Settings, **kwargs: object) -> QAResult:
            _spin(n)
            return inner(question, settings, **kwargs)

    return Burn()


def bot_settings(api: BotAPIServer, data_dir: Path) -> Settings:
    """Settings of a bot talking to the local Bot API server, keeping its state in `data_dir`."""
    return Settings(
        data_dir=data_dir,
        _env_file=None,
        telegram_bot_token=SecretStr(api.token),
        telegram_api_url=api.base_url,
        telegram_file_url=api.base_file_url,
    )


async def run(users: int, workers: int, delay: float, kind: str, data_dir: Path, rate: float) -> dict[str, float]:
    """Seconds from the moment all questions are queued to each answer."""
    qa = ScriptedQA(delay=delay) if kind == "sleep" else cpu_chain(delay, rate)
    async with BotAPIServer() as api:
        app = build_application(bot_settings(api, data_dir), qa=qa, lookup=lambda *a, **k: None, qa_workers=workers)
        async with polling(app):
            since = len(api.requests)
            started = time.monotonic()
            for user in range(users):
                api.push(message_update(10_000 + user, f"Вопрос {user}"))
            await api.wait_for(lambda s: len(s.calls("sendMessage", since=since)) >= users, timeout=600)
            answers = [r.at - started for r in api.calls("sendMessage", since=since)]
    return {"last": max(answers), "median": statistics.median(answers), "first": min(answers)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--delay", type=float, default=0.5, help="seconds the chain takes per question")
    parser.add_argument("--users", type=int, nargs="+", default=[1, 10, 20])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 16], help="qa_workers (threads for the chain)")
    parser.add_argument("--kind", choices=["sleep", "cpu", "both"], default="both")
    args = parser.parse_args()
    quiet_noisy_loggers()
    rate = loops_per_second()

    table = Table(title=f"Time to answers, chain {args.delay:.2f} s a question (2 CPU cores shared)")
    for col in (
        "chain",
        "qa_workers",
        "users",
        "first answer, s",
        "median, s",
        "last answer, s",
        "sequential, s",
    ):
        table.add_column(col, justify="right")
    kinds = ["sleep", "cpu"] if args.kind == "both" else [args.kind]
    with tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:
            for workers in args.workers:
                for users in args.users:
                    folder = Path(tmp) / f"{kind}-{workers}-{users}"
                    r = asyncio.run(run(users, workers, args.delay, kind, folder, rate))
                    table.add_row(
                        "waits (I/O)" if kind == "sleep" else "computes (GIL)",
                        str(workers),
                        str(users),
                        f"{r['first']:.2f}",
                        f"{r['median']:.2f}",
                        f"{r['last']:.2f}",
                        f"{users * args.delay:.2f}",
                    )
    Console(width=130).print(table)


if __name__ == "__main__":
    main()
