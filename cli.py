"""The command line, a face over the chain: `python -m rag_chain ask "вопрос"`, `python -m rag_chain chat` and
`python -m rag_chain eval --questions FILE.jsonl [--dialogues FILE.jsonl]` (rag_chain, run as a program, runs this
module's `__main__`; `python -m cli` is the same).

`ask` and `chat` prepare the data dir (a pack, a first corpus) and answer through `invoke_qa()`. `eval` ranks gold
questions with retrieval/evaluate.py and gold dialogues through the chain: a dialogue line is `{"id", "lang",
"turns": [...], "relevant": [...]}`, gold for the last turn; the earlier turns are answered in order through the
chain (no LLM) and passed to it as history, and the last turn is ranked as the chain searches it, beside the two
baselines (the last turn searched alone, all turns glued together).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from answer.records import Exchange, QAResult
from config import Settings
from corpus.errors import UserError
from corpus.redact import redact_logs
from corpus.store import load_articles
from index.publish import DataDirBusy, publish, writable_data_dir
from index.status import IndexPending
from rag_chain import QAChain, index_pending, invoke_qa
from retrieval.evaluate import evaluate, format_report, write_rankings
from retrieval.gold import GoldDialogue, read_dialogues, read_questions
from retrieval.metrics import EvalReport, QuestionResult, make_report
from retrieval.pipeline import Followup, Retrieval

logger = logging.getLogger(__name__)

DESCRIPTION = (
    "The chain: question → retrieval (augment, hybrid search, law-aware, rerank) → answer (template, LLM or "
    "extractive, grounding check) → `QAResult`. `invoke_qa()` is the one entry point every face uses."
)
EVAL_DESCRIPTION = (
    "Article-level evaluation of retrieval on gold questions and dialogues: hit@k, recall@k, MRR, nDCG@10, latency."
)


# --- ask, chat --------------------------------------------------------------------------------------------------------


def _prepare(settings: Settings, from_dir: Path | None, pack: Path | None = None) -> None:
    """Install `pack` into a data dir with no corpus yet; build or refresh the corpus when asked to, or when there
    is none yet, and publish it; the search index is not built here (the answer comes from the searches that are
    ready, and says what is missing).

    Progress goes to stderr, so that `ask --json` prints nothing but JSON on stdout."""
    from index.stage import interrupted
    from ingest_adilet.pipeline import ingest

    if message := interrupted(settings.data_dir):  # a half-moved build: not a first run, not a fetch
        raise UserError(message)
    if pack is not None:
        _install_pack(settings, pack)
    if from_dir is None and (settings.corpus_dir / "chunks.jsonl").exists():
        return
    with contextlib.redirect_stdout(sys.stderr):
        if not (settings.corpus_dir / "chunks.jsonl").exists():
            writable_data_dir(settings.data_dir, "the first run")  # a file or a read-only dir: said before the build
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
    from corpus.console import make_console

    console = make_console()  # piped: each line as long as its content (no hard wrap at 80 columns)
    console.print(result.answer, markup=False, highlight=False)
    console.print()
    heading = "Дереккөздер" if result.lang == "kk" else "Источники"
    # Never a silently weaker answer: while the index is incomplete the line names the searches that ran.
    searched = f"; searched: {', '.join(result.searches)}, not yet: {', '.join(pending.missing)}" if pending else ""
    console.print(
        f"[bold]{heading}[/bold] ({result.backend}, {result.template}, "
        f"{'grounded' if result.grounded else 'not grounded'}{searched}):"
    )
    shown = result.answer
    for s in result.sources:
        edition = f" ({s.edition()})" if s.edition() else ""
        console.print(f"  [{s.source_id}] {s.citation()}{edition} — {s.url}", markup=False, highlight=False)
        if s.note and s.note not in shown:  # its text is in the other language: said once per document
            shown += s.note
            console.print(f"      {s.note}", markup=False, highlight=False)
    console.print("[dim]" + ", ".join(f"{k} {v:.0f}" for k, v in result.timings.items()) + "[/dim]")


def _chat(settings: Settings, from_dir: Path | None, pack: Path | None = None) -> int:
    """Questions from stdin, one a line, each answered with the earlier exchanges as history, as `ask` prints."""
    try:
        _prepare(settings, from_dir, pack)
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


# --- eval -------------------------------------------------------------------------------------------------------------


# How the last turn of a dialogue is searched: as the chain does with the earlier turns as history, and the two
# baselines it is measured against.
WITH_HISTORY, ALONE, GLUED = "with history", "last turn alone", "all turns glued"


def evaluate_dialogues(
    chain: QAChain, dialogues: Sequence[GoldDialogue], k: int = 20, *, name: str = "dialogues"
) -> dict[str, EvalReport]:
    """Answer each dialogue's earlier turns in order through the chain, each with the ones before as history,
    then rank its last turn three ways (WITH_HISTORY, ALONE, GLUED); one report per way."""
    retrieval = chain.retrieval
    if dialogues:
        retrieval.warm_up()  # as in `evaluate`
    retrieval.forget_questions()
    results: dict[str, list[QuestionResult]] = {WITH_HISTORY: [], ALONE: [], GLUED: []}
    for d in dialogues:
        history: list[Exchange] = []
        for turn in d.turns[:-1]:
            history.append(Exchange.of(chain.invoke(turn, history)))
        last = d.turns[-1]
        start = time.perf_counter()
        understood = chain.understand(last, history)
        searches = {WITH_HISTORY: understood.search_question, ALONE: last, GLUED: " ".join(d.turns)}
        for way, text in searches.items():
            ranked = retrieval.rank_articles(text, k, understood.followup if way == WITH_HISTORY else Followup())
            elapsed = (time.perf_counter() - start) * 1000
            info = retrieval.analyze(text)
            results[way].append(
                QuestionResult(d.id, d.lang or info.lang, bool(info.refs), frozenset(d.relevant_keys), ranked, elapsed)
            )
            start = time.perf_counter()
    return {way: make_report(name if way == WITH_HISTORY else f"{name} ({way})", k, r) for way, r in results.items()}


def format_comparison(name: str, reports: dict[str, EvalReport]) -> str:
    """One row per way of searching a dialogue's last turn: hit@1/5/10 and MRR."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{name}: the last turn searched three ways")
    table.add_column("last turn")
    for col in ("n", "hit@1", "hit@5", "hit@10", "MRR"):
        table.add_column(col, justify="right")
    for way in (ALONE, GLUED, WITH_HISTORY):
        m = reports[way].overall
        table.add_row(way, str(m.n), *(f"{v:.3f}" for v in (m.hit1, m.hit5, m.hit10, m.mrr)))
    buf = io.StringIO()
    Console(file=buf, width=120, color_system=None).print(table)
    return buf.getvalue()


