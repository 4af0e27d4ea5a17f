"""PTB persistence over the bot's store (SQLite or PostgreSQL): each user's `user_data` as a JSON row; nothing is
pickled, and a replica reads a user's row again before each of their updates, so a /lang set on another one holds."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from telegram.ext import BasePersistence, PersistenceInput

from bot.feedback import FeedbackStore

logger = logging.getLogger(__name__)

UserData = dict[str, Any]


class StorePersistence(BasePersistence[UserData, dict[str, Any], dict[str, Any]]):
    """Keeps `user_data` (the /lang choice) across restarts in `FeedbackStore`'s user_state table.

    Only user data is stored: bot_data holds live objects (the chain, the thread pool) and chats keep nothing.
    A damaged row is skipped with a warning by the store, so a user starts fresh instead of the bot failing.
    """

    def __init__(self, store: FeedbackStore, update_interval: float = 10.0) -> None:
        super().__init__(
            store_data=PersistenceInput(bot_data=False, chat_data=False, user_data=True, callback_data=False),
            update_interval=update_interval,
        )
        self.store = store

    async def get_user_data(self) -> dict[int, UserData]:
        return await asyncio.to_thread(self.store.user_states)

    async def update_user_data(self, user_id: int, data: UserData) -> None:
        try:
            await asyncio.to_thread(self.store.save_user_state, user_id, data)
        except SQLAlchemyError as err:  # kept in memory: written with the user's next change
            logger.warning("the state of user %s could not be stored (%s)", user_id, type(err).__name__)

    async def drop_user_data(self, user_id: int) -> None:
        await asyncio.to_thread(self.store.drop_user_state, user_id)

    async def refresh_user_data(self, user_id: int, user_data: UserData) -> None:
        """Read the user's row again before their update is handled: another replica may have changed it."""
        try:
            stored = await asyncio.to_thread(self.store.user_state, user_id)
        except SQLAlchemyError as err:
            logger.warning(
                "the state of user %s could not be read (%s): the one in memory is used", user_id, type(err).__name__
            )
            return
        if stored is not None:
            user_data.clear()
            user_data.update(stored)

    # Chat data, bot data, callback data and conversations are not stored.
    async def get_chat_data(self) -> dict[int, dict[str, Any]]:
        return {}

    async def get_bot_data(self) -> dict[str, Any]:
        return {}

    async def get_callback_data(self) -> None:
        return None

    async def get_conversations(self, name: str) -> dict:
        return {}

    async def update_conversation(self, name: str, key: tuple[int | str, ...], new_state: object | None) -> None:
        pass

    async def update_chat_data(self, chat_id: int, data: dict[str, Any]) -> None:
        pass

    async def update_bot_data(self, data: dict[str, Any]) -> None:
        pass

    async def update_callback_data(self, data: Any) -> None:
        pass

    async def drop_chat_data(self, chat_id: int) -> None:
        pass

    async def refresh_chat_data(self, chat_id: int, chat_data: dict[str, Any]) -> None:
        pass

    async def refresh_bot_data(self, bot_data: dict[str, Any]) -> None:
        pass

    async def flush(self) -> None:
        """Every update is written when it is handed over: nothing is buffered."""
