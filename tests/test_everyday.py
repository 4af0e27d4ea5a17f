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


@pytest.mark.parametrize(
    ("question", "article", "within", "not_within"),
    [
        ("Меня сократили, какие выплаты положены?", "131", 1, 5),  # compensation for losing one's job
        ("Завод стоит уже месяц, сидим без работы. Что нам положено?", "112", 10, 50),  # pay for downtime (2026-11-29)
    ],
    ids=["сократили", "завод стоит"],
)
def test_a_russian_question_in_a_citizens_words_finds_its_article_with_the_glossary(
    slice_settings: Settings, chunks: list[Chunk], question: str, article: str, within: int, not_within: int
) -> None:
    """«Сократили» is not the law's word («сокращения численности или штата»), nor «завод стоит» («простой»):
    with the everyday search the article is among the first `within` on the Labour Code alone, without it not
    among the first `not_within`. A Kazakh question gets no such list."""
    from retrieval.pipeline import Retrieval, Stages

    on = Retrieval.load(slice_settings, chunks=chunks, stages=Stages(dense=False, rerank=False))
    assert on.settings.glossary_ru_weight > 0
    off = on.variant(glossary_ru_weight=0.0)
    key = (LABOUR_CODE, article)
    assert key in [(d, a) for d, a, _ in on.rank_articles(question, within)]
    assert key not in [(d, a) for d, a, _ in off.rank_articles(question, not_within)]
    kazakh = "Мені қысқартты, қандай төлемдер төленеді?"
    assert on.rank_articles(kazakh, 10) == off.rank_articles(kazakh, 10)


@pytest.mark.parametrize(
    "question",
    [
        "Купила годовой абонемент в фитнес-клуб, через месяц передумала. Можно вернуть деньги за абонемент?",
        "Хочу вернуть деньги за обучение, школа отказывает",
    ],
    ids=["абонемент", "обучение"],
)
def test_a_refund_for_a_paid_service_finds_the_refusal_of_the_contract(
    shared_dir: Path, tmp_path_factory: pytest.TempPathFactory, question: str
) -> None:
    """«Вернуть деньги за абонемент / обучение» in the law's words is the unilateral refusal of a paid-services
    contract (ГК 686, the Civil Code's special part): with the everyday search among the first 10 of that code,
    without it not among the first 100 (query augmentation off in both: the synonym map's «отказ от услуг» entry
    names ГК 686 too, and this is the everyday search's own test)."""
    from corpus.store import load_chunks
    from ingest_adilet.pipeline import ingest
    from retrieval.pipeline import Retrieval, Stages

    civil_special = "K990000409_"
    settings = Settings(data_dir=tmp_path_factory.mktemp("civil") / "data", _env_file=None, learned_ranker=False)
    assert ingest(settings, source_dir=shared_dir / "corpus", doc_ids=[civil_special], progress=False).ok
    stages = Stages(dense=False, rerank=False, augment=False)
    on = Retrieval.load(settings, chunks=load_chunks(settings.corpus_dir), stages=stages)
    off = on.variant(glossary_ru_weight=0.0)
    key = (civil_special, "686")
    assert key in [(d, a) for d, a, _ in on.rank_articles(question, 10)]
    assert key not in [(d, a) for d, a, _ in off.rank_articles(question, 100)]
