"""Benchmark: does one user's flood delay another user's answer?

The real bot (PTB Application, long polling, AIORateLimiter, the per-user limit of TELEGRAM_RATE_LIMIT_PER_MINUTE)
runs against the tests' local Bot API server with a stand-in chain taking `--delay` seconds. Idle: user B asks
once. Flood: user A sends `--flood` messages at once, then B asks once. Time to answer: from pushing B's update to
the bot's message to B. Target: under the flood within 2x the idle time.

.venv/bin/python bench/bot_flood.py --flood 200 --delay 0.2
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bot_concurrency import bot_settings
from bot.app import build_application
from bot.logsetup import quiet_noisy_loggers
from tests.support.bot import ScriptedQA
from tests.support.telegram_server import BotAPIServer, message_update, polling

FLOODER, OTHER = 20_001, 20_002


async def other_users_wait(flood: int, delay: float, data_dir: Path) -> tuple[float, int]:
    """Seconds until user B's answer after `flood` messages of user A, and the messages the bot sent A."""
    async with BotAPIServer() as api:
        app = build_application(bot_settings(api, data_dir), qa=ScriptedQA(delay=delay), lookup=lambda *a, **k: None)
        async with polling(app):
            for i in range(flood):
                api.push(message_update(FLOODER, f"Флуд {i}"))
            since = len(api.requests)
            started = time.monotonic()
            api.push(message_update(OTHER, "Какой штраф за кражу?"))
            await api.wait_for(lambda s: bool(s.calls("sendMessage", chat_id=OTHER, since=since)), timeout=600)
            [answer] = api.calls("sendMessage", chat_id=OTHER, since=since)
            await asyncio.sleep(1.0)  # let the flood's replies finish, to count them
            to_flooder = len(api.calls("sendMessage", chat_id=FLOODER))
    return answer.at - started, to_flooder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flood", type=int, default=200, help="messages user A sends at once")
    parser.add_argument("--delay", type=float, default=0.2, help="seconds the stand-in chain takes per question")
    args = parser.parse_args()
    quiet_noisy_loggers()
    with tempfile.TemporaryDirectory() as tmp:
        idle, _ = asyncio.run(other_users_wait(0, args.delay, Path(tmp) / "idle"))
        flooded, replies = asyncio.run(other_users_wait(args.flood, args.delay, Path(tmp) / "flood"))
    table = Table(title=f"Another user's time to answer, chain {args.delay:.2f} s")
    for col in ("idle answer, s", f"under a {args.flood}-message flood, s", "ratio", "messages sent to the flooder"):
        table.add_column(col, justify="right")
    table.add_row(f"{idle:.2f}", f"{flooded:.2f}", f"{flooded / idle:.1f}x", str(replies))
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
