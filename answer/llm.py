"""The chat model: Groq and/or Ollama in the configured order, composed with `with_fallbacks`; each backend with
its LLM budget (answer/budget.py) checked before a request is sent."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import httpx
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, convert_to_messages
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableGenerator, RunnableLambda
from sqlalchemy.exc import SQLAlchemyError

from answer.budget import LLMBudget, windows
from config import Settings
from corpus import metrics

logger = logging.getLogger(__name__)

# Each backend stamps its name here, so the caller knows who answered after fallbacks.
BACKEND_KEY = "backend"


def _groq(settings: Settings, budget: LLMBudget | None = None) -> BaseChatModel | None:
    if settings.groq_api_key is None:
        logger.debug("groq left out: GROQ_API_KEY is not set")
        return None
    from langchain_groq import ChatGroq

    return ChatGroq(
        model=settings.groq_model,
        api_key=settings.groq_api_key,
        base_url=settings.groq_base_url,
        temperature=0,
        max_tokens=settings.llm_max_tokens,
        timeout=settings.llm_timeout,
        # The free tier answers 429 with retry-after often; the next backend is better than waiting it out.
        max_retries=0,
        # Every response's x-ratelimit-* headers (and a 429's retry-after) keep the shared budget current.
        http_client=httpx.Client(event_hooks={"response": [budget.observe]}) if budget else None,
    )


def _ollama(settings: Settings, budget: LLMBudget | None = None) -> BaseChatModel | None:
    if not settings.ollama_enabled:
        logger.debug("ollama left out: OLLAMA_ENABLED is not set")
        return None
    from langchain_ollama import ChatOllama

    return ChatOllama(
        model=settings.ollama_model,
        base_url=settings.ollama_base_url,
        temperature=0,
        # Ollama's default context is small and silently truncates 8 sources of ~1800 characters.
        num_ctx=settings.ollama_num_ctx,
        num_predict=settings.llm_max_tokens,
        client_kwargs={"timeout": settings.llm_timeout},
    )


_BUILDERS = {"groq": _groq, "ollama": _ollama}


class _CountFailures(BaseCallbackHandler):
    """Counts the backend's failed requests (kzlaw_llm_errors_total), which `with_fallbacks` otherwise swallows."""

    def __init__(self, backend: str) -> None:
        self.backend = backend

    def on_llm_error(self, error: BaseException, **kwargs: object) -> None:
        metrics.llm_error(self.backend, error)


def _prompt_chars(value: Any) -> int:
    """Characters of what a chat model is given (a prompt value, messages or a string)."""
    messages = value.to_messages() if isinstance(value, PromptValue) else convert_to_messages(value)
    return sum(len(m.text) for m in messages)


def _stamped(model: BaseChatModel, name: str, budget: LLMBudget | None = None) -> Runnable:
    """The model, whose reply carries `response_metadata["backend"] = name`; `.stream()` still streams. With a
    `budget`, a request it cannot cover raises `BudgetSpent` before anything is sent, and the reply's usage is
    counted."""

    def stamp(message: BaseMessage) -> BaseMessage:
        return message.model_copy(update={"response_metadata": {**message.response_metadata, BACKEND_KEY: name}})

    def stamp_first(chunks: Iterator[BaseMessage]) -> Iterator[BaseMessage]:
        # A RunnableLambda would gather the whole reply before stamping it: chunks pass through one by one.
        # Only the first is stamped, as chunks add up their metadata's strings ("groq" + "groq").
        used: int | None = None
        for i, chunk in enumerate(chunks):
            if usage := getattr(chunk, "usage_metadata", None):
                used = (used or 0) + usage.get("total_tokens", 0)
            yield stamp(chunk) if i == 0 else chunk
        if budget is not None:
            _guarded(budget.settle, used)

    def reserve(value: Any) -> Any:
        if budget is not None:
            _guarded(budget.reserve, _prompt_chars(value))
        return value

    guard = RunnableLambda(reserve, name=f"budget_{name}")
    counted = model.with_config(callbacks=[_CountFailures(name)])
    return (guard | counted | RunnableGenerator(stamp_first, name=f"stamp_{name}")).with_config(run_name=name)


def _guarded(step: Any, *args: Any) -> None:
    """A budget step; the database being away never stops an answer (BudgetSpent does: it is the budget's say)."""
    try:
        step(*args)
    except SQLAlchemyError as err:
        logger.warning("LLM budget unavailable, asking without it: %s: %s", type(err).__name__, err)


def build_chat_model(settings: Settings) -> Runnable | None:
    """Configured backends in `settings.llm_backends` order, each falling back to the next; None if none."""
    built = []
    for name in dict.fromkeys(settings.llm_backends):
        budget = _budget(settings, name)
        if (model := _BUILDERS[name](settings, budget)) is not None:
            built.append((name, model, budget))
    if not built:
        return None
    logger.info("chat backends: %s", ", ".join(name for name, _, _ in built))
    first, *rest = [_stamped(model, name, budget) for name, model, budget in built]
    return first.with_fallbacks(rest) if rest else first


def _budget(settings: Settings, name: str) -> LLMBudget | None:
    """The backend's shared budget when any of its limits is set (and its database answers)."""
    if not windows(settings, name) or (name == "groq" and settings.groq_api_key is None):
        return None
    if name == "ollama" and not settings.ollama_enabled:
        return None
    try:
        return LLMBudget(settings, name)
    except (SQLAlchemyError, OSError) as err:
        logger.warning("LLM budget of %s unavailable, asking without it: %s: %s", name, type(err).__name__, err)
        return None


def backend_of(message: BaseMessage) -> str:
    """Which backend produced a reply: our stamp, else the provider LangChain recorded, else "llm"."""
    meta = message.response_metadata
    return str(meta.get(BACKEND_KEY) or meta.get("model_provider") or "llm")
