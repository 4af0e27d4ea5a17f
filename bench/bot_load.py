"""Load benchmark of the real bot over the real chain: N users ask real questions at once.

The real bot (PTB Application, long polling, its 16 worker threads) runs against the tests' local Bot API server
on 127.0.0.1 and answers with the real `rag_chain.invoke_qa` over the corpus and index in --data-dir (read only:
the bot's own state goes to a temporary folder). Each user (a distinct id, so the per-user rate limit does not
apply) sends --questions real questions from the gold sets in ../shared/eval, one after another, each once the
answer to the previous one has come. Time to answer: from sending the update to the answer message (the one
carrying the rating buttons). A failure is an error reply, an exception logged by the bot, or no answer within
--timeout seconds; there must be none.

.venv/bin/python bench/bot_load.py --data-dir data --users 1 10 50
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bot_concurrency import bot_settings  # noqa: E402
from bot.app import build_application  # noqa: E402
from bot.handlers import MAX_QUESTION_CHARS  # noqa: E402
from bot.keyboards import RATE_PATTERN  # noqa: E402
from bot.logsetup import quiet_noisy_loggers  # noqa: E402
from config import Settings  # noqa: E402
from tests.support.telegram_server import BotAPIServer, BotRequest, message_update, polling  # noqa: E402

EVAL_FILES = ("citizen_dev.jsonl", "jurhelp_dev.jsonl")


def gold_questions(eval_dir: Path) -> list[str]:
    """Every question of the gold sets the bot accepts (it asks to shorten longer ones), in file order."""
    out: list[str] = []
    for name in EVAL_FILES:
        with (eval_dir / name).open(encoding="utf-8") as f:
            out.extend(json.loads(line)["query"] for line in f if line.strip())
    return [q for q in out if len(" ".join(q.split())) <= MAX_QUESTION_CHARS]


class BotFailures(logging.Handler):
    """Warnings and errors the bot logs: update ids whose handling failed, and anything else that went wrong."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.updates: set[int] = set()
        self.other: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        if record.name == "bot.handlers" and args and isinstance(args[0], int):
            self.updates.add(args[0])  # "update %s failed" / "update %s: UserError: …"
        elif record.levelno >= logging.ERROR:
            self.other.append(f"{record.name}: {record.getMessage()}")


def is_answer(request: BotRequest) -> bool:
    """The message that ends an answer carries its rating buttons."""
    markup = request.params.get("reply_markup") or {}
    return any(
        RATE_PATTERN.match(button.get("callback_data", ""))
        for row in markup.get("inline_keyboard", [])
        for button in row
    )


@dataclass
class Level:
    """What one number of users got."""

    users: int
    seconds: list[float] = field(default_factory=list)  # time to answer, per answered question
    failures: list[str] = field(default_factory=list)
    wall: float = 0.0


async def user(
    api: BotAPIServer, failures: BotFailures, user_id: int, questions: list[str], timeout: float, level: Level
) -> None:
    """One user asking their questions one after another."""
    for question in questions:
        since = len(api.requests)
        sent = time.monotonic()
        update_id = api.push(message_update(user_id, question))

        def done(s: BotAPIServer, since: int = since, update_id: int = update_id) -> bool:
            return update_id in failures.updates or any(is_answer(r) for r in s.calls(chat_id=user_id, since=since))

        try:
            await api.wait_for(done, timeout=timeout)
        except TimeoutError:
            got = [
                r.method + (f" {r.params['text'][:80]!r}" if "text" in r.params else "")
                for r in api.calls(chat_id=user_id, since=since)
            ]
            level.failures.append(f"user {user_id}: no answer in {timeout:.0f} s to {question[:60]!r}; got {got}")
            return
        if update_id in failures.updates:
            level.failures.append(f"user {user_id}: error reply to {question[:60]!r}")
            continue
        answer = next(r for r in api.calls(chat_id=user_id, since=since) if is_answer(r))
        level.seconds.append(answer.at - sent)


async def run_level(
    chain_settings: Settings, users: int, per_user: int, pool: list[str], timeout: float, state_dir: Path, seed: int
) -> Level:
    """`users` users at once, each asking `per_user` questions drawn from `pool`."""
    from rag_chain import get_chain, invoke_qa

    def qa(question: str, settings: Settings, **kwargs: Any):
        # The bot passes its own settings (token, local API); the chain reads --data-dir.
        return invoke_qa(question, chain_settings, **kwargs)

    rng = random.Random(seed)
    level = Level(users)
    failures = BotFailures()
    logging.getLogger().addHandler(failures)
    try:
        await asyncio.to_thread(get_chain, chain_settings)  # loaded before the clock starts, as a running bot is
        async with BotAPIServer() as api:
            app = build_application(bot_settings(api, state_dir), qa=qa)
            async with polling(app):
                started = time.monotonic()
                await asyncio.gather(
                    *(user(api, failures, 20_000 + n, rng.sample(pool, per_user), timeout, level) for n in range(users))
                )
                level.wall = time.monotonic() - started
    finally:
        logging.getLogger().removeHandler(failures)
    level.failures.extend(failures.other)
    return level


def percentile(values: list[float], q: float) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, help="corpus and index to answer from (default: DATA_DIR or ./data)")
    parser.add_argument("--users", type=int, nargs="+", default=[1, 10, 50], help="users at once, one run each")
    parser.add_argument("--questions", type=int, default=3, help="questions each user asks, one after another")
    parser.add_argument(
        "--eval-dir",
        type=Path,
        default=ROOT.parent / "shared" / "eval",
        help="where citizen_dev.jsonl and jurhelp_dev.jsonl are",
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds an answer may take")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    quiet_noisy_loggers()

    chain_settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    pool = gold_questions(args.eval_dir)
    table = Table(title=f"The bot over the real chain ({chain_settings.data_dir}), {args.questions} questions a user")
    for col in ("users", "questions", "answers/s", "p50, s", "p95, s", "max, s", "failures"):
        table.add_column(col, justify="right")
    failed: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for users in args.users:
            level = asyncio.run(
                run_level(chain_settings, users, args.questions, pool, args.timeout, Path(tmp) / str(users), args.seed)
            )
            s = level.seconds
            table.add_row(
                str(users),
                str(users * args.questions),
                f"{len(s) / level.wall:.2f}" if level.wall else "-",
                f"{statistics.median(s):.2f}" if s else "-",
                f"{percentile(s, 95):.2f}" if s else "-",
                f"{max(s):.2f}" if s else "-",
                str(len(level.failures)),
            )
            failed.extend(level.failures)
    Console(width=120).print(table)
    for line in failed:
        print(f"failure: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