def dialogue_chain(settings: Settings, retrieval: Retrieval) -> QAChain:
    """The chain over this retrieval with no LLM, as dialogues are evaluated (extractive answers, offline rule)."""
    offline = settings.model_copy(update={"llm_backends": []})
    return QAChain(offline, retrieval, load_articles(settings.corpus_dir))


def eval_main(argv: Sequence[str] | None, settings: Settings) -> int:
    """CLI: evaluate question and dialogue files and print their tables; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m rag_chain eval", description=EVAL_DESCRIPTION)
    parser.add_argument("--questions", type=Path, action="append", default=[], help="gold JSONL (repeatable)")
    parser.add_argument(
        "--dialogues",
        type=Path,
        action="append",
        default=[],
        help="gold dialogues JSONL, {id, lang, turns, relevant} per line, gold for the last turn (repeatable)",
    )
    parser.add_argument("--data-dir", type=Path, help="data directory (corpus and index); default DATA_DIR")
    parser.add_argument("--k", type=int, default=20, help="articles ranked per question")
    parser.add_argument("--out", type=Path, help="write rankings as JSONL (with several files: FILE.<name>.jsonl)")
    args = parser.parse_args(argv)
    if not args.questions and not args.dialogues:
        parser.error("give --questions FILE.jsonl and/or --dialogues FILE.jsonl")
    if args.data_dir:
        settings = settings.model_copy(update={"data_dir": args.data_dir})
    try:
        # bad files fail before the long load
        files = {path: read_questions(path) for path in args.questions}
        dialogues = {path: read_dialogues(path) for path in args.dialogues}
        retrieval = Retrieval.load(settings)
        if retrieval.pending is not None:  # the figures are not the full pipeline's: say so
            note = f"Note: searches that ran: {', '.join(retrieval.searches)}. {retrieval.pending.message()}"
            print(note, file=sys.stderr)
        several = len(files) + len(dialogues) > 1

        def out_for(path: Path) -> Path | None:
            out = args.out
            return out.with_suffix(f".{path.stem}{out.suffix}") if out is not None and several else out

        for path, questions in files.items():
            report = evaluate(retrieval, questions, args.k, name=path.stem)
            if (out := out_for(path)) is not None:
                write_rankings(out, report.results)
            print(format_report(report))
        if dialogues:
            chain = dialogue_chain(settings, retrieval)
            for path, gold in dialogues.items():
                reports = evaluate_dialogues(chain, gold, args.k, name=path.stem)
                if (out := out_for(path)) is not None:
                    write_rankings(out, reports[WITH_HISTORY].results)
                print(format_report(reports[WITH_HISTORY]))
                print(format_comparison(path.stem, reports))
    except UserError as err:
        print(f"Error: {err}", file=sys.stderr)
        return 1
    return 0


# --- the command ------------------------------------------------------------------------------------------------------


def _log_handler(level: int) -> logging.Handler:
    """The command's log handler on stderr, installed on the root logger (when nothing configured logging yet)."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
    return handler


def main(argv: list[str] | None = None) -> int:
    """`python -m rag_chain ask|chat|eval …`; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m rag_chain", description=DESCRIPTION)
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
    ask.add_argument("--data-dir", type=Path, help="corpus, index and caches (default: DATA_DIR or ./data)")
    ask.add_argument("-v", "--verbose", action="store_true")
    chat = sub.add_parser(
        "chat", help="a conversation: follow-ups are understood in context; /new resets, Ctrl-D quits"
    )
    chat.add_argument("--from-dir", type=Path, help="as for ask")
    chat.add_argument("--pack", type=Path, metavar="PACK", help="as for ask")
    chat.add_argument("--data-dir", type=Path, help="corpus, index and caches (default: DATA_DIR or ./data)")
    chat.add_argument("-v", "--verbose", action="store_true")
    # eval's own options (--questions, --dialogues, --k, --out, --data-dir) are parsed by eval_main
    sub.add_parser("eval", add_help=False, help="measure retrieval on gold questions (JSONL); eval --help")
    args, rest = parser.parse_known_args(argv)
    if args.command == "eval":
        handler = _log_handler(logging.WARNING)
        settings = Settings()
        redact_logs(settings.secret_values(), [handler])
        return eval_main(rest, settings)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")

    handler = _log_handler(logging.DEBUG if args.verbose else logging.WARNING)
    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    if args.command != "chat":  # one question and exit: a warm-up beside it would only slow it (WARM_UP holds for chat)
        settings = settings.model_copy(update={"warm_up": False})
    redact_logs(settings.secret_values(), [handler])  # every library's records: a model server may echo its key
    if args.command == "chat":
        return _chat(settings, args.from_dir, args.pack)
    try:
        _prepare(settings, args.from_dir, args.pack)
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
