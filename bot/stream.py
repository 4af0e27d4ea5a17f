"""Show a model's answer while it is generated: Bot API drafts in private chats, else one message edited.

The chain calls `on_token` from its worker thread; the shown text is refreshed from the event loop at most once
per `interval` seconds (Telegram allows about one message a second per chat). The final answer, checked against
the sources, is sent by the handler afterwards: it replaces the draft, or the edited message becomes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading

from telegram import Message
from telegram.constants import ChatType
from telegram.error import TelegramError

from answer.links import unlink
from bot.format import MAX_MESSAGE, escape

logger = logging.getLogger(__name__)

PREVIEW_CHARS = MAX_MESSAGE - 96  # a long answer shows its head while streaming; the final one is split


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """The text generated so far as Telegram HTML within one message: its head, "…" when cut; links not yet
    checked against the sources show as "[…]"."""
    text = unlink(text.strip(), (), "[…]")
    return escape(text if len(text) <= limit else text[: limit - 1].rstrip() + "…")


class AnswerStream:
    """Collects streamed pieces of an answer to `message` and shows them until `close()`."""

    def __init__(self, message: Message, interval: float) -> None:
        self.message = message
        self.interval = interval
        # Drafts exist for private chats only; elsewhere, or when the server refuses them, one message is edited.
        self.use_drafts = message.chat.type == ChatType.PRIVATE
        self.shown: Message | None = None  # the edited message, which the final answer then replaces
        self.updates = 0
        self._pieces: list[str] = []
        self._lock = threading.Lock()
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        self._closed = asyncio.Event()
        self._task = asyncio.create_task(self._run())

    def on_token(self, piece: str) -> None:
        """Called by the chain's thread with each piece of the answer."""
        with self._lock:
            self._pieces.append(piece)
        self._loop.call_soon_threadsafe(self._changed.set)

    def text(self) -> str:
        with self._lock:
            return "".join(self._pieces)

    async def _run(self) -> None:
        last = ""
        while True:
            await self._changed.wait()
            self._changed.clear()
            if self._closed.is_set():
                return
            shown = preview(self.text())
            if shown and shown != last:
                await self._show(shown)
                last = shown
                with contextlib.suppress(TimeoutError):  # the pause between updates, cut short by close()
                    await asyncio.wait_for(self._closed.wait(), self.interval)

    async def _show(self, html: str) -> None:
        bot = self.message.get_bot()
        try:
            if self.use_drafts:
                try:
                    # The draft id: the question's message id, non-zero and the same for every update.
                    await bot.send_message_draft(self.message.chat_id, self.message.message_id, html)
                    self.updates += 1
                    return
                except TelegramError as err:  # e.g. an older self-hosted Bot API server without the method
                    logger.info("drafts refused (%s): the answer is streamed by editing a message", err)
                    self.use_drafts = False
            if self.shown is None:
                self.shown = await self.message.reply_html(html)
            else:
                await self.shown.edit_text(html)
            self.updates += 1
        except TelegramError as err:  # cosmetic: the final answer still comes
            logger.debug("streamed update failed: %s", err)

    async def close(self) -> None:
        """Stop showing updates; one under way is finished first, so `shown` is the message the user sees."""
        self._closed.set()
        self._changed.set()
        await self._task
