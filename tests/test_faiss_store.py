"""The FAISS store: cosine scores by hand, exact metadata filters, JSON save/load (no pickle), atomic swap."""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import numpy as np
import pytest
from langchain_community.vectorstores import FAISS
from langchain_core.documents import Document

from corpus.files import DamagedFile, file_digest
from index.faiss_store import LawFAISS, load_faiss, read_faiss_meta, save_faiss
from tests.support.index import KeywordEmbeddings

WORDS = ["кража", "грабеж", "разбой", "убийство"]
ROWS = [  # id, text, doc_id, article, lang, kind
    ("uk:ru:188:0", "кража кража", "K1400000226", "188", "ru", "code"),
    ("uk:ru:190:0", "кража грабеж", "K1400000226", "190", "ru", "code"),
    ("uk:ru:191:0", "грабеж", "K1400000226", "191", "ru", "code"),
    ("uk:kk:188:0", "кража разбой", "K1400000226", "188", "kk", "code"),
    ("koap:ru:134:0", "кража", "K1400000235", "134", "ru", "code"),
    ("law:ru:5:0", "убийство", "Z0000", "5", "ru", "law"),
]


@pytest.fixture
def fake() -> KeywordEmbeddings:
    return KeywordEmbeddings(WORDS)


@pytest.fixture
def store(fake: KeywordEmbeddings) -> LawFAISS:
    docs = [
        Document(page_content=t, metadata={"doc_id": d, "article": a, "lang": lang, "kind": k, "chunk_id": i})
        for i, t, d, a, lang, k in ROWS
    ]
    return LawFAISS.from_vectors(fake, docs, [fake.vector(d.page_content) for d in docs], [r[0] for r in ROWS])


def ids(results: list[tuple[Document, float]]) -> list[str]:
    return [d.metadata["chunk_id"] for d, _ in results]


def test_scores_are_cosine_similarities(store: LawFAISS) -> None:
    results = store.similarity_search_with_score("кража", k=6)
    # query (1,0,0,0,.01): cosine with «кража кража» ≈ 1, with «кража грабеж» ≈ 1/√2, with «грабеж» ≈ 0
    got = dict(zip(ids(results), [s for _, s in results], strict=True))
    assert got["uk:ru:188:0"] == pytest.approx(1.0, abs=1e-3)
    assert got["uk:ru:190:0"] == pytest.approx(1 / math.sqrt(2), abs=1e-3)
    assert got["uk:ru:191:0"] == pytest.approx(0.0, abs=1e-3)
    assert ids(results)[:2] in (["uk:ru:188:0", "koap:ru:134:0"], ["koap:ru:134:0", "uk:ru:188:0"])
    rel = store.similarity_search_with_relevance_scores("кража", k=1)
    assert rel[0][1] == pytest.approx(1.0, abs=1e-3)  # relevance is in [0, 1], higher is better


def test_filters_plain_lists_and_operators(store: LawFAISS) -> None:
    search = store.similarity_search_with_score
    assert ids(search("кража", k=5, filter={"doc_id": "K1400000235"})) == ["koap:ru:134:0"]
    assert ids(search("кража", k=5, filter={"article": ["190", "191"]})) == ["uk:ru:190:0", "uk:ru:191:0"]
    assert ids(search("кража", k=5, filter={"lang": {"$eq": "kk"}})) == ["uk:kk:188:0"]
    assert ids(search("грабеж", k=5, filter={"doc_id": {"$in": ["K1400000226"]}, "lang": "ru"})) == [
        "uk:ru:191:0",
        "uk:ru:190:0",
        "uk:ru:188:0",
    ]
    assert ids(search("кража", k=5, filter={"kind": "law"})) == ["law:ru:5:0"]
    assert search("кража", k=5, filter={"doc_id": "nope"}) == []


