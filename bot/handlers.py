"""Telegram handlers: commands, questions, buttons, non-text messages and the error handler (what they share:
bot/services.py)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import time

from sqlalchemy.exc import SQLAlchemyError
from telegram import Message, Update
from telegram.error import BadRequest, TelegramError
from telegram.ext import ContextTypes

from bot import keyboards
from bot.conversation import Conversation
from bot.format import escape, format_about, format_answer, format_article, split_html
from bot.records import record_later
from bot.services import (
    log_unavailable,
    message_of,
    query_of,
    reply,
    reply_parts,
    run_blocking,
    services,
    set_user_lang,
    shorten,
    typing,
    user_lang,
)
from bot.stream import AnswerStream
from bot.texts import parse_lang, t
from bot.updates import question_chat, wait_turn
from config import MAX_QUESTION_CHARS, Settings
from corpus import metrics
from corpus.errors import ChainUnavailable, QAError, UserError
from corpus.legal import article_lang, read_article_args
from corpus.records import Lang
from corpus.text import clean_text

logger = logging.getLogger(__name__)


async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Greet the user and say what the bot does."""
    await reply(message_of(update), t("start", user_lang(update, context)))


async def help_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Explain how to ask, follow-ups and /new, /article and /lang."""
    lang = user_lang(update, context)
    settings = services(context).settings
    per_minute = settings.telegram_rate_limit_per_minute
    note = t("rate_note", lang, per_minute=per_minute) if per_minute > 0 else ""
    await reply(message_of(update), help_text(settings, lang, note))


def help_text(settings: Settings, lang: Lang, rate_note: str) -> str:
    return t(
        "help",
        lang,
        max_chars=MAX_QUESTION_CHARS,
        rate_note=rate_note,
        turns=settings.history_turns,
        minutes=f"{settings.telegram_history_minutes:g}",
    )


async def new_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Start a new conversation: the next question is understood on its own."""
    message = message_of(update)
    await asyncio.to_thread(services(context).store.new_conversation, message.chat_id)
    await reply(message, t("new_conversation", user_lang(update, context)))


async def lang_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Switch the interface language: /lang kk, /lang ru, or buttons when no argument is given."""
    message = message_of(update)
    chosen = parse_lang(context.args[0]) if context.args else None
    if chosen is None:
        await reply(message, t("lang_choose", user_lang(update, context)), keyboards.lang_keyboard())
        return
    await set_user_lang(update, context, chosen)
    await reply(message, t("lang_set", chosen))


async def lang_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Store the language picked with a button and confirm in it."""
    query = query_of(update)
    chosen: Lang = "kk" if (query.data or "").endswith("kk") else "ru"
    await set_user_lang(update, context, chosen)
    if not (isinstance(query.message, Message) and query.message.is_accessible):
        # The buttons' message cannot be edited (deleted, too old: date 0) or was not sent: confirm in the popup.
        await query.answer(t("lang_set", chosen))
        return
    await query.answer()
    with contextlib.suppress(BadRequest):  # the same language picked twice: "message is not modified"
        await query.edit_message_text(t("lang_set", chosen))


