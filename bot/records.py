"""Records the store could not take when they were made (the database unreachable while the bot runs): the user
has their answer already; the record is tried again a few times in the background, and logged as lost, with its
update's id, when it still cannot be stored."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from telegram.ext import ContextTypes

logger = logging.getLogger(__name__)

RETRY_AFTER = (2.0, 10.0, 30.0)  # seconds before each further try


def record_later(context: ContextTypes.DEFAULT_TYPE, record: Callable[[], Any], update_id: int, what: str) -> None:
    """Try `record` again in the background (RETRY_AFTER), logging it as lost with `update_id` if it never works."""
    logger.warning("update %d: the %s could not be stored now; trying again in the background", update_id, what)
    pending: set[asyncio.Task] = context.bot_data.setdefault("record_retries", set())
    task = asyncio.create_task(_retry(record, update_id, what))
    pending.add(task)
    task.add_done_callback(pending.discard)


async def _retry(record: Callable[[], Any], update_id: int, what: str) -> None:
    error: BaseException | None = None
    try:
        for delay in RETRY_AFTER:
            await asyncio.sleep(delay)
            try:
                stored = await asyncio.to_thread(record)
            except SQLAlchemyError as err:
                error = err
                continue
            logger.info("update %d: the %s is stored now (%s)", update_id, what, stored)
            return
    except asyncio.CancelledError:
        error = error or RuntimeError("the bot stopped before it could be stored")
    logger.error(
        "update %d: the %s is lost, not stored after %d tries: %s",
        update_id,
        what,
        len(RETRY_AFTER) + 1,
        " ".join(str(getattr(error, "orig", None) or error).split())[:300],
    )
