"""Pinecone as the vector store, through the real pinecone client and langchain-pinecone, locally."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import pytest
from langchain_pinecone import PineconeVectorStore
from pydantic import SecretStr

from config import Settings
from corpus.errors import IndexNotReady, UserError
from corpus.records import Chunk
from index.build import build_index, embedding_text, load_vector_store, metadata_filter
from index.pinecone_sync import record_manager
from tests.support.index import KeywordEmbeddings, make_chunk
from tests.support.pinecone_server import PineconeState, pinecone_server

WORDS = ["кража", "грабеж", "разбой", "убийство"]
UK, KOAP = "K1400000226", "K1400000235"


def corpus() -> list[Chunk]:
    return [
        make_chunk(UK, "ru", "188", "Кража", "1. Кража, то есть тайное хищение."),
        make_chunk(UK, "ru", "188", "Кража", "2. Кража группой лиц.", part=1),
        make_chunk(UK, "ru", "191", "Грабеж", "1. Грабеж, то есть открытое хищение."),
        make_chunk(UK, "ru", "192", "Разбой", "1. Разбой, то есть нападение."),
        make_chunk(UK, "kk", "188", "Ұрлық", "1. Ұрлық кража."),
        make_chunk(KOAP, "ru", "134", "Мелкое хищение", "1. Мелкая кража.", code="КоАП РК", kind="code"),
    ]


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """One vector per article in both languages: these tests check the build's mechanics on a tiny corpus."""
    return settings.model_copy(update={"dense_scope": "first_chunk", "dense_search_lang": None})


@pytest.fixture
def server() -> Iterator[tuple[str, PineconeState]]:
    with pinecone_server(dimension=len(WORDS) + 1) as s:
        yield s


@pytest.fixture
def pc_settings(settings: Settings, server: tuple[str, PineconeState]) -> Settings:
    host, _ = server
    return settings.model_copy(
        update={
            "vector_store": "pinecone",
            "pinecone_api_key": SecretStr("pc-test-key"),
            "pinecone_host": host,
            "pinecone_namespace": "laws",
        }
    )


def test_build_upserts_first_chunks_with_float_values_and_metadata(
    pc_settings: Settings, server: tuple[str, PineconeState]
) -> None:
    _, state = server
    fake = KeywordEmbeddings(WORDS)
    report = build_index(pc_settings, chunks=corpus(), embeddings=fake, progress=False)
    assert (report.store, report.vectors, report.upserted, report.embedded, report.deleted) == (
        "pinecone",
        5,
        5,
        5,
        0,
    )

    [upsert] = state.bodies("/vectors/upsert")
    assert upsert["namespace"] == "laws"
    firsts = [c.chunk_id for c in corpus() if c.chunk_id.endswith(":0")]
    assert [v["metadata"]["chunk_id"] for v in upsert["vectors"]] == firsts
    assert [v["id"].partition("#")[0] for v in upsert["vectors"]] == firsts  # chunk id + a hash of what is stored
    first = upsert["vectors"][0]
    assert all(isinstance(x, float) for v in upsert["vectors"] for x in v["values"])
    assert first["values"] == pytest.approx(fake.vector(embedding_text(corpus()[0], pc_settings)), abs=1e-6)
    assert first["metadata"]["text"] == corpus()[0].text
    assert {k: first["metadata"][k] for k in ("doc_id", "article", "lang", "kind", "article_key")} == {
        "doc_id": UK,
        "article": "188",
        "lang": "ru",
        "kind": "code",
        "article_key": f"{UK}:188",
    }
    assert all(r.headers["api-key"] == "pc-test-key" for r in state.requests)
    assert state.bodies("/describe_index_stats")  # the build checks what the namespace holds

    manifest = json.loads((pc_settings.index_dir / "pinecone.json").read_text(encoding="utf-8"))
    assert (manifest["namespace"], manifest["model_id"]) == ("laws", fake.model_id)
    assert sorted(record_manager(pc_settings).list_keys()) == sorted(v["id"] for v in upsert["vectors"])


def test_search_returns_documents_with_metadata_and_sends_filters(
    pc_settings: Settings, server: tuple[str, PineconeState]
) -> None:
    _, state = server
    fake = KeywordEmbeddings(WORDS)
    build_index(pc_settings, chunks=corpus(), embeddings=fake, progress=False)
    store = load_vector_store(pc_settings, embeddings=fake)
    assert isinstance(store, PineconeVectorStore)

    results = store.similarity_search_with_score("грабеж", k=2)
    top, score = results[0]
    assert top.id == f"{UK}:ru:191:0" and top.page_content == corpus()[2].text
    assert top.metadata["article"] == "191" and top.metadata["doc_id"] == UK and "text" not in top.metadata
    assert score == pytest.approx(1.0, abs=1e-3)

    hits = store.similarity_search("кража", k=5, filter=metadata_filter(doc_id=KOAP))
    assert [d.metadata["article"] for d in hits] == ["134"]
    hits = store.similarity_search("кража", k=5, filter=metadata_filter(lang="ru", article=["188", "192"]))
    assert sorted(d.metadata["article"] for d in hits) == ["188", "192"]
    query = state.bodies("/query")[-1]
    assert query["filter"] == {"lang": {"$eq": "ru"}, "article": {"$in": ["188", "192"]}}
    assert query["namespace"] == "laws" and query["includeMetadata"] is True and query["topK"] == 5
    assert all(isinstance(x, float) for x in query["vector"])