def test_narrow_filter_is_exact_beyond_fetch_k(fake: KeywordEmbeddings) -> None:
    """LangChain's FAISS keeps filter matches among the top fetch_k hits; ours searches inside the filter."""
    docs = [Document(page_content="кража", metadata={"doc_id": "A", "n": i}) for i in range(60)]
    docs.append(Document(page_content="убийство", metadata={"doc_id": "B", "n": 60}))
    store = LawFAISS.from_vectors(fake, docs, [fake.vector(d.page_content) for d in docs], [str(i) for i in range(61)])
    [(doc, score)] = store.similarity_search_with_score("кража", k=3, filter={"doc_id": "B"}, fetch_k=20)
    plain = FAISS.similarity_search_with_score_by_vector(store, fake.vector("кража"), 3, {"doc_id": "B"}, 20)
    assert plain == []  # what the base class would have answered
    assert doc.metadata["n"] == 60 and score == pytest.approx(0.0, abs=1e-3)


def test_save_and_load_round_trip_without_pickle(
    store: LawFAISS, fake: KeywordEmbeddings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "index" / "faiss"
    size = save_faiss(store, folder, {"model_id": fake.model_id})
    assert size > 0 and sorted(p.name for p in folder.iterdir()) == [
        "docstore.jsonl",
        "index.faiss",
        "meta.json",
    ]
    meta = read_faiss_meta(folder)
    assert {k: meta[k] for k in ("model_id", "count", "dim")} == {"model_id": fake.model_id, "count": 6, "dim": 5}
    for name in ("index.faiss", "docstore.jsonl"):  # what a load checks the files against
        assert meta["files"][name] == file_digest(folder / name).model_dump()

    def no_pickle(*args: object, **kwargs: object) -> None:
        raise AssertionError("load must not unpickle")

    monkeypatch.setattr(pickle, "load", no_pickle)
    monkeypatch.setattr(pickle, "loads", no_pickle)
    loaded = load_faiss(folder, fake)
    before = store.similarity_search_with_score("кража грабеж", k=6)
    after = loaded.similarity_search_with_score("кража грабеж", k=6)
    assert [(d.id, d.page_content, d.metadata) for d, _ in after] == [
        (d.id, d.page_content, d.metadata) for d, _ in before
    ]
    assert [s for _, s in after] == pytest.approx([s for _, s in before])
    assert ids(loaded.similarity_search_with_score("кража", k=5, filter={"lang": "kk"})) == ["uk:kk:188:0"]


def test_failed_save_leaves_the_previous_index(
    store: LawFAISS, fake: KeywordEmbeddings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "faiss"
    save_faiss(store, folder, {"build": 1})
    bigger = LawFAISS.from_vectors(fake, [Document(page_content="разбой")], [fake.vector("разбой")], ["new"])

    import index.faiss_store as fs

    def broken_dumps(*args: object, **kwargs: object) -> str:
        raise OSError("disk full")

    monkeypatch.setattr(fs.json, "dumps", broken_dumps)
    with pytest.raises(OSError, match="disk full"):
        save_faiss(bigger, folder, {"build": 2})
    monkeypatch.undo()
    assert read_faiss_meta(folder)["build"] == 1
    assert len(load_faiss(folder, fake).documents_in_order()) == 6
    assert [p.name for p in tmp_path.iterdir()] == ["faiss"]  # the temp folder was removed

    # a swap interrupted between its two renames: the old index is found under faiss.old
    folder.rename(tmp_path / "faiss.old")
    assert read_faiss_meta(folder)["build"] == 1
    save_faiss(bigger, folder, {"build": 3})
    assert read_faiss_meta(folder)["build"] == 3 and not (tmp_path / "faiss.old").exists()
    assert load_faiss(folder, fake).similarity_search("разбой", k=1)[0].page_content == "разбой"


def test_missing_index_raises_file_not_found(tmp_path: Path, fake: KeywordEmbeddings) -> None:
    with pytest.raises(FileNotFoundError):
        load_faiss(tmp_path / "nothing", fake)


def test_filtered_search_equals_the_full_ranking_restricted(fake: KeywordEmbeddings) -> None:
    """Every filter form gives the unfiltered order restricted to the matching documents."""
    rng = np.random.default_rng(7)
    n = 300
    vectors = rng.standard_normal((n, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    meta = [{"doc_id": f"D{i % 7}", "article": str(i % 13), "lang": "ru" if i % 3 else "kk", "n": i} for i in range(n)]
    docs = [Document(page_content=f"doc {i}", metadata=m) for i, m in enumerate(meta)]
    store = LawFAISS.from_vectors(fake, docs, vectors, [str(i) for i in range(n)])
    query = rng.standard_normal(8).astype(np.float32)
    full = [d.metadata["n"] for d, _ in store.similarity_search_with_score_by_vector(query.tolist(), k=n)]
    filters = [
        {"doc_id": "D3"},
        {"doc_id": {"$in": ["D1", "D2"]}, "lang": {"$eq": "kk"}},
        {"article": ["1", "2", "3"], "lang": "ru"},
        {"lang": {"$nin": ["ru"]}},  # not a plain condition: the scan path
        {"$or": [{"doc_id": "D0"}, {"article": "5"}]},
    ]
    for flt in filters:
        keep = FAISS._create_filter_func(flt)
        want = [i for i in full if keep(meta[i])][:10]
        got = [d.metadata["n"] for d, _ in store.similarity_search_with_score_by_vector(query.tolist(), 10, flt)]
        assert got == want, flt
    # the per-field value index follows documents added later
    store.add_embeddings([("late", vectors[0].tolist())], metadatas=[{"doc_id": "D99", "n": n}], ids=["late"])
    [(late, score)] = store.similarity_search_with_score_by_vector(vectors[0].tolist(), 5, {"doc_id": "D99"})
    assert late.page_content == "late" and score == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize(
    ("name", "damage", "problem"),
    [
        ("index.faiss", lambda p: p.write_bytes(p.read_bytes()[:-40]), "bytes, its build wrote"),
        ("docstore.jsonl", lambda p: p.write_bytes(p.read_bytes()[:-7]), "bytes, its build wrote"),
        # the same size, other bytes: only the sha256 tells
        (
            "docstore.jsonl",
            lambda p: p.write_bytes(p.read_bytes().replace("кража".encode(), "КРАЖА".encode())),
            "sha256",
        ),
        ("meta.json", lambda p: p.write_bytes(b""), "not JSON"),
    ],
)
def test_a_damaged_file_is_named(store: LawFAISS, fake: KeywordEmbeddings, tmp_path: Path, name, damage, problem):
    folder = tmp_path / "faiss"
    save_faiss(store, folder, {"build": 1})
    damage(folder / name)
    with pytest.raises(DamagedFile, match=problem) as err:
        load_faiss(folder, fake)
    assert err.value.path == folder / name


def test_an_index_without_checksums_is_still_checked_when_read(
    store: LawFAISS, fake: KeywordEmbeddings, tmp_path: Path
) -> None:
    """An index written before sizes were recorded: faiss's and JSON's own errors become DamagedFile."""
    import json

    folder = tmp_path / "faiss"
    save_faiss(store, folder, {"build": 1})
    meta = json.loads((folder / "meta.json").read_text())
    del meta["files"]
    (folder / "meta.json").write_text(json.dumps(meta))
    assert len(load_faiss(folder, fake).documents_in_order()) == 6
    good = (folder / "docstore.jsonl").read_bytes()
    (folder / "docstore.jsonl").write_bytes(good[:-9])  # a cut line (mid-character too: not UTF-8)
    with pytest.raises(DamagedFile, match="does not parse"):
        load_faiss(folder, fake)
    (folder / "docstore.jsonl").write_bytes(good[: good.index(b"\n") + 1])  # cut at a line end
    with pytest.raises(DamagedFile, match="1 documents for 6 vectors"):
        load_faiss(folder, fake)
    (folder / "docstore.jsonl").write_bytes(good)
    index = folder / "index.faiss"
    index.write_bytes(index.read_bytes()[:-40])
    with pytest.raises(
        DamagedFile, match=r"its header declares 6 vectors of dimension 5 \(30 floats\), the file holds 20"
    ):
        load_faiss(folder, fake)
