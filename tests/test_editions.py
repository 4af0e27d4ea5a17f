"""Editions: every answer tells the edition of each document it cites — a saved page's «по состоянию на» date, or
a text snapshot's latest amending act («с изменениями по»); the bot's /about tells what the answers rest on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from answer.context import format_context
from answer.records import Source
from bot.app import build_application
from bot.format import format_about, format_answer
from config import Settings
from corpus.legal.registry import CRIMINAL_CODE_ID
from corpus.store import edition_label, load_articles, load_manifest
from index.summary import summarize
from ingest_adilet.editions import act_dates, amended_through, repealed_by
from ingest_adilet.html_parser import parse_html
from ingest_adilet.text_parser import parse_text
from tests.support.retrieval import CONSUMER, KOAP, TK, UK
from tests.support.telegram_server import message_update, polling, settings_for

DIGITAL_ASSETS = "Z2300000193"
BANKS = "Z950002444_"  # repealed as a whole by the Law of 16.01.2026 № 258-VIII, a few norms later


def _articles(shared_dir: Path, doc_id: str, lang: str = "ru"):
    site = "kaz" if lang == "kk" else "rus"
    return parse_text((shared_dir / "corpus" / site / f"{doc_id}.txt").read_text(encoding="utf-8"), doc_id, lang)


def test_act_dates_are_the_dates_before_an_act_number_not_when_it_takes_effect() -> None:
    note = (
        "Сноска. Статья 274 с изменениями, внесенными РК от 20.12.2021 № 84-VII (вводится в действие по истечении "
        "десяти календарных дней …); от 05.11.2022 № 157-VII (вводится в действие с 01.01.2023)."
    )
    assert act_dates(note) == [(2021, 12, 20), (2022, 11, 5)]
    kazakh = "Ескерту. 27-бапқа өзгеріс енгізілді - ҚР 2005.07.08 № 72 (қолданысқа енгізілу тәртібін 2-баптан қараңыз)"
    assert act_dates(kazakh) == [(2005, 7, 8)]
    assert act_dates("ҚР 29.09.2014 N 239-V (… 01.01.2015 бастап қолданысқа енгізіледі)") == [(2014, 9, 29)]


def test_a_text_snapshot_is_dated_by_its_latest_amendment_in_force(shared_dir: Path) -> None:
    labour = _articles(shared_dir, TK)
    assert amended_through(labour) == "16.07.2025"
    # Later acts appear only in editor's notes announcing changes not yet in the text: they do not count.
    text = (shared_dir / "corpus" / "rus" / f"{TK}.txt").read_text(encoding="utf-8")
    assert "предусматривается изменение Законом РК от 09.01.2026" in text
    assert max(act_dates(text)) == (2026, 1, 9)
    # The two languages of one law are different snapshots: the Kazakh one already holds the January amendment.
    assert amended_through(_articles(shared_dir, DIGITAL_ASSETS)) == "17.11.2025"
    assert amended_through(_articles(shared_dir, DIGITAL_ASSETS, "kk")) == "16.01.2026"
    assert amended_through([]) is None


def test_a_saved_page_states_its_edition_and_its_amendments_precede_it(shared_dir: Path) -> None:
    html = (shared_dir / "corpus" / "html" / f"{CRIMINAL_CODE_ID}.html").read_text(encoding="utf-8")
    page = parse_html(html, CRIMINAL_CODE_ID, "ru", "https://adilet.zan.kz/rus/docs/K1400000226")
    assert page.edition_date == "20.03.2026"
    day, month, year = (int(x) for x in amended_through(page.articles).split("."))
    assert (2025, 1, 1) <= (year, month, day) <= (2026, 3, 20)


def test_a_law_repealed_as_a_whole_says_so_in_its_own_words_in_either_language(shared_dir: Path) -> None:
    def text(doc_id: str, site: str = "rus") -> str:
        return (shared_dir / "corpus" / site / f"{doc_id}.txt").read_text(encoding="utf-8")

    assert (
        repealed_by(text(BANKS), "ru")
        == "Закон утратил силу Законом РК от 16.01.2026 № 258-VIII (кроме отдельных норм)"
    )
    kazakh = repealed_by(text(BANKS, "kaz"), "kk")
    assert kazakh == "Заңның күші жойылды – ҚР 16.01.2026 № 258-VIII Заңымен (жекелеген нормаларын қоспағанда)"
    # every other document of the corpus is in force, though their articles are repealed one by one («Статья 117
    # исключена …», «…-бап алып тасталды») and their transitional provisions repeal other acts
    for site, lang in (("rus", "ru"), ("kaz", "kk")):
        for path in sorted((shared_dir / "corpus" / site).glob("*.txt")):
            if path.stem != BANKS:
                assert repealed_by(path.read_text(encoding="utf-8"), lang) is None, path
    whole = "Сноска. Кодекс утратил силу Законом РК от 05.07.2014 № 236-V (вводится в действие с 01.01.2015).\n"
    assert repealed_by(whole, "ru") == "Кодекс утратил силу Законом РК от 05.07.2014 № 236-V"


def test_a_repealed_law_is_cited_with_its_repeal(
    shared_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ingested, its manifest entries carry the note; an answer citing it tells it in its text, beside the edition
    in the CLI, the bot and `invoke_qa`'s JSON, and in a chat model's context; a law in force is cited as before."""
    from cli import _print_result
    from ingest_adilet.pipeline import ingest
    from rag_chain import QAChain
    from retrieval.pipeline import Retrieval, Stages
    from tests.support.ingest import make_source_dir

    source = make_source_dir(tmp_path / "source", shared_dir, [BANKS, DIGITAL_ASSETS])
    settings = Settings(data_dir=tmp_path / "data", _env_file=None, learned_ranker=False)
    assert ingest(settings, source_dir=source, progress=False).ok
    notes = {(d.doc_id, d.lang): d.repealed_by for d in load_manifest(settings.corpus_dir).documents}
    assert notes[(BANKS, "ru")] and notes[(BANKS, "ru")].startswith("Закон утратил силу Законом РК от 16.01.2026")
    assert notes[(BANKS, "kk")] and notes[(BANKS, "kk")].startswith("Заңның күші жойылды")
    assert notes[(DIGITAL_ASSETS, "ru")] is None

    retrieval = Retrieval.load(settings, stages=Stages(dense=False, sparse=False, rerank=False, learned=False))
    chain = QAChain(settings, retrieval, load_articles(settings.corpus_dir))
    result = chain.invoke("Какой срок исковой давности по требованиям банка к заемщику?")
    banks = [s for s in result.sources if s.doc_id == BANKS]
    assert banks and all(s.repealed_by == notes[(BANKS, "ru")] for s in banks)
    assert (
        banks[0].edition().endswith("; Закон утратил силу Законом РК от 16.01.2026 № 258-VIII (кроме отдельных норм)")
    )
    assert all(s.repealed_by is None for s in result.sources if s.doc_id != BANKS)
    as_json = json.loads(json.dumps(result.to_json(), ensure_ascii=False))
    assert {s["repealed_by"] for s in as_json["sources"] if s["doc_id"] == BANKS} == {notes[(BANKS, "ru")]}
    assert any("Закон утратил силу Законом РК от 16.01.2026" in line for line in format_answer(result, "ru"))
    # the quotes say it under the article's label, and so would the context a chat model reads
    assert f"{banks[0].citation()} ({notes[(BANKS, 'ru')]})" in result.answer
    assert f"({notes[(BANKS, 'ru')]})" in format_context(banks, settings)
    _print_result(result)
    assert "Закон утратил силу Законом РК от 16.01.2026 № 258-VIII" in capsys.readouterr().out


