"""The bot's store, in PostgreSQL at DATABASE_URL (shared by every replica) or else a SQLite file of its own in
DATA_DIR/bot: asked questions (answer, latency, error), the askers' 👍/👎 ratings, each user's state (the /lang
choice, as JSON), each chat's conversation (the exchanges a follow-up is read with, and the bot's message ids of each
answer, so that a reply continues from that exchange; `conversation` reads them), the updates being handled (each
once, a chat's questions one at a time and in order), the shared per-user rate limit, admin statistics
(`feedback_stats`) and retention. One schema for both engines (`schema`, SQLAlchemy Core), migrated at start.

Questions are personal data: the SQLite folder is made 0700 and the files 0600 whatever the umask
(`private_files`). A file SQLite cannot read is moved aside and a fresh one started, so a damaged database never stops
the bot.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sqlite3
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import Connection, Engine, Table, and_, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from answer.records import QAResult
from bot import schema
from bot.conversation import Conversation, read_conversation, sources_json
from bot.feedback_stats import FeedbackStats, read_stats
from bot.private_files import (
    FILE_MODE,
    check_integrity,
    is_damage,
    move_aside,
    private_dir,
    private_file,
    restrict,
    side_files,
)
from bot.schema import answer_messages, conversation_resets, exchanges, questions, ratings, updates, user_state
from config import Settings
from corpus import database
from corpus.errors import UserError
from corpus.text import clean_text

logger = logging.getLogger(__name__)

DAY = 24 * 3600.0
UPDATE_LEASE = 60.0  # seconds a claim on an update lasts without renewal (a dead replica's claims lapse after it)
UPDATES_KEPT = DAY  # handled update ids are remembered this long (Telegram keeps an undelivered update 24 h)
RateOutcome = Literal["rated", "gone", "not_asker"]


class StoreUnavailable(UserError):
    """DATABASE_URL is set but the database cannot be reached at start."""


@dataclass(frozen=True)
class Purged:
    """What one retention pass deleted."""

    questions: int
    ratings: int
    user_ids: tuple[int, ...]  # users whose stored state was deleted
    exchanges: int = 0


def _clean(**values: object) -> dict[str, object]:
    """Query values with every string cleaned, so a stray surrogate never makes an insert fail."""
    return {k: clean_text(v) if isinstance(v, str) else v for k, v in values.items()}


def _insert_question(conn: Connection, **values: object) -> int:
    """A row of `questions`, dated now, with its strings cleaned; its id."""
    row = conn.execute(questions.insert().values(_clean(created_at=time.time(), **values)).returning(questions.c.id))
    return int(row.scalar_one())


def _upsert(conn: Connection, table: Table) -> Any:
    """INSERT … ON CONFLICT for the connection's engine (both dialects spell it the same way in SQLAlchemy)."""
    return (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(table)


def describe(url: str) -> str:
    """A database URL as logs and messages may show it: the password hidden."""
    return make_url(url).render_as_string(hide_password=True)


def open_store(settings: Settings) -> FeedbackStore:
    """The bot's store: DATABASE_URL's PostgreSQL, else DATA_DIR/bot/feedback.sqlite (owner-only)."""
    sqlite_file = private_dir(settings.data_dir / "bot") / "feedback.sqlite"
    if settings.database_url is None:
        return FeedbackStore(sqlite_file)
    store = FeedbackStore(database.engine(settings, sqlite_file), secrets=settings.secret_values())
    logger.info("the bot's store is the PostgreSQL database %s", store.where)
    return store


class FeedbackStore:
    """The bot's rows, through one SQLAlchemy engine: a SQLite file (`path`) or PostgreSQL; usable from any thread.

    Args:
        target: a SQLite file (made owner-only; moved aside when damaged), or the engine of DATABASE_URL.
        secrets: strings never to show in a message (DATABASE_URL's password, in a driver's error text).
    """

    def __init__(self, target: Path | Engine, *, secrets: list[str] | None = None) -> None:
        self.path: Path | None = None
        if isinstance(target, Path):
            self.path = target
            target.parent.mkdir(parents=True, exist_ok=True)
            self._prepare_sqlite()
            target = database.sqlite_engine(self.path)
            target.dispose()  # connections pooled before a damaged file was moved aside would still read it
        self.engine: Engine = target
        self.where = str(self.path) if self.path else describe(target.url.render_as_string(hide_password=False))
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"  # this process's claims
        try:
            schema.migrate(self.engine, self.where)
        except schema.SchemaTooNew:
            raise
        except SQLAlchemyError as err:
            if self.path is not None:
                raise
            reason = " ".join(str(getattr(err, "orig", None) or err).split())
            for secret in secrets or ():
                reason = reason.replace(secret, "***")
            raise StoreUnavailable(f"DATABASE_URL ({self.where}): cannot use the database: {reason}") from err
        if self.path is not None:
            for side in side_files(self.path):  # SQLite gives them the database's mode; an old install may differ
                restrict(side, FILE_MODE)

    def _prepare_sqlite(self) -> None:
        """Owner-only file; a file SQLite cannot read is moved aside (kept, for recovery) and a fresh one started."""
        assert self.path is not None
        try:
            self._check_sqlite()
        except sqlite3.DatabaseError as err:
            if not is_damage(err):
                raise
            moved = move_aside(self.path)
            logger.warning(
                "%s is damaged (%s): moved it to %s and started an empty database; what it held stays in "
                "the moved file (recover what is readable with: sqlite3 %s .recover | sqlite3 recovered.sqlite)",
                self.path,
                err,
                moved,
                moved,
            )
            self._check_sqlite()

    def _check_sqlite(self) -> None:
        assert self.path is not None
        private_file(self.path)
        db = sqlite3.connect(self.path, timeout=10)
        try:
            check_integrity(db)
            db.execute("PRAGMA journal_mode=WAL")  # readers (/stats) do not block the writers
        finally:
            db.close()

    def close(self) -> None:
        """Close the pooled connections (the engine opens new ones if used again)."""
        self.engine.dispose()

    # --- questions and ratings --------------------------------------------------------------------
    def record_answer(self, result: QAResult, *, user_id: int | None, chat_id: int | None, latency: float) -> int:
        """Store an answered question; returns its id (the one rating buttons carry)."""
        with self.engine.begin() as conn:
            return self._insert_answer(conn, result, user_id=user_id, chat_id=chat_id, latency=latency)

    def _insert_answer(
        self, conn: Connection, result: QAResult, *, user_id: int | None, chat_id: int | None, latency: float
    ) -> int:
        sources = json.dumps([{"citation": s.citation(), "url": s.url} for s in result.sources], ensure_ascii=False)
        return _insert_question(
            conn,
            user_id=user_id,
            chat_id=chat_id,
            lang=result.lang,
            question=result.question,
            answer=result.answer,
            sources=sources,
            backend=result.backend,
            template=result.template,
            grounded=int(result.grounded),
            latency=latency,
        )

    def record_answered(
        self,
        result: QAResult,
        *,
        user_id: int | None,
        chat_id: int,
        latency: float,
        parent_id: int | None,
        asked_at: float,
    ) -> int:
        """Store an answered question and its exchange in one transaction (before the answer is sent, so that the
        chat's next question already continues it); `asked_at`, when it arrived, places it in its conversation."""
        with self.engine.begin() as conn:
            question_id = self._insert_answer(conn, result, user_id=user_id, chat_id=chat_id, latency=latency)
            self._insert_exchange(conn, question_id, result, chat_id=chat_id, parent_id=parent_id, at=asked_at)
        return question_id

    def record_failure(
        self, question: str, error: BaseException, *, user_id: int | None, chat_id: int | None, latency: float
    ) -> int:
        """Store a question that got no answer, with the error's type and message."""
        with self.engine.begin() as conn:
            error_text = f"{type(error).__name__}: {error}"[:1000]
            return _insert_question(
                conn, user_id=user_id, chat_id=chat_id, question=question, latency=latency, error=error_text
            )

    def rate(self, question_id: int, user_id: int, rating: int) -> RateOutcome:
        """Store (or change) the asker's rating of an answer, +1 or -1.

        "gone" when there is no such answer (never asked, failed, or deleted by retention), "not_asker" when
        `user_id` did not ask it: only the asker rates, so nobody can rate answers given to someone else.
        """
        if rating not in (-1, 1):
            raise ValueError(f"rating must be +1 or -1, not {rating}")
        with self.engine.begin() as conn:
            asker = conn.execute(
                select(questions.c.user_id).where(questions.c.id == question_id, questions.c.error.is_(None))
            ).one_or_none()
            if asker is None:
                return "gone"
            if asker[0] != user_id:
                return "not_asker"
            insert = _upsert(conn, ratings).values(
                question_id=question_id, user_id=user_id, rating=rating, created_at=time.time()
            )
            conn.execute(
                insert.on_conflict_do_update(
                    index_elements=["question_id", "user_id"],
                    set_={"rating": insert.excluded.rating, "created_at": insert.excluded.created_at},
                )
            )
            return "rated"

    # --- conversations ---------------------------------------------------------------------------
    def record_exchange(
        self,
        question_id: int,
        result: QAResult,
        *,
        chat_id: int,
        parent_id: int | None,
        asked_at: float | None = None,
    ) -> None:
        """Keep an answered question as an exchange of its chat's conversation (before the answer is sent, so
        that a quick next message already continues it)."""
        with self.engine.begin() as conn:
            self._insert_exchange(
                conn, question_id, result, chat_id=chat_id, parent_id=parent_id, at=asked_at or time.time()
            )

    def _insert_exchange(
        self, conn: Connection, question_id: int, result: QAResult, *, chat_id: int, parent_id: int | None, at: float
    ) -> None:
        insert = _upsert(conn, exchanges).values(
            _clean(
                question_id=question_id,
                chat_id=chat_id,
                parent_id=parent_id,
                search_question=result.search_question or result.question,
                sources=sources_json(result.sources),
                created_at=at,
            )
        )
        conn.execute(
            insert.on_conflict_do_update(
                index_elements=["question_id"],
                set_={
                    c: insert.excluded[c] for c in ("chat_id", "parent_id", "search_question", "sources", "created_at")
                },
            )
        )

    def record_answer_messages(self, question_id: int, *, chat_id: int, message_ids: list[int]) -> None:
        """The bot's messages that carry an exchange's answer: a reply to any of them continues from it."""
        if not message_ids:
            return
        with self.engine.begin() as conn:
            insert = _upsert(conn, answer_messages).values(
                [{"chat_id": chat_id, "message_id": m, "question_id": question_id} for m in message_ids]
            )
            conn.execute(
                insert.on_conflict_do_update(
                    index_elements=["chat_id", "message_id"], set_={"question_id": insert.excluded.question_id}
                )
            )

    def new_conversation(self, chat_id: int, *, now: float | None = None) -> None:
        """/new: the chat's next message begins a conversation (a reply to an earlier answer still continues it);
        a question still being answered when /new came is not continued either (its exchange is dated from its
        arrival)."""
        with self.engine.begin() as conn:
            insert = _upsert(conn, conversation_resets).values(
                chat_id=chat_id, reset_at=time.time() if now is None else now
            )
            conn.execute(
                insert.on_conflict_do_update(index_elements=["chat_id"], set_={"reset_at": insert.excluded.reset_at})
            )

    def conversation(
        self,
        chat_id: int,
        *,
        turns: int,
        idle_seconds: float,
        reply_to: int | None = None,
        now: float | None = None,
    ) -> Conversation:
        """The last `turns` exchanges a new message of `chat_id` continues.

        A reply to one of the bot's answers (`reply_to`, its message id) continues from that answer's exchange
        whatever its age; otherwise the chat's last exchange, unless /new came after it or it is older than
        `idle_seconds`. Each exchange's parent is the one it continued, so a thread is followed, not the chat.
        """
        if turns <= 0:
            return Conversation()
        now = time.time() if now is None else now
        with self.engine.connect() as conn:
            return read_conversation(conn, chat_id, turns=turns, idle_seconds=idle_seconds, reply_to=reply_to, now=now)

    # --- updates: each handled once, a chat's questions in order -----------------------------------------
    def claim_update(self, update_id: int, *, chat_id: int | None = None, now: float | None = None) -> bool:
        """Claim an update for this process: False when it was handled, or is being handled, by any process (a
        retried or doubly delivered update). A claim whose holder stopped renewing it (a killed replica) lapses
        after UPDATE_LEASE and may be taken over. `chat_id` marks a question, answered in its chat's turn."""
        now = time.time() if now is None else now
        with self.engine.begin() as conn:
            insert = _upsert(conn, updates).values(
                update_id=update_id, chat_id=chat_id, holder=self.holder, lease_until=now + UPDATE_LEASE, created_at=now
            )
            claimed = conn.execute(
                insert.on_conflict_do_update(
                    index_elements=["update_id"],
                    set_={"holder": insert.excluded.holder, "lease_until": insert.excluded.lease_until},
                    where=and_(updates.c.done_at.is_(None), updates.c.lease_until < now),
                ).returning(updates.c.update_id)
            )
            return claimed.first() is not None

    def renew_update(self, update_id: int) -> None:
        """Keep this process's claim on an update alive while it is being handled."""
        with self.engine.begin() as conn:
            conn.execute(
                updates.update()
                .where(updates.c.update_id == update_id, updates.c.holder == self.holder)
                .values(lease_until=time.time() + UPDATE_LEASE)
            )

    def finish_update(self, update_id: int) -> None:
        """The update is handled: never again, and the chat's next question may go."""
        with self.engine.begin() as conn:
            conn.execute(
                updates.update()
                .where(updates.c.update_id == update_id, updates.c.holder == self.holder)
                .values(done_at=time.time())
            )

    def update_done(self, update_id: int) -> bool:
        """Whether the update was handled (by any process)."""
        with self.engine.connect() as conn:
            done = conn.execute(select(updates.c.done_at).where(updates.c.update_id == update_id)).scalar()
        return done is not None

    def answer_sent(self, update_id: int, chat_id: int, question: str) -> bool:
        """Whether `question` of `chat_id` was answered, and the answer sent, since `update_id` was first claimed:
        what a replica killed after sending its answer, before marking the update handled, leaves behind."""
        asked = " ".join(question.split()).casefold()
        with self.engine.connect() as conn:
            since = conn.execute(select(updates.c.created_at).where(updates.c.update_id == update_id)).scalar()
            if since is None:
                return False
            sent = conn.execute(
                select(questions.c.question)
                .where(questions.c.chat_id == chat_id, questions.c.created_at >= since)
                .where(
                    select(answer_messages.c.question_id)
                    .where(answer_messages.c.question_id == questions.c.id)
                    .exists()
                )
            ).scalars()
            return any(" ".join(q.split()).casefold() == asked for q in sent)

    def chat_turn(self, update_id: int, chat_id: int, *, now: float | None = None) -> bool:
        """Whether the question of `update_id` may be answered now: no earlier question of its chat is still
        being handled (by any process whose claim is alive)."""
        now = time.time() if now is None else now
        with self.engine.connect() as conn:
            earlier = conn.execute(
                select(func.count())
                .select_from(updates)
                .where(
                    updates.c.chat_id == chat_id,
                    updates.c.update_id < update_id,
                    updates.c.done_at.is_(None),
                    updates.c.lease_until >= now,
                )
            ).scalar_one()
        return earlier == 0

    # --- the per-user rate limit, shared by every replica -------------------------------------------------
    def rate_hit(
        self, user_id: int, max_events: int, window: float, *, now: float | None = None
    ) -> tuple[float | None, bool]:
        """Count a question of `user_id` in its sliding window of `window` seconds: (None, False) when allowed,
        else (seconds until it would be, whether to tell the user: once per window). Refused questions are not
        counted. One transaction that starts with a write, so replicas counting the same user take turns."""
        now = time.time() if now is None else now
        with self.engine.begin() as conn:
            limits = schema.rate_limits
            conn.execute(
                _upsert(conn, limits)
                .values(user_id=user_id, events="[]", told_at=None, updated_at=now)
                .on_conflict_do_nothing(index_elements=["user_id"])
            )
            raw, told_at = conn.execute(
                select(limits.c.events, limits.c.told_at).where(limits.c.user_id == user_id).with_for_update()
            ).one()
            try:
                events = [float(e) for e in json.loads(raw) if float(e) > now - window]
            except (TypeError, ValueError):
                events = []
            if len(events) >= max_events:
                tell = told_at is None or told_at <= now - window
                if tell:
                    conn.execute(limits.update().where(limits.c.user_id == user_id).values(told_at=now, updated_at=now))
                return min(events) + window - now, tell
            events.append(now)
            conn.execute(
                limits.update()
                .where(limits.c.user_id == user_id)
                .values(events=json.dumps(events), told_at=None, updated_at=now)
            )
        return None, False

    # --- user state (PTB user_data) -------------------------------------------------------------
    def user_states(self) -> dict[int, dict[str, Any]]:
        """Every stored user state; a row that is not a JSON object is skipped with a warning."""
        try:
            with self.engine.connect() as conn:
                rows = conn.execute(select(user_state.c.user_id, user_state.c.data)).all()
        except SQLAlchemyError as err:
            logger.warning("user states in %s cannot be read (%s): every user starts fresh", self.where, err)
            return {}
        return self._states(rows)

    def user_state(self, user_id: int) -> dict[str, Any] | None:
        """One user's stored state (as another replica may have changed it); None when there is none."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(user_state.c.user_id, user_state.c.data).where(user_state.c.user_id == user_id)
            ).all()
        return self._states(rows).get(user_id)

    def _states(self, rows: Any) -> dict[int, dict[str, Any]]:
        states: dict[int, dict[str, Any]] = {}
        damaged: list[int] = []
        for user_id, data in rows:
            try:
                state = json.loads(data)
            except (TypeError, ValueError):
                state = None
            if isinstance(user_id, int) and isinstance(state, dict):
                states[user_id] = state
            else:
                damaged.append(user_id)
        if damaged:
            logger.warning(
                "the stored state of %d user(s) in %s is damaged and was skipped (they start fresh): ids %s",
                len(damaged),
                self.where,
                damaged[:20],
            )
        return states

    def save_user_state(self, user_id: int, state: dict[str, Any]) -> None:
        """Store a user's state and mark them active now; an empty state deletes the row."""
        kept = {}
        for key, value in state.items():
            try:
                json.dumps(value)
            except (TypeError, ValueError):
                logger.warning("user_data[%r] is not JSON (%s): it is not kept across restarts", key, type(value))
            else:
                kept[str(key)] = value
        if not kept:
            self.drop_user_state(user_id)
            return
        with self.engine.begin() as conn:
            insert = _upsert(conn, user_state).values(
                _clean(user_id=user_id, data=json.dumps(kept, ensure_ascii=False), updated_at=time.time())
            )
            conn.execute(
                insert.on_conflict_do_update(
                    index_elements=["user_id"],
                    set_={"data": insert.excluded.data, "updated_at": insert.excluded.updated_at},
                )
            )

    def drop_user_state(self, user_id: int) -> None:
        with self.engine.begin() as conn:
            conn.execute(user_state.delete().where(user_state.c.user_id == user_id))

    # --- retention --------------------------------------------------------------------------------
    def purge(self, days: int, *, now: float | None = None) -> Purged:
        """Delete questions (with their ratings) asked, and user states untouched, more than `days` days ago.

        `days` 0 keeps everything. Handled update ids and idle rate-limit windows (no user text) go after a day.
        """
        now = time.time() if now is None else now
        with self.engine.begin() as conn:
            conn.execute(updates.delete().where(updates.c.created_at < now - UPDATES_KEPT))
            conn.execute(schema.rate_limits.delete().where(schema.rate_limits.c.updated_at < now - DAY))
        if days <= 0:
            return Purged(0, 0, ())
        cutoff = now - days * DAY
        old = select(questions.c.id).where(questions.c.created_at < cutoff)
        with self.engine.begin() as conn:
            conn.execute(answer_messages.delete().where(answer_messages.c.question_id.in_(old)))
            n_exchanges = conn.execute(exchanges.delete().where(exchanges.c.question_id.in_(old))).rowcount
            conn.execute(conversation_resets.delete().where(conversation_resets.c.reset_at < cutoff))
            n_ratings = conn.execute(ratings.delete().where(ratings.c.question_id.in_(old))).rowcount
            n_questions = conn.execute(questions.delete().where(questions.c.created_at < cutoff)).rowcount
            user_ids = tuple(
                conn.execute(
                    user_state.delete().where(user_state.c.updated_at < cutoff).returning(user_state.c.user_id)
                ).scalars()
            )
        logger.info(
            "retention (%d days): deleted %d questions (%d of them in conversations), %d ratings, %d user states",
            days,
            n_questions,
            n_exchanges,
            n_ratings,
            len(user_ids),
        )
        return Purged(n_questions, n_ratings, user_ids, n_exchanges)

    def stats(self) -> FeedbackStats:
        """Counts of questions and ratings, and answer latency percentiles."""
        with self.engine.connect() as conn:
            return read_stats(conn)
