"""The bot's SQLite database: asked questions (answer, latency, error), the askers' 👍/👎 ratings, each user's
state (the /lang choice, as JSON), each chat's conversation (the exchanges a follow-up is read with, and the
bot's message ids of each answer, so that a reply continues from that exchange; `conversation` reads them), admin
statistics (`feedback_stats`) and retention.

Questions are personal data: the folder is made 0700 and the files 0600 whatever the umask (`private_files`). A
file SQLite cannot read is moved aside and a fresh one started, so a damaged database never stops the bot.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from answer.records import QAResult
from bot.conversation import Conversation, read_conversation, sources_json
from bot.feedback_stats import FeedbackStats, read_stats
from bot.private_files import FILE_MODE, check_integrity, is_damage, move_aside, private_file, restrict, side_files
from corpus.text import clean_text

logger = logging.getLogger(__name__)

DAY = 24 * 3600.0
RateOutcome = Literal["rated", "gone", "not_asker"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS questions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at REAL NOT NULL,
    user_id INTEGER,
    chat_id INTEGER,
    lang TEXT,
    question TEXT NOT NULL,
    answer TEXT,
    sources TEXT,          -- JSON list of {citation, url}
    backend TEXT,
    template TEXT,
    grounded INTEGER,
    latency REAL,          -- seconds from the question to the answer, chain only
    error TEXT             -- set when no answer was given
);
CREATE TABLE IF NOT EXISTS ratings (
    question_id INTEGER NOT NULL REFERENCES questions(id),
    user_id INTEGER NOT NULL,
    rating INTEGER NOT NULL CHECK (rating IN (-1, 1)),
    created_at REAL NOT NULL,
    PRIMARY KEY (question_id, user_id)
);
CREATE TABLE IF NOT EXISTS exchanges (
    question_id INTEGER PRIMARY KEY REFERENCES questions(id),  -- its question and answer
    chat_id INTEGER NOT NULL,
    parent_id INTEGER,         -- the exchange whose conversation this one continued; NULL: it began one
    search_question TEXT NOT NULL,
    sources TEXT NOT NULL,     -- JSON list of the answer's Source records
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS exchanges_by_chat ON exchanges (chat_id, created_at);
CREATE TABLE IF NOT EXISTS answer_messages (  -- the bot's messages carrying each answer: a reply to one
    chat_id INTEGER NOT NULL,                 -- continues from its exchange
    message_id INTEGER NOT NULL,
    question_id INTEGER NOT NULL REFERENCES exchanges(question_id),
    PRIMARY KEY (chat_id, message_id)
);
CREATE TABLE IF NOT EXISTS conversation_resets (  -- /new: earlier exchanges are not continued by themselves
    chat_id INTEGER PRIMARY KEY,
    reset_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS user_state (
    user_id INTEGER PRIMARY KEY,
    data TEXT NOT NULL,        -- JSON object: the user's PTB user_data ({"lang": "kk"})
    updated_at REAL NOT NULL   -- the user's last activity; retention deletes older rows
);
"""


@dataclass(frozen=True)
class Purged:
    """What one retention pass deleted."""

    questions: int
    ratings: int
    user_ids: tuple[int, ...]  # users whose stored state was deleted
    exchanges: int = 0


def _params(*values: object) -> tuple[object, ...]:
    """Query parameters with every string cleaned, so a stray surrogate never makes an insert fail."""
    return tuple(clean_text(v) if isinstance(v, str) else v for v in values)


def _inserted_id(cur: sqlite3.Cursor) -> int:
    """The id of the row an INSERT just added (sqlite3 types lastrowid Optional: None before any insert)."""
    if cur.lastrowid is None:
        raise RuntimeError("the INSERT added no row")
    return cur.lastrowid


