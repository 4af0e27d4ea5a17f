"""The service's Prometheus metrics (prometheus-client, default registry) and the per-answer timing log line.

Low in the layering on purpose: retrieval and the answer stage record into it (the time of each search, a fallback
and its cause, a backend's failed request) without importing anything above them; the faces record a question's
outcome (`answered`, `failed`) and serve the registry (bot/app.py, METRICS_PORT). The stage histograms are fed from
the timings every answer already carries (`QAResult.timings`, "<stage>_ms"), so nothing is timed twice.

The answer cache's counters and the LLM budget's gauge (`kzlaw_answer_cache_*`, `kzlaw_llm_budget_remaining`) are
defined by their own modules on the same default registry and served with these.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from prometheus_client import Counter, Histogram

logger = logging.getLogger(__name__)

# Seconds: an analysis takes milliseconds, a search tens of them, a model's answer up to LLM_TIMEOUT (60 s).
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)

QUESTIONS = Counter("kzlaw_questions_total", "Questions asked of the chain (invoke_qa), answered or not.")
ANSWERS = Counter(
    "kzlaw_answers_total",
    "Answers given, by the backend that wrote them (groq, ollama, extractive), the template (universal, criminal, "
    "range) and the status (answered, or no_such_article / unknown_code / off_topic).",
    ["backend", "template", "status"],
)
FALLBACKS = Counter(
    "kzlaw_fallbacks_total",
    "Answers given as quotes of the norms (extractive) instead of a model's text, by cause: llm_error (every chat "
    "backend failed), grounding_failed (the model's text failed the grounding check), no_model (no backend "
    "configured), no_sources (nothing retrieved to quote).",
    ["cause"],
)
LLM_ERRORS = Counter(
    "kzlaw_llm_errors_total",
    "Failed requests to a chat backend, by backend and error type (e.g. groq, RateLimitError); the next backend "
    "or the quotes answer instead.",
    ["backend", "error"],
)
ERRORS = Counter(
    "kzlaw_errors_total",
    "Errors, by where (qa: a question the chain could not answer; update: a Telegram update whose handler failed; "
    "chain_load: the bot's chain failed to load) and kind (user: a message the user is shown, e.g. the index is "
    "not built; internal: anything else, logged with its traceback).",
    ["where", "kind"],
)
STAGE_SECONDS = Histogram(
    "kzlaw_stage_seconds",
    "Time of each stage of an answer: followup, analyze, search (the first stage and the learned ranker), "
    "search_bm25 / search_dense / search_latent (each search), rerank, retrieval, context, llm, grounding, "
    "extractive, answer, total.",
    ["stage"],
    buckets=BUCKETS,
)

_timings: ContextVar[dict[str, float] | None] = ContextVar("kzlaw_timings", default=None)


@contextmanager
def collecting(timings: dict[str, float]) -> Iterator[dict[str, float]]:
    """Within the block, `timed` blocks (in this thread and the contexts it copies) add their time to `timings`."""
    token = _timings.set(timings)
    try:
        yield timings
    finally:
        _timings.reset(token)


@contextmanager
def timed(name: str) -> Iterator[None]:
    """Add the block's milliseconds to `<name>_ms` of the timings being collected (summed when it runs several
    times for one question); nothing is recorded outside `collecting`."""
    timings = _timings.get()
    start = time.perf_counter()
    try:
        yield
    finally:
        if timings is not None:
            key = f"{name}_ms"
            timings[key] = timings.get(key, 0.0) + (time.perf_counter() - start) * 1000


def asked() -> None:
    """A question reaches the chain."""
    QUESTIONS.inc()


def fallback(cause: str) -> None:
    """An answer falls back to the quotes, and why."""
    FALLBACKS.labels(cause=cause).inc()


def llm_error(backend: str, error: BaseException) -> None:
    """A chat backend's request failed."""
    LLM_ERRORS.labels(backend=backend, error=type(error).__name__).inc()


def error(where: str, *, user: bool) -> None:
    """An error at `where`; `user`: its message is shown to the user (a UserError), not an internal failure."""
    ERRORS.labels(where=where, kind="user" if user else "internal").inc()


def answered(timings: Mapping[str, float], *, backend: str, template: str, status: str) -> None:
    """One answer: counted by backend, template and status, each stage's time ("<stage>_ms") observed."""
    ANSWERS.labels(backend=backend, template=template, status=status).inc()
    for key, ms in timings.items():
        if key.endswith("_ms"):
            STAGE_SECONDS.labels(stage=key.removesuffix("_ms")).observe(ms / 1000)


def answer_line(question_id: int | str | None, timings: Mapping[str, float], **fields: object) -> str:
    """The structured log line of one answer: its question id, `fields` and each stage's milliseconds, as JSON."""
    stages = {key.removesuffix("_ms"): round(ms, 1) for key, ms in timings.items() if key.endswith("_ms")}
    return json.dumps({"question_id": question_id, **fields, "stages_ms": stages}, ensure_ascii=False)
