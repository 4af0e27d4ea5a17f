"""The chain: question → retrieval (augment, hybrid search, law-aware, rerank) → answer (template, LLM or extractive,
grounding check) → `QAResult`. `invoke_qa()` is the one entry point every face uses.

CLI: `python -m rag_chain ask "вопрос"`, `python -m rag_chain chat`, `python -m rag_chain eval --questions FILE.jsonl`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from pydantic import SecretStr

from answer.followup import FollowupCondenser, FollowupRule, Understood
from answer.generate import answer_question
from answer.llm import build_chat_model
from answer.records import Exchange, QAResult, Source
from config import MAX_QUESTION_CHARS, Settings
from corpus.errors import QAError, UserError
from corpus.legal import article_ref
from corpus.records import Article, Lang
from corpus.store import load_articles, read_manifest
from corpus.text import clean_text
from index.publish import DataDirBusy, publish, published
from index.status import IndexPending
from retrieval.pipeline import Retrieval

logger = logging.getLogger(__name__)


class QAChain:
    """Retrieval and answering, loaded once; `invoke` is thread-safe."""

    def __init__(
        self, settings: Settings, retrieval: Retrieval, articles: list[Article], generation: str | None = None
    ) -> None:
        """Args: generation: the published build (index/publish.py) the data was loaded from, if any."""
        self.settings = settings
        self.retrieval = retrieval
        self.generation = generation
        self.chat_model = build_chat_model(settings)
        self._articles = {(a.doc_id, a.lang, a.number): a for a in articles}
        self.editions = {e.key: e for e in read_manifest(settings.corpus_dir).documents}  # (doc_id, lang) → entry
        rule = FollowupRule(
            search=lambda q: [doc_id for doc_id, _, _ in retrieval.rank_articles(q, 5)],
            max_chars=settings.followup_context_chars,
        )
        self.followup = FollowupCondenser(settings, rule, self.chat_model)
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
        )
        return QAResult(
            question=x["question"],
            answer=answer.text,
            sources=self._with_editions(answer.sources),
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
        """Each source with the edition of its document (corpus manifest), which the answer tells the user."""
        out = []
        for s in sources:
            entry = self.editions.get((s.doc_id, s.lang))
            if entry is None:
                out.append(s)
            else:
                out.append(dataclasses.replace(s, edition_date=entry.edition_date, edition_basis=entry.edition_basis))
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


_chains: dict[tuple, _Held] = {}
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
    dir (index/publish.py); if so that build is loaded in a background thread and swapped in when ready. Until
    then, and for questions already in flight, the loaded chain answers; a build that fails to load is logged
    and skipped until the next publication."""
    key = _key(settings)
    with _lock:
        held = _chains.get(key)
        if held is None:
            started = time.perf_counter()
            held = _chains[key] = _Held(QAChain.load(settings), time.monotonic())
            logger.info("chain loaded in %.1f s", time.perf_counter() - started)
        elif time.monotonic() - held.checked >= settings.reload_check_seconds:
            _look_for_newer(held, settings)
        return held.chain


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
        "the build published by %s (%s) loaded in %.1f s and swapped in (searches: %s)",
        by,
        generation,
        time.perf_counter() - started,
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
    from index.build import build_index

    if index_pending(settings) is None:
        return False
    build_index(settings, progress=False)
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
    streamed answer that fails it with the quotes."""
    return get_chain(settings or Settings()).invoke(question, history, on_token)


def lookup_article(code: str, number: str, settings: Settings | None = None, lang: Lang = "ru") -> Article | None:
    """The verbatim article «УК 188», for faces that show an article on request."""
    return get_chain(settings or Settings()).article(code, number, lang)


# --- CLI ---------------------------------------------------------------------------------------------------------


def _prepare(settings: Settings, from_dir: Path | None) -> None:
    """Build or refresh the corpus when asked to, or when there is none yet, and publish it; the search index is
    not built here (the answer comes from the searches that are ready, and says what is missing).

    Progress goes to stderr, so that `ask --json` prints nothing but JSON on stdout."""
    from ingest_adilet.pipeline import ingest

    if from_dir is None and (settings.corpus_dir / "chunks.jsonl").exists():
        return
    with contextlib.redirect_stdout(sys.stderr):
        if not (settings.corpus_dir / "chunks.jsonl").exists():
            print(
                f"First run: building the corpus in {settings.data_dir} from "
                f"{from_dir or settings.source_dir or settings.adilet_base_url} (about 20 s from a local copy); "
                "the first answer comes from the lexical searches, at once."
            )
        try:
            report = ingest(settings, source_dir=from_dir or settings.source_dir)
        except DataDirBusy as err:
            if not (settings.corpus_dir / "chunks.jsonl").exists():
                raise
            print(f"The corpus was not re-read: {err} The answer comes from the corpus as it is.")
            return
        if report.failures and not (settings.corpus_dir / "chunks.jsonl").exists():
            raise UserError("the corpus could not be built: see the failures above")
    if any(r.outcome == "ingested" for r in report.results):
        publish(settings, "ingest")


def _install_pack(settings: Settings, pack: Path) -> None:
    """Unpack `pack` into a data dir that has no corpus yet; a data dir with one keeps it (said on stderr)."""
    from ingest_adilet.unpack import unpack

    if (settings.corpus_dir / "chunks.jsonl").exists():
        print(
            f"{settings.data_dir} already has a corpus: --pack ignored (`python -m ingest_adilet unpack` replaces it).",
            file=sys.stderr,
        )
        return
    report = unpack(settings, pack)
    print(
        f"Installed {pack} into {settings.data_dir}: {report.documents} documents, {report.chunks} chunks, "
        f"{report.vectors} vectors, in {report.seconds:.1f} s.",
        file=sys.stderr,
    )


def _print_result(result: QAResult, pending: IndexPending | None = None) -> None:
    from rich.console import Console

    console = Console()
    console.print(result.answer, markup=False, highlight=False)
    console.print()
    heading = "Дереккөздер" if result.lang == "kk" else "Источники"
    # Never a silently weaker answer: while the index is incomplete the line names the searches that ran.
    searched = f"; searched: {', '.join(result.searches)}, not yet: {', '.join(pending.missing)}" if pending else ""
    console.print(
        f"[bold]{heading}[/bold] ({result.backend}, {result.template}, "
        f"{'grounded' if result.grounded else 'not grounded'}{searched}):"
    )
    for s in result.sources:
        edition = f" ({s.edition()})" if s.edition() else ""
        console.print(f"  [{s.source_id}] {s.citation()}{edition} — {s.url}", markup=False, highlight=False)
    console.print("[dim]" + ", ".join(f"{k} {v:.0f}" for k, v in result.timings.items()) + "[/dim]")


def _chat(settings: Settings, from_dir: Path | None) -> int:
    """Questions from stdin, one a line, each answered with the earlier exchanges as history, as `ask` prints."""
    try:
        _prepare(settings, from_dir)
        pending = index_pending(settings)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if pending:
        print(pending.message(), file=sys.stderr)
    print("Задайте вопрос; /new — новый разговор, Ctrl-D — выход. / Сұрақ қойыңыз; /new — жаңа әңгіме.")
    history: list[Exchange] = []
    while True:
        try:
            line = input("> " if sys.stdin.isatty() else "").strip()
        except EOFError:
            return 0
        if not line:
            continue
        if line == "/new":
            history.clear()
            print("Новый разговор. / Жаңа әңгіме.")
            continue
        try:
            result = invoke_qa(line, settings, history)
        except UserError as err:  # a bad question: say why and go on
            print(f"error: {err}", file=sys.stderr)
            continue
        if result.used_history:
            label = "Сұрақты былай түсіндім" if result.lang == "kk" else "Понял вопрос так"
            print(f"{label}: {result.search_question}")
        _print_result(result, index_pending(settings))
        print()
        history = [*history, Exchange.of(result)][-settings.history_turns :] if settings.history_turns else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rag_chain", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ask = sub.add_parser("ask", help="answer a question, citing the articles it rests on")
    ask.add_argument("question", nargs="+")
    ask.add_argument("--json", action="store_true", help="print the result as JSON")
    ask.add_argument(
        "--pack",
        type=Path,
        metavar="PACK",
        help="a data pack (`ingest_adilet pack`): installed "
        "first when the data dir has no corpus, for an office without internet",
    )
    ask.add_argument(
        "--from-dir",
        type=Path,
        help="build/refresh the corpus from this directory first "
        "(layout rus/ID.txt, kaz/ID.txt, html/ID.html); default: live adilet when no corpus exists",
    )
    # eval's own options (--questions, --k, --out, --data-dir) are parsed by retrieval.evaluate
    sub.add_parser("eval", add_help=False, help="measure retrieval on gold questions (JSONL); eval --help")
    ask.add_argument("--data-dir", type=Path, help="corpus, index and caches (default: DATA_DIR or ./data)")
    ask.add_argument("-v", "--verbose", action="store_true")
    chat = sub.add_parser(
        "chat", help="a conversation: follow-ups are understood in context; /new resets, Ctrl-D quits"
    )
    chat.add_argument("--from-dir", type=Path, help="as for ask")
    chat.add_argument("--data-dir", type=Path, help="corpus, index and caches (default: DATA_DIR or ./data)")
    chat.add_argument("-v", "--verbose", action="store_true")
    args, rest = parser.parse_known_args(argv)
    if args.command == "eval":
        from retrieval.evaluate import main as evaluate

        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
        return evaluate(rest, Settings())
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")

    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    if args.command == "chat":
        return _chat(settings, args.from_dir)
    try:
        if args.pack is not None:
            _install_pack(settings, args.pack)
        _prepare(settings, args.from_dir)
        result = invoke_qa(" ".join(args.question), settings)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    pending = index_pending(settings)
    if args.json:
        print(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
    else:
        _print_result(result, pending)
    if pending:
        print(pending.message(), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
