"""The chat model: Groq and/or Ollama in the configured order, composed with `with_fallbacks`."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableGenerator

from config import Settings
from corpus import metrics

logger = logging.getLogger(__name__)

# Each backend stamps its name here, so the caller knows who answered after fallbacks.
BACKEND_KEY = "backend"


def _groq(settings: Settings) -> BaseChatModel | None:
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
    )


def _ollama(settings: Settings) -> BaseChatModel | None:
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


def _stamped(model: BaseChatModel, name: str) -> Runnable:
    """The model, whose reply carries `response_metadata["backend"] = name`; `.stream()` still streams."""

    def stamp(message: BaseMessage) -> BaseMessage:
        return message.model_copy(update={"response_metadata": {**message.response_metadata, BACKEND_KEY: name}})

    def stamp_first(chunks: Iterator[BaseMessage]) -> Iterator[BaseMessage]:
        # A RunnableLambda would gather the whole reply before stamping it: chunks pass through one by one.
        # Only the first is stamped, as chunks add up their metadata's strings ("groq" + "groq").
        for i, chunk in enumerate(chunks):
            yield stamp(chunk) if i == 0 else chunk

    counted = model.with_config(callbacks=[_CountFailures(name)])
    return (counted | RunnableGenerator(stamp_first, name=f"stamp_{name}")).with_config(run_name=name)


def build_chat_model(settings: Settings) -> Runnable | None:
    """Configured backends in `settings.llm_backends` order, each falling back to the next; None if none."""
    built = [
        (name, model)
        for name in dict.fromkeys(settings.llm_backends)
        if (model := _BUILDERS[name](settings)) is not None
    ]
    if not built:
        return None
    logger.info("chat backends: %s", ", ".join(name for name, _ in built))
    first, *rest = [_stamped(model, name) for name, model in built]
    return first.with_fallbacks(rest) if rest else first


def backend_of(message: BaseMessage) -> str:
    """Which backend produced a reply: our stamp, else the provider LangChain recorded, else "llm"."""
    meta = message.response_metadata
    return str(meta.get(BACKEND_KEY) or meta.get("model_provider") or "llm")
