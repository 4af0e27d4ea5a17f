"""A Russian question's everyday words in the law's terms (retrieval/everyday.py): the packaged glossary read
against the corpus, its matching, and the search it adds on a real slice of ../shared (the Labour Code)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from config import Settings
from corpus.lang import stem_ru
from corpus.records import Chunk
from retrieval.analyzer import analyze
from retrieval.everyday import EverydayEntry, EverydayGlossary, EverydayTerms
from retrieval.synonyms import load_packaged

LABOUR_CODE = "K1500000414"


def test_every_term_of_the_glossary_is_the_laws_own_wording(shared_dir: Path) -> None:
    """Each of the law's terms occurs in the corpus texts (a misspelt or invented term would match nothing), and
    each everyday form has words a question can match."""
    vocabulary: set[str] = set()
    for path in sorted((shared_dir / "corpus" / "rus").glob("*.txt")):
        vocabulary |= set(re.findall(r"[а-яё]+", path.read_text(encoding="utf-8").lower()))
    stems = {stem_ru(w) for w in vocabulary}
    entries = load_packaged("glossary_ru.json", EverydayGlossary).entries
    assert len(entries) >= 300
    unknown = sorted({t for e in entries for t in e.ru if not set(analyze(t, "ru")) <= stems})
    assert not unknown, unknown
    assert all(analyze(f, "ru") for e in entries for f in e.ru_forms)


def test_the_longest_form_at_a_place_wins_and_each_entry_counts_once() -> None:
    terms = EverydayTerms.of(
        EverydayGlossary(
            entries=[
                EverydayEntry(ru_forms=["муж"], ru=["супруг"]),
                EverydayEntry(ru_forms=["бывший муж", "бывшего мужа"], ru=["бывший супруг"]),
                EverydayEntry(ru_forms=["декрет", "декретный"], ru=["отпуск по беременности и родам"]),
                EverydayEntry(ru_forms=["по статье", "уволили по статье"], ru=["дисциплинарное взыскание"]),
            ]
        )
    )
    assert terms.phrases("Бывший муж не платит") == ["бывший супруг"]
    assert terms.phrases("Муж против декрета") == ["супруг", "отпуск по беременности и родам"]
    assert terms.phrases("Декретный отпуск, декрет") == ["отпуск по беременности и родам"]
    assert terms.query("Кто оплачивает декрет?") == "отпуск беремен род"
    assert terms.query("Сколько дней отпуска?") == ""  # nothing everyday: nothing searched
    # «по статье» leaves only «статья», a word of every other question: only the whole «уволили по статье» counts.
    assert terms.phrases("Что говорит статья 188?") == []
    assert terms.phrases("Меня уволили по статье") == ["дисциплинарное взыскание"]
    assert EverydayTerms.packaged().phrases("утратила силу статья") == []


@pytest.fixture(scope="module")
def slice_settings(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """The Labour Code, ingested by the real ingest from ../shared."""
    from ingest_adilet.pipeline import ingest

    settings = Settings(data_dir=tmp_path_factory.mktemp("everyday") / "data", _env_file=None, learned_ranker=False)
    report = ingest(settings, source_dir=shared_dir / "corpus", doc_ids=[LABOUR_CODE], progress=False)
    assert report.ok, report.failures
    return settings


@pytest.fixture(scope="module")
def chunks(slice_settings: Settings) -> list[Chunk]:
    from corpus.store import load_chunks

    return load_chunks(slice_settings.corpus_dir)


def test_a_russian_question_in_a_citizens_words_finds_its_article_with_the_glossary(
    slice_settings: Settings, chunks: list[Chunk]
) -> None:
    """«Сократили» is not the law's word («сокращения численности или штата»): without the everyday search the
    compensation for losing one's job (ТК 131) is not among the first five; with it, it is first. A Kazakh
    question gets no such list."""
    from retrieval.pipeline import Retrieval, Stages

    question = "Меня сократили, какие выплаты положены?"
    on = Retrieval.load(slice_settings, chunks=chunks, stages=Stages(dense=False, rerank=False))
    assert on.settings.glossary_ru_weight > 0
    off = on.variant(glossary_ru_weight=0.0)
    compensation = (LABOUR_CODE, "131")
    assert [(d, a) for d, a, _ in on.rank_articles(question, 1)] == [compensation]
    assert compensation not in [(d, a) for d, a, _ in off.rank_articles(question, 5)]
    kazakh = "Мені қысқартты, қандай төлемдер төленеді?"
    assert on.rank_articles(kazakh, 10) == off.rank_articles(kazakh, 10)


def test_downtime_in_a_citizens_words_finds_the_pay_for_downtime(slice_settings: Settings, chunks: list[Chunk]) -> None:
    """«Завод стоит» is the law's «простой» (an entry of 2026-11-29): with the everyday search the pay for
    downtime (ТК 112) is among the first ten on the Labour Code alone, without it not among the first fifty."""
    from retrieval.pipeline import Retrieval, Stages

    question = "Завод стоит уже месяц, сидим без работы. Что нам положено?"
    on = Retrieval.load(slice_settings, chunks=chunks, stages=Stages(dense=False, rerank=False))
    off = on.variant(glossary_ru_weight=0.0)
    downtime = (LABOUR_CODE, "112")
    assert downtime in [(d, a) for d, a, _ in on.rank_articles(question, 10)]
    assert downtime not in [(d, a) for d, a, _ in off.rank_articles(question, 50)]
