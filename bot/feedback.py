"""SQLite store of asked questions (answer, latency, error) and users' 👍/👎 ratings; admin statistics."""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from answer.records import QAResult

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
"""


@dataclass(frozen=True)
class FeedbackStats:
    """What /stats shows."""

    questions: int
    answered: int
    failed: int
    users: int
    up: int
    down: int
    latency_p50: float | None
    latency_p95: float | None


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..1) of `values`, None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


class FeedbackStore:
    """Questions and ratings in one SQLite file; each call opens its own connection (any thread may call)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")  # readers (/stats) do not block the writers
            db.executescript(_SCHEMA)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=10)
        try:
            with db:  # commits, or rolls back on error
                yield db
        finally:
            db.close()

    def record_answer(
        self, result: QAResult, *, user_id: int | None, chat_id: int | None, latency: float
    ) -> int:
        """Store an answered question; returns its id (the one rating buttons carry)."""
        sources = json.dumps(
            [{"citation": s.citation(), "url": s.url} for s in result.sources], ensure_ascii=False
        )
        with self._connect() as db:
            cur = db.execute(
                "INSERT INTO questions (created_at, user_id, chat_id, lang, question, answer, sources,"
                " backend, template, grounded, latency) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
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
            return int(cur.lastrowid)

    def record_failure(
        self, question: str, error: BaseException, *, user_id: int | None, chat_id: int | None, latency: float
    ) -> int:
        """Store a question that got no answer, with the error's type and message."""
        with self._connect() as db:
            cur = db.execute(
                "INSERT INTO questions (created_at, user_id, chat_id, question, latency, error)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (time.time(), user_id, chat_id, question, latency, f"{type(error).__name__}: {error}"[:1000]),
            )
            return int(cur.lastrowid)

    def rate(self, question_id: int, user_id: int, rating: int) -> bool:
        """Store (or change) a user's rating of an answer: +1 or -1; False when there is no such answer."""
        if rating not in (-1, 1):
            raise ValueError(f"rating must be +1 or -1, not {rating}")
        with self._connect() as db:
            if not db.execute(
                "SELECT 1 FROM questions WHERE id = ? AND error IS NULL", (question_id,)
            ).fetchone():
                return False
            db.execute(
                "INSERT INTO ratings (question_id, user_id, rating, created_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (question_id, user_id) DO UPDATE SET rating = excluded.rating,"
                " created_at = excluded.created_at",
                (question_id, user_id, rating, time.time()),
            )
            return True

    def stats(self) -> FeedbackStats:
        """Counts of questions and ratings, and answer latency percentiles."""
        with self._connect() as db:
            questions, failed, users = db.execute(
                "SELECT COUNT(*), COUNT(error), COUNT(DISTINCT user_id) FROM questions"
            ).fetchone()
            up, down = db.execute(
                "SELECT COALESCE(SUM(rating = 1), 0), COALESCE(SUM(rating = -1), 0) FROM ratings"
            ).fetchone()
            latencies = [
                row[0]
                for row in db.execute(
                    "SELECT latency FROM questions WHERE error IS NULL AND latency IS NOT NULL"
                )
            ]
        return FeedbackStats(
            questions=questions,
            answered=questions - failed,
            failed=failed,
            users=users,
            up=up,
            down=down,
            latency_p50=percentile(latencies, 0.50),
            latency_p95=percentile(latencies, 0.95),
        )