class FeedbackStore:
    """Questions, ratings and user state in one SQLite file; each call opens its own connection (any thread)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._open()
        except sqlite3.DatabaseError as err:
            if not is_damage(err):
                raise
            moved = move_aside(path)
            logger.warning(
                "%s is damaged (%s): moved it to %s and started an empty database; what it held stays in "
                "the moved file (recover what is readable with: sqlite3 %s .recover | sqlite3 recovered.sqlite)",
                path,
                err,
                moved,
                moved,
            )
            self._open()

    def _open(self) -> None:
        """Create or check the database: owner-only files, WAL, the schema."""
        private_file(self.path)
        with self._connect() as db:
            check_integrity(db)
            db.execute("PRAGMA journal_mode=WAL")  # readers (/stats) do not block the writers
            db.executescript(_SCHEMA)
        for side in side_files(self.path):  # SQLite gives them the database's mode; an old install may differ
            restrict(side, FILE_MODE)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=10)
        try:
            with db:  # commits, or rolls back on error
                yield db
        finally:
            db.close()

    def record_answer(self, result: QAResult, *, user_id: int | None, chat_id: int | None, latency: float) -> int:
        """Store an answered question; returns its id (the one rating buttons carry)."""
        sources = json.dumps([{"citation": s.citation(), "url": s.url} for s in result.sources], ensure_ascii=False)
        with self._connect() as db:
            cur = db.execute(
                "INSERT INTO questions (created_at, user_id, chat_id, lang, question, answer, sources,"
                " backend, template, grounded, latency) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                _params(
                    time.time(),
                    user_id,
                    chat_id,
                    result.lang,
                    result.question,
                    result.answer,
                    sources,
                    result.backend,
                    result.template,
                    int(result.grounded),
                    latency,
                ),
            )
            return _inserted_id(cur)

    def record_failure(
        self, question: str, error: BaseException, *, user_id: int | None, chat_id: int | None, latency: float
    ) -> int:
        """Store a question that got no answer, with the error's type and message."""
        with self._connect() as db:
            cur = db.execute(
                "INSERT INTO questions (created_at, user_id, chat_id, question, latency, error)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                _params(time.time(), user_id, chat_id, question, latency, f"{type(error).__name__}: {error}"[:1000]),
            )
            return _inserted_id(cur)

    def rate(self, question_id: int, user_id: int, rating: int) -> RateOutcome:
        """Store (or change) the asker's rating of an answer, +1 or -1.

        "gone" when there is no such answer (never asked, failed, or deleted by retention), "not_asker" when
        `user_id` did not ask it: only the asker rates, so nobody can rate answers given to someone else.
        """
        if rating not in (-1, 1):
            raise ValueError(f"rating must be +1 or -1, not {rating}")
        with self._connect() as db:
            row = db.execute("SELECT user_id FROM questions WHERE id = ? AND error IS NULL", (question_id,)).fetchone()
            if row is None:
                return "gone"
            if row[0] != user_id:
                return "not_asker"
            db.execute(
                "INSERT INTO ratings (question_id, user_id, rating, created_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (question_id, user_id) DO UPDATE SET rating = excluded.rating,"
                " created_at = excluded.created_at",
                (question_id, user_id, rating, time.time()),
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
    ) -> None:
        """Keep an answered question as an exchange of its chat's conversation (before the answer is sent, so
        that a quick next message already continues it)."""
        with self._connect() as db:
            db.execute(
                "INSERT OR REPLACE INTO exchanges (question_id, chat_id, parent_id, search_question, sources,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?)",
                _params(
                    question_id,
                    chat_id,
                    parent_id,
                    result.search_question or result.question,
                    sources_json(result.sources),
                    time.time(),
                ),
            )

    def record_answer_messages(self, question_id: int, *, chat_id: int, message_ids: list[int]) -> None:
        """The bot's messages that carry an exchange's answer: a reply to any of them continues from it."""
        with self._connect() as db:
            db.executemany(
                "INSERT OR REPLACE INTO answer_messages (chat_id, message_id, question_id) VALUES (?, ?, ?)",
                [(chat_id, m, question_id) for m in message_ids],
            )

    def new_conversation(self, chat_id: int, *, now: float | None = None) -> None:
        """/new: the chat's next message begins a conversation (a reply to an earlier answer still continues it)."""
        with self._connect() as db:
            db.execute(
                "INSERT INTO conversation_resets (chat_id, reset_at) VALUES (?, ?) ON CONFLICT (chat_id)"
                " DO UPDATE SET reset_at = excluded.reset_at",
                (chat_id, time.time() if now is None else now),
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
        with self._connect() as db:
            return read_conversation(db, chat_id, turns=turns, idle_seconds=idle_seconds, reply_to=reply_to, now=now)

    # --- user state (PTB user_data) -------------------------------------------------------------
    def user_states(self) -> dict[int, dict[str, Any]]:
        """Every stored user state; a row that is not a JSON object is skipped with a warning."""
        states: dict[int, dict[str, Any]] = {}
        damaged: list[int] = []
        try:
            with self._connect() as db:
                rows = db.execute("SELECT user_id, data FROM user_state").fetchall()
        except sqlite3.DatabaseError as err:
            logger.warning("user states in %s cannot be read (%s): every user starts fresh", self.path, err)
            return states
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
                self.path,
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
        with self._connect() as db:
            db.execute(
                "INSERT INTO user_state (user_id, data, updated_at) VALUES (?, ?, ?) ON CONFLICT (user_id)"
                " DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at",
                _params(user_id, json.dumps(kept, ensure_ascii=False), time.time()),
            )

    def drop_user_state(self, user_id: int) -> None:
        with self._connect() as db:
            db.execute("DELETE FROM user_state WHERE user_id = ?", (user_id,))

    # --- retention --------------------------------------------------------------------------------
    def purge(self, days: int, *, now: float | None = None) -> Purged:
        """Delete questions (with their ratings) asked, and user states untouched, more than `days` days ago.

        `days` 0 keeps everything.
        """
        if days <= 0:
            return Purged(0, 0, ())
        cutoff = (time.time() if now is None else now) - days * DAY
        with self._connect() as db:
            old = "SELECT id FROM questions WHERE created_at < ?"
            db.execute(f"DELETE FROM answer_messages WHERE question_id IN ({old})", (cutoff,))
            exchanges = db.execute(f"DELETE FROM exchanges WHERE question_id IN ({old})", (cutoff,)).rowcount
            db.execute("DELETE FROM conversation_resets WHERE reset_at < ?", (cutoff,))
            ratings = db.execute(
                "DELETE FROM ratings WHERE question_id IN (SELECT id FROM questions WHERE created_at < ?)",
                (cutoff,),
            ).rowcount
            questions = db.execute("DELETE FROM questions WHERE created_at < ?", (cutoff,)).rowcount
            user_ids = tuple(
                row[0] for row in db.execute("DELETE FROM user_state WHERE updated_at < ? RETURNING user_id", (cutoff,))
            )
        logger.info(
            "retention (%d days): deleted %d questions (%d of them in conversations), %d ratings, %d user states",
            days,
            questions,
            exchanges,
            ratings,
            len(user_ids),
        )
        return Purged(questions, ratings, user_ids, exchanges)

    def stats(self) -> FeedbackStats:
        """Counts of questions and ratings, and answer latency percentiles."""
        with self._connect() as db:
            return read_stats(db)
