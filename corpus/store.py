"""The corpus on disk: DATA_DIR/corpus/{articles.jsonl, chunks.jsonl, manifest.json}.

Records are grouped by document and language in registry order. A write replaces only the documents it is
given, copies every other line byte for byte, and lands through temporary files and `os.replace`, so a failed
run leaves the previous corpus as it was and an unchanged run rewrites nothing. The manifest records the size and
sha256 of both JSONL files: a load or an ingest that finds them changed reports them as damaged (DataDamaged),
and the ingest then rebuilds the corpus.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from corpus.errors import DataDamaged, IndexNotReady
from corpus.files import DamagedFile, FileDigest, Staged, check_file, read_json, stage_file
from corpus.legal.registry import ADILET_SOURCES
from corpus.records import Article, Chunk, content_hash

logger = logging.getLogger(__name__)

ARTICLES_FILE = "articles.jsonl"
CHUNKS_FILE = "chunks.jsonl"
MANIFEST_FILE = "manifest.json"
LANG_ORDER = ("ru", "kk")
_BUILD_HINT = "build it with `python -m ingest_adilet` (or `--from-dir DIR` for local texts)"

DocKey = tuple[str, str]  # (doc_id, lang)
EditionBasis = Literal["as_of", "amended_through"]


def edition_label(date: str | None, basis: str | None, lang: str = "ru") -> str:
    """«редакция по состоянию на 20.03.2026» (the page's own date) or «редакция с изменениями по 16.01.2026» (a
    text snapshot's latest amending act: ingest_adilet/editions.py), in Kazakh likewise; "" when not known."""
    if not date:
        return ""
    if basis == "amended_through":
        return f"{date} дейінгі өзгерістерімен редакция" if lang == "kk" else f"редакция с изменениями по {date}"
    return f"{date} жағдай бойынша редакция" if lang == "kk" else f"редакция по состоянию на {date}"


class DocumentEntry(BaseModel):
    """What the manifest says about one document in one language."""

    model_config = ConfigDict(extra="forbid")

    doc_id: str
    lang: str
    title: str
    source: str = Field(description="Where the text came from: html, txt or adilet.")
    edition_date: str | None = Field(default=None, description="DD.MM.YYYY; what it means: edition_basis.")
    edition_basis: EditionBasis | None = Field(
        default=None,
        description="as_of: the page's «по состоянию на» date; amended_through: a text snapshot's latest "
        "amending act cited in its footnotes (ingest_adilet/editions.py).",
    )
    repealed_by: str | None = Field(
        default=None,
        description="The document's own note that it was repealed as a whole («Закон утратил силу Законом РК от "
        "16.01.2026 № 258-VIII …»; ingest_adilet/editions.py); None: in force.",
    )
    articles: int
    repealed: int
    chunks: int
    input_hash: str = Field(description="Hash of the raw input and parser settings (unchanged: skipped).")
    output_hash: str = Field(description="Hash of this document's lines in articles.jsonl and chunks.jsonl.")
    ingested_at: str

    @property
    def key(self) -> DocKey:
        return (self.doc_id, self.lang)


class LangTotals(BaseModel):
    model_config = ConfigDict(extra="forbid")

    documents: int = 0
    articles: int = 0
    repealed: int = 0
    chunks: int = 0


class Manifest(BaseModel):
    """manifest.json: one entry per document and language, plus totals per language."""

    model_config = ConfigDict(extra="forbid")

    documents: list[DocumentEntry] = []
    totals: dict[str, LangTotals] = {}
    files: dict[str, FileDigest] = Field(
        default={}, description="Size and sha256 of articles.jsonl and chunks.jsonl as this write left them."
    )

    def entry(self, doc_id: str, lang: str) -> DocumentEntry | None:
        return next((d for d in self.documents if d.doc_id == doc_id and d.lang == lang), None)


@dataclass(frozen=True)
class DocumentRecords:
    """Everything one ingested document contributes to the corpus."""

    doc_id: str
    lang: str
    title: str
    source: str
    input_hash: str
    articles: Sequence[Article]
    chunks: Sequence[Chunk]
    edition_date: str | None = None
    edition_basis: EditionBasis | None = None
    repealed_by: str | None = None

    @property
    def key(self) -> DocKey:
        return (self.doc_id, self.lang)


def _order(key: DocKey) -> tuple[int, int, str, str]:
    rank = {s.doc_id: i for i, s in enumerate(ADILET_SOURCES)}
    doc_id, lang = key
    lang_rank = LANG_ORDER.index(lang) if lang in LANG_ORDER else len(LANG_ORDER)
    return (rank.get(doc_id, len(rank)), lang_rank, doc_id, lang)


def _line(record: Article | Chunk) -> str:
    return json.dumps(record.to_json(), ensure_ascii=False) + "\n"


def ingest_command(corpus_dir: Path) -> str:
    """The command that rebuilds the corpus in `corpus_dir` (DATA_DIR/corpus)."""
    return f"python -m ingest_adilet --data-dir {Path(corpus_dir).parent} [--from-dir DIR]"


def _damaged(err: DamagedFile, corpus_dir: Path) -> DataDamaged:
    return DataDamaged(err.path, err.problem, ingest_command(corpus_dir))


def _require(corpus_dir: Path, name: str) -> Path:
    path = Path(corpus_dir) / name
    if not path.exists():
        raise IndexNotReady(f"No corpus at {corpus_dir} ({name} is missing): {_BUILD_HINT}.")
    return path


def _records(corpus_dir: Path, name: str) -> Iterator[dict]:
    """The JSON objects of a corpus JSONL file, checked against the manifest first; DataDamaged naming the file
    and the ingest command when it differs from what was written or does not parse."""
    path = _require(corpus_dir, name)
    try:
        check_file(path, read_manifest(corpus_dir).files.get(name))
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, start=1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError as err:
                        raise DamagedFile(path, f"line {n} is not JSON ({err.msg})") from None
                    except RecursionError:
                        raise DamagedFile(path, f"line {n} is nested too deep") from None
    except UnicodeDecodeError as err:
        raise _damaged(DamagedFile(path, f"not UTF-8 at byte {err.start}"), corpus_dir) from None
    except DamagedFile as err:
        raise _damaged(err, corpus_dir) from None


def _parsed(corpus_dir: Path, name: str, parse: type[Article] | type[Chunk]) -> list:
    records = []
    for n, d in enumerate(_records(corpus_dir, name), start=1):
        try:
            records.append(parse.from_json(d))
        except (KeyError, TypeError, ValueError) as err:
            path = Path(corpus_dir) / name
            raise _damaged(DamagedFile(path, f"record {n} is incomplete ({err!r})"), corpus_dir) from None
    return records


def load_articles(corpus_dir: Path) -> list[Article]:
    """All articles of the corpus, in registry order."""
    return _parsed(corpus_dir, ARTICLES_FILE, Article)


def load_chunks(corpus_dir: Path) -> list[Chunk]:
    """All chunks of the corpus, in registry order."""
    return _parsed(corpus_dir, CHUNKS_FILE, Chunk)


def load_manifest(corpus_dir: Path) -> Manifest:
    """The corpus manifest (documents with counts and hashes, totals)."""
    _require(corpus_dir, MANIFEST_FILE)
    return read_manifest(corpus_dir)


def read_manifest(corpus_dir: Path) -> Manifest:
    """The manifest, or an empty one when no corpus has been written yet; DataDamaged when it does not parse."""
    path = Path(corpus_dir) / MANIFEST_FILE
    if not path.exists():
        return Manifest()
    try:
        return Manifest.model_validate(read_json(path))
    except DamagedFile as err:
        raise _damaged(err, corpus_dir) from None
    except ValidationError as err:
        problem = f"not a corpus manifest: {err.errors()[0]['msg']}" if err.errors() else "not a corpus manifest"
        raise _damaged(DamagedFile(path, problem), corpus_dir) from None


def check_corpus(corpus_dir: Path) -> Manifest:
    """The manifest, after checking that both JSONL files are what it recorded (size and sha256, ~0.2 s for
    the full corpus); DataDamaged naming the first file that is not. An absent corpus is an empty manifest."""
    manifest = read_manifest(corpus_dir)
    for name in (ARTICLES_FILE, CHUNKS_FILE):
        path = Path(corpus_dir) / name
        if not manifest.documents and not manifest.files and not path.exists():
            continue
        try:
            check_file(path, manifest.files.get(name))
            if name not in manifest.files:  # written before sizes were recorded: at least it must parse
                for _ in _records(corpus_dir, name):
                    pass
        except DamagedFile as err:
            raise _damaged(err, corpus_dir) from None
    return manifest


def _grouped_lines(path: Path) -> dict[DocKey, list[str]]:
    """The raw lines of a JSONL file, grouped by (doc_id, lang) in file order."""
    groups: dict[DocKey, list[str]] = {}
    if not path.exists():
        return groups
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                groups.setdefault((d["doc_id"], d["lang"]), []).append(line)
    return groups


def _totals(entries: Iterable[DocumentEntry]) -> dict[str, LangTotals]:
    totals: dict[str, LangTotals] = {}
    for e in entries:
        t = totals.setdefault(e.lang, LangTotals())
        t.documents += 1
        t.articles += e.articles
        t.repealed += e.repealed
        t.chunks += e.chunks
    rank = {lang: i for i, lang in enumerate(LANG_ORDER)}
    return {lang: totals[lang] for lang in sorted(totals, key=lambda x: (rank.get(x, len(rank)), x))}


def write_corpus(
    corpus_dir: Path,
    updates: Sequence[DocumentRecords],
    *,
    now: datetime | None = None,
    fresh: bool = False,
) -> Manifest:
    """Replace the records of the given documents (others are kept as they are, unless `fresh`: then the corpus
    holds only `updates`, as when the previous one is damaged); return the new manifest."""
    corpus_dir = Path(corpus_dir)
    corpus_dir.mkdir(parents=True, exist_ok=True)
    manifest = Manifest() if fresh else read_manifest(corpus_dir)
    if not updates:
        return manifest
    stamp = (now or datetime.now(UTC)).replace(microsecond=0).isoformat()
    articles = {} if fresh else _grouped_lines(corpus_dir / ARTICLES_FILE)
    chunks = {} if fresh else _grouped_lines(corpus_dir / CHUNKS_FILE)
    entries = {e.key: e for e in manifest.documents}
    for doc in updates:
        a_lines = [_line(a) for a in doc.articles]
        c_lines = [_line(c) for c in doc.chunks]
        articles[doc.key] = a_lines
        chunks[doc.key] = c_lines
        entries[doc.key] = DocumentEntry(
            doc_id=doc.doc_id,
            lang=doc.lang,
            title=doc.title,
            source=doc.source,
            edition_date=doc.edition_date,
            edition_basis=doc.edition_basis,
            repealed_by=doc.repealed_by,
            articles=len(doc.articles),
            repealed=sum(a.status == "repealed" for a in doc.articles),
            chunks=len(doc.chunks),
            input_hash=doc.input_hash,
            output_hash=content_hash(*a_lines, *c_lines),
            ingested_at=stamp,
        )
    keys = sorted(set(entries) | set(articles) | set(chunks), key=_order)
    stray = [k for k in keys if k not in entries]
    if stray:  # lines without a manifest entry belong to no known document: drop them
        logger.warning("dropping corpus records without a manifest entry: %s", stray)
        keys = [k for k in keys if k in entries]
    contents = {
        ARTICLES_FILE: (ln for k in keys for ln in articles.get(k, [])),
        CHUNKS_FILE: (ln for k in keys for ln in chunks.get(k, [])),
    }
    staged: list[Staged] = []
    try:
        for name, lines in contents.items():
            staged.append(stage_file(corpus_dir / name, lines))
        new_manifest = Manifest(
            documents=[entries[k] for k in keys],
            totals=_totals(entries[k] for k in keys),
            files={s.path.name: s.digest for s in staged},
        )
        staged.append(stage_file(corpus_dir / MANIFEST_FILE, new_manifest.model_dump_json(indent=1) + "\n"))
        # The manifest goes last: a reader that sees the new manifest sees the new records (and if a move fails
        # half-way, the old manifest's sizes and hashes name the moved file as damaged and the next ingest
        # rebuilds it).
        for s in staged:
            s.publish()
    finally:
        for s in staged:
            s.discard()
    logger.info("corpus written to %s: %d documents updated", corpus_dir, len(updates))
    return new_manifest
