"""The LLM budget: each backend's requests and tokens per minute and per day, shared by every replica.

Before a request is sent, its cost (one request; the prompt's estimated tokens plus the largest reply,
LLM_MAX_TOKENS) is reserved in every window of the backend at once; a window that cannot cover it refuses
(`BudgetSpent`), and `with_fallbacks` moves to the next backend (Ollama, then the quotes) with no request sent —
no 429 round trip. The reply's usage then replaces the estimate. The windows are kept current from what the
provider says: Groq's `x-ratelimit-{limit,remaining,reset}-requests` (the requests per day) and `-tokens` (the
tokens per minute) on every response, and `retry-after` on a 429, read by an httpx event hook on the client the
chat model is given (`event_hooks`).

Windows are rows of the `llm_budget` table in DATABASE_URL (every replica), else DATA_DIR/cache/budget.sqlite:
(account, window) → limit, used, resets_at, blocked_until, where the account is the backend, its model and a
digest of its address and key: providers limit each organisation and model apart (Groq's limits are per model).
A window starts with its first request and resets `period` seconds later (or when the provider says). Every change
is a conditional UPDATE in one transaction, so two replicas never both spend the last request.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import httpx
from prometheus_client import Gauge
from sqlalchemy import Column, Float, Integer, MetaData, String, Table, and_, case, or_, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from config import Settings
from corpus.database import engine

logger = logging.getLogger(__name__)

REMAINING = Gauge(
    "kzlaw_llm_budget_remaining",
    "What is left of an LLM backend's budget in its current window (kind: requests_per_minute, …, tokens_per_day).",
    ["backend", "kind"],
)

SQLITE_FILE = "budget.sqlite"  # in DATA_DIR/cache when DATABASE_URL is unset
PERIODS = {"minute": 60.0, "day": 86400.0}
KINDS = ("requests", "tokens")
# What Groq's headers report (console.groq.com/docs/rate-limits): -requests the requests per day, -tokens the
# tokens per minute.
REPORTED = {"requests": "requests_per_day", "tokens": "tokens_per_minute"}
# Tokens per character of a prompt, on the high side for Cyrillic with Llama 3's tokenizer (none is installed
# offline to count exactly): an estimate too low would cost the 429 the budget is there to avoid.
CHARS_PER_TOKEN = 3.0

metadata = MetaData()
llm_budget = Table(
    "llm_budget",
    metadata,
    Column("account", String(128), primary_key=True),  # backend/model/digest of its address and key
    Column("window", String(32), primary_key=True),  # requests_per_minute, requests_per_day, tokens_per_…
    Column("configured", Integer, nullable=False),  # the setting the limit came from (a change of it applies)
    Column("limit_", Integer, nullable=False),  # the setting, or what the provider last said
    Column("used", Integer, nullable=False),
    Column("resets_at", Float, nullable=False),  # epoch seconds; a window past it starts afresh
    Column("blocked_until", Float, nullable=False),  # epoch seconds, from a 429's retry-after
)


class BudgetSpent(Exception):
    """A backend's budget cannot cover a request: the next backend answers (nothing was sent)."""

    def __init__(self, backend: str, window: str, retry_in: float) -> None:
        super().__init__(f"{backend} budget spent: {window}, next in {retry_in:.0f} s")
        self.backend, self.window, self.retry_in = backend, window, retry_in


@dataclass(frozen=True)
class Window:
    name: str  # e.g. tokens_per_minute
    kind: str  # requests / tokens
    seconds: float
    limit: int


def windows(settings: Settings, backend: str) -> list[Window]:
    """The backend's limited windows (its settings `<backend>_<kind>_per_<period>`; 0 = no limit)."""
    out = []
    for kind in KINDS:
        for period, seconds in PERIODS.items():
            name = f"{kind}_per_{period}"
            limit = int(getattr(settings, f"{backend}_{name}", 0) or 0)
            if limit > 0:
                out.append(Window(name, kind, seconds, limit))
    return sorted(out, key=lambda w: w.name)  # one order for every transaction: no deadlock between replicas


def account(settings: Settings, backend: str) -> str:
    """Whose limits these are: the backend, its model, and a digest of its address and key (never the key)."""
    if backend == "groq":
        key = settings.groq_api_key.get_secret_value() if settings.groq_api_key else ""
        model, address = settings.groq_model, f"{settings.groq_base_url}\0{key}"
    else:
        model, address = settings.ollama_model, settings.ollama_base_url
    return f"{backend}/{model}/{hashlib.sha256(address.encode()).hexdigest()[:16]}"[:128]


class _Refused(Exception):
    def __init__(self, window: Window) -> None:
        self.window = window


# What the current thread reserved and what its last response reported, from the reservation (before the
# request) to the settlement (after the reply): one backend call runs in one thread, the httpx hook included.
_local = threading.local()


