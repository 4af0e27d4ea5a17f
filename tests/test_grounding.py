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


# --- norms: polarity, punishments, figures (answer.norms) on the real text of УК 188 ---------------------------

PENALTY = (
    "По части 1 статьи 188 УК РК кража наказывается штрафом до одной тысячи месячных расчетных показателей "
    "либо лишением свободы на срок до трех лет [S1]."
)


@pytest.mark.parametrize(
    ("changed", "reason"),
    [
        ("кража не наказывается [S1].", "«не наказывается» where the source says the opposite"),
        (
            PENALTY.replace("наказывается", "не наказывается"),
            "«не наказывается» where the source says the opposite",
        ),
        (
            PENALTY.replace("до трех лет", "до трех лет или смертной казнью"),
            "punishment «смертная казнь» not in the source",
        ),
        (
            "Кража в особо крупном размере наказывается пожизненным лишением свободы [S1].",
            "punishment «пожизненное лишение свободы» not in the source",
        ),
        (PENALTY.replace("до трех лет", "до двенадцати лет"), "«12 год» not in the source"),
        (PENALTY.replace("до трех лет", "до 12 лет"), "«12 год» not in the source"),
        (PENALTY.replace("одной тысячи", "пяти тысяч"), "«5000 МРП» not in the source"),
    ],
)
def test_a_sentence_that_reverses_or_hardens_the_norm_fails(settings: Settings, uk_sources, changed, reason):
    g = check(THEFT.replace(PENALTY, changed), uk_sources, settings)
    assert not g.ok
    assert g.contradicting == (changed,)
    assert f"1 sentences contradict their sources: {reason}" in g.notes
    # one such sentence among faithful ones fails the answer; the lexical check alone let it through
    assert g.unsupported_sentences == ()


@pytest.mark.parametrize(
    "paraphrase",
    [
        "Кража наказывается штрафом до 1000 МРП либо лишением свободы до 3 лет [S1].",
        "За кражу грозит штраф до 1 000 МРП, исправительные работы или до трёх лет ограничения свободы [S1].",
        "Общественные работы за кражу — до 800 часов [S1].",
        "Кражу в крупном размере наказывают лишением свободы на срок от 2 до 7 лет с конфискацией имущества [S1].",
        "Смертная казнь за кражу не предусмотрена [S1].",
        "Наказание — лишение свободы не более трех лет, с конфискацией имущества или без таковой [S1].",
    ],
)
def test_true_paraphrases_of_the_norm_pass(settings: Settings, uk_sources, paraphrase):
    assert PENALTY in THEFT
    g = check(THEFT.replace(PENALTY, paraphrase), uk_sources, settings)
    assert g.ok, g.notes
    assert g.contradicting == ()


def test_a_number_from_the_question_is_not_an_invented_figure(settings: Settings, uk_sources):
    text = THEFT.replace(PENALTY, "Кража телефона за 150 000 тенге наказывается лишением свободы до трех лет [S1].")
    assert not check(text, uk_sources, settings).ok
    g = check_grounding(
        text, uk_sources, lang="ru", is_criminal=True, settings=settings, question="Украл телефон за 150 000 тенге"
    )
    assert g.ok, g.notes


def test_a_kazakh_sentence_that_negates_its_source_fails(settings: Settings, shared_dir: Path):
    consent, scope = (to_sources(docs(shared_dir, PERSONAL_DATA, [n], "kk"), settings) for n in ("8", "3"))
    stated = (
        "Мемлекеттік органдардың ақпараттандыру объектілеріндегі дербес деректерді өңдеу кезінде келісім "
        "мемлекеттік сервис арқылы беріледі [S1]."
    )
    assert check(stated, consent, settings, lang="kk", is_criminal=False).ok
    g = check(stated.replace("беріледі", "берілмейді"), consent, settings, lang="kk", is_criminal=False)
    assert not g.ok and "1 sentences contradict their sources: «беріл» where the source states it" in g.notes
    # the source negates («қолданылмайды»), the answer states
    negated = (
        "Осы Заң мемлекеттік құпияларға жатқызылған дербес деректерді жинауға, өңдеуге және қорғауға "
        "қолданылмайды [S1]."
    )
    assert check(negated, scope, settings, lang="kk", is_criminal=False).ok
    g = check(negated.replace("қолданылмайды", "қолданылады"), scope, settings, lang="kk", is_criminal=False)
    assert not g.ok and g.contradicting


def test_a_kazakh_answer_about_russian_law_is_checked_for_punishments_and_figures(settings: Settings, uk_sources):
    faithful = "Ұрлық үшін айыппұл немесе үш жылға дейін бас бостандығынан айыру жазасы қолданылады [S1]."
    assert check(faithful, uk_sources, settings, lang="kk").ok
    g = check(faithful.replace("үш жылға", "он екі жылға"), uk_sources, settings, lang="kk")
    assert not g.ok and "1 sentences contradict their sources: «12 год» not in the source" in g.notes
    g = check(faithful.replace("айыппұл немесе", "өлім жазасы немесе"), uk_sources, settings, lang="kk")
    assert not g.ok and g.contradicting


# --- links ------------------------------------------------------------------------------------------------------

UK_URL = "https://adilet.zan.kz/rus/docs/K1400000226"


@pytest.mark.parametrize(
    "link",
    [
        "https://evil.example/pay",
        "adilet-zan.kz.evil.com",
        "https://adilet.zan.kz.evil.com/rus/docs/K1400000226",
        "https://adilet.zan.kz@evil.com/",
        "[adilet.zan.kz](https://evil.example/login)",
        "аdilet.zan.kz/rus/docs/K1400000226",  # a Cyrillic «а»
        "https://adilet.zan.kz/rus/docs/K9999999999",  # the real site, but no source's link
        "@adilet_help_bot",
        "help@adilet-zan.kz",
    ],
)
def test_a_sentence_with_a_foreign_link_is_dropped(settings: Settings, uk_sources, link):
    phishing = f"Оплатить штраф за кражу можно онлайн: {link} [S1]."
    text = THEFT.replace("\n\nЭто не", f"\n{phishing}\n\nЭто не")
    g = check(text, uk_sources, settings)
    assert g.ok, g.notes
    assert phishing not in g.text and "Оплатить" not in g.text
    assert g.text == THEFT
    assert len(g.dropped_links) == 1 and g.dropped_links[0] in link
    assert any(n.startswith("dropped the sentences with links that are not a source's") for n in g.notes)


def test_a_sources_own_link_and_the_bare_site_stay(settings: Settings, uk_sources):
    text = THEFT.replace("[S1].\nОбъект", f"[S1]. Текст статьи: {UK_URL}.\nОбъект")
    g = check(text, uk_sources, settings)
    assert g.ok and g.text == text and g.dropped_links == ()
    assert "adilet.zan.kz." in g.text  # the disclaimer names the site


def test_an_answer_made_only_of_foreign_links_fails(settings: Settings, uk_sources):
    g = check("Подробности на https://evil.example/kraja [S1].", uk_sources, settings)
    assert not g.ok and g.text == "" and "cites no source" in g.notes
