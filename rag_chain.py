"""The chain: question → retrieval (augment, hybrid search, law-aware, rerank) → answer (template, LLM or extractive,
grounding check) → `QAResult`. `invoke_qa()` is the one entry point every face uses.

CLI: `python -m rag_chain ask "вопрос"`, `python -m rag_chain chat`, `python -m rag_chain eval --questions FILE.jsonl`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from langchain_core.runnables import RunnableLambda, RunnablePassthrough

from answer.followup import FollowupCondenser, FollowupRule, Understood
from answer.generate import answer_question
from answer.llm import build_chat_model
from answer.records import Exchange, QAResult
from config import Settings
from corpus.errors import QAError, UserError
from corpus.records import Article
from corpus.store import load_articles
from corpus.text import clean_text
from retrieval.pipeline import Retrieval
from retrieval.query import analyze_query

logger = logging.getLogger(__name__)

MAX_QUESTION_CHARS = 4000


class QAChain:
    """Retrieval and answering, loaded once; `invoke` is thread-safe."""

    def __init__(self, settings: Settings, retrieval: Retrieval, articles: list[Article]) -> None:
        self.settings = settings
        self.retrieval = retrieval
        self.chat_model = build_chat_model(settings)
        self._articles = {(a.doc_id, a.lang, a.number): a for a in articles}
        rule = FollowupRule(
            search=lambda q: [doc_id for doc_id, _, _ in retrieval.rank_articles(q, 5)],
            max_chars=settings.followup_context_chars,
        )
        self.followup = FollowupCondenser(settings, rule, self.chat_model)
        # x: {"question": as asked, "search": what to search and answer (the question, or a follow-up read in
        # the context of the conversation), "used_history", "followup": what the conversation adds to the search}
        self.runnable = RunnablePassthrough.assign(
            retrieved=RunnableLambda(lambda x: retrieval.retrieve(x["search"], x["followup"]))
        ) | RunnableLambda(self._answer)

    @classmethod
    def load(cls, settings: Settings) -> QAChain:
        return cls(settings, Retrieval.load(settings), load_articles(settings.corpus_dir))

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
        )

    def article(self, code: str, number: str, lang: str = "ru") -> Article | None:
        """The article `number` of the code people call `code` («УК», «ҚК», «КоАП РК»), in `lang` when available."""
        # The query analyzer already knows every name of every code, and where the Civil Code splits in two.
        code, number = clean_text(code), clean_text(number)
        for ref in analyze_query(f"статья {number.strip().rstrip('.')} {code}").refs[:1]:
            for want in (lang, "ru", "kk"):
                if art := self._articles.get((ref.doc_id, want, ref.article)):
                    return art
        return None


_chains: dict[tuple, QAChain] = {}
_lock = threading.Lock()


def get_chain(settings: Settings) -> QAChain:
    """The loaded chain for these settings (built on first use, then shared)."""
    key = (str(settings.data_dir.resolve()), settings.model_dump_json())
    with _lock:
        if key not in _chains:
            started = time.perf_counter()
            _chains[key] = QAChain.load(settings)
            logger.info("chain loaded in %.1f s", time.perf_counter() - started)
        return _chains[key]


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


def lookup_article(code: str, number: str, settings: Settings | None = None, lang: str = "ru") -> Article | None:
    """The verbatim article «УК 188», for faces that show an article on request."""
    return get_chain(settings or Settings()).article(code, number, lang)


# --- CLI ---------------------------------------------------------------------------------------------------------


def _prepare(settings: Settings, from_dir: Path | None) -> None:
    """Build or refresh the corpus and index when asked to, or when they do not exist yet.

    Their progress goes to stderr, so that `ask --json` prints nothing but JSON on stdout."""
    from index.build import build_index
    from ingest_adilet.pipeline import ingest

    if from_dir is None and (settings.corpus_dir / "chunks.jsonl").exists():
        return
    with contextlib.redirect_stdout(sys.stderr):
        if not (settings.index_dir / "faiss" / "meta.json").exists():
            print(f"First run: building the corpus and the search index in {settings.data_dir} from "
                  f"{from_dir or settings.source_dir or settings.adilet_base_url}. Embedding the whole corpus "
                  "takes about 45 minutes on 2 cores, and its latent terms ~35 minutes more (SPARSE_WEIGHT=0 skips "
                  "them; DENSE_SCOPE=first_chunk halves the rest); an interrupted build resumes; later runs start in "
                  "seconds.")
        report = ingest(settings, source_dir=from_dir or settings.source_dir)
        if report.failures and not (settings.corpus_dir / "chunks.jsonl").exists():
            raise UserError("the corpus could not be built: see the failures above")
        build_index(settings)


def _print_result(result: QAResult) -> None:
    from rich.console import Console

    console = Console()
    console.print(result.answer, markup=False, highlight=False)
    console.print()
    heading = "Дереккөздер" if result.lang == "kk" else "Источники"
    console.print(f"[bold]{heading}[/bold] ({result.backend}, {result.template}, "
                  f"{'grounded' if result.grounded else 'not grounded'}):")
    for s in result.sources:
        console.print(f"  [{s.source_id}] {s.citation()} — {s.url}", markup=False, highlight=False)
    console.print("[dim]" + ", ".join(f"{k} {v:.0f}" for k, v in result.timings.items()) + "[/dim]")


def _chat(settings: Settings, from_dir: Path | None) -> int:
    """Questions from stdin, one a line, each answered with the earlier exchanges as history, as `ask` prints."""
    try:
        _prepare(settings, from_dir)
        get_chain(settings)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
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
        _print_result(result)
        print()
        history = [*history, Exchange.of(result)][-settings.history_turns :] if settings.history_turns else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rag_chain", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ask = sub.add_parser("ask", help="answer a question, citing the articles it rests on")
    ask.add_argument("question", nargs="+")
    ask.add_argument("--json", action="store_true", help="print the result as JSON")
    ask.add_argument("--from-dir", type=Path, help="build/refresh the corpus from this directory first "
                     "(layout rus/ID.txt, kaz/ID.txt, html/ID.html); default: live adilet when no corpus exists")
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

    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    if args.command == "chat":
        return _chat(settings, args.from_dir)
    try:
        _prepare(settings, args.from_dir)
        result = invoke_qa(" ".join(args.question), settings)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
    else:
        _print_result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
