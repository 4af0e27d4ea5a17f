"""What /stats shows: how many questions were asked, answered and failed, by how many users, the askers' 👍/👎,
and the answer latency percentiles, counted in the feedback database (`feedback.FeedbackStore.stats`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from sqlalchemy import Connection, case, func, select

from bot.schema import questions, ratings

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


def read_stats(conn: Connection) -> FeedbackStats:
    """Counts of questions and ratings, and answer latency percentiles."""
    asked, failed, users = conn.execute(
        select(func.count(), func.count(questions.c.error), func.count(questions.c.user_id.distinct()))
    ).one()
    up, down = conn.execute(
        select(
            func.coalesce(func.sum(case((ratings.c.rating == 1, 1), else_=0)), 0),
            func.coalesce(func.sum(case((ratings.c.rating == -1, 1), else_=0)), 0),
        )
    ).one()
    latencies = list(
        conn.execute(
            select(questions.c.latency).where(questions.c.error.is_(None), questions.c.latency.is_not(None))
        ).scalars()
    )
    return FeedbackStats(
        questions=asked,
        answered=asked - failed,
        failed=failed,
        users=users,
        up=int(up),
        down=int(down),
        latency_p50=percentile(latencies, 0.50),
        latency_p95=percentile(latencies, 0.95),
    )