def test_the_manifest_records_each_documents_edition_and_its_basis(corpus_slice) -> None:
    manifest = load_manifest(corpus_slice.settings.corpus_dir)
    editions = {(d.doc_id, d.lang): (d.source, d.edition_date, d.edition_basis) for d in manifest.documents}
    assert editions == {
        (UK, "ru"): ("html", "20.03.2026", "as_of"),
        (KOAP, "ru"): ("txt", "09.01.2026", "amended_through"),
        (TK, "ru"): ("txt", "16.07.2025", "amended_through"),
        (CONSUMER, "ru"): ("txt", "04.12.2025", "amended_through"),
        (CONSUMER, "kk"): ("txt", "04.12.2025", "amended_through"),
    }


def test_edition_labels_name_what_the_date_is() -> None:
    assert edition_label("20.03.2026", "as_of") == "редакция по состоянию на 20.03.2026"
    assert edition_label("16.07.2025", "amended_through") == "редакция с изменениями по 16.07.2025"
    assert edition_label("16.07.2025", "amended_through", "kk") == "16.07.2025 дейінгі өзгерістерімен редакция"
    assert edition_label("20.03.2026", "as_of", "kk") == "20.03.2026 жағдай бойынша редакция"
    assert edition_label(None, None) == ""


@pytest.fixture(scope="module")
def chain(corpus_slice, bm25_retrieval):
    from rag_chain import QAChain

    return QAChain(corpus_slice.settings, bm25_retrieval, load_articles(corpus_slice.settings.corpus_dir))


