"""BM25's analysis of every chunk, kept: made once by the index build, read back by every start.

Analysing the ~18k chunks of the full corpus for BM25 (tokens, stems, phrase pairs, weights) takes ~9 s of CPU,
the most of a chain's load (bench/chain_start.py). The build that writes the index (`ingest_adilet index`, a
refresh, the bot's background build) also writes DATA_DIR/index/bm25/:

- weights.npz: BM25's weight of each (term, chunk), scipy's CSR npz of terms × chunks — the very arrays of the
  chunks × terms CSC matrix `SparseBM25` searches, so a load takes them as they are (no copy, no recomputation);
- terms.json: the term of each row, in ascending order (a JSON list of strings), so that a load looks a question's
  terms up by bisection (`SortedTerms`) instead of building a dict of them;
- meta.json: what they were made from — the analyzer (`analyzer_id`: the setting that shapes the terms, the
  stemmer's version and a digest of the code that makes terms and weights) and the chunks (`corpus_hash`: their
  ids and texts, in order) —, the shape, and the size and sha256 of the other two files.

A load uses them only when meta.json names these chunks and this analyzer; otherwise (not built, another corpus,
another analyzer or setting) it says so in the log and analyses the chunks as before, so the rankings are the
same either way. A file that is not what its build wrote (size, sha256, an array header, the shape) is
DamagedFile, refused like every other index file. Nothing is unpickled.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

from langchain_core.documents import Document
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from scipy import sparse

import corpus.lang
import retrieval.analyzer
import retrieval.bm25
from config import Settings
from corpus.files import DamagedFile, FileDigest, atomic_write, check_file, read_json
from corpus.records import Chunk, content_hash
from index.publish import writes_data_dir
from index.sparse import check_matrix
from retrieval.articles import chunk_document
from retrieval.bm25 import ChunkBM25Retriever, SortedTerms, SparseBM25
from retrieval.searches import build_bm25

logger = logging.getLogger(__name__)

FOLDER = "bm25"  # in DATA_DIR/index
WEIGHTS_FILE = "weights.npz"
TERMS_FILE = "terms.json"
META_FILE = "meta.json"
FILES = (META_FILE, WEIGHTS_FILE, TERMS_FILE)
MAX_CHUNKS = 1 << 24  # ~900 times the full corpus: a header declaring more is not a build of ours
# The code that turns a chunk into terms and weights: any change to it makes the kept weights out of date.
ANALYSIS_CODE = (corpus.lang, retrieval.analyzer, retrieval.bm25)


class Bm25Meta(BaseModel):
    """meta.json of the kept BM25 analysis."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    analyzer: str
    corpus: str
    chunks: int = Field(ge=0)
    terms: int = Field(ge=0)
    files: dict[str, FileDigest]
    built_at: str


@dataclass(frozen=True)
class Bm25Report:
    chunks: int
    terms: int
    seconds: float
    unchanged: bool = False


# Read when this module is loaded (with the analysis code it imports), not when first asked: see corpus/lang.py.
_CODE_DIGEST = hashlib.sha256(b"".join(Path(m.__file__ or "").read_bytes() for m in ANALYSIS_CODE)).hexdigest()[:16]


def analyzer_id(settings: Settings) -> str:
    """What makes BM25's terms and weights: the phrase setting, the stemmer's version, a digest of the code."""
    return f"{'phrases' if settings.bm25_phrases else 'terms'}:snowball-{version('snowballstemmer')}:{_CODE_DIGEST}"


def corpus_hash(documents: Sequence[Document]) -> str:
    """The chunks BM25 is built over: their ids and texts, in order (~0.1 s for the full corpus)."""
    return content_hash(*(part for d in documents for part in (d.id or "", d.page_content)))


def folder_of(settings: Settings) -> Path:
    return settings.index_dir / FOLDER