async def article_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Show an article verbatim: /article УК 188."""
    message = message_of(update)
    lang = user_lang(update, context)
    parsed = read_article_args([clean_text(a) for a in context.args or []])
    if parsed is None:
        await reply(message, t("article_usage", lang))
        return
    code, number = parsed.code, parsed.number
    svc = services(context)
    wanted = article_lang(code, lang)
    async with typing(message):
        article = await run_blocking(
            context, functools.partial(svc.lookup, code, number, settings=svc.settings, lang=wanted)
        )
    if article is None:
        await reply(message, t("article_not_found", lang, code=shorten(code), number=shorten(number)))
        return
    # «УК 188 часть 2», «УК 188 189»: the article is shown whole, and what was not used is said
    note = t("article_ignored", lang, ignored=shorten(parsed.ignored)) if parsed.ignored else ""
    await reply_parts(message, format_article(article, note=note, lang=wanted))


async def ask(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Answer a question with invoke_qa(), list its sources, and offer article and rating buttons."""
    message = message_of(update)
    lang = user_lang(update, context)
    # Cleaned at the edge: a stray surrogate would break the chain's encoders and the stored record.
    question = clean_text(message.text or "").strip()
    if not question:
        await reply(message, t("empty", lang))
        return
    if len(question) > MAX_QUESTION_CHARS:
        await reply(message, t("too_long", lang, length=len(question), max_chars=MAX_QUESTION_CHARS))
        return
    svc = services(context)
    user_id = update.effective_user.id if update.effective_user else message.chat_id
    wait, tell = await svc.limiter.check(user_id)
    if wait is not None:
        if not tell:  # told once this window: no API call for the rest
            logger.debug("user %s is still rate limited: message dropped", user_id)
            return
        logger.info("user %s is rate limited for %.0f s", user_id, wait)
        await reply(
            message,
            t(
                "rate_limited",
                lang,
                per_minute=svc.settings.telegram_rate_limit_per_minute,
                seconds=math.ceil(wait),
            ),
        )
        return

    logger.debug("question from user %s: %s", user_id, question)
    asked_at = time.time()  # places the exchange in its conversation: a /new sent while it is answered wins
    if question_chat(update) is not None:  # the chat's earlier questions first, whichever replica has them
        await wait_turn(svc.store, update, message.chat_id)
    replied = message.reply_to_message
    try:
        conversation = await asyncio.to_thread(
            svc.store.conversation,
            message.chat_id,
            turns=svc.settings.history_turns,
            idle_seconds=svc.settings.telegram_history_minutes * 60,
            reply_to=replied.message_id if replied is not None else None,
        )
    except SQLAlchemyError as err:
        logger.warning(
            "update %d: the conversation cannot be read (%s): answered alone", update.update_id, type(err).__name__
        )
        conversation = Conversation()
    started = time.perf_counter()
    interval = svc.settings.telegram_stream_interval
    stream = AnswerStream(message, interval) if interval > 0 else None
    try:
        async with typing(message):
            result = await run_blocking(
                context,
                functools.partial(
                    svc.qa,
                    question,
                    settings=svc.settings,
                    history=conversation.history,
                    on_token=stream.on_token if stream else None,
                ),
            )
    except Exception as err:
        latency = time.perf_counter() - started
        record = functools.partial(
            svc.store.record_failure, question, err, user_id=user_id, chat_id=message.chat_id, latency=latency
        )
        try:
            await asyncio.to_thread(record)
        except SQLAlchemyError:
            record_later(context, record, update.update_id, "failed question")
        raise  # the error handler tells the user
    finally:
        if stream is not None:
            await stream.close()
    latency = time.perf_counter() - started
    record = functools.partial(
        svc.store.record_answered,
        result,
        user_id=user_id,
        chat_id=message.chat_id,
        latency=latency,
        parent_id=conversation.parent_id,
        asked_at=asked_at,
    )
    question_id: int | None
    try:  # stored before it is sent, so that the chat's next question already continues it
        question_id = await asyncio.to_thread(record)
    except SQLAlchemyError:
        question_id = None  # answered all the same, without rating buttons; the record is retried
        record_later(context, record, update.update_id, "answer")
    logger.info(
        "question %s from user %s answered in %.2f s (%s, %s, %d sources, %d earlier exchanges%s, %d streamed)",
        question_id if question_id is not None else f"of update {update.update_id} (not stored yet)",
        user_id,
        latency,
        result.backend,
        result.template,
        len(result.sources),
        len(conversation.history),
        ", used" if result.used_history else "",
        stream.updates if stream else 0,
    )
    # One structured line per answer: its id and each stage's time (the same figures as kzlaw_stage_seconds).
    logger.info(
        "answer %s",
        metrics.answer_line(
            question_id,
            result.timings,
            update_id=update.update_id,
            backend=result.backend,
            template=result.template,
            status=result.status,
        ),
    )
    # Labels follow the answer's language: a Kazakh question gets a Kazakh answer whatever the interface.
    answer_lang = result.lang
    keyboard = keyboards.answer_keyboard(result, question_id, answer_lang)
    sent = await reply_parts(
        message, format_answer(result, answer_lang), keyboard, first=stream.shown if stream else None
    )
    if question_id is None:
        return
    try:
        await asyncio.to_thread(
            svc.store.record_answer_messages,
            question_id,
            chat_id=message.chat_id,
            message_ids=[m.message_id for m in sent],
        )
    except SQLAlchemyError as err:
        logger.warning(
            "question %d: its messages were not stored (%s): a reply to them starts anew",
            question_id,
            type(err).__name__,
        )