def test_every_cited_document_carries_its_edition(chain, capsys: pytest.CaptureFixture[str]) -> None:
    from cli import _print_result

    theft = chain.invoke("Что будет за кражу телефона?")
    uk = [s for s in theft.sources if s.doc_id == UK]
    assert uk and {(s.edition_date, s.edition_basis) for s in uk} == {("20.03.2026", "as_of")}
    leave = chain.invoke("Сколько дней длится ежегодный оплачиваемый трудовой отпуск?")
    labour = [s for s in leave.sources if s.doc_id == TK]
    assert labour and labour[0].edition() == "редакция с изменениями по 16.07.2025"
    assert all(s.edition_date for s in (*theft.sources, *leave.sources))
    as_json = json.loads(json.dumps(leave.to_json(), ensure_ascii=False))
    assert {(s["edition_date"], s["edition_basis"]) for s in as_json["sources"] if s["doc_id"] == TK} == {
        ("16.07.2025", "amended_through")
    }
    _print_result(theft)
    assert "Статья 188. Кража (редакция по состоянию на 20.03.2026)" in capsys.readouterr().out


def test_the_bot_lists_the_edition_of_each_cited_document_once(chain) -> None:
    result = chain.invoke("Что будет за кражу телефона?")
    html = "\n".join(format_answer(result, "ru"))
    editions = html.split("<i>Редакции:</i>\n", 1)[1].splitlines()
    codes = {s.code for s in result.sources}
    assert "УК РК — редакция по состоянию на 20.03.2026" in editions
    assert len(editions) == len({(s.doc_id, s.lang) for s in result.sources}) and len(codes) >= 1
    kazakh = "\n".join(format_answer(result, "kk"))
    assert "<i>Редакциялар:</i>" in kazakh and "20.03.2026 жағдай бойынша редакция" in kazakh
    unknown = Source("S1", "X", "1", "Код", "Статья", "", "", 1.0)
    assert "Редакции" not in "\n".join(format_answer(_with_sources(result, (unknown,)), "ru"))


def _with_sources(result, sources):
    import dataclasses

    return dataclasses.replace(result, sources=sources)


def test_about_summarizes_the_data_dir(corpus_slice) -> None:
    summary = summarize(corpus_slice.settings)
    assert (summary.oldest_edition, summary.newest_edition) == ("16.07.2025", "20.03.2026")
    assert (summary.editions_as_of, summary.editions_amended) == (1, 4)
    assert summary.vectors is None and summary.latent_rows is None  # BM25 only on this slice's data dir
    text = format_about(summary, "ru")
    manifest = load_manifest(corpus_slice.settings.corpus_dir)
    articles = sum(t.articles for t in manifest.totals.values())
    assert "Документов: 4 на русском, 1 на казахском" in text
    assert f"статей: {articles:,}".replace(",", "\u202f") in text
    assert "с 16.07.2025 по 20.03.2026 (1 — «по состоянию на»" in text
    assert "векторы — не построены; латентные термы — не построены; векторы заголовков статей — не построены" in text
    assert format_about(None, "kk") == "Корпус әлі жиналмаған: әзірге жауап жоқ."


