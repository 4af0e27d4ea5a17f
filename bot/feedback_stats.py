"""What /stats shows: how many questions were asked, answered and failed, by how many users, the askers' 👍/👎,
and the answer latency percentiles, counted in the feedback database (`feedback.FeedbackStore.stats`).
"""

from __future__ import annotations

import logging
import math
import sqlite3
from dataclasses import dataclass

logger = logging.getLogger(__name__)


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


def read_stats(db: sqlite3.Connection) -> FeedbackStats:
    """Counts of questions and ratings, and answer latency percentiles."""
    questions, failed, users = db.execute(
        "SELECT COUNT(*), COUNT(error), COUNT(DISTINCT user_id) FROM questions"
    ).fetchone()
    up, down = db.execute("SELECT COALESCE(SUM(rating = 1), 0), COALESCE(SUM(rating = -1), 0) FROM ratings").fetchone()
    latencies = [
        row[0] for row in db.execute("SELECT latency FROM questions WHERE error IS NULL AND latency IS NOT NULL")
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