async def rate_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Store a 👍/👎 for the answer whose id the button carries, and tick the chosen button."""
    query = query_of(update)
    match = keyboards.RATE_PATTERN.match(query.data or "")
    if match is None:  # not reached: the handler is registered with this pattern
        await stale_button(update, context)
        return
    lang = user_lang(update, context)
    question_id, up = int(match.group(1)), match.group(2) == "up"
    outcome = await asyncio.to_thread(services(context).store.rate, question_id, query.from_user.id, 1 if up else -1)
    if outcome == "not_asker":  # e.g. in a group: the buttons are under someone else's answer
        await query.answer(t("rate_not_asker", lang))
        return
    if outcome == "gone":
        await query.answer(t("rating_expired", lang))
        return
    logger.info("question %d rated %s by user %s", question_id, "up" if up else "down", query.from_user.id)
    await query.answer(t("rated", lang))
    old = query.message.reply_markup if isinstance(query.message, Message) else None
    if old is not None:
        new = keyboards.mark_rating(old, question_id, up)
        if new != old:
            with contextlib.suppress(BadRequest):  # a double tap races to "message is not modified"
                await query.edit_message_reply_markup(new)


async def stats_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Admins only: questions, ratings and answer latency."""
    message = message_of(update)
    svc = services(context)
    lang = user_lang(update, context)
    user = update.effective_user
    if user is None or user.id not in svc.settings.telegram_admin_ids:
        await reply(message, t("admins_only", lang))
        return
    s = await asyncio.to_thread(svc.store.stats)

    def secs(v: float | None) -> str:
        return "—" if v is None else f"{v:.2f}"

    await reply(
        message,
        t(
            "stats",
            lang,
            questions=s.questions,
            answered=s.answered,
            failed=s.failed,
            users=s.users,
            up=s.up,
            down=s.down,
            p50=secs(s.latency_p50),
            p95=secs(s.latency_p95),
        ),
    )


async def about_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """What the answers rest on: documents, articles, chunks, their editions, the corpus date, the searches built."""
    from index.summary import summarize

    message = message_of(update)
    settings = services(context).settings
    try:
        summary = await asyncio.to_thread(summarize, settings)
    except UserError as err:  # a damaged corpus: the file and the command that rebuilds it go to the log
        logger.warning("/about: %s: %s", type(err).__name__, err)
        await reply(message, t("unavailable", user_lang(update, context)))
        return
    await reply(message, format_about(summary, user_lang(update, context)))


async def non_text(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Stickers, photos, voice, files and the rest: say that only text questions are understood."""
    m = message_of(update)
    if m.sticker:
        key = "sticker"
    elif m.photo:
        key = "photo"
    elif m.voice or m.audio or m.video_note:
        key = "voice"
    elif m.document:
        key = "document"
    else:
        key = "other_media"
    await reply(m, t(key, user_lang(update, context)))


async def unknown_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """List the commands that exist."""
    await reply(message_of(update), t("unknown_command", user_lang(update, context)))


async def on_error(update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Log the error with its traceback and tell the user, so the bot never goes silent."""
    err = context.error
    update_id = update.update_id if isinstance(update, Update) else None
    metrics.error("update", user=isinstance(err, UserError))
    if isinstance(err, ChainUnavailable):
        log_unavailable(err, f"update {update_id}")
    elif isinstance(err, UserError):
        logger.warning("update %s: %s: %s", update_id, type(err).__name__, err)
    else:
        logger.error("update %s failed", update_id, exc_info=err)
    if not isinstance(update, Update):
        return
    lang = user_lang(update, context)
    # A question's own problem is said as it is; the data's (a damaged index, a missing build: paths, errors and
    # the operator's commands) only as one plain sentence, the details being in the log.
    if isinstance(err, QAError) and str(err):
        text = escape(clean_text(str(err)))
    else:
        text = t("unavailable" if isinstance(err, UserError) else "error", lang)
    if update.callback_query:
        with contextlib.suppress(TelegramError):  # it may have been answered before the error
            await update.callback_query.answer()
    try:
        if update.effective_message:
            await reply(update.effective_message, text)
        elif update.effective_chat:
            for part in split_html(text):
                await context.bot.send_message(update.effective_chat.id, part, parse_mode="HTML")
    except TelegramError as send_err:
        logger.error("update %s: could not tell the user about the error: %s", update_id, send_err)


async def stale_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A button this version does not know (an old message): stop the spinner and say so."""
    await query_of(update).answer(t("rating_expired", user_lang(update, context)))