def test_rebuild_upserts_only_changes_and_deletes_removed(
    pc_settings: Settings, server: tuple[str, PineconeState]
) -> None:
    _, state = server
    build_index(pc_settings, chunks=corpus(), embeddings=KeywordEmbeddings(WORDS), progress=False)
    again = build_index(pc_settings, chunks=corpus(), embeddings=KeywordEmbeddings(WORDS), progress=False)
    assert (again.upserted, again.embedded, again.unchanged) == (0, 0, True)
    assert len(state.bodies("/vectors/upsert")) == 1

    old_ids = {v["metadata"]["chunk_id"]: v["id"] for v in state.bodies("/vectors/upsert")[0]["vectors"]}

    changed = [c for c in corpus() if c.article != "192"]
    changed[2] = dataclasses.replace(changed[2], text=changed[2].text + " Грабеж с насилием.")
    fake = KeywordEmbeddings(WORDS)
    report = build_index(pc_settings, chunks=changed, embeddings=fake, progress=False)
    # the changed chunk alone is embedded and upserted; its old vector and the removed chunk's are deleted
    assert (report.upserted, report.embedded, report.deleted) == (1, 1, 2)
    assert fake.embedded == [embedding_text(changed[2], pc_settings)]
    [upsert] = state.bodies("/vectors/upsert")[1:]
    assert [v["metadata"]["chunk_id"] for v in upsert["vectors"]] == [f"{UK}:ru:191:0"]
    [delete] = state.bodies("/vectors/delete")
    assert delete["namespace"] == "laws"
    assert sorted(delete["ids"]) == sorted([old_ids[f"{UK}:ru:191:0"], old_ids[f"{UK}:ru:192:0"]])
    assert sorted(v[1]["chunk_id"] for v in state.namespaces["laws"].values()) == sorted(
        c.chunk_id for c in changed if c.chunk_id.endswith(":0")
    )
    assert sorted(state.namespaces["laws"]) == sorted(record_manager(pc_settings).list_keys())
    assert build_index(pc_settings, chunks=changed, embeddings=fake, progress=False).unchanged
    assert len(state.bodies("/vectors/upsert")) == 2 and len(state.bodies("/vectors/delete")) == 1


def test_emptied_namespace_is_filled_again(pc_settings: Settings, server: tuple[str, PineconeState]) -> None:
    _, state = server
    build_index(pc_settings, chunks=corpus(), embeddings=KeywordEmbeddings(WORDS), progress=False)
    state.namespaces["laws"].clear()  # someone deleted the namespace in the console
    with pytest.raises(IndexNotReady, match="is empty"):
        load_vector_store(pc_settings, embeddings=KeywordEmbeddings(WORDS))
    fake = KeywordEmbeddings(WORDS)
    report = build_index(pc_settings, chunks=corpus(), embeddings=fake, progress=False)
    assert report.upserted == 5 and fake.embedded == []  # vectors come from the embedding cache
    assert len(state.namespaces["laws"]) == 5


def test_missing_settings_and_wrong_dimension_fail_clearly(
    pc_settings: Settings, settings: Settings, server: tuple[str, PineconeState]
) -> None:
    no_key = settings.model_copy(update={"vector_store": "pinecone"})
    with pytest.raises(UserError, match="PINECONE_API_KEY and PINECONE_HOST"):
        build_index(no_key, chunks=corpus(), embeddings=KeywordEmbeddings(WORDS), progress=False)
    with pytest.raises(UserError, match="dimension 5 but the embedding model gives 3"):
        build_index(pc_settings, chunks=corpus(), embeddings=KeywordEmbeddings(WORDS[:2]), progress=False)
    _, state = server
    assert state.bodies("/vectors/upsert") == []


def test_vectors_of_a_build_before_the_indexing_api_are_replaced(
    pc_settings: Settings, server: tuple[str, PineconeState]
) -> None:
    """A namespace filled under plain chunk ids (recorded in pinecone.json) is not left with duplicates."""
    _, state = server
    legacy = {c.chunk_id: "old-hash" for c in corpus() if c.chunk_id.endswith(":0")}
    state.namespaces["laws"] = {i: ([1.0, 0, 0, 0, 0], {"text": "old", "chunk_id": i}) for i in legacy}
    pc_settings.index_dir.mkdir(parents=True, exist_ok=True)
    manifest = {"host": pc_settings.pinecone_host, "namespace": "laws", "model_id": "x", "vectors": legacy}
    (pc_settings.index_dir / "pinecone.json").write_text(json.dumps(manifest), encoding="utf-8")
    report = build_index(pc_settings, chunks=corpus(), embeddings=KeywordEmbeddings(WORDS), progress=False)
    assert (report.upserted, report.deleted) == (5, 5)
    assert sorted(state.namespaces["laws"]) == sorted(record_manager(pc_settings).list_keys())
    assert not set(legacy) & set(state.namespaces["laws"])
    assert build_index(pc_settings, chunks=corpus(), embeddings=KeywordEmbeddings(WORDS), progress=False).unchanged
