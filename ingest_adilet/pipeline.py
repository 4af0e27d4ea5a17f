"""Ingest: for each registry document and language get the text, parse articles, chunk them, store the corpus.

Text comes from a local directory (`html/ID.html` for Russian when it parses, else `rus/ID.txt`, `kaz/ID.txt`)
or from live adilet through the fetcher. A document that fails keeps its previous records; a document whose
input is unchanged is not parsed again.
"""

from __future__ import annotations

import ast
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from rich.table import Table

from config import PROJECT_DIR, Settings
from corpus.chunking import chunk_article
from corpus.errors import AdiletUnreachable, DataDamaged, IngestError, UserError
from corpus.legal.registry import ADILET_SOURCES, AdiletSource
from corpus.progress import tracker
from corpus.records import Article, Chunk, Lang, content_hash
from corpus.store import DocumentEntry, DocumentRecords, EditionBasis, Manifest, check_corpus, write_corpus
from index.publish import writes_data_dir
from ingest_adilet.editions import amended_through, repealed_by
from ingest_adilet.text_parser import parse_text

if TYPE_CHECKING:
    from ingest_adilet.fetch import AdiletFetcher

logger = logging.getLogger(__name__)

# Bump when what an unchanged input yields changes for a reason outside the parsing code below.
PARSER_VERSION = "1"
# The parsers and the chunker. Their source and that of every project module they import (the citation heading of a
# chunk comes from corpus/legal, the code's short name from its registry) are part of the input hash: a change to
# any of them re-parses every document.
_PARSER_ENTRIES = (
    "ingest_adilet/html_parser.py",
    "ingest_adilet/text_parser.py",
    "ingest_adilet/editions.py",
    "corpus/chunking.py",
)
# Data files those modules read: the registry's table, whose short names head every chunk.
_PARSER_DATA = ("corpus/legal/registry.json",)
SITE_DIR = {"ru": "rus", "kk": "kaz"}
LAYOUT = "rus/ID.txt, kaz/ID.txt, html/ID.html"

Outcome = Literal["ingested", "unchanged", "skipped", "failed"]


@dataclass(frozen=True)
class DocumentResult:
    """What happened to one document in one language."""

    doc_id: str
    lang: str
    outcome: Outcome
    source: str = ""
    articles: int = 0
    repealed: int = 0
    chunks: int = 0
    reason: str = ""