@writes_data_dir("index")
def build_bm25_index(settings: Settings, chunks: Sequence[Chunk] | None = None) -> Bm25Report:
    """Analyse the corpus's chunks (DATA_DIR/corpus, or `chunks`) and keep BM25's weights in DATA_DIR/index/bm25;
    nothing is written when the kept ones were made from these chunks by this analyzer and are whole."""
    from index.build import read_chunks

    start = time.perf_counter()
    documents = [chunk_document(c) for c in (chunks if chunks is not None else read_chunks(settings))]
    folder = folder_of(settings)
    analyzer, corpus = analyzer_id(settings), corpus_hash(documents)
    try:
        meta = _read_meta(folder)
        if meta is not None and (meta.analyzer, meta.corpus, meta.chunks) == (analyzer, corpus, len(documents)):
            _read(folder, meta)  # whole, as a load would find it
            return Bm25Report(meta.chunks, meta.terms, time.perf_counter() - start, unchanged=True)
    except DamagedFile as err:
        logger.warning("%s is damaged (%s): analysing the chunks again", err.path, err.problem)
    scorer = build_bm25(documents, settings).vectorizer
    terms = scorer.terms
    order = sorted(range(len(terms)), key=terms.__getitem__)  # kept in term order: read back as SortedTerms
    terms = [terms[i] for i in order]
    weights = scorer.matrix.T.tocsr()[order]  # terms × chunks: its arrays are those of the chunks × terms CSC
    folder.mkdir(parents=True, exist_ok=True)
    (folder / META_FILE).unlink(missing_ok=True)  # a crash from here on leaves no kept analysis, never a mixed one
    files = {
        WEIGHTS_FILE: atomic_write(folder / WEIGHTS_FILE, lambda f: sparse.save_npz(f, weights, compressed=False)),
        TERMS_FILE: atomic_write(folder / TERMS_FILE, json.dumps(terms, ensure_ascii=False)),
    }
    meta = Bm25Meta(
        analyzer=analyzer,
        corpus=corpus,
        chunks=len(documents),
        terms=len(terms),
        files=files,
        built_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    atomic_write(folder / META_FILE, meta.model_dump_json(indent=1))
    seconds = time.perf_counter() - start
    logger.info("BM25 analysis kept in %s: %d chunks, %d terms, %.1f s", folder, len(documents), len(terms), seconds)
    return Bm25Report(len(documents), len(terms), seconds)


def load_bm25(documents: Sequence[Document], settings: Settings) -> ChunkBM25Retriever:
    """BM25 over these chunk Documents from the analysis the build kept when it was made from them by this
    analyzer, else by analysing them (logged); DamagedFile when a kept file is not what its build wrote."""
    scorer = load_scorer(settings, documents)
    if scorer is None:
        start = time.perf_counter()
        retriever = build_bm25(documents, settings)
        logger.info("BM25: %d chunks analysed in %.1f s", len(documents), time.perf_counter() - start)
        return retriever
    return build_bm25(documents, settings, scorer=scorer)


NOT_KEPT = "not kept"
OTHER_ANALYZER = "made by another analyzer"
OTHER_CORPUS = "made from another corpus"


def check_bm25(settings: Settings, documents: Sequence[Document]) -> str | None:
    """Why the kept analysis cannot serve these documents (NOT_KEPT, OTHER_ANALYZER, OTHER_CORPUS), None when it
    was made from them by this analyzer; DamagedFile when its meta.json does not parse."""
    return _match(settings, documents)[1]


def load_scorer(settings: Settings, documents: Sequence[Document]) -> SparseBM25 | None:
    """The kept BM25 weights of these documents, or None (logged) when none were kept or they were made from
    other chunks or by another analyzer; DamagedFile when a file is not what its build wrote."""
    folder = folder_of(settings)
    meta, why = _match(settings, documents)
    if meta is None or why is not None:
        log = logger.info if why == NOT_KEPT else logger.warning
        log("BM25 analysis in %s %s: analysing the chunks (`python -m ingest_adilet index` keeps it)", folder, why)
        return None
    return _read(folder, meta)


def _match(settings: Settings, documents: Sequence[Document]) -> tuple[Bm25Meta | None, str | None]:
    """meta.json and why it cannot serve these documents (None: it can)."""
    meta = _read_meta(folder_of(settings))
    if meta is None:
        return None, NOT_KEPT
    if meta.analyzer != analyzer_id(settings):
        return meta, OTHER_ANALYZER
    if meta.chunks != len(documents) or meta.corpus != corpus_hash(documents):
        return meta, OTHER_CORPUS
    return meta, None


def check_kept(folder: Path) -> Bm25Meta:
    """meta.json, after checking both files against it (size, sha256) and the weights' array headers against the
    shape it declares — the checks made before anything is loaded; DamagedFile when one fails (a missing
    meta.json too)."""
    meta = _read_meta(folder)
    if meta is None:
        raise DamagedFile(folder / META_FILE, "missing")
    _check_files(folder, meta)
    return meta


def _check_files(folder: Path, meta: Bm25Meta) -> None:
    if set(meta.files) != {WEIGHTS_FILE, TERMS_FILE}:
        raise DamagedFile(folder / META_FILE, f"records {sorted(meta.files)}, not {WEIGHTS_FILE} and {TERMS_FILE}")
    for name in (WEIGHTS_FILE, TERMS_FILE):
        check_file(folder / name, meta.files[name])
    shape = check_matrix(folder / WEIGHTS_FILE, max_columns=MAX_CHUNKS, row_limit=None)
    if shape != (meta.terms, meta.chunks):
        raise DamagedFile(
            folder / WEIGHTS_FILE,
            f"a {shape[0]} × {shape[1]} matrix, {META_FILE} says {meta.terms} terms × {meta.chunks} chunks",
        )


def _read(folder: Path, meta: Bm25Meta) -> SparseBM25:
    """The scorer from the kept files, each checked before it is parsed (sizes are then bounded by meta.json)."""
    _check_files(folder, meta)
    path = folder / WEIGHTS_FILE
    try:
        weights = sparse.load_npz(path)
        if weights.format != "csr" or weights.dtype.kind != "f":
            raise ValueError(f"a {weights.format} matrix of {weights.dtype}")
        weights.check_format(full_check=True)  # offsets ascending, chunk indices inside the matrix
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as err:
        raise DamagedFile(path, f"not BM25's weights ({type(err).__name__}: {str(err)[:80]})") from None
    path = folder / TERMS_FILE
    try:
        terms = json.loads(path.read_bytes())  # its size is the one meta.json records (checked above)
    except (ValueError, RecursionError) as err:
        raise DamagedFile(path, f"not JSON ({type(err).__name__})") from None
    if not isinstance(terms, list) or len(terms) != meta.terms or not set(map(type, terms)) <= {str}:
        raise DamagedFile(path, f"not a list of the {meta.terms} terms {META_FILE} declares")
    vocab = SortedTerms(terms)
    if not vocab.is_sorted():
        raise DamagedFile(path, "its terms are not in ascending order, each once")
    return SparseBM25.from_weights(weights.T, vocab)  # the transpose of a CSR matrix is a CSC one, no copy


def _read_meta(folder: Path) -> Bm25Meta | None:
    """meta.json, None when there is none; DamagedFile when it does not parse."""
    path = folder / META_FILE
    try:
        return Bm25Meta.model_validate(read_json(path))
    except FileNotFoundError:
        return None
    except ValidationError as err:
        raise DamagedFile(path, f"not the meta of a BM25 analysis ({err.errors()[0]['msg']})") from None
