"""The plain-text parser and build_article on the real adilet snapshots in ../shared/corpus."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import pytest

from corpus.records import Article
from ingest_adilet.articles import build_article, paragraphs
from ingest_adilet.text_parser import parse_text
from tests.conftest import SHARED_DIR

CORPUS = SHARED_DIR / "corpus"
SITE = {"ru": "rus", "kk": "kaz"}
# Counted apart from the parser: an unindented line «Статья N.» / «Статья N» / «Статья N Title» / «N-бап. …».
RU_HEADING_LINE = re.compile(r"^ *Статья \d+(?:-\d+)*(?:\.|\s*$| [А-ЯЁ(])")
KK_HEADING_LINE = re.compile(r"^ *\d+(?:-\d+)*-бап(?:\.|\s*$| [А-ЯӘІҢҒҮҰҚӨҺ])")


@cache
def parsed(doc_id: str, lang: str = "ru") -> tuple[Article, ...]:
    text = (CORPUS / SITE[lang] / f"{doc_id}.txt").read_text(encoding="utf-8")
    return tuple(parse_text(text, doc_id, lang, f"https://adilet.zan.kz/{SITE[lang]}/docs/{doc_id}"))


def by_number(doc_id: str, lang: str = "ru") -> dict[str, Article]:
    return {a.number: a for a in parsed(doc_id, lang)}


def manifest_docs() -> list[tuple[str, str]]:
    manifest = json.loads((CORPUS / "manifest.json").read_text(encoding="utf-8"))
    return [(d["doc_id"], {"rus": "ru", "kaz": "kk"}[site]) for d in manifest["documents"] for site in d["languages"]]


def test_criminal_code(shared_dir: Path) -> None:
    uk = by_number("K1400000226")
    assert len(uk) >= 480
    assert uk["188"].title == "Кража"
    assert uk["188"].path[-1] == "Глава 6. УГОЛОВНЫЕ ПРАВОНАРУШЕНИЯ ПРОТИВ СОБСТВЕННОСТИ"
    assert uk["188"].text.startswith("1. Кража, то есть тайное хищение чужого имущества")
    assert uk["188-1"].title == "Скотокрадство"
    assert uk["188"].url == "https://adilet.zan.kz/rus/docs/K1400000226"
    assert all(a.hash for a in uk.values())
    for a in uk.values():
        assert "Сноска" not in a.text and "Примечание ИЗПИ" not in a.text and "Примечание РЦПИ" not in a.text
    # The footnote of article 188 moved to its metadata, link texts rejoined («12.07.2018 \n№ 180-VІ\n (…»).
    assert (
        uk["188"]
        .footnotes[0]
        .startswith("Сноска. Статья 188 с изменениями, внесенными законами РК от 12.07.2018 № 180-VІ (вводится")
    )
    # «Примечание.» is law: kept in the article it closes.
    assert "Примечание. Лицо, совершившее деяния, предусмотренные частями первой или второй" in uk["118"].text


def test_law_notes_are_kept_everywhere_in_the_criminal_code(shared_dir: Path) -> None:
    raw = (shared_dir / "corpus/rus/K1400000226.txt").read_text(encoding="utf-8")
    in_raw = sum(1 for ln in raw.split("\n") if re.match(r"^\s*Примечани[ея]\.", ln))
    in_text = sum(len(re.findall(r"(?m)^Примечани[ея]\.", a.text)) for a in parsed("K1400000226"))
    assert in_raw > 20 and in_text == in_raw


@pytest.mark.parametrize(("doc_id", "lang"), manifest_docs())
def test_every_listed_document_yields_articles(doc_id: str, lang: str) -> None:
    articles = parsed(doc_id, lang)
    assert len(articles) >= 10
    assert all(a.doc_id == doc_id and a.lang == lang for a in articles)
    assert sum(bool(a.text) for a in articles) >= 0.95 * len(articles)
    if lang == "kk":
        raw = (CORPUS / "kaz" / f"{doc_id}.txt").read_text(encoding="utf-8")
        assert all(f"{a.number}-бап" in raw for a in articles)
        assert not any("Ескерту." in a.text or "ЗҚАИ-ның ескертпесі" in a.text for a in articles)
        # «мемлекеттiк» (Latin i) is repaired to «мемлекеттік» in titles and text.
        assert not any(re.search(r"[әіңғүұқөһ]i|i[әіңғүұқөһ]", a.title + a.text) for a in articles)


@pytest.mark.parametrize(("lang", "pattern"), [("ru", RU_HEADING_LINE), ("kk", KK_HEADING_LINE)])
def test_article_count_matches_heading_lines(lang: str, pattern: re.Pattern[str]) -> None:
    total_lines = total_articles = 0
    for path in sorted((CORPUS / SITE[lang]).glob("*.txt")):
        heading_lines = sum(1 for ln in path.read_text(encoding="utf-8").split("\n") if pattern.match(ln))
        n = len(parsed(path.stem, lang))
        assert abs(n - heading_lines) <= max(2, 0.02 * heading_lines), path.name
        total_lines += heading_lines
        total_articles += n
    assert abs(total_articles - total_lines) <= 0.02 * total_lines


def test_constitution_articles_without_a_dot() -> None:
    kz = by_number("K950001000_")
    assert len(kz) >= 95
    assert kz["1"].title == ""
    assert kz["1"].text.startswith("1. Республика Казахстан утверждает себя демократическим")
    assert kz["1"].path == ("Раздел I. Общие положения",)
    # «Примечание. См. нормативные постановления Конституционного Суда …» is the editor's pointer, not law.
    assert kz["1"].editor_notes[0].startswith("Примечание. См. нормативные постановления")


def test_repealed_articles() -> None:
    uk = by_number("K1400000226")
    assert uk["47"].status == "repealed"
    assert uk["47"].title == "Смертная казнь"
    assert uk["47"].text.startswith("Статья 47 исключена Законом РК от 29.12.2021 № 89-VII")
    assert uk["188"].status == "in_force"  # repealed sub-items («2) исключен …») do not repeal the article
    # Title that is itself the repeal note: «Статья 95. (Статья 95 исключена - Законом РК от 8 июля 2005 …»
    law = by_number("Z030000461_")
    assert law["95"].status == "repealed" and law["95"].title == ""
    assert "исключена" in law["95"].text
    kk = by_number("Z030000461_", "kk")
    assert kk["71"].status == "repealed"
    assert "алынып тасталды" in kk["71"].text
    assert sum(a.status == "repealed" for a in parsed("K1400000235")) > 20


def test_civil_code_numbering_continues_across_its_two_documents() -> None:
    def num(a: Article) -> int:
        return int(a.number.split("-")[0])

    general, special = parsed("K940001000_"), parsed("K990000409_")
    assert max(map(num, general)) < min(map(num, special))
    assert {a.number for a in general}.isdisjoint(a.number for a in special)


def test_titles_broken_over_lines_are_rejoined() -> None:
    assert by_number("Z950002444_")["52-4"].title == "Дополнительные требования к уставу исламского банка"
    assert by_number("Z1200000056")["2"].title == (
        "Законодательство Республики Казахстан о микрофинансовой деятельности"
    )
    assert by_number("Z950002444_", "kk")["52-2"].title == (
        "Исламдық қаржыландыру принциптері жөніндегі кеңестің қызметі"
    )
    # A heading repeated as the first body line is not kept in the text.
    assert not by_number("Z100000274_", "kk")["6"].text.startswith("6-бап")
    assert by_number("K1400000226")["219"].title.startswith("Незаконное получение кредита")


def test_editor_note_announcing_an_article_goes_to_that_article() -> None:
    koap = by_number("K1400000235")
    notes = koap["214"].editor_notes
    assert any(n.startswith("Примечание ИЗПИ! Статья 214 предусматривается в редакции") for n in notes)
    assert not any("Статья 214" in n for n in koap["213"].editor_notes)
    # A note about the chapter stays where it stands (end of article 380-2's lines), out of the law text.
    uk = by_number("K1400000226")
    assert not any("Главу 16" in a.text for a in uk.values())


def test_no_article_text_keeps_a_broken_link_line() -> None:
    for doc_id in ("K1400000226", "K1100000518"):
        for a in parsed(doc_id):
            assert not re.search(r"(?m)^(№ \d|\(вводится|\)$)", a.text), (doc_id, a.number)


def test_table_of_contents_is_not_counted_twice() -> None:
    text = (
        "СОДЕРЖАНИЕ\n\nСтатья 1. Цель\nСтатья 2. Сфера\n\n Глава 1. ОБЩИЕ ПОЛОЖЕНИЯ\n"
        "Статья 1. Цель\n\n      1. Цель Закона — порядок.\n\n"
        "Статья 2. Сфера\n\n      Закон действует везде.\n"
    )
    articles = parse_text(text, "Z1", "ru")
    assert [(a.number, a.text) for a in articles] == [
        ("1", "1. Цель Закона — порядок."),
        ("2", "Закон действует везде."),
    ]
    assert articles[0].path == ("Глава 1. ОБЩИЕ ПОЛОЖЕНИЯ",)


def test_build_article_sorts_notes_and_rejoins_links() -> None:
    lines = [
        "",
        "Примечание ИЗПИ!",
        "",
        "\xa0\xa0\xa0\xa0\xa0 Часть 2 предусматривается в редакции Закона РК от 30.12.2025 ",
        "№ 247-VIII",
        " (вводится в действие).",
        "",
        "\xa0\xa0\xa0\xa0\xa0 1. Кража, совершенная в соответствии со ",
        "статьей 52",
        " настоящего Кодекса, –",
        "\xa0\xa0\xa0\xa0\xa0 Примечание. Лицо освобождается от ответственности.",
        "",
        "\xa0\xa0\xa0\xa0\xa0 Ескерту. 8-бапқа өзгеріс енгізілді - ҚР 2011.03.25 ",
        "№ 421-IV",
        " Заңымен.",
    ]
    a = build_article("X1", "ru", "5", " Кража ", lines, ("Глава 6",), "u", "01.01.2026")
    assert a.title == "Кража"
    assert a.text == (
        "1. Кража, совершенная в соответствии со статьей 52 настоящего Кодекса, –\n"
        "Примечание. Лицо освобождается от ответственности."
    )
    assert a.footnotes == ("Ескерту. 8-бапқа өзгеріс енгізілді - ҚР 2011.03.25 № 421-IV Заңымен.",)
    assert a.editor_notes == (
        "Примечание ИЗПИ! Часть 2 предусматривается в редакции Закона РК от 30.12.2025 № 247-VIII "
        "(вводится в действие).",
    )
    assert a.status == "in_force" and a.hash == a.with_hash().hash and a.edition_date == "01.01.2026"
    assert paragraphs(["a\nb", "", "  c"]) == ["ab", "c"]


def test_build_article_kazakh_repeal() -> None:
    lines = ["", "\xa0" * 5 + " Ескерту. 45-бап алып тасталды – ҚР 05.04.2023 ", "№ 221-VII", " Заңымен"]
    a = build_article("K030000442_", "kk", "45", "Құрылысқа байланысты емес жер учаскелерiн беру", lines)
    assert a.status == "repealed"
    assert a.text == "45-бап алып тасталды – ҚР 05.04.2023 № 221-VII Заңымен"


def test_titles_that_merely_start_like_a_repeal_are_kept() -> None:
    # «Исключение участника …» (expulsion) is a title, not «исключена» (repealed).
    article = by_number("K940001000_")["68"]
    assert article.title.startswith("Исключение участника из полного товарищества")
    assert article.status == "in_force" and not article.text.startswith("Исключение участника")


def test_expired_articles_and_repeal_notes_in_headings() -> None:
    # «Сноска. Статья 173 действовала до 01.01.2017 …» and nothing else: the article no longer applies.
    expired = by_number("K1500000375")["173"]
    assert expired.status == "repealed" and expired.text.startswith("Статья 173 действовала до 01.01.2017")
    # «Статья 23. Особые условия … \n(исключена Законом РК от 7 мая 2007 года \n№ 244\n)»
    repealed = by_number("Z030000446_")["23"]
    assert repealed.title == "Особые условия определения размера причиненного вреда"
    assert repealed.status == "repealed" and repealed.text == "исключена Законом РК от 7 мая 2007 года № 244"
    assert all(a.text for a in parsed("K1500000375"))
