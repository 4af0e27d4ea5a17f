"""Stopping the bot while it is still loading the chain (its warm-up): the process ends cleanly, with no
«Task was destroyed but it is pending!» and no ERROR line.

The bot runs as `python -m bot` runs it — `run_polling()` owning (and closing) its event loop, the entry point's
logging — in a child process against the local Bot API server, with a chain that takes seconds to load; it is
stopped by SIGINT (Ctrl-C) once the load has begun."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from tests.support.telegram_server import BotAPIServer

ROOT = Path(__file__).resolve().parents[1]

BOT = """
import sys, time
from pydantic import SecretStr
from bot.app import build_application
from bot.logsetup import configure_logging
from config import Settings
from tests.support.bot import ScriptedQA

def slow_lookup(code, number, settings, lang="ru"):  # a chain that takes seconds to load
    print("LOADING", file=sys.stderr, flush=True)
    time.sleep(3)
    return None

def unraisable(hook_args):  # what the interpreter would print as «Exception ignored in …»
    print(f"UNRAISABLE {hook_args.exc_type.__name__}: {hook_args.err_msg}", file=sys.stderr, flush=True)

sys.unraisablehook = unraisable
configure_logging(False)
token, api_url, file_url, data_dir = sys.argv[1:]
settings = Settings(
    _env_file=None,
    data_dir=data_dir,
    telegram_bot_token=SecretStr(token),
    telegram_api_url=api_url,
    telegram_file_url=file_url,
)
build_application(settings, qa=ScriptedQA(), lookup=slow_lookup).run_polling()
print("STOPPED", file=sys.stderr, flush=True)
"""


async def test_stopping_during_warm_up_ends_without_an_error(api: BotAPIServer, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GROQ_", "OLLAMA_", "PINECONE_", "TELEGRAM_"))}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        BOT,
        api.token,
        api.base_url,
        api.base_file_url,
        str(tmp_path / "data"),
        cwd=ROOT,
        env=env,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    seen: list[str] = []
    try:
        async with asyncio.timeout(60):
            # the bot is polling and its warm-up has begun (the load takes 3 s more)
            while not all(any(mark in line for line in seen) for mark in ("LOADING", "Application started")):
                line = (await proc.stderr.readline()).decode()
                assert line, "".join(seen)
                seen.append(line)
            proc.send_signal(signal.SIGINT)
            rest = (await proc.stderr.read()).decode()
            await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    log = "".join(seen) + rest
    assert proc.returncode == 0, log
    assert "STOPPED" in log and "Application is stopping" in log
    assert "Task was destroyed" not in log, log
    assert "UNRAISABLE" not in log and "Exception ignored" not in log, log
    assert not [line for line in log.splitlines() if " ERROR " in line or line.startswith("Traceback")], log
