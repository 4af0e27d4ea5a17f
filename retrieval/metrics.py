"""Article-level metrics of a ranking against gold (binary relevance): hit@k, recall@k, reciprocal rank, nDCG@k;
their means over a set of questions (`Metrics`) and the report of a question file (`EvalReport`, `make_report`)."""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from retrieval.gold import Key

logger = logging.getLogger(__name__)

Ranked = list[tuple[str, str, float]]  # (doc_id, article, score), best first


def hit_at(ranked: Sequence[Key], relevant: set[Key], k: int) -> float:
    """1.0 when any relevant article is in the top k."""
    return 1.0 if any(key in relevant for key in ranked[:k]) else 0.0


def recall_at(ranked: Sequence[Key], relevant: set[Key], k: int) -> float:
    """Share of the relevant articles found in the top k."""
    return len(relevant.intersection(ranked[:k])) / len(relevant) if relevant else 0.0


def reciprocal_rank(ranked: Sequence[Key], relevant: set[Key]) -> float:
    """1 / rank of the first relevant article (0 when none is ranked)."""
    return next((1.0 / i for i, key in enumerate(ranked, start=1) if key in relevant), 0.0)


def ndcg_at(ranked: Sequence[Key], relevant: set[Key], k: int) -> float:
    """Binary-relevance nDCG@k."""
    dcg = sum(1.0 / math.log2(i + 1) for i, key in enumerate(ranked[:k], start=1) if key in relevant)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(relevant), k) + 1))
    return dcg / ideal if ideal else 0.0


@dataclass(frozen=True)
class QuestionResult:
    """What the pipeline ranked for one gold question."""

    id: str
    lang: str
    explicit: bool  # the question names articles itself («ст. 188 УК», «статьи 120-135»)
    relevant: frozenset[Key]
    ranked: Ranked
    latency_ms: float

    @property
    def keys(self) -> list[Key]:
        return [(d, a) for d, a, _ in self.ranked]


@dataclass(frozen=True)
class Metrics:
    """Mean metrics over a set of questions."""

    n: int
    hit1: float
    hit5: float
    hit10: float
    recall5: float
    recall10: float
    recall20: float
    mrr: float
    ndcg10: float

    @classmethod
    def of(cls, results: Sequence[QuestionResult]) -> Metrics:
        def mean(f: Callable[[list[Key], set[Key]], float]) -> float:
            return statistics.fmean(f(r.keys, set(r.relevant)) for r in results) if results else 0.0

        return cls(
            n=len(results),
            hit1=mean(lambda r, g: hit_at(r, g, 1)),
            hit5=mean(lambda r, g: hit_at(r, g, 5)),
            hit10=mean(lambda r, g: hit_at(r, g, 10)),
            recall5=mean(lambda r, g: recall_at(r, g, 5)),
            recall10=mean(lambda r, g: recall_at(r, g, 10)),
            recall20=mean(lambda r, g: recall_at(r, g, 20)),
            mrr=mean(reciprocal_rank),
            ndcg10=mean(lambda r, g: ndcg_at(r, g, 10)),
        )


@dataclass(frozen=True)
class EvalReport:
    """Metrics of one question file: overall, per subset (lang, explicit references), and latency."""

    name: str
    k: int
    overall: Metrics
    subsets: dict[str, Metrics]
    latency_p50_ms: float
    latency_p95_ms: float
    results: list[QuestionResult] = field(repr=False)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def make_report(name: str, k: int, results: list[QuestionResult]) -> EvalReport:
    """Aggregate per-question results into a report."""
    subsets: dict[str, Metrics] = {}
    for lang in sorted({r.lang for r in results}):
        subsets[f"lang={lang}"] = Metrics.of([r for r in results if r.lang == lang])
    explicit = [r for r in results if r.explicit]
    if explicit:
        subsets["explicit refs"] = Metrics.of(explicit)
        subsets["no explicit refs"] = Metrics.of([r for r in results if not r.explicit])
    latencies = [r.latency_ms for r in results]
    return EvalReport(
        name=name,
        k=k,
        overall=Metrics.of(results),
        subsets=subsets,
        latency_p50_ms=percentile(latencies, 50),
        latency_p95_ms=percentile(latencies, 95),
        results=results,
    )
