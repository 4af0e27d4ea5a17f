"""html_articles alone: lines as html_reader gives them assembled into articles (path, anchors, notes moved out)."""

from __future__ import annotations

from ingest_adilet.html_articles import assemble_articles
from ingest_adilet.html_reader import Line

URL = "https://adilet.zan.kz/rus/docs/X1"


def test_headings_open_articles_and_notes_go_where_they_belong() -> None:
    lines = [
        Line(heading=["Глава 1. ОБЩИЕ ПОЛОЖЕНИЯ"], anchors=["z1"]),
        Line(heading=["Статья 1. Первая"], anchors=["z2"]),
        Line(parts=[("1. Текст первой статьи.", "text")], anchors=["z3"]),
        Line(parts=[("Сноска. Статья 1 с изменениями, внесенными Законом РК от 01.01.2020 ", "note"), ("№ 1", "link")]),
        Line(parts=[("Примечание ИЗПИ!", "editor")]),  # a red note about the next article, before its heading
        Line(parts=[("Статья 2 вводится в действие с 01.01.2026.", "editor")]),
        Line(heading=["Статья 2. Вторая"], anchors=["z4"]),
        Line(parts=[("Текст второй статьи.", "text")]),
    ]
    first, second = assemble_articles(lines, "X1", "ru", f"{URL}#top", "01.02.2026")
    assert (first.number, first.title, first.text) == ("1", "Первая", "1. Текст первой статьи.")
    assert first.path == second.path == ("Глава 1. ОБЩИЕ ПОЛОЖЕНИЯ",)
    assert first.footnotes == ("Сноска. Статья 1 с изменениями, внесенными Законом РК от 01.01.2020 № 1",)
    assert first.editor_notes == ()
    assert second.editor_notes == ("Примечание ИЗПИ! Статья 2 вводится в действие с 01.01.2026.",)
    assert (first.url, second.url) == (f"{URL}#z2", f"{URL}#z4")
    assert first.edition_date == second.edition_date == "01.02.2026"


def test_a_title_broken_over_two_heading_lines_is_one_title() -> None:
    lines = [
        Line(heading=["Статья 5. Права и обязанности", "сторон договора"], anchors=["z9"]),
        Line(parts=[("Текст.", "text")]),
    ]
    [article] = assemble_articles(lines, "X1", "ru", URL, None)
    assert article.title == "Права и обязанности сторон договора" and article.url == f"{URL}#z9"