class LLMBudget:
    """One backend's windows in the shared database."""

    def __init__(self, settings: Settings, backend: str) -> None:
        """Args: settings: `<backend>_{requests,tokens}_per_{minute,day}`, llm_max_tokens, database_url (else the
        SQLite file in DATA_DIR/cache); backend: groq / ollama."""
        self.backend = backend
        self.account = account(settings, backend)
        self.windows = windows(settings, backend)
        self.max_tokens = settings.llm_max_tokens
        settings.cache_dir.mkdir(parents=True, exist_ok=True)
        self.engine = engine(settings, settings.cache_dir / SQLITE_FILE)
        metadata.create_all(self.engine)
        self._configure()

    def _configure(self) -> None:
        """A row per window; a window whose setting changed takes the new limit."""
        t = llm_budget.c
        with self.engine.begin() as conn:
            for w in self.windows:
                where = and_(t.account == self.account, t.window == w.name)
                conn.execute(
                    update(llm_budget).where(where, t.configured != w.limit).values(configured=w.limit, limit_=w.limit)
                )
        for w in self.windows:
            row = {"account": self.account, "window": w.name, "configured": w.limit, "limit_": w.limit}
            try:
                with self.engine.begin() as conn:
                    conn.execute(llm_budget.insert().values(row | {"used": 0, "resets_at": 0.0, "blocked_until": 0.0}))
            except IntegrityError:  # kept from before, or another replica made it first
                pass
        self._publish()

    def reserve(self, prompt_chars: int) -> int:
        """Reserve one request of `prompt_chars` characters and the longest reply; the tokens reserved. Raises
        `BudgetSpent` (reserving nothing) when a window cannot cover it or the provider asked to wait."""
        tokens = math.ceil(prompt_chars / CHARS_PER_TOKEN) + self.max_tokens
        _local.reserved, _local.reported = 0, set()
        if not self.windows:
            return 0
        now = time.time()
        t = llm_budget.c
        try:
            with self.engine.begin() as conn:
                for w in self.windows:
                    need = 1 if w.kind == "requests" else tokens
                    fresh = t.resets_at <= now
                    done = conn.execute(
                        update(llm_budget)
                        .where(t.account == self.account, t.window == w.name, t.blocked_until <= now)
                        .where(or_(and_(fresh, t.limit_ >= need), and_(~fresh, t.limit_ - t.used >= need)))
                        .values(
                            used=case((fresh, need), else_=t.used + need),
                            resets_at=case((fresh, now + w.seconds), else_=t.resets_at),
                        )
                    )
                    if done.rowcount == 0:
                        raise _Refused(w)  # the transaction rolls back: nothing of this request is kept
        except _Refused as refused:
            raise BudgetSpent(self.backend, refused.window.name, self._wait(refused.window, now)) from None
        _local.reserved = tokens
        self._publish()
        return tokens

    def _wait(self, w: Window, now: float) -> float:
        with self.engine.connect() as conn:
            row = conn.execute(
                select(llm_budget.c.resets_at, llm_budget.c.blocked_until).where(
                    llm_budget.c.account == self.account, llm_budget.c.window == w.name
                )
            ).first()
        return max(0.0, max(row) - now) if row else 0.0

    def settle(self, total_tokens: int | None) -> None:
        """Replace the tokens reserved by the thread's last request with what its reply says it used, in the windows
        the provider's headers did not already set."""
        reserved: int = getattr(_local, "reserved", 0)
        reported: set[str] = getattr(_local, "reported", set())
        _local.reserved = 0
        if not reserved or total_tokens is None:
            return
        delta = total_tokens - reserved
        t = llm_budget.c
        names = [w.name for w in self.windows if w.kind == "tokens" and w.name not in reported]
        if names:
            with self.engine.begin() as conn:
                conn.execute(
                    update(llm_budget)
                    .where(t.account == self.account, t.window.in_(names))
                    .values(used=case((t.used + delta < 0, 0), else_=t.used + delta))
                )
        self._publish()

    def observe(self, response: httpx.Response) -> None:
        """The provider's own figures (x-ratelimit-*) and a 429's retry-after, from every response."""
        try:
            self._observe(response.status_code, response.headers, time.time())
        except SQLAlchemyError as err:  # the answer matters more than the bookkeeping
            logger.warning("LLM budget not updated from %s's headers: %s: %s", self.backend, type(err).__name__, err)

    def _observe(self, status: int, headers: Mapping[str, str], now: float) -> None:
        t = llm_budget.c
        reported: set[str] = set()
        with self.engine.begin() as conn:
            for kind, window in REPORTED.items():
                limit = _int(headers.get(f"x-ratelimit-limit-{kind}"))
                remaining = _int(headers.get(f"x-ratelimit-remaining-{kind}"))
                reset = duration(headers.get(f"x-ratelimit-reset-{kind}"))
                if limit is None or remaining is None:
                    continue
                values: dict = {"limit_": limit, "used": max(0, limit - remaining)}
                if reset is not None:
                    values["resets_at"] = now + reset
                conn.execute(update(llm_budget).where(t.account == self.account, t.window == window).values(values))
                reported.add(window)
            if status == 429 and (wait := duration(headers.get("retry-after"), unit="s")) is not None:
                conn.execute(update(llm_budget).where(t.account == self.account).values(blocked_until=now + wait))
                logger.info("%s asked to wait %.0f s (429): the next backend answers until then", self.backend, wait)
        _local.reported = reported
        self._publish()

    def remaining(self) -> dict[str, int]:
        """What is left in each window now."""
        now = time.time()
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(llm_budget.c.window, llm_budget.c.limit_, llm_budget.c.used, llm_budget.c.resets_at).where(
                    llm_budget.c.account == self.account
                )
            ).all()
        names = {w.name for w in self.windows}
        return {w: (limit if resets <= now else max(0, limit - used)) for w, limit, used, resets in rows if w in names}

    def _publish(self) -> None:
        for window, left in self.remaining().items():
            REMAINING.labels(backend=self.backend, kind=window).set(left)


def _int(value: str | None) -> int | None:
    try:
        return int(float(value)) if value is not None else None
    except ValueError:
        return None


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def duration(value: str | None, unit: str = "") -> float | None:
    """Seconds of a provider's duration: «2m59.56s», «7.66s», «120ms», «1h0m0s»; a bare number in `unit` ("s")."""
    if value is None:
        return None
    value = value.strip()
    if unit == "s":
        try:
            return float(value)
        except ValueError:
            pass
    parts: Iterable[tuple[str, str]] = _DURATION.findall(value)
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    seconds = [float(n) * scale[u] for n, u in parts]
    return sum(seconds) if seconds else None
