"""The answer stage: template, context, model, grounding; the extractive answer when any of them fails."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import Runnable, RunnableLambda, RunnableParallel

from answer.budget import BudgetSpent
from answer.context import format_context, to_sources
from answer.extractive import abstention, extractive_answer
from answer.grounding import check_grounding, strip_disclaimer
from answer.llm import backend_of, build_chat_model
from answer.records import Answer, Source
from answer.templates import Phrases, TemplateName, load_phrases, load_template, select_template
from config import Settings
from corpus import metrics
from corpus.records import Lang

if TYPE_CHECKING:
    from retrieval.pipeline import Verdict

logger = logging.getLogger(__name__)

EXTRACTIVE = "extractive"


def _with_disclaimer(text: str, phrases: Phrases) -> str:
    """The model's text ending with the disclaimer, once, whether the model wrote it or not."""
    return f"{strip_disclaimer(text, phrases.disclaimer).strip()}\n\n{phrases.disclaimer}"


def answer_chain(settings: Settings, template: TemplateName, lang: Lang, chat_model: Runnable) -> Runnable:
    """prompt | model | {text, backend}: the model's reply as text, and the backend that gave it."""
    prompt = load_template(settings, template, lang)
    return prompt | chat_model | RunnableParallel(text=StrOutputParser(), backend=RunnableLambda(backend_of))


def streamed(chain: Runnable, inputs: dict, on_token: Callable[[str], None]) -> dict[str, str]:
    """`chain.invoke(inputs)` through `.stream()`, handing each piece of text to `on_token` as it arrives."""
    pieces: list[str] = []
    backend = "llm"
    for chunk in chain.stream(inputs):
        if piece := chunk.get("text"):
            pieces.append(piece)
            on_token(piece)
        backend = chunk.get("backend", backend)
    return {"text": "".join(pieces), "backend": backend}


def answer_question(
    question: str,
    docs: Sequence[Document],
    *,
    lang: Lang,
    is_criminal: bool,
    is_range: bool,
    settings: Settings,
    chat_model: Runnable | None = None,
    verdict: Verdict | None = None,
    on_token: Callable[[str], None] | None = None,
    annotate: Callable[[Sequence[Source]], Sequence[Source]] | None = None,
) -> Answer:
    """Answer from the retrieved documents; the model when one answers and passes grounding, else the quotes.

    `chat_model` defaults to `build_chat_model(settings)`; build it once and pass it in to reuse its clients.
    A `verdict` other than "answered" (retrieval found nothing that answers) gets its short reply, no model.
    `on_token` receives the model's text piece by piece as it is generated (the same fallbacks); the grounding
    check still judges the whole text, and a streamed answer that fails it is replaced by the quotes.
    `annotate` adds what the corpus manifest says of each source's document (its edition, a repeal of the whole
    document: `QAChain`) before the model or the quotes read them, so that both say it.
    """
    timings: dict[str, float] = {}
    start = t = time.perf_counter()
    if verdict is not None and verdict.status != "answered":
        text = abstention(verdict, lang=lang, settings=settings)
        timings["answer_ms"] = (time.perf_counter() - start) * 1000
        template = select_template(is_range, is_criminal)
        return Answer(text, (), template, EXTRACTIVE, False, (f"verdict: {verdict.status}",), timings, verdict.status)

    def lap(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        timings[f"{name}_ms"] = (now - t) * 1000
        t = now

    template = select_template(is_range, is_criminal)
    phrases = load_phrases(settings, lang)

    def annotated(found: Sequence[Source]) -> Sequence[Source]:
        return annotate(found) if annotate is not None else found

    # The model reads each article's parts that match the question; the quotes choose from the whole text.
    sources = annotated(to_sources(docs, settings, question=question, lang=lang))
    context = format_context(sources, settings)
    model = chat_model if chat_model is not None else build_chat_model(settings)
    lap("context")

    notes: list[str] = []
    user_note: str | None = None
    if not sources:
        notes.append("no sources")
        metrics.fallback("no_sources")
    elif model is None:
        notes.append("no chat model configured")
        metrics.fallback("no_model")
    else:
        try:
            chain = answer_chain(settings, template, lang, model)
            inputs = {"question": question, "context": context}
            reply = chain.invoke(inputs) if on_token is None else streamed(chain, inputs, on_token)
        except Exception as err:  # every backend failed: the quotes still answer
            logger.warning("chat model failed, answering with quotes: %s: %s", type(err).__name__, err)
            logger.debug("chat model failure", exc_info=True)
            notes.append(f"model failed: {type(err).__name__}: {err}")
            # with_fallbacks raises the first backend's error: a spent budget is why no model answered
            user_note = phrases.budget_spent if isinstance(err, BudgetSpent) else phrases.model_failed
            metrics.fallback("budget_spent" if isinstance(err, BudgetSpent) else "llm_error")
            lap("llm")
        else:
            lap("llm")
            grounding = check_grounding(
                reply["text"],
                sources,
                lang=lang,
                is_criminal=is_criminal,
                settings=settings,
                question=question,
            )
            lap("grounding")
            if grounding.ok:
                timings["answer_ms"] = (time.perf_counter() - start) * 1000
                return Answer(
                    text=_with_disclaimer(grounding.text, phrases),
                    sources=tuple(s for s in sources if s.source_id in grounding.cited),
                    template=template,
                    backend=reply["backend"],
                    grounded=True,
                    notes=grounding.notes,
                    timings=timings,
                )
            logger.info("answer of %s failed grounding: %s", reply["backend"], "; ".join(grounding.notes))
            notes += [f"{reply['backend']} answer failed grounding", *grounding.notes]
            user_note = phrases.grounding_failed
            metrics.fallback("grounding_failed")

    extract = extractive_answer(
        question,
        annotated(to_sources(docs, settings, lang=lang)),
        lang=lang,
        is_criminal=is_criminal,
        is_range=is_range,
        settings=settings,
        note=user_note,
    )
    lap("extractive")
    timings["answer_ms"] = (time.perf_counter() - start) * 1000
    # Quotes of the sources are grounded by construction; with no source there is nothing to rest on.
    return Answer(extract.text, extract.sources, template, EXTRACTIVE, bool(sources), tuple(notes), timings)
