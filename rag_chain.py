"""The chain: question → retrieval (augment, hybrid search, law-aware, rerank) → answer (template, LLM or extractive,
grounding check) → `QAResult`. `invoke_qa()` is the one entry point every face uses. The loaded chain is held per
settings and swaps in a newly published build without a restart (`get_chain`).

`python -m rag_chain ask "вопрос"`, `… chat`, `… eval --questions FILE.jsonl`: the command line, cli.py, which
imports this module (never the other way round); run as a program, this module hands over to it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from pydantic import SecretStr

from answer.cache import AnswerCache
from answer.followup import FollowupCondenser, FollowupRule, Understood
from answer.generate import answer_question
from answer.llm import build_chat_model
from answer.records import Exchange, QAResult, Source
from config import MAX_QUESTION_CHARS, Settings
from corpus import metrics
from corpus.errors import ChainUnavailable, QAError, UserError
from corpus.legal import article_ref
from corpus.records import Article, Lang
from corpus.store import load_articles, read_manifest
from corpus.text import clean_text
from index.publication import check_format, publish, published
from index.status import IndexPending
from retrieval.pipeline import Retrieval

logger = logging.getLogger(__name__)


class QAChain:
    """Retrieval and answering, loaded once; `invoke` is thread-safe."""

    def __init__(
        self, settings: Settings, retrieval: Retrieval, articles: list[Article], generation: str | None = None
    ) -> None:
        """Args: generation: the published build (index/publication.py) the data was loaded from, if any."""
        self.settings = settings
        self.retrieval = retrieval
        self.generation = generation
        self.chat_model = build_chat_model(settings)
        self._articles = {(a.doc_id, a.lang, a.number): a for a in articles}
        self.editions = {e.key: e for e in read_manifest(settings.corpus_dir).documents}  # (doc_id, lang) → entry
        rule = FollowupRule(
            search=lambda q: [doc_id for doc_id, _, _ in retrieval.rank_articles(q, 5)],
            best_match=retrieval.best_match,
            max_chars=settings.followup_context_chars,
        )
        self.followup = FollowupCondenser(settings, rule, self.chat_model)
        self.cache = AnswerCache(settings) if settings.answer_cache else None
        # x: {"question": as asked, "search": what to search and answer (the question, or a follow-up read in
        # the context of the conversation), "used_history", "followup": what the conversation adds to the search}
        # {question → retrieve} | answer: retrieval is the composition of retrieval/pipeline.py.
        self.runnable = RunnablePassthrough.assign(
            retrieved=RunnableLambda(lambda x: retrieval.retrieve(x["search"], x["followup"]), name="retrieve")
        ) | RunnableLambda(self._answer, name="answer")

    @classmethod
    def load(cls, settings: Settings) -> QAChain:
        # Read first: a build published while the files load is then seen as newer, and loaded again.
        publication = published(settings)
        check_format(publication, settings.data_dir)  # a newer program's build: upgrade first
        generation = publication.generation if publication else None
        return cls(settings, Retrieval.load(settings), load_articles(settings.corpus_dir), generation)

    def invoke(
        self, question: str, history: Sequence[Exchange] = (), on_token: Callable[[str], None] | None = None
    ) -> QAResult:
        """Answer `question`; `history`, the earlier exchanges of the conversation (oldest first), lets a
        follow-up («А если сумма крупная?») be understood in their context; `on_token` receives a model's answer
        piece by piece as it is generated (the result is the checked, final answer)."""
        # Cleaned at the edge: invalid UTF-8 read as lone surrogates would crash the embedder's encoder.
        question = " ".join(clean_text(question).split())
        history = [
            dataclasses.replace(e, question=clean_text(e.question), search_question=clean_text(e.search_question))
            for e in history
        ]
        if not question:
            raise QAError("Вопрос пустой: напишите, что вас интересует. / Сұрақ бос: не білгіңіз келетінін жазыңыз.")
        if len(question) > MAX_QUESTION_CHARS:
            raise QAError(
                f"Вопрос слишком длинный ({len(question)} символов, предел {MAX_QUESTION_CHARS}): сократите его."
            )
        started = time.perf_counter()
        if self.cache and (hit := self.cache.fetch(question, history, self.generation)):
            hit.timings["total_ms"] = (time.perf_counter() - started) * 1000
            return hit
        understood = self.understand(question, history)
        followup_ms = (time.perf_counter() - started) * 1000
        result = self.runnable.invoke(
            {
                "question": question,
                "search": understood.search_question,
                "used_history": understood.used_history,
                "followup": understood.followup,
                "on_token": on_token,
            }
        )
        if history:
            result.timings["followup_ms"] = followup_ms
        result.timings["total_ms"] = (time.perf_counter() - started) * 1000
        if self.cache:
            self.cache.store(question, history, self.generation, result)
        return result

    def understand(self, question: str, history: Sequence[Exchange] = ()) -> Understood:
        """What to search for `question` after the last `settings.history_turns` exchanges of `history`."""
        turns = self.settings.history_turns
        return self.followup.invoke(question, history[-turns:] if history and turns else ())

    def _answer(self, x: dict) -> QAResult:
        retrieved = x["retrieved"]
        query = retrieved.query
        answer = answer_question(
            x["search"] if x["used_history"] else x["question"],
            retrieved.docs,
            lang=query.lang,
            is_criminal=query.is_criminal,
            is_range=query.is_range,
            settings=self.settings,
            chat_model=self.chat_model,
            verdict=retrieved.verdict,
            on_token=x.get("on_token"),
            annotate=self._with_editions,
        )
        return QAResult(
            question=x["question"],
            answer=answer.text,
            sources=answer.sources,
            template=answer.template,
            backend=answer.backend,
            lang=query.lang,
            grounded=answer.grounded,
            grounding_notes=answer.notes,
            status=answer.status,
            timings={("retrieval_ms" if k == "total_ms" else k): v for k, v in retrieved.timings.items()}
            | answer.timings,
            search_question=x["search"],
            used_history=x["used_history"],
            searches=self.retrieval.searches,
        )

    def _with_editions(self, sources: Sequence[Source]) -> tuple[Source, ...]:
        """Each source with the edition of its document (corpus manifest), which the answer tells the user, and
        its repeal when the whole document was repealed."""
        out = []
        for s in sources:
            entry = self.editions.get((s.doc_id, s.lang))
            if entry is None:
                out.append(s)
            else:
                out.append(
                    dataclasses.replace(
                        s,
                        edition_date=entry.edition_date,
                        edition_basis=entry.edition_basis,
                        repealed_by=entry.repealed_by,
                    )
                )
        return tuple(out)

    def article(self, code: str, number: str, lang: Lang = "ru") -> Article | None:
        """The article `number` of the code people call `code` («УК», «ҚК», «КоАП РК»), in `lang` when available."""
        # corpus.legal knows every name of every code, and where the Civil Code splits in two.
        ref = article_ref(clean_text(code), clean_text(number))
        if ref is None:
            return None
        for want in (lang, "ru", "kk"):
            if art := self._articles.get((ref.doc_id, want, ref.article)):
                return art
        return None


@dataclass
class _Held:
    """A loaded chain, and what is known of newer builds of its data dir."""

    chain: QAChain
    checked: float  # time.monotonic() of the last look at published.json
    loading: str | None = None  # the generation being loaded in the background
    failed: str | None = None  # a generation that could not be loaded: not tried again


@dataclass
class _Failed:
    """A chain that could not be loaded: when to try again (backoff), and the publication it was tried on."""

    message: str  # the operator's message
    detail: str  # the error's type and text: the same failure again is not reported as new
    generation: str | None
    failures: int
    retry_at: float  # time.monotonic()


RETRY_MAX_SECONDS = 300.0
_chains: dict[tuple, _Held] = {}
_failed: dict[tuple, _Failed] = {}
_lock = threading.Lock()


def _key(settings: Settings) -> tuple:
    """Settings that differ in anything, keys included, get chains of their own: `model_dump_json()` masks a
    SecretStr as «**********», so the keys' values are hashed in (never kept in the clear)."""
    secrets = {name: value.get_secret_value() for name, value in settings if isinstance(value, SecretStr)}
    digest = hashlib.sha256(json.dumps(secrets, sort_keys=True).encode("utf-8")).hexdigest()
    return (str(settings.data_dir.resolve()), settings.model_dump_json(), digest)


