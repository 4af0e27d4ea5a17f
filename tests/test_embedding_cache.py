"""The embedding cache: content-hash keys, batches committed one by one, resume after an interruption."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from index.cache import CachedEmbeddings, EmbeddingCache, cache_key
from tests.support.index import KeywordEmbeddings

WORDS = ["кража", "грабеж", "разбой", "убийство"]


def texts(n: int) -> list[str]:
    return [f"статья {i} " + " ".join(WORDS[j % 4] for j in range(i % 7 + 1)) for i in range(n)]


def test_second_pass_embeds_nothing_and_returns_the_same_vectors(tmp_path: Path) -> None:
    fake = KeywordEmbeddings(WORDS)
    cache = EmbeddingCache(tmp_path / "cache" / "embeddings.sqlite")
    first = CachedEmbeddings(fake, cache, batch_size=4).embed_documents(texts(10))
    assert len(fake.embedded) == 10 and [len(c) for c in fake.calls] == [4, 4, 2]
    # float32 round trip of the hand-computable vector
    assert first[0] == pytest.approx(fake.vector(texts(10)[0]), abs=1e-6)

    again = CachedEmbeddings(fake, EmbeddingCache(tmp_path / "cache" / "embeddings.sqlite"), batch_size=4)
    second = again.embed_documents(texts(10))
    assert second == first
    assert len(fake.embedded) == 10  # nothing new was embedded
    assert (again.hits, again.misses) == (10, 0)
    assert len(cache) == 10


def test_only_changed_and_new_texts_are_embedded(tmp_path: Path) -> None:
    fake = KeywordEmbeddings(WORDS)
    cached = CachedEmbeddings(fake, EmbeddingCache(tmp_path / "e.sqlite"), batch_size=8)
    cached.embed_documents(texts(5))
    changed = texts(5)
    changed[2] = "статья 2 разбой разбой"
    fake.calls.clear()
    out = cached.embed_documents([*changed, "новая статья убийство", "новая статья убийство"])
    assert fake.embedded == ["статья 2 разбой разбой", "новая статья убийство"]  # duplicates embed once
    assert out[5] == out[6]
    assert np.argmax(out[2]) == WORDS.index("разбой")


def test_keys_depend_on_model_and_kind() -> None:
    assert cache_key("m1", "text") != cache_key("m2", "text")
    assert cache_key("m1", "text", "passage") != cache_key("m1", "text", "query")
    assert cache_key("m1", "text") == cache_key("m1", "text")


def test_interrupted_run_keeps_committed_batches(tmp_path: Path) -> None:
    path = tmp_path / "e.sqlite"
    failing = KeywordEmbeddings(WORDS, fail_after=10)  # the third batch of 4 raises
    with pytest.raises(RuntimeError, match="injected"):
        CachedEmbeddings(failing, EmbeddingCache(path), batch_size=4).embed_documents(texts(20))
    assert len(EmbeddingCache(path)) == 8  # two batches were committed before the failure

    fresh = KeywordEmbeddings(WORDS)
    batches: list[int] = []
    resumed = CachedEmbeddings(fresh, EmbeddingCache(path), batch_size=4, on_batch=lambda n, s: batches.append(n))
    assert len(resumed.missing(texts(20))) == 12
    out = resumed.embed_documents(texts(20))
    assert fresh.embedded == texts(20)[8:]
    assert batches == [4, 4, 4]
    assert out[0] == pytest.approx(fresh.vector(texts(20)[0]), abs=1e-6)


def test_queries_are_not_cached(tmp_path: Path) -> None:
    fake = KeywordEmbeddings(WORDS)
    cache = EmbeddingCache(tmp_path / "e.sqlite")
    q = CachedEmbeddings(fake, cache).embed_query("кража")
    assert q == fake.vector("кража") and len(cache) == 0


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),  # truncated: "disk image is malformed"
        lambda p: p.write_bytes(b"\0garbage" * 16 + p.read_bytes()[128:]),  # header overwritten: "not a database"
    ],
    ids=["truncated", "overwritten"],
)
def test_a_damaged_cache_is_moved_aside_and_a_new_one_started(tmp_path: Path, damage, caplog) -> None:
    path = tmp_path / "embeddings.sqlite"
    cache = EmbeddingCache(path)
    cache.put_many([(cache_key("m", t), np.ones(384)) for t in texts(300)])  # several pages
    cache.close()
    damage(path)
    with caplog.at_level("WARNING", logger="index.cache"):
        fresh = EmbeddingCache(path)
    assert len(fresh) == 0 and "is damaged" in caplog.text
    [aside] = [p for p in tmp_path.iterdir() if ".damaged-" in p.name]
    assert aside.name in caplog.text
    fake = KeywordEmbeddings(WORDS)
    CachedEmbeddings(fake, fresh).embed_documents(texts(3))  # the build goes on: it embeds again
    assert len(fake.embedded) == 3 and len(fresh) == 3
