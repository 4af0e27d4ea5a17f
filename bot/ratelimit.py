"""A per-user sliding-window limit on questions, counted in the bot's store so that every replica counts the same
window (`SharedLimiter`); the in-process `SlidingWindowLimiter` stands in while the store cannot be reached.
Telegram's own flood limits are AIORateLimiter's job."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Hashable

from sqlalchemy.exc import SQLAlchemyError

from bot.feedback import FeedbackStore

logger = logging.getLogger(__name__)


class SlidingWindowLimiter:
    """At most `max_events` accepted events per key in any `window` seconds; 0 disables the limit.

    Used from the event loop only, so it needs no lock. Refused events are not counted: a user who keeps
    writing while limited gets through as soon as the window allows.
    """

    def __init__(self, max_events: int, window: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_events = max_events
        self.window = window
        self._clock = clock
        self._events: dict[Hashable, deque[float]] = {}
        self._told: dict[Hashable, float] = {}  # when each limited key was last told so

    def hit(self, key: Hashable) -> float | None:
        """Count an event for `key`; None when allowed, else the seconds until it would be."""
        if self.max_events <= 0:
            return None
        now = self._clock()
        events = self._events.setdefault(key, deque())
        while events and events[0] <= now - self.window:
            events.popleft()
        if len(events) >= self.max_events:
            return events[0] + self.window - now
        events.append(now)
        self._told.pop(key, None)
        self._forget_idle(now)
        return None

    def first_refusal(self, key: Hashable) -> bool:
        """Whether a refusal of `key` (after `hit` returned a wait) should be told: once per window, so that a
        flood of refused messages does not spend the bot's shared send budget (the rest are dropped silently)."""
        now = self._clock()
        told = self._told.get(key)
        if told is not None and told > now - self.window:
            return False
        self._told[key] = now
        return True

    def _forget_idle(self, now: float) -> None:
        # Keeps memory bounded by the users active in the last window, not by everyone ever seen.
        if len(self._events) > 1024:
            for key in [k for k, ev in self._events.items() if not ev or ev[-1] <= now - self.window]:
                del self._events[key]
            for key in [k for k, at in self._told.items() if at <= now - self.window]:
                del self._told[key]


class SharedLimiter:
    """At most `max_events` questions per user in any `window` seconds, counted in `store` (shared by replicas);
    0 disables the limit. A limited user is told once per window, the rest of their messages are dropped."""

    def __init__(self, store: FeedbackStore, max_events: int, window: float = 60.0) -> None:
        self.store = store
        self.max_events = max_events
        self.window = window
        self.local = SlidingWindowLimiter(max_events, window)  # while the store is unreachable

    async def check(self, user_id: int) -> tuple[float | None, bool]:
        """(None, False) when the question is allowed, else (seconds until it would be, whether to tell them)."""
        if self.max_events <= 0:
            return None, False
        try:
            return await asyncio.to_thread(self.store.rate_hit, user_id, self.max_events, self.window)
        except SQLAlchemyError as err:
            logger.warning(
                "the rate limit is counted in this process only: the store cannot be reached (%s)", type(err).__name__
            )
        wait = self.local.hit(user_id)
        return wait, wait is not None and self.local.first_refusal(user_id)
