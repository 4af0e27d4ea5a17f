"""A per-user sliding-window limit on questions (Telegram's own flood limits are AIORateLimiter's job)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable


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
