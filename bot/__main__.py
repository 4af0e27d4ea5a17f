"""`python -m bot [--data-dir DIR]`: run the Telegram bot by long polling or as a webhook (TELEGRAM_MODE)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from telegram import Update

from bot.app import build_application, webhook_kwargs
from bot.logsetup import configure_logging
from config import Settings
from corpus.errors import UserError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bot", description=__doc__)
    parser.add_argument("--data-dir", type=Path, help="corpus, index and bot state (default: DATA_DIR or ./data)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logs, including users' messages")
    args = parser.parse_args(argv)

    settings = Settings(data_dir=args.data_dir) if args.data_dir else Settings()
    configure_logging(args.verbose, secrets=settings.secret_values())  # every library's records, every secret
    try:
        webhook = webhook_kwargs(settings) if settings.telegram_mode == "webhook" else None
        app = build_application(settings)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if webhook:
        app.run_webhook(**webhook)
    else:
        app.run_polling(allowed_updates=Update.ALL_TYPES)
    return 0


if __name__ == "__main__":
    sys.exit(main())
