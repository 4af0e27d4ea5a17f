"""Heading recognition on real adilet lines: articles (ru/kk), structural levels, and mere references."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest_adilet.headings import (
    ArticleHeading,
    HeadingPath,
    StructuralHeading,
    clean,
    is_article_heading,
    match_article_heading,
    match_structural_heading,
)


@pytest.mark.parametrize(
    ("line", "number", "title"),
    [
        (" Статья 188. Кража", "188", "Кража"),
        ("Статья 188-1. Скотокрадство", "188-1", "Скотокрадство"),
        (" Статья 1", "1", ""),  # the Constitution: no dot, no title
        (" Статья 49 ", "49", ""),
        ("Статья 2 Законодательство о банкротстве", "2", "Законодательство о банкротстве"),
        ("Статья 95. (Статья 95 исключена - Законом РК", "95", "(Статья 95 исключена - Законом РК"),
        ("188-бап. Ұрлық", "188", "Ұрлық"),
        ("8-1-бап. Мемлекеттік сервис", "8-1", "Мемлекеттік сервис"),
        ("2-бап Заңды тұлғаларды тіркеу саласы", "2", "Заңды тұлғаларды тіркеу саласы"),
        ("31-бап", "31", ""),  # title on the next line («\n. Мүгедектігі бар …»)
        ("\xa0\xa0\xa0\xa0\xa0 2-1-бап. Осы Заңның негізгі мақсаты", "2-1", "Осы Заңның негізгі мақсаты"),
    ],
)
def test_article_headings(line: str, number: str, title: str) -> None:
    assert match_article_heading(line) == ArticleHeading(number, title)


@pytest.mark.parametrize(
    "line",
    [
        "в соответствии со статьей 52 настоящего Кодекса",
        "      1. Кража, то есть тайное хищение чужого имущества, –",
        "31-баптан",
        "44-баптың",
        "62-68-баптар. ",
        "\xa0\xa0\xa0\xa0\xa0 Статья 285 с изменениями, внесенными Законом РК от 21.12.2022",
        "\xa0\xa0\xa0\xa0\xa0 Статья 214 предусматривается в редакции Закона РК от 30.12.2025",
        "\xa0\xa0\xa0\xa0\xa0 29-1-бап жаңа редакцияда көзделген – ҚР 16.01.2026",
        "ст. 467",
        "статьи 188",
    ],
)
def test_references_and_notes_are_not_headings(line: str) -> None:
    assert not is_article_heading(line)


def test_kazakh_reference_lines_in_a_real_file_are_not_headings(shared_dir: Path) -> None:
    lines = (shared_dir / "corpus/kaz/Z1300000094.txt").read_text(encoding="utf-8").split("\n")
    refs = [ln for ln in lines if ln.strip().endswith("-баптан")]
    assert refs, "the file has link lines such as «31-баптан»"
    assert not any(is_article_heading(ln) for ln in refs)
    headings = [match_article_heading(ln) for ln in lines if ln.strip().startswith("8-1-бап")]
    assert headings == [ArticleHeading("8-1", "Мемлекеттік сервис")]


@pytest.mark.parametrize(
    ("line", "level"),
    [
        (" ОБЩАЯ ЧАСТЬ", "part"),
        (" Общая часть", "part"),
        ("РАЗДЕЛ 1. УГОЛОВНЫЙ ЗАКОН", "section"),
        (" Раздел I. Основные положения", "section"),
        (" Глава 6. УГОЛОВНЫЕ ПРАВОНАРУШЕНИЯ ПРОТИВ СОБСТВЕННОСТИ", "chapter"),
        ("Параграф 1. Общие положения о субъектах предпринимательства", "paragraph"),
        ("§ 1. Законный режим имущества супругов", "paragraph"),
        (" I. Общие положения", "subsection"),
        (" І бөлiм. Негізгі ережелер", "section"),  # Kazakh «і» typed as a Latin «i»
        ("2 БӨЛIМ", "section"),
        (" 3-тарау. Жерге меншік құқығы", "chapter"),
        (" IV тарау. ЖАУАПКЕРШІЛІГІ ШЕКТЕУЛІ СЕРІКТЕСТІКТІҢ МҮЛКІ", "chapter"),
        (" 1-параграф. Кондоминиум объектісін басқару", "paragraph"),
    ],
)
def test_structural_headings(line: str, level: str) -> None:
    heading = match_structural_heading(line)
    assert heading is not None and heading.level == level


@pytest.mark.parametrize(
    "line",
    [
        "6-тарауына",
        "Глава 1 дополнена статьей 5-1",
        "главой 5 настоящего Кодекса",
        "бөлімшесі (бұдан әрі)",
        "ОБЩАЯ ЧАСТЬ настоящего Кодекса",
    ],
)
def test_structural_lookalikes_are_not_headings(line: str) -> None:
    assert match_structural_heading(line) is None


def test_heading_path_closes_deeper_levels() -> None:
    path = HeadingPath()
    path.enter(StructuralHeading("part", "ОСОБЕННАЯ ЧАСТЬ"))
    path.enter(StructuralHeading("chapter", "Глава 1. ПРОТИВ ЛИЧНОСТИ"))
    path.enter(StructuralHeading("paragraph", "§ 1. Убийство"))
    path.enter(StructuralHeading("chapter", "Глава 2. ПРОТИВ СЕМЬИ"))
    path.extend("chapter", "И НЕСОВЕРШЕННОЛЕТНИХ")
    assert path.current() == ("ОСОБЕННАЯ ЧАСТЬ", "Глава 2. ПРОТИВ СЕМЬИ И НЕСОВЕРШЕННОЛЕТНИХ")


def test_clean_puts_latin_lookalikes_inside_cyrillic_words_in_cyrillic() -> None:
    assert clean("\xa0\xa0 мемлекеттiк  органдардың\xa0құзыретi ") == "мемлекеттік органдардың құзыреті"
    assert clean("cоғыс") == "соғыс"
    # Real mixes and Roman numerals with a Cyrillic «І» stay as they are.
    assert clean("ТОО KazMunai, № 300-VІ, Wi-Fi") == "ТОО KazMunai, № 300-VІ, Wi-Fi"