def get_chain(settings: Settings) -> QAChain:
    """The loaded chain for these settings (built on first use, then shared).

    At most once every `settings.reload_check_seconds` it looks whether a newer build was published in the data
    dir (index/publication.py); if so that build is loaded in a background thread and swapped in when ready. Until
    then, and for questions already in flight, the loaded chain answers; a build that fails to load is logged
    and skipped until the next publication.

    A first load that fails raises ChainUnavailable (the operator's message, `new` the first time it is seen) and
    is tried again only after `settings.load_retry_seconds`, doubling each time (at most RETRY_MAX_SECONDS), or at
    once when a new build is published: questions meanwhile get ChainUnavailable at once, without a load each."""
    key = _key(settings)
    with _lock:
        held = _chains.get(key)
        if held is None:
            return _first_load(key, settings)
        if time.monotonic() - held.checked >= settings.reload_check_seconds:
            _look_for_newer(held, settings)
        return held.chain


def _first_load(key: tuple, settings: Settings) -> QAChain:
    """Load the chain for `key`, or raise the last failure while its backoff lasts (the caller holds _lock)."""
    failed = _failed.get(key)
    publication = published(settings)
    generation = publication.generation if publication else None
    if failed is not None and time.monotonic() < failed.retry_at and generation == failed.generation:
        retry_in = failed.retry_at - time.monotonic()
        raise ChainUnavailable(failed.message, detail=failed.detail, retry_in=retry_in, new=False)
    started = time.perf_counter()
    logger.info("loading the chain from %s%s", settings.data_dir, f" (attempt {failed.failures + 1})" if failed else "")
    try:
        chain = QAChain.load(settings)
    except Exception as err:
        failures = failed.failures + 1 if failed else 1
        wait = min(settings.load_retry_seconds * 2 ** (failures - 1), RETRY_MAX_SECONDS)
        message = str(err) if isinstance(err, UserError) else f"the chain could not be loaded ({type(err).__name__})"
        detail = f"{type(err).__name__}: {err}"
        _failed[key] = _Failed(message, detail, generation, failures, time.monotonic() + wait)
        new = failed is None or failed.detail != detail
        raise ChainUnavailable(message, detail=detail, retry_in=wait, new=new) from err
    _failed.pop(key, None)
    _chains[key] = _Held(chain, time.monotonic())
    logger.info("chain loaded in %.1f s", time.perf_counter() - started)
    if settings.warm_up:  # answering at once; what the first questions would load is loaded beside them
        threading.Thread(target=_warm_up, args=(chain,), name="chain-warm-up", daemon=True).start()
    return chain


