"""Build the Telegram `Application`: settings, the chain's callables, handlers; nothing here runs it."""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from telegram import BotCommand, LinkPreviewOptions, Update
from telegram.constants import ParseMode
from telegram.ext import (
    AIORateLimiter,
    Application,
    CallbackQueryHandler,
    CommandHandler,
    Defaults,
    MessageHandler,
    filters,
)

from bot import handlers, keyboards
from bot.feedback import DAY, open_store
from bot.monitoring import MonitoringServer
from bot.persistence import StorePersistence
from bot.private_files import private_dir
from bot.ratelimit import SharedLimiter
from bot.services import QA, BotServices, Lookup, log_unavailable
from bot.texts import COMMANDS
from bot.updates import ClaimingUpdateProcessor, HandledQueue
from config import Settings
from corpus import metrics
from corpus.errors import ChainUnavailable, UserError

if TYPE_CHECKING:
    from index.status import IndexPending

logger = logging.getLogger(__name__)

QA_WORKERS = 16  # threads for invoke_qa: most of an answer is waiting on the LLM's HTTP reply
RETENTION_EVERY = DAY  # seconds between retention passes after the one at start
INDEX_CHECK_EVERY = 60.0  # seconds between looks at whether the loaded chain's index is complete
_SECRET_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")  # what Telegram accepts as a webhook secret_token
_NEW_SECRET = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"


class BotConfigError(UserError):
    """The bot cannot start with these settings; the message says what to set."""


def require_token(settings: Settings) -> str:
    """The bot token, or an error naming the variable to set."""
    token = settings.telegram_bot_token.get_secret_value().strip() if settings.telegram_bot_token else ""
    if not token:
        raise BotConfigError(
            "TELEGRAM_BOT_TOKEN is not set: create a bot with @BotFather and put its token in the "
            "environment or in .env (TELEGRAM_BOT_TOKEN=123456:ABC...)"
        )
    return token


def webhook_kwargs(settings: Settings) -> dict[str, Any]:
    """Arguments of `run_webhook` / `Updater.start_webhook` for webhook mode."""
    url = settings.telegram_webhook_url
    if not url:
        raise BotConfigError(
            "TELEGRAM_MODE=webhook needs TELEGRAM_WEBHOOK_URL, the public HTTPS address Telegram posts "
            "updates to (e.g. https://bot.example.kz/telegram); or set TELEGRAM_MODE=polling"
        )
    secret = settings.telegram_webhook_secret.get_secret_value() if settings.telegram_webhook_secret else ""
    if not secret:
        # Without it the webhook answers any POST as if Telegram had sent it: forged updates.
        raise BotConfigError(
            "TELEGRAM_MODE=webhook needs TELEGRAM_WEBHOOK_SECRET, which Telegram sends with every update so that "
            f"posts from anyone else are refused (403); generate one with {_NEW_SECRET} and put it in the "
            "environment or in .env (TELEGRAM_WEBHOOK_SECRET=...)"
        )
    if not _SECRET_TOKEN.fullmatch(secret):
        raise BotConfigError(
            "TELEGRAM_WEBHOOK_SECRET may hold only 1-256 characters A-Z, a-z, 0-9, _ and - (Telegram refuses "
            f"others); generate one with {_NEW_SECRET}"
        )
    return {
        "listen": settings.telegram_webhook_listen,
        "port": settings.telegram_webhook_port,
        "url_path": urlparse(url).path.strip("/"),
        "webhook_url": url,
        "secret_token": secret,
        "allowed_updates": Update.ALL_TYPES,
    }


def _default_qa() -> QA:
    import rag_chain  # imported late: it loads the retrieval stack, which tests of the bot do not need

    return rag_chain.invoke_qa


def _default_lookup() -> Lookup:
    import rag_chain

    return rag_chain.lookup_article


async def _post_init(app: Application) -> None:
    """Set the command menus (Russian by default, Kazakh for Kazakh apps) and start loading the chain."""
    await app.bot.set_my_commands([BotCommand(*c) for c in COMMANDS["ru"]])
    await app.bot.set_my_commands([BotCommand(*c) for c in COMMANDS["kk"]], language_code="kk")
    if (monitoring := app.bot_data.get("monitoring")) is not None:
        monitoring.start()
    app.bot_data["warm_up"] = asyncio.create_task(_warm_up(app.bot_data["services"], app.bot_data))
    if app.bot_data["services"].settings.telegram_retention_days > 0:
        app.bot_data["retention"] = asyncio.create_task(_retention_daily(app))


