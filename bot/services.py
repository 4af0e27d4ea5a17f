"""What the bot's handlers share: the services in bot_data (the chain, the article lookup, the feedback store, the
rate limiter, the executor), the update's message or button press, the user's language, running the blocking chain
off the event loop, "typing…", and replies split to Telegram's message limit."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Protocol, TypeVar

from telegram import CallbackQuery, InlineKeyboardMarkup, Message, Update
from telegram.constants import ChatAction
from telegram.error import BadRequest, TelegramError
from telegram.ext import ContextTypes

from answer.records import Exchange, QAResult
from bot.feedback import FeedbackStore
from bot.format import split_html
from bot.ratelimit import SharedLimiter
from bot.texts import pick_lang
from config import Settings
from corpus.errors import ChainUnavailable, UserError
from corpus.records import Article, Lang
from corpus.text import clean_text

logger = logging.getLogger(__name__)

ECHO_CHARS = 40  # what a reply repeats of the user's input, at most
TYPING_REFRESH = 4.5  # Telegram shows "typing…" for 5 s per chat action
T = TypeVar("T")


class QA(Protocol):
    """`rag_chain.invoke_qa`: the question, the chat's earlier exchanges, and a callback for streamed text."""

    def __call__(
        self,
        question: str,
        settings: Settings,
        history: Sequence[Exchange] = (),
        on_token: Callable[[str], None] | None = None,
    ) -> QAResult: ...


class Lookup(Protocol):
    def __call__(self, code: str, number: str, settings: Settings, lang: Lang = "ru") -> Article | None: ...


@dataclass(frozen=True)
class BotServices:
    """What handlers use, kept in bot_data["services"]."""

    settings: Settings
    qa: QA
    lookup: Lookup
    store: FeedbackStore
    limiter: SharedLimiter
    executor: Executor  # runs the blocking chain off the event loop


def services(context: ContextTypes.DEFAULT_TYPE) -> BotServices:
    return context.bot_data["services"]


def message_of(update: Update) -> Message:
    """The update's message, for handlers registered for messages and commands (PTB types it Optional)."""
    if (message := update.effective_message) is None:
        raise ValueError(f"update {update.update_id} carries no message")
    return message


def query_of(update: Update) -> CallbackQuery:
    """The update's button press, for handlers registered for callback queries (PTB types it Optional)."""
    if (query := update.callback_query) is None:
        raise ValueError(f"update {update.update_id} carries no callback query")
    return query


async def set_user_lang(update: Update, context: ContextTypes.DEFAULT_TYPE, lang: Lang) -> None:
    """Remember the language chosen with /lang or its buttons for this user, stored at once (another replica reads
    the user's row before their next update)."""
    if context.user_data is None or update.effective_user is None:  # no user to keep it for (e.g. a channel post)
        raise ValueError(f"update {update.update_id} has no user to remember a language for")
    context.user_data["lang"] = lang
    if context.application.persistence is not None:
        await context.application.persistence.update_user_data(update.effective_user.id, dict(context.user_data))


def user_lang(update: Update, context: ContextTypes.DEFAULT_TYPE) -> Lang:
    """The language chosen with /lang, else the one of the user's Telegram app."""
    chosen = context.user_data.get("lang") if context.user_data is not None else None
    user = update.effective_user
    return pick_lang(chosen, user.language_code if user else None)


async def run_blocking(context: ContextTypes.DEFAULT_TYPE, fn: functools.partial[T]) -> T:
    """Run a blocking call of the chain in the bot's executor, so other updates keep being handled."""
    return await asyncio.get_running_loop().run_in_executor(services(context).executor, fn)


@contextlib.asynccontextmanager
async def typing(message: Message) -> AsyncIterator[None]:
    """Show "typing…" until the block ends; the first action is sent before the work starts."""

    async def send() -> None:
        try:
            await message.get_bot().send_chat_action(message.chat_id, ChatAction.TYPING)
        except TelegramError as err:  # cosmetic: never let it cost the answer
            logger.debug("chat action failed: %s", err)

    async def refresh() -> None:
        while True:
            await asyncio.sleep(TYPING_REFRESH)
            await send()

    await send()
    task = asyncio.create_task(refresh())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def shorten(text: str, limit: int = ECHO_CHARS) -> str:
    """The user's input as a reply may repeat it: at most `limit` characters, then "…"."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


async def reply_parts(
    message: Message,
    parts: list[str],
    markup: InlineKeyboardMarkup | None = None,
    *,
    first: Message | None = None,
) -> list[Message]:
    """Send HTML parts in order, the keyboard under the last one; `first`, a message of the bot's (a streamed
    answer), is edited into the first part instead. Returns the messages that carry them."""
    sent: list[Message] = []
    for i, part in enumerate(parts):
        markup_here = markup if i == len(parts) - 1 else None
        if i == 0 and first is not None:
            try:
                edited = await first.edit_text(clean_text(part), reply_markup=markup_here)
            except BadRequest as err:  # e.g. deleted meanwhile: send it anew
                logger.info("the streamed message could not become the answer (%s): sending it", err)
            else:
                sent.append(edited if isinstance(edited, Message) else first)
                continue
        sent.append(await message.reply_html(clean_text(part), reply_markup=markup_here))
    return sent


async def reply(message: Message, text: str, markup: InlineKeyboardMarkup | None = None) -> None:
    """Send Telegram HTML, in as many messages as it takes to keep each within Telegram's 4096 characters."""
    await reply_parts(message, split_html(text), markup)


def log_unavailable(err: ChainUnavailable, what: str) -> None:
    """The chain's load failure in the log: its details the first time (users are only told it is unavailable),
    then one short line per unanswered update."""
    if err.new:
        cause = err.__cause__
        logger.error(
            "the chain could not be loaded: %s; users are told the service is unavailable; next attempt in %.0f s, "
            "or at once when a build is published",
            err.detail,
            err.retry_in,
            exc_info=cause if cause is not None and not isinstance(cause, UserError) else None,
        )
    else:
        logger.info("%s: not answered, the chain is not loaded (next attempt in %.0f s)", what, err.retry_in)
