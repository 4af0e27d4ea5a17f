"""parse_html on the real saved adilet pages (and the API's text_content), plus the page forms they lack."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from corpus.errors import IngestError
from ingest_adilet.html_parser import ParsedPage, parse_html
from tests.support.adilet_server import article_body

UK = "K1400000226"
PD = "Z1300000094"
UK_URL = f"https://adilet.zan.kz/rus/docs/{UK}"
CHROME = (
    "Последние документы",
    "Популярные документы",
    "Состояние базы",
    "Всего документов",
    "Документы по состоянию на",
    "Если Вы обнаружили на странице ошибку",
    "Н. НАЗАРБАЕВ",
)
NOT_LAW = ("Сноска", "Примечание ИЗПИ", "Примечание РЦПИ", "Вниманию пользователей")


def _page(shared_dir: Path, doc_id: str) -> Path:
    return shared_dir / "corpus" / "html" / f"{doc_id}.html"


@pytest.fixture(scope="module")
def uk_html(shared_dir: Path) -> str:
    return _page(shared_dir, UK).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def uk(uk_html: str) -> ParsedPage:
    return parse_html(uk_html, UK, "ru", UK_URL)


@pytest.fixture(scope="module")
def uk_by_number(uk: ParsedPage) -> dict:
    return {a.number: a for a in uk.articles}


def test_criminal_code_has_every_article_once(uk: ParsedPage):
    numbers = [a.number for a in uk.articles]
    assert len(numbers) == 503
    assert len(set(numbers)) == 503
    main = [int(n) for n in numbers if "-" not in n]
    assert main == list(range(1, 468))  # 1…467 in reading order, none missing
    added = [n for n in numbers if "-" in n]
    assert len(added) == 36 and all(re.fullmatch(r"\d+(?:-\d+)+", n) for n in added)
    assert {"67-1", "109-1", "380-3"} <= set(added)


def test_criminal_code_page_facts(uk: ParsedPage, uk_by_number: dict):
    assert uk.title == "Уголовный кодекс Республики Казахстан"
    assert uk.status == "Обновленный"
    assert uk.edition_date == "20.03.2026"
    assert {a.edition_date for a in uk.articles} == {"20.03.2026"}
    theft = uk_by_number["188"]
    assert theft.title == "Кража"
    assert theft.text.startswith("1. Кража, то есть тайное хищение чужого имущества, –\nнаказывается штрафом")
    assert theft.path == ("ОСОБЕННАЯ ЧАСТЬ", "Глава 6. УГОЛОВНЫЕ ПРАВОНАРУШЕНИЯ ПРОТИВ СОБСТВЕННОСТИ")
    assert theft.status == "in_force" and theft.lang == "ru" and theft.doc_id == UK
    assert theft.footnotes[0].startswith("Сноска. Статья 188 с изменениями, внесенными законами РК")
    assert theft.hash
    # several levels in one <h3>, parted by <br>; a title broken over two lines is joined
    assert uk_by_number["1"].path == ("ОБЩАЯ ЧАСТЬ", "РАЗДЕЛ 1. УГОЛОВНЫЙ ЗАКОН")
    assert uk_by_number["70"].path == ("ОБЩАЯ ЧАСТЬ", "РАЗДЕЛ 5. ОСВОБОЖДЕНИЕ ОТ УГОЛОВНОЙ ОТВЕТСТВЕННОСТИ И НАКАЗАНИЯ")
    # the last heading is neither a section nor a chapter, but it closes the Special part
    assert uk_by_number["467"].path == ("ЗАКЛЮЧИТЕЛЬНЫЕ ПОЛОЖЕНИЯ",)
    assert uk_by_number["466"].text.splitlines()[-1] != "ЗАКЛЮЧИТЕЛЬНЫЕ ПОЛОЖЕНИЯ"


def test_criminal_code_anchors(uk: ParsedPage, uk_by_number: dict, uk_html: str):
    assert all(re.fullmatch(rf"{UK_URL}#z\d+", a.url) for a in uk.articles)  # every article has one
    anchor = {n: a.url.split("#")[1] for n, a in uk_by_number.items()}
    assert anchor["1"] == "z2"  # <h3 id="z2"> Статья 1. …
    assert anchor["67-1"] == "z2836"  # <p><b><a name="z2836"></a>Статья 67-1. …
    assert anchor["147"] == "z584"  # <h3 id="z584"> <a name="z587"></a>Статья 147. …
    assert anchor["188"] == "z701"
    assert anchor["45"] == "z174"  # <h3> without id: the red note before it took <a name="z174">
    assert anchor["206"] == "z788"  # <h3> without id: the footnote before it took <a name="z788">
    assert f'<a href="/rus/docs/{UK}#z174">статьи 45</a>' in uk_html  # adilet itself links article 45 there

    # Every link of the page to one of its own articles («статьи 45», «ст. 467») lands where we point.
    links = BeautifulSoup(uk_html, "lxml").select(f'article a[href^="/rus/docs/{UK}#z"]')
    checked, wrong = 0, set()
    for link in links:
        m = re.fullmatch(r"(?:стать[а-я]*|ст\.)\s*(\d+(?:-\d+)*)", link.get_text(" ", strip=True))
        if m:
            checked += 1
            if anchor[m.group(1)] != link["href"].split("#")[1]:
                wrong.add((m.group(1), link["href"].split("#")[1]))
    assert checked > 100
    # adilet's own stale link: «статью 28» points at item 3) of article 99 (<p id="z108">)
    assert wrong == {("28", "z108")}


def test_criminal_code_text_is_only_law(uk: ParsedPage, uk_by_number: dict):
    for article in uk.articles:
        for marker in (*NOT_LAW, *CHROME):
            assert marker not in article.text, (article.number, marker)
            assert marker not in article.title, (article.number, marker)
        assert "  " not in article.text and "\xa0" not in article.text
    # «Примечание.» belongs to the law and stays
    assert "Примечание. Публичные выступления, содержащие критические" in uk_by_number["378"].text
    # red notes and footnotes are moved to the metadata, not lost
    assert sum(len(a.footnotes) for a in uk.articles) > 400
    assert uk_by_number["72"].editor_notes[0].startswith("Нормативным постановлением Конституционного Суда")
    assert "Нормативным постановлением" not in uk_by_number["72"].text
    # a red note standing before article 45's heading speaks of article 45, not 44
    assert uk_by_number["45"].editor_notes[0].startswith("Примечание РЦПИ! Действие статьи 45 приостановлено")
    assert uk_by_number["44"].editor_notes == ()
    # footnote spans broken by links are joined back with their spaces
    assert " 27.12.2019 № 292-VІ (порядок введения в действие см. ст.2)." in uk_by_number["188"].footnotes[0]


def test_criminal_code_repealed_articles(uk: ParsedPage, uk_by_number: dict):
    repealed = [a.number for a in uk.articles if a.status == "repealed"]
    assert repealed == ["47", "108", "109", "130", "197", "215", "219", "235", "240", "241", "373", "374", "393"]
    death = uk_by_number["47"]
    assert death.title == "Смертная казнь"
    assert death.text.startswith("Статья 47 исключена Законом РК от 29.12.2021 № 89-VII")
    # a repealed item inside an article stays in its text
    assert "2) исключен Законом РК от 21.01.2019 № 217-VI" in uk_by_number["188"].text
    assert uk_by_number["109-1"].status == "in_force" and uk_by_number["109-1"].title == "Побои"


def test_api_text_content_gives_the_same_articles(shared_dir: Path, uk: ParsedPage):
    fragment = article_body(_page(shared_dir, UK))
    assert "<html" not in fragment and "container_omega" not in fragment
    page = parse_html(fragment, UK, "ru", UK_URL)
    assert page.edition_date is None and page.title == "" and page.status == ""
    assert [replace(a, edition_date=None) for a in page.articles] == [
        replace(a, edition_date=None) for a in uk.articles
    ]


def test_personal_data_law_against_its_text_snapshot(shared_dir: Path):
    html = _page(shared_dir, PD).read_text(encoding="utf-8")
    assert "Последние документы" in html and "Популярные документы" in html  # the full page, with chrome
    page = parse_html(html, PD, "ru", f"https://adilet.zan.kz/rus/docs/{PD}")
    numbers = [a.number for a in page.articles]

    snapshot = (shared_dir / "corpus" / "rus" / f"{PD}.txt").read_text(encoding="utf-8")
    headings = re.findall(r"^ ?Статья (\d+(?:-\d+)*)\.", snapshot, flags=re.M)
    assert len(set(headings)) == len(headings) == 38
    # The snapshot is a later edition: article 19-1, announced on the saved page by a red note, is in force.
    assert set(headings) - set(numbers) == {"19-1"} and set(numbers) <= set(headings)
    assert len(numbers) == len(set(numbers)) == 37
    by_number = {a.number: a for a in page.articles}
    assert any("дополнить статьей 19-1" in n for n in by_number["19"].editor_notes)

    assert all(re.fullmatch(rf"https://adilet.zan.kz/rus/docs/{PD}#z\d+", a.url) for a in page.articles)
    assert by_number["1"].url.endswith("#z2") and by_number["31"].url.endswith("#z73")
    assert by_number["1"].path == ("Глава 1. ОБЩИЕ ПОЛОЖЕНИЯ",)
    # a `note` span that is law: a repealed item
    assert "11-2) Исключен Законом РК от 30.12.2021 № 96-VII" in by_number["1"].text
    assert len(by_number["1"].editor_notes) == 4
    assert page.edition_date == "20.03.2026"
    for article in page.articles:
        for marker in (*NOT_LAW, *CHROME):
            assert marker not in article.text, (article.number, marker)
    # the President's signature closing the law is not part of article 31
    assert by_number["31"].text.endswith("их обработка и защита соответствуют целям их сбора.")
    # the preamble and the document-wide red notes precede article 1 and belong to no article
    assert not any("Настоящий Закон регулирует" in a.text for a in page.articles)


def test_empty_shell_raises_naming_the_document(shared_dir: Path):
    html = _page(shared_dir, "K030000442_").read_text(encoding="utf-8")
    with pytest.raises(IngestError, match=r"^K030000442_: .*empty JavaScript shell"):
        parse_html(html, "K030000442_", "ru", "https://adilet.zan.kz/rus/docs/K030000442_")


@pytest.mark.parametrize(
    ("html", "why"),
    [
        ("<html><body><h1>Проверка</h1><div class='g-recaptcha'></div></body></html>", "captcha"),
        ("<html><body><p>Документ не найден</p></body></html>", "without any article heading"),
        ("<html><body><article><p>Статья 5 в редакции …</p></article></body></html>", "no article headings"),
    ],
)
def test_pages_without_law_raise(html: str, why: str):
    with pytest.raises(IngestError, match=rf"^X1: .*{why}"):
        parse_html(html, "X1", "ru", "https://adilet.zan.kz/rus/docs/X1")


# Forms the saved pages lack, written as adilet writes them: a Kazakh page, <p><b> chapter headings,
# `color="FF0000"`, a footnote in a bare span, a note inside a paragraph, headings without anchors.
KAZAKH = """<article>
<p><font color="#FF0000">&nbsp;&nbsp; Қолданушылар назарына!</font></p>
<p><b><a name="z1"></a>1-тарау. ЖАЛПЫ ЕРЕЖЕЛЕР</b></p>
<p><b><a name="z2"></a>1-бап. Негізгі ұғымдар</b></p>
<p id="z3">&nbsp;&nbsp; 1. Осы Заңда<font color="FF0000">(ЗҚАИ-ның ескертпесі: өзгеріс күтілуде)</font>негізгі ұғымдар пайдаланылады.</p>
<p id="z4">&nbsp;&nbsp; 2. <b>31-баптан</b> басқа жағдайларда <a href="/kaz/docs/K1400000226#z701">188-бапқа</a> сәйкес.</p>
<p><b>Ескертпе. 5-бапта көзделген жағдайлар</b></p>
<span>&nbsp;&nbsp; Ескерту. 1-бапқа өзгеріс енгізілді - ҚР 25.06.2020 </span><a href="/kaz/docs/Z2000000347">№ 347-VI</a><span> Заңымен.</span><br>
<font color="#FF0000">&nbsp;&nbsp; <a name="z9"></a>ЗҚАИ-ның ескертпесі!</font><br>
<font color="#FF0000">&nbsp;&nbsp; 2-бап жаңа редакцияда көзделген.</font><br>
<h3> 2-бап. Заңның мақсаты</h3>
<p id="z10">&nbsp;&nbsp; Осы Заңның мақсаты – адамның құқықтарын қорғау.</p>
<p><b>2-тарау. ҚОРЫТЫНДЫ<br>ЕРЕЖЕЛЕР</b></p>
<h3> 3-бап. Заңды қолданысқа енгізу</h3>
<p id="z12">&nbsp;&nbsp; Осы Заң алғашқы ресми жарияланған күнінен бастап қолданысқа енгізіледі.</p>
<h3> 4-бап. Жер учаскесі</h3>
<p class="note">&nbsp;&nbsp; Ескерту. 4-бап алып тасталды - ҚР 30.12.2021 № 96-VII Заңымен.</p>
</article>"""  # noqa: E501


def test_kazakh_page_and_rare_forms():
    page = parse_html(KAZAKH, "Z9", "kk", "https://adilet.zan.kz/kaz/docs/Z9")
    a1, a2, a3, a4 = page.articles
    assert [a.number for a in page.articles] == ["1", "2", "3", "4"]
    assert a1.title == "Негізгі ұғымдар" and a1.lang == "kk"
    assert a1.path == ("1-тарау. ЖАЛПЫ ЕРЕЖЕЛЕР",)
    assert a1.url == "https://adilet.zan.kz/kaz/docs/Z9#z2"
    # a dropped inline note leaves a space; bold words and links inside a paragraph are not headings
    assert a1.text.splitlines() == [
        "1. Осы Заңда негізгі ұғымдар пайдаланылады.",
        "2. 31-баптан басқа жағдайларда 188-бапқа сәйкес.",
        "Ескертпе. 5-бапта көзделген жағдайлар",  # a law note in bold heads nothing: it stays
    ]
    assert a1.footnotes == ("Ескерту. 1-бапқа өзгеріс енгізілді - ҚР 25.06.2020 № 347-VI Заңымен.",)
    assert a1.editor_notes == ("(ЗҚАИ-ның ескертпесі: өзгеріс күтілуде)",)
    # the red note before article 2 speaks of it, and took its anchor
    assert a2.editor_notes == ("ЗҚАИ-ның ескертпесі! 2-бап жаңа редакцияда көзделген.",)
    assert a2.url.endswith("#z9")
    # a chapter heading in <p><b> broken by <br>; an <h3> without any anchor falls back to its first paragraph
    assert a3.path == ("2-тарау. ҚОРЫТЫНДЫ ЕРЕЖЕЛЕР",)
    assert a3.url.endswith("#z12")
    assert a4.status == "repealed" and a4.url == "https://adilet.zan.kz/kaz/docs/Z9"
    assert a4.text.startswith("4-бап алып тасталды")


def test_site_chrome_never_reaches_an_article(shared_dir: Path):
    """Without an <article> element the whole body is read: the reading stops at the chrome after the law."""
    html = _page(shared_dir, PD).read_text(encoding="utf-8")
    html = html.replace("<article>", "").replace("</article>", "")
    page = parse_html(html, PD, "ru", f"https://adilet.zan.kz/rus/docs/{PD}")
    assert len(page.articles) == 37
    for article in page.articles:
        for marker in CHROME:
            assert marker not in article.text, (article.number, marker)
    assert page.articles[-1].text.endswith("соответствуют целям их сбора.")
