"""Each Telegram update handled once across replicas, and a chat's questions answered one at a time, in order.

`ClaimingUpdateProcessor` (PTB's update processor, so polling and webhook modes both go through it) claims every
update in the store before its handlers run: an update Telegram retries, or that two replicas receive, finds its
claim taken and waits until it is handled (then it is dropped) or until the claim lapses (then it is taken over).
Claims are made one after another in the order the updates came (one thread), so a chat's questions are claimed in
order; `wait_turn` holds a question until every earlier question of its chat is answered, by whichever process: the
second then reads the first's exchange. The queue is the claims in the database, not process memory; a claim is
renewed while its update is handled, and a killed replica's claims lapse (`feedback.UPDATE_LEASE`) so its chats
move on.

In webhook mode the application's queue is a `HandledQueue`: the webhook answers Telegram only once the update is
handled, so an update a replica had taken and not finished when it was killed is posted again by Telegram, through
the load balancer to another replica, which takes it over when the dead replica's claim lapses.

When the store cannot be reached the update is handled anyway (a question is answered rather than lost), without
these guarantees, and the log says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from telegram import Update
from telegram.ext import BaseUpdateProcessor

from bot.feedback import UPDATE_LEASE, FeedbackStore
from corpus.text import clean_text

logger = logging.getLogger(__name__)

TURN_POLL = 0.1  # seconds between looks at whether a question's turn in its chat has come
CLAIM_POLL = 0.5  # seconds between looks at an update another process holds: handled, or its claim lapsed


def question_chat(update: object) -> int | None:
    """The chat of an update the `ask` handler answers (a text message that is not a command), else None."""
    if not isinstance(update, Update) or update.message is None:
        return None
    text = update.message.text
    return update.message.chat_id if text and not text.startswith("/") else None


class ClaimingUpdateProcessor(BaseUpdateProcessor):
    """Handles up to `max_concurrent_updates` updates at once, each only after claiming it in `store`."""

    def __init__(
        self,
        store: FeedbackStore,
        max_concurrent_updates: int = 256,
        on_handled: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__(max_concurrent_updates)
        self.store = store
        self.on_handled = on_handled  # told each update id once its delivery is handled or dropped
        self._claims: ThreadPoolExecutor | None = None  # one thread: claims are made in the order updates came

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        if not isinstance(update, Update):
            await coroutine
            return
        try:
            await self._claimed(update, coroutine)
        finally:
            if self.on_handled is not None:
                self.on_handled(update.update_id)

    async def _claimed(self, update: Update, coroutine: Awaitable[Any]) -> None:
        update_id = update.update_id
        loop = asyncio.get_running_loop()
        try:
            claimed = await loop.run_in_executor(
                self._claims_executor(), lambda: self.store.claim_update(update_id, chat_id=question_chat(update))
            )
        except SQLAlchemyError as err:
            logger.warning(
                "update %d: the store cannot be reached (%s): handled without the once-only check",
                update_id,
                _short(err),
            )
            claimed = None
        while claimed is False:  # a repeated delivery: wait until it is handled, or take over a lapsed claim
            try:
                if await asyncio.to_thread(self.store.update_done, update_id):
                    logger.info("update %d is handled already (a repeated delivery): skipped", update_id)
                    if asyncio.iscoroutine(coroutine):
                        coroutine.close()
                    return
                await asyncio.sleep(CLAIM_POLL)
                claimed = await asyncio.to_thread(self.store.claim_update, update_id, chat_id=question_chat(update))
                if claimed and await self._sent_before(update):
                    logger.warning("update %d: its process stopped after sending the answer: marked handled", update_id)
                    await asyncio.to_thread(self.store.finish_update, update_id)
                    if asyncio.iscoroutine(coroutine):
                        coroutine.close()
                    return
            except SQLAlchemyError as err:
                logger.warning("update %d: its claim cannot be read (%s): handled now", update_id, _short(err))
                claimed = None
            if claimed:
                logger.warning("update %d: taken over from a process that stopped handling it", update_id)
        renewing = asyncio.create_task(self._renew(update_id)) if claimed else None
        try:
            await coroutine
        finally:
            if renewing is not None:
                renewing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await renewing
                try:
                    await asyncio.to_thread(self.store.finish_update, update_id)
                except SQLAlchemyError as err:
                    logger.warning("update %d: could not be marked handled (%s)", update_id, _short(err))

    async def _sent_before(self, update: Update) -> bool:
        """Whether the question of an update taken over was answered by the process that held it."""
        chat_id = question_chat(update)
        if chat_id is None or update.message is None or not update.message.text:
            return False
        question = clean_text(update.message.text).strip()
        return await asyncio.to_thread(self.store.answer_sent, update.update_id, chat_id, question)

    async def _renew(self, update_id: int) -> None:
        while True:
            await asyncio.sleep(UPDATE_LEASE / 3)
            try:
                await asyncio.to_thread(self.store.renew_update, update_id)
            except SQLAlchemyError as err:
                logger.warning("update %d: its claim could not be renewed (%s)", update_id, _short(err))

    def _claims_executor(self) -> ThreadPoolExecutor:
        if self._claims is None:
            self._claims = ThreadPoolExecutor(max_workers=1, thread_name_prefix="claims")
        return self._claims

    async def initialize(self) -> None:
        self._claims_executor()

    async def shutdown(self) -> None:
        if self._claims is not None:
            self._claims.shutdown(wait=False)
            self._claims = None


class HandledQueue(asyncio.Queue[object]):
    """The application's update queue in webhook mode: `put`, which PTB's webhook handler awaits before its 200
    goes out, returns once the update is handled (`handled`, called by the update processor)."""

    def __init__(self) -> None:
        super().__init__()
        self._waiting: defaultdict[int, list[asyncio.Future[None]]] = defaultdict(list)

    async def put(self, item: object) -> None:
        if not isinstance(item, Update):
            await super().put(item)
            return
        handled = asyncio.get_running_loop().create_future()
        self._waiting[item.update_id].append(handled)
        await super().put(item)
        await handled

    def handled(self, update_id: int) -> None:
        for waiting in self._waiting.pop(update_id, []):
            if not waiting.done():
                waiting.set_result(None)


async def wait_turn(store: FeedbackStore, update: Update, chat_id: int) -> None:
    """Return when no earlier question of `chat_id` is still being answered (by any replica)."""
    waited = time.monotonic()
    while True:
        try:
            if await asyncio.to_thread(store.chat_turn, update.update_id, chat_id):
                break
        except SQLAlchemyError as err:
            logger.warning(
                "update %d: the chat's turn cannot be read (%s): answering now", update.update_id, _short(err)
            )
            break
        await asyncio.sleep(TURN_POLL)
    if time.monotonic() - waited > TURN_POLL:
        logger.debug(
            "update %d waited %.1f s for the chat's earlier question", update.update_id, time.monotonic() - waited
        )


def _short(err: BaseException) -> str:
    """A database error in one line, without the SQL and parameters SQLAlchemy appends (they may hold user text)."""
    return " ".join(str(getattr(err, "orig", None) or type(err).__name__).split())[:300]