async def _warm_up(svc: BotServices, bot_data: dict[str, Any]) -> None:
    """Load the chain before the first question arrives; when it runs the real chain and its search index is
    missing or stale, start building the index in the background (BACKGROUND_INDEX_BUILD).

    lookup_article() loads the same cached chain as invoke_qa(), without asking a model anything.
    """
    started = time.perf_counter()
    try:
        await asyncio.get_running_loop().run_in_executor(
            svc.executor, functools.partial(svc.lookup, "УК", "1", settings=svc.settings)
        )
    except ChainUnavailable as err:  # its details, once; rag_chain retries the load with backoff
        metrics.error("chain_load", user=True)
        log_unavailable(err, "warm-up")
    except UserError as err:
        metrics.error("chain_load", user=True)
        logger.warning("the chain is not ready (%s): questions are told the service is unavailable", err)
    except Exception:
        metrics.error("chain_load", user=False)
        logger.exception("loading the chain failed; questions will be retried when they come")
    else:
        bot_data["chain_ready"] = True
        logger.info("chain ready in %.1f s", time.perf_counter() - started)
        if bot_data.get("real_chain"):
            await _complete_index(svc, bot_data)


async def _complete_index(svc: BotServices, bot_data: dict[str, Any]) -> None:
    """Keep the search index complete in a background thread (BACKGROUND_INDEX_BUILD): whenever the loaded chain
    lacks its vectors or latent terms — at start, or after a new corpus was published — build them while the
    lexical searches answer; the build publishes itself and the chain swaps to it (rag_chain.get_chain)."""
    import rag_chain

    settings = svc.settings
    if not settings.background_index_build:
        pending = await asyncio.get_running_loop().run_in_executor(svc.executor, rag_chain.index_pending, settings)
        if pending is not None:
            logger.warning("%s (BACKGROUND_INDEX_BUILD is off)", pending.message())
        return
    stop = threading.Event()
    thread = threading.Thread(target=_keep_index, args=(settings, stop), name="index-keeper", daemon=True)
    bot_data["index_keeper"] = (thread, stop)
    thread.start()


def _keep_index(settings: Settings, stop: threading.Event) -> None:
    """Build what the loaded chain's index lacks, checking every INDEX_CHECK_EVERY seconds until `stop`; one
    attempt per loaded build, so a build that fails (or whose publication fails to load) is not retried in a loop."""
    import rag_chain

    attempted: set[str | None] = set()  # generations of the chains a build was attempted for
    while True:
        try:
            generation = rag_chain.get_chain(settings).generation
            pending = rag_chain.index_pending(settings)
            if pending is not None and generation not in attempted:
                attempted.add(generation)
                _build_index(settings, pending)
        except Exception:
            logger.exception("checking the search index failed; trying again in %.0f s", INDEX_CHECK_EVERY)
        if stop.wait(INDEX_CHECK_EVERY):
            return


def _build_index(settings: Settings, pending: IndexPending) -> None:
    """One background build: a log line when it starts, and one when it is published (the chain swaps to it)."""
    import rag_chain

    logger.info(
        "answering with the lexical searches while the %s are built in the background (%s on 2 cores; "
        "BACKGROUND_INDEX_BUILD=false turns this off)",
        pending.what,
        pending.eta(),
    )
    started = time.perf_counter()
    try:
        rag_chain.build_missing_index(settings)
    except Exception:
        logger.exception("the background index build failed: answers stay lexical until `%s`", pending.command)
        return
    logger.info(
        "search index built in the background in %.1f min and published: answers switch to it",
        (time.perf_counter() - started) / 60,
    )


async def _retention_daily(app: Application) -> None:
    """Apply TELEGRAM_RETENTION_DAYS every RETENTION_EVERY seconds while the bot runs (the first pass is at start)."""
    svc: BotServices = app.bot_data["services"]
    while True:
        await asyncio.sleep(RETENTION_EVERY)
        try:
            purged = await asyncio.to_thread(svc.store.purge, svc.settings.telegram_retention_days)
        except Exception:
            logger.exception("retention pass failed; the next one is in %.0f s", RETENTION_EVERY)
            continue
        for user_id in purged.user_ids:  # forget the in-memory copy too, or it would be written back
            app.drop_user_data(user_id)


async def _shutdown(app: Application) -> None:
    # Cancel the warm-up (a chain still loading) and the retention loop, and wait for them to end here: left
    # pending when run_polling closes the loop, each would be logged as «Task was destroyed but it is pending!».
    tasks = [t for t in (app.bot_data.get("warm_up"), app.bot_data.get("retention")) if t is not None]
    tasks += app.bot_data.get("record_retries", ())  # each logs its record as lost
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if "index_keeper" in app.bot_data:  # a build under way is left to finish or die with the process
        app.bot_data["index_keeper"][1].set()
    app.bot_data["services"].executor.shutdown(wait=False, cancel_futures=True)
    app.bot_data["services"].store.close()
    if (monitoring := app.bot_data.get("monitoring")) is not None:
        monitoring.stop()


