"""The grounding check on answers over real articles: citations, the Criminal Code, language, support."""

from __future__ import annotations

from pathlib import Path

import pytest

from answer.context import to_sources
from answer.grounding import check_grounding
from answer.records import Source
from config import Settings
from corpus.legal import cited_refs as article_refs
from corpus.legal.registry import CRIMINAL_CODE_ID
from tests.support.answer import GK, PERSONAL_DATA, UK, docs

THEFT = (
    "Кража — это тайное хищение чужого имущества [S1]. По части 1 статьи 188 УК РК кража наказывается "
    "штрафом до одной тысячи месячных расчетных показателей либо лишением свободы на срок до трех лет [S1].\n"
    "Объект — отношения собственности. Субъективная сторона — умысел [S1].\n"
    "Кража в крупном размере наказывается лишением свободы на срок от двух до семи лет [S1].\n\n"
    "Это не юридическая консультация: ответ составлен по текстам законов. "
    "Проверьте действующую редакцию на adilet.zan.kz."
)


@pytest.fixture
def uk_sources(settings: Settings, shared_dir: Path) -> tuple[Source, ...]:
    return to_sources(docs(shared_dir, UK, ["188", "187", "190"]), settings)


def check(text: str, sources, settings: Settings, *, lang: str = "ru", is_criminal: bool = True):
    return check_grounding(text, sources, lang=lang, is_criminal=is_criminal, settings=settings)


def test_a_faithful_answer_passes(settings: Settings, uk_sources):
    g = check(THEFT, uk_sources, settings)
    assert g.ok, g.notes
    assert g.cited == ("S1",)
    assert g.unknown_citations == () and g.unsupported_sentences == ()


def test_an_unknown_source_id_fails(settings: Settings, uk_sources):
    g = check(THEFT + " См. также [S9].", uk_sources, settings)
    assert not g.ok
    assert g.unknown_citations == ("[S9]",)


@pytest.mark.parametrize(
    "reference",
    [
        "по статье 175 УК РК",
        "согласно ст. 175",
        "ст.189 Уголовного кодекса",
        "ҚР ҚК-нің 175-бабы",
        "статьи 188 и 192",
    ],
)
def test_a_written_reference_to_an_article_outside_the_sources_fails(settings: Settings, uk_sources, reference):
    g = check(THEFT.replace("[S1].\nОбъект", f"[S1], а также {reference}.\nОбъект"), uk_sources, settings)
    assert not g.ok
    assert len(g.unknown_citations) == 1
    assert "cites what is not among the sources" in g.notes[0]


def test_a_reference_to_the_right_number_in_another_code_fails(settings: Settings, uk_sources):
    g = check(THEFT.replace("статьи 188 УК РК", "статьи 188 ГК РК"), uk_sources, settings)
    assert not g.ok and g.unknown_citations == ("статьи 188",)


def test_references_in_every_form_resolve_to_sources(settings: Settings, shared_dir: Path):
    sources = to_sources(docs(shared_dir, UK, ["188", "189", "190"]), settings)
    text = (
        "Статьи 188–190 УК РК касаются хищений [S1]. Ст. 189 — присвоение и растрата чужого имущества [S2]. "
        "Статья 190 Уголовного кодекса — мошенничество [S3]. ҚР ҚК-нің 188-бабы — кража."
    )
    g = check(text, sources, settings, is_criminal=True)
    assert g.ok, g.notes
    assert set(g.cited) == {"S1", "S2", "S3"}


def test_article_refs_read_lists_codes_and_kazakh_forms():
    [ru] = article_refs("согласно статьям 188, 189 и 190-1 Уголовного кодекса")
    assert ru.numbers == ("188", "189", "190-1") and ru.docs == {CRIMINAL_CODE_ID}
    [kk] = article_refs("Қылмыстық кодекстің 188-1-бабы")
    assert kk.numbers == ("188-1",) and kk.docs == {CRIMINAL_CODE_ID}
    [bare] = article_refs("часть 2 статьи 7 настоящего Кодекса")
    assert bare.numbers == ("7",) and bare.docs is None