@dataclass
class IngestReport:
    """Per-document results of one run, and where the corpus is."""

    corpus_dir: Path
    results: list[DocumentResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failures(self) -> list[DocumentResult]:
        return [r for r in self.results if r.outcome == "failed"]

    @property
    def ok(self) -> bool:
        return not self.failures


@dataclass(frozen=True)
class _Input:
    """One way to read a document: its raw text, where it came from, and the parser for it."""

    source: str  # html / txt / adilet
    raw: str
    parse: Callable[[], tuple[list[Article], str | None]]  # articles and edition date


def _parse_html(html: str, doc_id: str, lang: Lang, url: str) -> tuple[list[Article], str | None]:
    try:
        from ingest_adilet.html_parser import parse_html
    except ImportError as err:  # the HTML parser is written in parallel; until then local texts still work
        raise IngestError(f"{doc_id}: the HTML parser is not available ({err})") from err
    page = parse_html(html, doc_id, lang, url)
    return list(page.articles), page.edition_date


_PAGE_HEAD_CHARS = 100_000  # of a page's HTML: its head footnotes come within the first 25,000 on adilet's pages


def _plain_text(inp: _Input) -> str:
    """The input's text from its first footnote on (a page's navigation before it dropped), where a document
    repealed as a whole says so (`repealed_by`)."""
    if inp.source == "txt":
        return inp.raw
    from bs4 import BeautifulSoup

    text = BeautifulSoup(inp.raw[:_PAGE_HEAD_CHARS], "html.parser").get_text(" ")
    return text[min((i for i in (text.find("Сноска"), text.find("Ескерту")) if i >= 0), default=0) :]


def _local_inputs(source_dir: Path, doc: AdiletSource, lang: Lang) -> list[_Input]:
    """The local files for a document, best first: the saved page (Russian), then the plain text."""
    url = doc.url(lang)
    inputs: list[_Input] = []
    html_path = source_dir / "html" / f"{doc.doc_id}.html"
    if lang == "ru" and html_path.exists():
        html = html_path.read_text(encoding="utf-8", errors="replace")
        inputs.append(_Input("html", html, lambda: _parse_html(html, doc.doc_id, lang, url)))
    txt_path = source_dir / SITE_DIR[lang] / f"{doc.doc_id}.txt"
    if txt_path.exists():
        text = txt_path.read_text(encoding="utf-8", errors="replace")
        inputs.append(_Input("txt", text, lambda: (parse_text(text, doc.doc_id, lang, url), None)))
    return inputs


def _project_imports(path: Path) -> set[Path]:
    """The project's modules `path` imports (a package's __init__, or the submodule `from package import name`
    names)."""
    found: set[Path] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        else:
            continue
        for name in names:
            base = PROJECT_DIR.joinpath(*name.split("."))
            found.update(p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file())
    return found


def parser_modules() -> list[Path]:
    """The parsers, the chunker and every project module they import, directly or not."""
    seen = {PROJECT_DIR / m for m in _PARSER_ENTRIES}
    todo = list(seen)
    while todo:
        for dep in _project_imports(todo.pop()) - seen:
            seen.add(dep)
            todo.append(dep)
    return sorted(seen)


@cache
def parser_version() -> str:
    """PARSER_VERSION plus a hash of the parsing and chunking code and the data it reads."""
    files = [*parser_modules(), *(PROJECT_DIR / d for d in _PARSER_DATA)]
    sources = [p.read_text(encoding="utf-8") for p in files]
    return f"{PARSER_VERSION}:{content_hash(*sources)[:16]}"


def _input_hash(inp: _Input, settings: Settings) -> str:
    return content_hash(parser_version(), str(settings.chunk_max_chars), inp.source, inp.raw)


def _records(doc: AdiletSource, lang: Lang, inp: _Input, settings: Settings) -> DocumentRecords:
    """Parse and chunk one input; no articles at all is an error, never an empty document."""
    articles, edition_date = inp.parse()
    # A saved page states its edition («по состоянию на»); a text snapshot gets the honest proxy, the latest
    # amending act its footnotes cite (ingest_adilet/editions.py), named as such.
    basis: EditionBasis | None = "as_of" if edition_date else None
    if edition_date is None and (edition_date := amended_through(articles)) is not None:
        basis = "amended_through"
    if not articles:
        raise IngestError(
            f"{doc.doc_id} ({lang}): no articles found in the {inp.source} text; the page may be an empty "
            "shell or a captcha — check it in a browser, or ingest from a saved copy with --from-dir"
        )
    chunks: list[Chunk] = [c for a in articles for c in chunk_article(a, doc, max_chars=settings.chunk_max_chars)]
    return DocumentRecords(
        doc_id=doc.doc_id,
        lang=lang,
        title=doc.title(lang),
        source=inp.source,
        input_hash=_input_hash(inp, settings),
        articles=articles,
        chunks=chunks,
        edition_date=edition_date,
        edition_basis=basis,
        repealed_by=repealed_by(_plain_text(inp), lang),
    )


def select_sources(doc_ids: Sequence[str] | None) -> list[AdiletSource]:
    """The registry entries to ingest: all, or the given ids (an unknown id is a UserError)."""
    if not doc_ids:
        return list(ADILET_SOURCES)
    known = {s.doc_id: s for s in ADILET_SOURCES}
    unknown = [d for d in doc_ids if d not in known]
    if unknown:
        raise UserError(
            f"Unknown document id(s): {', '.join(unknown)}. Known ids are listed in "
            f"corpus.legal.registry.ADILET_SOURCES, e.g. {', '.join(list(known)[:4])}."
        )
    return [known[d] for d in dict.fromkeys(doc_ids)]


@writes_data_dir("ingest")
def ingest(
    settings: Settings,
    *,
    source_dir: Path | None = None,
    doc_ids: Sequence[str] | None = None,
    langs: Iterable[Lang] | None = None,
    progress: bool = True,
    refetch: bool = False,
) -> IngestReport:
    """Ingest the registry documents (or `doc_ids`) in `langs` into settings.corpus_dir; see IngestReport.
    `refetch` downloads every document from adilet again instead of taking a cached download (refresh)."""
    started = time.perf_counter()
    source_dir = source_dir or settings.source_dir
    if source_dir is not None and not Path(source_dir).is_dir():
        raise UserError(f"--from-dir {source_dir} is not a directory (expected {LAYOUT})")
    docs = select_sources(doc_ids)
    lang_list: list[Lang] = list(dict.fromkeys(langs or settings.ingest_languages))
    corpus_dir = settings.corpus_dir
    if source_dir is not None:
        _require_texts(Path(source_dir), docs, lang_list)
    try:
        manifest, fresh = check_corpus(corpus_dir), False
    except DataDamaged as err:  # nothing in it can be trusted as "unchanged": every document is parsed again
        logger.warning("%s; rebuilding the whole corpus", err)
        manifest, fresh = Manifest(), True
    report = IngestReport(corpus_dir)
    updates: list[DocumentRecords] = []
    jobs = [(doc, lang) for doc in docs for lang in lang_list]

    fetcher = None
    if source_dir is None:
        from ingest_adilet.fetch import AdiletFetcher

        fetcher = AdiletFetcher(settings)

    unreachable: AdiletUnreachable | None = None
    try:
        with tracker("ingest", len(jobs), show=progress, transient=True) as bar:
            for doc, lang in jobs:
                bar.advance(0, current=f"{doc.doc_id} {lang}")  # what is being read (named on the bar)
                try:
                    result, records = _ingest_one(doc, lang, settings, manifest, source_dir, fetcher, refetch)
                except AdiletUnreachable as err:  # no document will get through: stop at once
                    unreachable = err
                    break
                report.results.append(result)
                if records is not None:
                    updates.append(records)
                bar.advance()
    finally:
        if fetcher is not None:
            fetcher.close()
    write_corpus(corpus_dir, updates, fresh=fresh)  # what was fetched before the connection failed is kept
    report.seconds = time.perf_counter() - started
    if unreachable is not None:
        raise unreachable
    return report


def _require_texts(source_dir: Path, docs: Sequence[AdiletSource], langs: Sequence[Lang]) -> None:
    """UserError when `source_dir` holds no text of any requested document (a wrong or empty folder), before
    anything is read or written."""
    if any(_local_inputs_exist(source_dir, doc, lang) for doc in docs for lang in langs):
        return
    example = docs[0].doc_id if docs else "K1400000226"
    raise UserError(
        f"--from-dir {source_dir} holds no text of the requested documents in {', '.join(langs)}: expected "
        f"{LAYOUT} (e.g. {source_dir / 'rus' / (example + '.txt')}) for the ids in ADILET_SOURCES "
        "(corpus/legal/registry.json); nothing was ingested and the corpus was left as it was"
    )


def _local_inputs_exist(source_dir: Path, doc: AdiletSource, lang: Lang) -> bool:
    html = lang == "ru" and (source_dir / "html" / f"{doc.doc_id}.html").is_file()
    return html or (source_dir / SITE_DIR[lang] / f"{doc.doc_id}.txt").is_file()


def _ingest_one(
    doc: AdiletSource,
    lang: Lang,
    settings: Settings,
    manifest: Manifest,
    source_dir: Path | None,
    fetcher: AdiletFetcher | None,
    refetch: bool = False,
) -> tuple[DocumentResult, DocumentRecords | None]:
    """Ingest one document in one language; failures are reported, never raised."""
    previous = manifest.entry(doc.doc_id, lang)
    try:
        if source_dir is not None:
            inputs = _local_inputs(Path(source_dir), doc, lang)
            if not inputs:
                return DocumentResult(doc.doc_id, lang, "skipped", reason=f"not in {source_dir}"), None
        else:
            assert fetcher is not None
            html = fetcher.fetch(doc.doc_id, lang, refresh=refetch)
            url = doc.url(lang)
            inputs = [_Input("adilet", html, lambda: _parse_html(html, doc.doc_id, lang, url))]
        errors: list[str] = []
        for i, inp in enumerate(inputs):
            if previous is not None and previous.input_hash == _input_hash(inp, settings):
                return _result(doc.doc_id, lang, "unchanged", previous.source, previous), None
            try:
                records = _records(doc, lang, inp, settings)
            except Exception as err:  # one bad input must not stop the others
                reason = str(err) if isinstance(err, UserError) else f"{type(err).__name__}: {err}"
                errors.append(f"{inp.source}: {reason}")
                if i + 1 < len(inputs):
                    logger.warning(
                        "%s (%s): the %s input failed (%s); using the %s instead",
                        doc.doc_id,
                        lang,
                        inp.source,
                        reason,
                        inputs[i + 1].source,
                    )
                else:
                    logger.debug("%s (%s) failed", doc.doc_id, lang, exc_info=True)
                continue
            return _result(doc.doc_id, lang, "ingested", inp.source, records), records
        return DocumentResult(doc.doc_id, lang, "failed", reason="; ".join(errors)), None
    except AdiletUnreachable:
        raise
    except Exception as err:  # fetch errors and the like: report with the document id, keep going
        logger.debug("%s (%s) failed", doc.doc_id, lang, exc_info=True)
        reason = str(err) if isinstance(err, UserError) else f"{type(err).__name__}: {err}"
        return DocumentResult(doc.doc_id, lang, "failed", reason=reason), None


def _result(
    doc_id: str, lang: str, outcome: Outcome, source: str, counts: DocumentRecords | DocumentEntry
) -> DocumentResult:
    if isinstance(counts, DocumentRecords):
        n_articles = len(counts.articles)
        repealed = sum(a.status == "repealed" for a in counts.articles)
        n_chunks = len(counts.chunks)
    else:
        n_articles, repealed, n_chunks = counts.articles, counts.repealed, counts.chunks
    return DocumentResult(doc_id, lang, outcome, source, n_articles, repealed, n_chunks)


def summary_table(report: IngestReport) -> Table:
    """A rich table of the run: documents, articles, repealed, chunks per language, and the failures."""
    table = Table(title=f"Corpus in {report.corpus_dir} ({report.seconds:.1f} s)")
    # docs = documents in the corpus after the run; new = parsed now; same = input unchanged, not parsed again
    for col in ("lang", "docs", "new", "same", "skipped", "failed", "articles", "repealed", "chunks"):
        table.add_column(col, justify="left" if col == "lang" else "right")
    langs = list(dict.fromkeys(r.lang for r in report.results))
    for lang in langs:
        rs = [r for r in report.results if r.lang == lang]
        done = [r for r in rs if r.outcome in ("ingested", "unchanged")]
        count = {o: sum(r.outcome == o for r in rs) for o in ("ingested", "unchanged", "skipped", "failed")}
        table.add_row(
            lang,
            str(len(done)),
            str(count["ingested"]),
            str(count["unchanged"]),
            str(count["skipped"]),
            f"[red]{count['failed']}[/red]" if count["failed"] else "0",
            str(sum(r.articles for r in done)),
            str(sum(r.repealed for r in done)),
            str(sum(r.chunks for r in done)),
        )
    return table


def failures_table(report: IngestReport) -> Table | None:
    """The failed documents with their reasons, or None when nothing failed."""
    if report.ok:
        return None
    table = Table(title="Failed documents (their previous records, if any, are kept)")
    table.add_column("document")
    table.add_column("lang")
    table.add_column("reason", overflow="fold")
    for r in report.failures:
        table.add_row(r.doc_id, r.lang, r.reason)
    return table