def _warm_up(chain: QAChain) -> None:
    """A loaded chain's warm-up (Retrieval.warm_up), logged; a failure is the questions' to meet and report."""
    try:
        logger.info("chain warmed up in %.1f s", chain.retrieval.warm_up())
    except Exception:
        logger.exception("the chain's warm-up failed")


def _look_for_newer(held: _Held, settings: Settings) -> None:
    """Start loading the published build if it is newer than the held chain's (the caller holds _lock)."""
    held.checked = time.monotonic()
    publication = published(settings)
    if publication is None or publication.generation in (held.chain.generation, held.loading, held.failed):
        return
    held.loading = publication.generation
    threading.Thread(
        target=_swap_in,
        args=(held, settings, publication.generation, publication.by),
        name="chain-reload",
        daemon=True,
    ).start()


def _swap_in(held: _Held, settings: Settings, generation: str, by: str) -> None:
    """Load a newly published build beside the held chain and replace it (questions in flight keep the old)."""
    started = time.perf_counter()
    try:
        chain = QAChain.load(settings)
        warming = chain.retrieval.warm_up()  # swapped in warm, and only if it answers
    except Exception as err:  # damaged or half-written: keep answering from what is loaded
        with _lock:
            held.loading, held.failed = None, generation
        logger.warning(
            "the build published by %s (%s) could not be loaded, answering from the loaded one until the next "
            "publication: %s: %s",
            by,
            generation,
            type(err).__name__,
            err,
        )
        return
    with _lock:
        held.chain, held.loading = chain, None
    logger.info(
        "the build published by %s (%s) loaded and warmed up in %.1f s (%.1f s) and swapped in (searches: %s)",
        by,
        generation,
        time.perf_counter() - started,
        warming,
        ", ".join(chain.retrieval.searches),
    )
    if chain.retrieval.pending is not None:  # e.g. a new corpus whose index is not built yet: say it, once
        logger.warning("%s", chain.retrieval.pending.message())