def _chain_ready(bot_data: dict[str, Any]) -> bool:
    """/healthz: the real chain is loaded (rag_chain.chain_loaded), or a stand-in's warm-up succeeded."""
    if bot_data["real_chain"]:
        import rag_chain

        return rag_chain.chain_loaded(bot_data["services"].settings)
    return bool(bot_data.get("chain_ready"))


def build_application(
    settings: Settings,
    *,
    qa: QA | None = None,
    lookup: Lookup | None = None,
    qa_workers: int = QA_WORKERS,
) -> Application:
    """The bot, wired to the chain and ready to run by polling or webhook.

    Args:
        settings: telegram_* (token, API URLs, admins, rate limit, retention, conversation minutes, streaming
            interval), history_turns, database_url (the store shared by replicas: questions, ratings,
            conversations, user state, updates being handled, rate limits) and data_dir (DATA_DIR/bot: the store
            in feedback.sqlite when DATABASE_URL is unset).
        qa: `invoke_qa(question, settings=..., history=..., on_token=...)`; defaults to `rag_chain.invoke_qa`.
        lookup: `lookup_article(code, number, settings=...)`; defaults to `rag_chain.lookup_article`.
        qa_workers: threads running `qa` at once; 1 answers questions one after another.
    """
    token = require_token(settings)
    state_dir = private_dir(settings.data_dir / "bot")  # questions are personal data: owner-only
    store = open_store(settings)  # StoreUnavailable / SchemaTooNew (UserErrors) stop the start with one line
    store.purge(settings.telegram_retention_days)
    legacy = state_dir / "state.pickle"
    if legacy.exists():  # PicklePersistence's file: unpickling it could run code, so it is never opened
        logger.warning(
            "%s is no longer read (a pickle can run code; /lang choices are kept in %s now) and can be deleted",
            legacy,
            store.path.name if store.path else "the database at DATABASE_URL",
        )
    # Webhook mode: Telegram hears 200 once an update is handled, so it posts again what a killed replica took.
    queue = HandledQueue() if settings.telegram_mode == "webhook" else asyncio.Queue()
    app = (
        Application.builder()
        .token(token)
        .update_queue(queue)
        .base_url(settings.telegram_api_url)
        .base_file_url(settings.telegram_file_url)
        .defaults(Defaults(parse_mode=ParseMode.HTML, link_preview_options=LinkPreviewOptions(is_disabled=True)))
        .rate_limiter(AIORateLimiter(max_retries=3))
        # Each update claimed in the store first: handled once across replicas, a chat's questions in order.
        .concurrent_updates(
            ClaimingUpdateProcessor(store, on_handled=queue.handled if isinstance(queue, HandledQueue) else None)
        )
        # Only user_data (the /lang choice) is kept across restarts, as JSON in the same database.
        .persistence(StorePersistence(store))
        .post_init(_post_init)
        .post_shutdown(_shutdown)
        .build()
    )
    # Only the real chain (not a stand-in given by a test or an embedding script) has an index to complete.
    app.bot_data["real_chain"] = qa is None and lookup is None
    app.bot_data["services"] = BotServices(
        settings=settings,
        qa=qa or _default_qa(),
        lookup=lookup or _default_lookup(),
        store=store,
        limiter=SharedLimiter(store, settings.telegram_rate_limit_per_minute, window=60.0),
        executor=ThreadPoolExecutor(max_workers=qa_workers, thread_name_prefix="qa"),
    )
    message = filters.UpdateType.MESSAGE
    app.add_handlers(
        [
            CommandHandler("start", handlers.start),
            CommandHandler("help", handlers.help_command),
            CommandHandler("lang", handlers.lang_command),
            CommandHandler("new", handlers.new_command),
            CommandHandler("article", handlers.article_command),
            CommandHandler("stats", handlers.stats_command),
            CommandHandler("about", handlers.about_command),
            CallbackQueryHandler(handlers.rate_button, pattern=keyboards.RATE_PATTERN),
            CallbackQueryHandler(handlers.lang_button, pattern=keyboards.LANG_PATTERN),
            CallbackQueryHandler(handlers.stale_button),
            MessageHandler(message & filters.COMMAND, handlers.unknown_command),
            MessageHandler(message & filters.TEXT, handlers.ask),
            MessageHandler(message & ~filters.StatusUpdate.ALL, handlers.non_text),
        ]
    )
    app.add_error_handler(handlers.on_error)
    if settings.metrics_port is not None:  # bound now, so that a port in use stops the start with one line
        app.bot_data["monitoring"] = MonitoringServer(
            settings.metrics_listen, settings.metrics_port, lambda: _chain_ready(app.bot_data)
        )
    return app
