"""The answer without a model, on real articles: the matching parts, punishments for crimes, citations."""

from __future__ import annotations

from pathlib import Path

from answer.context import to_sources
from answer.extractive import extractive_answer, units
from answer.templates import load_phrases
from config import Settings
from tests.support.answer import GK, PERSONAL_DATA, UK, docs


def test_theft_punishment_quotes_every_punishment_of_article_188(settings: Settings, shared_dir: Path):
    sources = to_sources(docs(shared_dir, UK, ["188", "187", "190", "191"]), settings)
    result = extractive_answer("Какое наказание за кражу?", sources, lang="ru", is_criminal=True, settings=settings)
    text = result.text
    phrases = load_phrases(settings, "ru")
    assert text.startswith("По вашему вопросу применимы следующие нормы:\n\n[S1] УК РК, Статья 188. Кража\n")
    assert "https://adilet.zan.kz/rus/docs/K1400000226" in text
    punishments = [ln for ln in sources[0].snippet.splitlines() if ln.startswith("наказывается")]
    assert len(punishments) >= 2
    for line in punishments:  # each part's punishment, as the law words it
        assert line in text
    assert "1. Кража, то есть тайное хищение чужого имущества" in text
    assert "исключен Законом" not in text  # repealed sub-items are not quoted
    assert text.endswith(phrases.disclaimer)
    # 187 (petty theft) names theft too; fraud and robbery only share «наказание», which every article has
    assert [s.article for s in result.sources] == ["188", "187"]
    assert "Статья 190" not in text and "Статья 191" not in text


def test_civil_question_quotes_the_matching_part_not_whole_articles(settings: Settings, shared_dir: Path):
    sources = to_sources(docs(shared_dir, GK, ["178", "179", "180"]), settings)
    text = extractive_answer(
        "Какой срок исковой давности?", sources, lang="ru", is_criminal=False, settings=settings
    ).text
    assert "[S1] ГК РК, Статья 178. Сроки исковой давности" in text
    assert "1. Общий срок исковой давности устанавливается в три года." in text
    assert "https://adilet.zan.kz/rus/docs/K940001000_" in text
    assert len(text) < sum(len(s.snippet) for s in sources)  # parts, not everything


def test_kazakh_question_gets_kazakh_intro_quotes_and_disclaimer(settings: Settings, shared_dir: Path):
    sources = to_sources(docs(shared_dir, PERSONAL_DATA, ["8", "7", "1"], "kk"), settings)
    question = "Дербес деректерді жинауға келісім қалай беріледі?"
    text = extractive_answer(question, sources, lang="kk", is_criminal=False, settings=settings).text
    phrases = load_phrases(settings, "kk")
    assert text.startswith(phrases.extractive_intro)
    assert "[S1] Дербес деректер туралы Заң, 8-бап." in text
    assert "https://adilet.zan.kz/kaz/docs/Z1300000094" in text
    assert "келісім береді" in text
    assert text.endswith(phrases.disclaimer)


def test_kazakh_question_on_russian_code_still_answers(settings: Settings, shared_dir: Path):
    sources = to_sources(docs(shared_dir, UK, ["188"]), settings)
    text = extractive_answer(
        "Ұрлық үшін қандай жаза бар?", sources, lang="kk", is_criminal=True, settings=settings
    ).text
    assert text.startswith(load_phrases(settings, "kk").extractive_intro)
    assert "[S1] УК РК, Статья 188. Кража" in text and "наказывается" in text


def test_range_question_quotes_every_article(settings: Settings, shared_dir: Path):
    sources = to_sources(docs(shared_dir, UK, ["188", "189", "190"]), settings)
    text = extractive_answer(
        "Статьи 188-190 УК", sources, lang="ru", is_criminal=True, is_range=True, settings=settings
    ).text
    for n in ("188", "189", "190"):
        assert f"Статья {n}." in text


def test_repealed_article_is_marked(settings: Settings, shared_dir: Path):
    sources = to_sources(docs(shared_dir, UK, ["47"]), settings)
    text = extractive_answer("Смертная казнь", sources, lang="ru", is_criminal=True, settings=settings).text
    assert "[S1] УК РК, Статья 47. Смертная казнь (утратила силу)" in text


def test_no_sources_says_so_with_the_note_and_disclaimer(settings: Settings):
    phrases = load_phrases(settings, "ru")
    text = extractive_answer("Вопрос", (), lang="ru", is_criminal=False, settings=settings, note="Заметка.").text
    assert text == f"Заметка.\n\n{phrases.no_sources}\n\n{phrases.disclaimer}"


def test_units_group_sub_items_under_their_part():
    text = "Преамбула.\n1. Кража, совершенная:\n1) группой лиц;\n2) исключен Законом РК;\nнаказывается.\n2. Иное"
    assert units(text) == ["Преамбула.", "1. Кража, совершенная:\n1) группой лиц;\nнаказывается.", "2. Иное"]


def test_kazakh_crime_question_quotes_the_criminal_code_even_when_kazakh_texts_match_its_words(
    settings: Settings, shared_dir: Path
):
    # Kazakh texts of a law share the question's words; the Russian-only Criminal Code shares none of them.
    found = docs(shared_dir, PERSONAL_DATA, ["8", "7", "1"], "kk") + docs(shared_dir, UK, ["217"])
    sources = to_sources(found, settings)
    question = "Дербес деректерді жинағаны үшін қандай жаза бар?"
    result = extractive_answer(question, sources, lang="kk", is_criminal=True, settings=settings)
    assert "K1400000226" in {s.doc_id for s in result.sources}
    assert "УК РК, Статья 217" in result.text
    # the same sources for a question that is not about a crime: no Criminal Code article is forced in
    civil = extractive_answer(question, sources, lang="kk", is_criminal=False, settings=settings)
    assert "K1400000226" not in {s.doc_id for s in civil.sources}


def test_remedy_articles_are_named_with_links_after_the_quotes(settings: Settings, shared_dir: Path):
    found = docs(shared_dir, GK, ["178", "9"])
    found[1].metadata["remedy"] = True  # ГК 9 as a remedy route's article, as retrieval marks it
    sources = to_sources(found, settings)
    assert [s.remedy for s in sources] == [False, True]
    result = extractive_answer("Какой срок исковой давности?", sources, lang="ru", is_criminal=False, settings=settings)
    intro = load_phrases(settings, "ru").remedy_intro
    before, _, after = result.text.partition(intro)
    assert "1. Общий срок исковой давности устанавливается в три года." in before
    line = "\n— [S2] ГК РК, Статья 9. Защита гражданских прав: https://adilet.zan.kz/rus/docs/K940001000_"
    assert after.startswith(line)
    assert "Защита гражданских прав осуществляется судом" not in result.text  # named, not quoted
    assert [s.article for s in result.sources] == ["178", "9"]
