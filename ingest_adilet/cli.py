"""Command line: `python -m ingest_adilet` builds the corpus, `python -m ingest_adilet index` the index."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path

from rich.table import Table

from config import Settings
from corpus.console import log_handler, make_console
from corpus.errors import UserError
from corpus.redact import redact_logs
from corpus.store import MANIFEST_FILE
from index.publish import writable_data_dir

# Messages and logs (stderr); built again by `main`, which knows whether this run's stderr is a terminal.
_console = make_console(stderr=True)


NO_PROGRESS_HELP = "no progress bar (on a terminal) or progress lines (in logs)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ingest_adilet",
        description="Build the article corpus (DATA_DIR/corpus) from adilet.zan.kz or from a local copy of "
        "its texts. Documents whose input has not changed are not parsed again; a document that fails "
        "keeps its previous records.",
        epilog="Then build the search index: python -m ingest_adilet index",
    )
    parser.add_argument(
        "--from-dir",
        type=Path,
        metavar="DIR",
        help="read texts from DIR (rus/ID.txt, kaz/ID.txt, html/ID.html) instead of live adilet",
    )
    parser.add_argument("--data-dir", type=Path, metavar="DIR", help="where the corpus goes (default: DATA_DIR)")
    parser.add_argument(
        "--docs", nargs="+", metavar="ID", help="only these adilet ids (default: every registry document)"
    )
    parser.add_argument("--lang", nargs="+", choices=["ru", "kk"], help="languages (default: INGEST_LANGUAGES)")
    parser.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)
    parser.add_argument("-v", "--verbose", action="store_true", help="log every step")
    sub = parser.add_subparsers(dest="command", metavar="{index,pack,unpack,refresh}")
    index = sub.add_parser(
        "index",
        help="build the search index from the corpus",
        description="Embed the corpus chunks and build the BM25 and vector indexes (DATA_DIR/index).",
    )
    _common_options(index, "where the corpus is and the index goes")
    packer = sub.add_parser(
        "pack",
        help="write the built corpus and index to one file, for an office without internet",
        description="Write DATA_DIR's corpus, vectors and latent terms, with a manifest (documents, editions, "
        "embedding model, index settings, sha256 of every file), to one file. The embedding cache is not packed.",
    )
    packer.add_argument("out", type=Path, metavar="PACK", help="the file to write (e.g. kz-law.pack.tar.gz)")
    packer.add_argument(
        "--compress",
        choices=["gz", "xz", "none"],
        default="gz",
        help="gz (default): about a third of the size in seconds; xz: smaller, much slower",
    )
    unpacker = sub.add_parser(
        "unpack",
        help="verify a pack and install it into the data dir",
        description="Check that this data dir's settings can search the pack (same embedding model and index "
        "settings), extract it, verify every file, then swap the corpus and index in. The data dir is left as it "
        "was when anything fails.",
    )
    unpacker.add_argument("pack", type=Path, metavar="PACK")
    _common_options(packer, "the data dir to pack from")
    _common_options(unpacker, "the data dir to unpack into")
    _refresh_parser(sub)
    return parser


def _common_options(command: argparse.ArgumentParser, data_dir_help: str) -> None:
    """--data-dir, -v and --no-progress on a subcommand. SUPPRESS keeps what was given before the subcommand when
    they are not given after it."""
    command.add_argument(
        "--data-dir", type=Path, metavar="DIR", default=argparse.SUPPRESS, help=f"{data_dir_help} (default: DATA_DIR)"
    )
    command.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log every step")
    command.add_argument("--no-progress", action="store_true", default=argparse.SUPPRESS, help=NO_PROGRESS_HELP)


def _refresh_parser(sub: argparse._SubParsersAction) -> None:
    refresh = sub.add_parser(
        "refresh",
        help="fetch the documents again, update what changed, publish corpus and index together",
        description="Fetch the registry documents from adilet again (or read a newer --from-dir), re-parse the "
        "changed ones, re-embed only changed chunks, and publish the new corpus and index together; prints the "
        "articles added, changed and repealed. A failure leaves the previous build in place (exit 1 or 2).",
    )
    for flags, kw in (
        (("--from-dir",), {"type": Path, "metavar": "DIR", "help": "read texts from DIR instead of live adilet"}),
        (("--docs",), {"nargs": "+", "metavar": "ID", "help": "only these adilet ids"}),
        (("--lang",), {"nargs": "+", "choices": ["ru", "kk"], "help": "languages (default: INGEST_LANGUAGES)"}),
    ):
        refresh.add_argument(*flags, default=argparse.SUPPRESS, **kw)
    _common_options(refresh, "the data dir to refresh")
    refresh.add_argument("--json", action="store_true", help="print the report as JSON (for scripts)")
    refresh.add_argument(
        "--allow-removal",
        action="store_true",
        help="publish even when a document loses more than half of its articles (refused without it)",
    )


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {"data_dir": args.data_dir} if args.data_dir else {}
    return Settings(**overrides)


def _ingest(args: argparse.Namespace, settings: Settings) -> int:
    from ingest_adilet.pipeline import failures_table, ingest, select_sources, summary_table

    source_dir = args.from_dir or settings.source_dir
    if not (settings.corpus_dir / MANIFEST_FILE).exists():
        n_docs = len(select_sources(args.docs))
        n_langs = len(args.lang or settings.ingest_languages)
        if source_dir is not None:
            eta = "well under a minute"
            origin = f"the texts in {source_dir}"
        else:
            eta = f"about {max(1, round(n_docs * n_langs * (settings.http_delay + 3) / 60))} min"
            origin = f"{settings.adilet_base_url} (politely, one request at a time)"
        _console.print(
            f"Building the corpus in {settings.corpus_dir} from {origin}: {n_docs} documents × {n_langs} "
            f"language(s), parsed into articles and chunks; this takes {eta}."
        )
    report = ingest(settings, source_dir=source_dir, doc_ids=args.docs, langs=args.lang, progress=not args.no_progress)
    if any(r.outcome == "ingested" for r in report.results):
        from index.publish import publish

        publish(settings, "ingest")  # a loaded chain over this data dir (the bot) picks up the new corpus
    out = make_console()
    out.print(summary_table(report))
    failures = failures_table(report)
    if failures is not None:
        out.print(failures)
        return 1
    out.print("Next: python -m ingest_adilet index")
    return 0


def _index(settings: Settings, progress: bool) -> int:
    from index.build import build_index
    from retrieval.bm25_index import build_bm25_index

    if not settings.index_dir.exists():
        _console.print(
            f"Building the search index in {settings.index_dir} from {settings.corpus_dir} with "
            f"{settings.embedding_backend} (dense scope: {settings.dense_scope}); the whole corpus takes"
            " about 45 minutes on 2 cores the first time, and ~35 minutes more for its latent terms (SPARSE_WEIGHT=0"
            " skips them; DENSE_SCOPE=first_chunk halves the rest); later builds embed only what changed."
        )
    report = build_index(settings, progress=progress)
    kept = build_bm25_index(settings)  # BM25's analysis, so that a start need not analyse every chunk again
    if not report.unchanged or not kept.unchanged:
        from index.publish import publish

        publish(settings, "index")  # a loaded chain over this data dir (the bot) swaps to the new index
    table = Table(title="Index")
    table.add_column("")
    table.add_column("", justify="right")
    for f in fields(report):
        value = getattr(report, f.name)
        table.add_row(f.name, f"{value:.1f}" if isinstance(value, float) else str(value))
    make_console().print(table)
    return 0


def _refresh(args: argparse.Namespace, settings: Settings) -> int:
    """Refresh and print what changed; 1 when it failed (the previous build stays published)."""
    import json

    from ingest_adilet.refresh import RefreshFailed, refresh, report_tables

    as_json = args.json
    try:
        report = refresh(
            settings,
            source_dir=args.from_dir,
            doc_ids=args.docs,
            langs=args.lang,
            progress=not as_json and not args.no_progress,
            allow_removal=args.allow_removal,
        )
    except RefreshFailed as err:
        if as_json:
            print(json.dumps({"ok": False, "error": str(err)}, ensure_ascii=False))
        _console.print(f"[red]refresh failed:[/red] {err}", highlight=False)
        return 1
    if as_json:
        print(json.dumps({"ok": True, **report.to_json()}, ensure_ascii=False, indent=1))
        return 0
    out = make_console()
    for table in report_tables(report):
        out.print(table)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (2 for user errors, 1 when a document failed)."""
    global _console
    args = _parser().parse_args(argv)
    _console = make_console(stderr=True)
    handler = log_handler(_console)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s", handlers=[handler]
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if not args.no_progress:  # off a terminal progress is a log line (corpus/progress.py), shown without -v
        logging.getLogger("corpus.progress").setLevel(logging.INFO)
    try:
        settings = _settings(args)
        redact_logs(settings.secret_values(), [handler])  # every library's records that reach the command's log
        if args.command != "pack":  # every other command writes the data dir: a file or a read-only one is said now
            writable_data_dir(settings.data_dir, args.command or "ingest")
        if args.command == "index":
            return _index(settings, progress=not args.no_progress)
        if args.command == "refresh":
            return _refresh(args, settings)
        if args.command in ("pack", "unpack"):
            from ingest_adilet.pack import pack, report_table
            from ingest_adilet.unpack import unpack

            report = (
                pack(settings, args.out, compression=args.compress)
                if args.command == "pack"
                else (unpack(settings, args.pack))
            )
            make_console().print(report_table(report, args.command))
            return 0
        return _ingest(args, settings)
    except UserError as err:
        _console.print(f"[red]error:[/red] {err}", highlight=False)
        return 2


if __name__ == "__main__":
    sys.exit(main())