def index_pending(settings: Settings) -> IndexPending | None:
    """What the loaded chain's index lacks (vectors, latent terms) and how to build it; None when complete, or
    while a newer build is being loaded (which may complete it)."""
    chain = get_chain(settings)
    with _lock:
        held = _chains.get(_key(settings))
        if held is not None and held.loading is not None:
            return None
    return chain.retrieval.pending


def build_missing_index(settings: Settings) -> bool:
    """Build the search index the loaded chain lacks and publish it, so that every chain over the data dir (in
    this process at once, in others at their next check) swaps to it; False when nothing was missing. Slow
    (see `IndexPending.eta`): run it in a background thread."""
    from corpus.progress import in_logs_only
    from index.build import build_index
    from retrieval.bm25_index import build_bm25_index

    if index_pending(settings) is None:
        return False
    with in_logs_only():  # a long build: its progress in the log, every 30 s or 5 % (never a bar among the logs)
        build_index(settings)
        build_bm25_index(settings)
    publish(settings, "index")
    with _lock:
        if (held := _chains.get(_key(settings))) is not None:
            _look_for_newer(held, settings)
    return True


def invoke_qa(
    question: str,
    settings: Settings | None = None,
    history: Sequence[Exchange] = (),
    on_token: Callable[[str], None] | None = None,
) -> QAResult:
    """Answer a question about the laws of Kazakhstan, citing only articles that were retrieved.

    `history`: the earlier exchanges of this conversation, oldest first (`Exchange.of(result)` for each earlier
    `QAResult`); a follow-up is then understood in their context (`QAResult.search_question`, `used_history`).
    `on_token`: called with each piece of a model's answer as it is generated (the chat model's `.stream()`, same
    Groq → Ollama fallbacks); the returned result is the final answer after the grounding check, which replaces a
    streamed answer that fails it with the quotes.

    Each call is counted in the service's metrics (corpus/metrics.py): the question, then its answer with each
    stage's time, or the error."""
    metrics.asked()
    try:
        result = get_chain(settings or Settings()).invoke(question, history, on_token)
    except Exception as err:
        metrics.error("qa", user=isinstance(err, UserError))
        raise
    metrics.answered(result.timings, backend=result.backend, template=result.template, status=result.status)
    return result


def chain_loaded(settings: Settings) -> bool:
    """Whether a chain for these settings is loaded (and answering); never waits for one being loaded."""
    return _key(settings) in _chains


def lookup_article(code: str, number: str, settings: Settings | None = None, lang: Lang = "ru") -> Article | None:
    """The verbatim article «УК 188», for faces that show an article on request."""
    return get_chain(settings or Settings()).article(code, number, lang)


if __name__ == "__main__":
    # `python -m rag_chain …` runs the command line, a face above the chain (cli.py imports this module, and
    # this module never imports it): the process is handed to cli's own `__main__`.
    import runpy

    runpy.run_module("cli", run_name="__main__", alter_sys=True)