def test_about_reports_an_index_built_from_another_corpus_as_out_of_date(shared_dir: Path, tmp_path: Path) -> None:
    """/about asks the loader's own checks: an index the chain would leave out (the corpus changed after it was
    built) is reported out of date, not built; the same data dir's chain says the same."""
    from index.build import build_index
    from ingest_adilet.pipeline import ingest
    from retrieval.loading import OUT_OF_DATE, load
    from retrieval.pipeline import Stages
    from tests.support.ingest import make_source_dir

    source = make_source_dir(tmp_path / "source", shared_dir, [DIGITAL_ASSETS])
    settings = Settings(data_dir=tmp_path / "data", _env_file=None, learned_ranker=False)
    assert ingest(settings, source_dir=source, progress=False).ok
    build_index(settings, progress=False)
    built = summarize(settings)
    assert (built.vectors, built.latent_rows, built.titles) == (20, 20, 14)  # 14 articles, each with its heading
    assert "векторы — 20; латентные термы — 20; векторы заголовков статей — 14" in format_about(built, "ru")

    # a new edition of the law arrives (one article reworded) and is ingested; the index is not rebuilt
    text = source / "rus" / f"{DIGITAL_ASSETS}.txt"
    body = text.read_text(encoding="utf-8")
    assert body.count("цифровых активов") > 3
    text.write_text(body.replace("цифровых активов", "цифровых финансовых активов", 3), encoding="utf-8")
    assert ingest(settings, source_dir=source, progress=False).ok

    stale = summarize(settings)
    assert (stale.vectors, stale.latent_rows) == (None, None)
    assert (stale.vectors_stale, stale.latent_stale) == (True, True)
    assert not built.vectors_stale and not built.latent_stale
    about = format_about(stale, "ru")
    assert "векторы — устарели (корпус изменился после их построения), пока не используются" in about
    assert "латентные термы — устарели" in format_about(stale, "ru") and "ескірген" in format_about(stale, "kk")
    loaded = load(settings, Stages(rerank=False, learned=False))  # the chain leaves both out, for the same reason
    assert loaded.vector_store is None and loaded.latent is None
    assert loaded.pending is not None and loaded.pending.reason == OUT_OF_DATE
    # The headings did not change (the words replaced are in article 1's text): their vectors still hold.
    assert (stale.titles, stale.titles_stale) == (14, False)

    # A heading reworded: the title vectors are out of date too, and usable again once the index is built.
    assert "Статья 11. Биржи цифровых активов\n" in body
    text.write_text(body.replace("Статья 11. Биржи цифровых активов", "Статья 11. Биржи цифровых валют"), "utf-8")
    assert ingest(settings, source_dir=source, progress=False).ok
    renamed = summarize(settings)
    assert (renamed.titles, renamed.titles_stale) == (None, True)
    assert "векторы заголовков статей — устарели" in format_about(renamed, "ru")
    build_index(settings, progress=False)
    rebuilt = summarize(settings)
    assert rebuilt.titles == 14 and "бап тақырыптарының векторлары — 14" in format_about(rebuilt, "kk")


async def test_about_command_through_the_bot_api(api, corpus_slice, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    shutil.copytree(corpus_slice.settings.corpus_dir, data_dir / "corpus")
    settings = settings_for(corpus_slice.settings.model_copy(update={"data_dir": data_dir}), api)
    app = build_application(settings, qa=lambda *a, **kw: None, lookup=lambda *a, **kw: None)
    async with polling(app):
        since = len(api.requests)
        api.push(message_update(41, "/about"))
        await api.wait_for(lambda s: any(r.method == "sendMessage" for r in s.calls(since=since)), timeout=60)
        sent = [r for r in api.calls(since=since) if r.method == "sendMessage"]
        api.push(message_update(42, "/about", language_code="kk"))
        await api.wait_for(lambda s: len([r for r in s.calls(since=since) if r.method == "sendMessage"]) == 2, 60)
        kazakh = [r for r in api.calls(since=since) if r.method == "sendMessage"][1]
    text = sent[0].params["text"]
    assert sent[0].params["chat_id"] == 41
    assert text.startswith("ℹ️ <b>На чём основаны ответы</b>")
    assert "Редакции документов: с 16.07.2025 по 20.03.2026" in text and "Корпус собран: 20" in text
    assert "Поиск: BM25 и ссылки на статьи — всегда; векторы — не построены" in text
    assert "Құжаттар: орыс тілінде 4, қазақ тілінде 1" in kazakh.params["text"]
    commands = [r for r in api.requests if r.method == "setMyCommands"]
    assert all("about" in json.dumps(r.params["commands"]) for r in commands)