def test_an_answer_citing_nothing_fails(settings: Settings, uk_sources):
    g = check("Кража наказывается штрафом либо лишением свободы на срок до трех лет.", uk_sources, settings)
    assert not g.ok and "cites no source" in g.notes


def test_a_crime_question_without_a_criminal_code_source_fails(settings: Settings, shared_dir: Path):
    sources = to_sources(docs(shared_dir, GK, ["188", "178"]), settings)
    text = "Собственник вправе владеть, пользоваться и распоряжаться своим имуществом [S1]."
    assert check(text, sources, settings, is_criminal=False).ok
    g = check(text, sources, settings, is_criminal=True)
    assert not g.ok
    assert "crime question: no Criminal Code source" in g.notes


def test_a_crime_answer_must_cite_the_criminal_code_it_was_given(settings: Settings, shared_dir: Path):
    sources = (*to_sources(docs(shared_dir, GK, ["188"]), settings), *uk_sources_of(settings, shared_dir))
    text = "Собственник вправе владеть, пользоваться и распоряжаться своим имуществом [S1]."
    g = check(text, sources, settings, is_criminal=True)
    assert not g.ok and "crime question: no Criminal Code source is cited" in g.notes


def uk_sources_of(settings: Settings, shared_dir: Path) -> tuple[Source, ...]:
    [s] = to_sources(docs(shared_dir, UK, ["188"]), settings)
    return (Source(**{**s.__dict__, "source_id": "S2"}),)


def test_an_answer_in_the_wrong_language_fails(settings: Settings, uk_sources):
    g = check(THEFT, uk_sources, settings, lang="kk")
    assert not g.ok
    assert "answer is in 'ru', the question in 'kk'" in g.notes


def test_a_kazakh_answer_quoting_russian_law_is_kazakh(settings: Settings, uk_sources):
    text = (
        "Ұрлық — бөтеннің мүлкін жасырын ұрлау [S1]. "
        "Заңда: «Кража, то есть тайное хищение чужого имущества» [S1]. "
        "Бұл үшін айыппұл немесе бас бостандығынан айыру жазасы қолданылады [S1]."
    )
    g = check(text, uk_sources, settings, lang="kk")
    assert g.ok, g.notes
    assert "lexical support not checked: no source in the answer's language" in g.notes


def test_an_invented_answer_fails_on_support(settings: Settings, uk_sources):
    text = (
        "Налоговый вычет предоставляется гражданам при покупке жилья [S1]. "
        "Вычет оформляется через налоговую декларацию в электронном виде [S1]. "
        "Размер вычета зависит от дохода и стоимости квартиры [S1]."
    )
    g = check(text, uk_sources, settings, is_criminal=True)
    assert not g.ok
    assert len(g.unsupported_sentences) == 3
    assert "3 of 3 sentences have little support in the sources" in g.notes


def test_one_loose_sentence_is_a_note_not_a_failure(settings: Settings, uk_sources):
    g = check(
        THEFT.replace("\n\nЭто не", "\nОбратитесь к адвокату до визита следователя домой.\n\nЭто не"),
        uk_sources,
        settings,
    )
    assert g.ok, g.notes
    assert g.unsupported_sentences == ("Обратитесь к адвокату до визита следователя домой.",)


def test_a_kazakh_answer_over_kazakh_sources_is_checked_for_support(settings: Settings, shared_dir: Path):
    sources = to_sources(docs(shared_dir, PERSONAL_DATA, ["8", "7"], "kk"), settings)
    faithful = (
        "Субъект немесе оның заңды өкілі дербес деректерді жинауға, өңдеуге жазбаша немесе мемлекеттік "
        "сервис арқылы келісім береді [S1]. Келісімді кері қайтарып алуға болады, "
        "бірақ заңдарға қайшы келсе, кері қайтарып ала алмайды [S1]."
    )
    g = check(faithful, sources, settings, lang="kk", is_criminal=False)
    assert g.ok, g.notes
    invented = (
        "Жол жүрісі ережесін бұзған жүргізуші куәлігінен айырылады [S1]. "
        "Айыппұл көлемі жылдамдықты асыру дәрежесіне байланысты [S1]."
    )
    g = check(invented, sources, settings, lang="kk", is_criminal=False)
    assert not g.ok and len(g.unsupported_sentences) == 2
