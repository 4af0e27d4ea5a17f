"""invoke_qa() end to end: the real retrieval over a real corpus slice, the real answer stage, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from corpus.errors import QAError
from corpus.legal.registry import CRIMINAL_CODE_ID
from corpus.store import load_articles
from rag_chain import QAChain
from tests.support.llm_servers import with_backends
from tests.support.retrieval import CONSUMER, TK

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def chain(corpus_slice, hybrid_retrieval) -> QAChain:
    return QAChain(corpus_slice.settings, hybrid_retrieval, load_articles(corpus_slice.settings.corpus_dir))


@pytest.fixture(scope="module")
def lexical_chain(corpus_slice, bm25_retrieval) -> QAChain:
    """The chain over the slice with BM25 alone: no vector index to build."""
    return QAChain(corpus_slice.settings, bm25_retrieval, load_articles(corpus_slice.settings.corpus_dir))


def test_crime_question_gets_extractive_answer_citing_theft(chain):
    result = chain.invoke("Что будет за кражу телефона?")
    assert (result.backend, result.template, result.lang) == ("extractive", "criminal", "ru")
    assert result.grounded
    assert (CRIMINAL_CODE_ID, "188") in {(s.doc_id, s.article) for s in result.sources}
    theft = next(s for s in result.sources if s.article == "188")
    assert (
        theft.code == "УК РК"
        and theft.title == "Кража"
        and theft.url.startswith("https://adilet.zan.kz/rus/docs/K1400000226")
    )
    assert "Статья 188. Кража" in result.answer and "adilet.zan.kz" in result.answer
    assert {"retrieval_ms", "answer_ms", "total_ms"} <= set(result.timings)


def test_every_cited_article_was_retrieved(chain):
    question = "Меня уволили без предупреждения, что делать?"
    retrieved = chain.retrieval.retrieve(question)
    result = chain.invoke(question)
    assert result.template == "universal"
    assert {(s.doc_id, s.article) for s in result.sources} <= {
        (d.metadata["doc_id"], d.metadata["article"]) for d in retrieved.docs
    }


def test_range_question_quotes_each_article_in_turn(chain):
    result = chain.invoke("Разъясните статьи 190-192 УК РК")
    assert result.template == "range"
    assert [s.article for s in result.sources[:3]] == ["190", "191", "192"]
    assert result.answer.index("Статья 190") < result.answer.index("Статья 191") < result.answer.index("Статья 192")


def test_kazakh_question_is_answered_in_kazakh(chain):
    result = chain.invoke("Ұрлық үшін қандай жаза қарастырылған?")
    assert result.lang == "kk" and result.template == "criminal"
    assert "ақпараттық сипатта" in result.answer or "заң кеңесі емес" in result.answer  # the Kazakh disclaimer
    assert any(s.doc_id == CRIMINAL_CODE_ID for s in result.sources)


# The Kazakh note of a source whose text the corpus has only in Russian (prompts/phrases.kk.toml), for a document.
def kazakh_note(doc_id: str) -> str:
    return (
        "Бұл баптың қазақ тіліндегі мәтіні осы корпуста жоқ, орыс тіліндегі мәтіні келтірілді; қазақша мәтіні: "
        f"https://adilet.zan.kz/kaz/docs/{doc_id}"
    )


def test_kazakh_question_on_a_russian_only_code_quotes_it_under_kazakh_names(lexical_chain):
    """The Labour Code is here only in Russian: a Kazakh answer names it in Kazakh («ҚР ЕК, 22-бап»), quotes the
    Russian text and says so in one Kazakh line that links the code's Kazakh page."""
    result = lexical_chain.invoke("ЕК 22-бап бойынша қызметкердің қандай құқықтары бар?")
    assert result.lang == "kk" and result.backend == "extractive"
    labour = next(s for s in result.sources if (s.doc_id, s.article) == (TK, "22"))
    assert (labour.lang, labour.code, labour.cite_lang) == ("ru", "ҚР ЕК", "kk")
    assert labour.citation() == "ҚР ЕК, 22-бап. Основные права и обязанности работника"
    assert labour.url.startswith("https://adilet.zan.kz/rus/docs/K1500000414")
    assert labour.note == kazakh_note(TK)
    block = f"[{labour.source_id}] ҚР ЕК, 22-бап. Основные права и обязанности работника\n{labour.url}\n{labour.note}\n"
    assert block in result.answer
    assert "Работник имеет право на" in result.answer  # the Russian text itself
    assert result.answer.count(labour.note) == 1  # once per document, however many of its articles are quoted
    assert "ТК РК" not in result.answer and "Статья 22" not in result.answer
    assert result.to_json()["sources"][0]["note"] == result.sources[0].note


def test_kazakh_question_on_a_law_in_kazakh_gets_its_kazakh_text(lexical_chain):
    """The consumer protection law is here in Kazakh too: its Kazakh text under its Kazakh heading, no note."""
    result = lexical_chain.invoke("Тұтынушылардың құқықтарын қорғау туралы заңның 7-бабы бойынша құқықтарым қандай?")
    assert result.lang == "kk"
    rights = next(s for s in result.sources if (s.doc_id, s.article) == (CONSUMER, "7"))
    assert (rights.lang, rights.cite_lang, rights.note) == ("kk", None, "")
    assert rights.citation() == "Тұтынушылардың құқықтарын қорғау туралы Заң, 7-бап. Тұтынушылардың құқықтары"
    assert rights.url.startswith("https://adilet.zan.kz/kaz/docs/Z100000274_")
    assert f"[{rights.source_id}] {rights.citation()}\n{rights.url}\n" in result.answer
    assert "құқықтары мен заңды мүдделерін қорғауға" in result.answer  # the Kazakh text itself
    assert "қазақша мәтіні:" not in result.answer


def test_kazakh_prompt_heads_russian_sources_in_kazakh(corpus_slice, bm25_retrieval, groq_server):
    """The model reads the Labour Code's Russian text under its Kazakh heading, as the answer will cite it."""
    groq_server.reply = "Қызметкер еңбек шартын жасасуға құқылы [S1]."
    settings = with_backends(corpus_slice.settings, groq=groq_server.url)
    chain = QAChain(settings, bm25_retrieval, load_articles(settings.corpus_dir))
    chain.invoke("ЕК 22-бап бойынша қызметкердің қандай құқықтары бар?")
    prompt = groq_server.received[-1].text_of("user")
    assert "] ҚР ЕК, 22-бап. Основные права и обязанности работника\n" in prompt
    assert "ТК РК" not in prompt


def test_model_answer_through_groq(corpus_slice, hybrid_retrieval, groq_server):
    groq_server.reply = (
        "Кража — тайное хищение чужого имущества [S1]. Она наказывается штрафом до одной тысячи месячных "
        "расчетных показателей либо лишением свободы на срок до трех лет [S1]."
    )
    settings = with_backends(corpus_slice.settings, groq=groq_server.url)
    chain = QAChain(settings, hybrid_retrieval, load_articles(settings.corpus_dir))
    result = chain.invoke("Какое наказание за кражу?")
    assert result.backend == "groq", result.grounding_notes
    assert result.grounded and result.answer.startswith("Кража — тайное хищение")
    assert [s.article for s in result.sources] == ["188"]
    prompt = groq_server.received[-1].text_of("user")
    assert "Статья 188. Кража" in prompt and "Какое наказание за кражу?" in prompt


def test_lookup_article_by_any_code_name(chain):
    for code in ("УК", "ҚК", "УК РК", "Уголовный кодекс"):
        article = chain.article(code, "188")
        assert article is not None
        assert (article.doc_id, article.number, article.title) == (CRIMINAL_CODE_ID, "188", "Кража")
    drunk_driving = chain.article("КоАП", "608")
    assert drunk_driving.title.startswith("Управление транспортным средством водителем, находящимся в состоянии")
    assert chain.article("УК", "9999") is None


def test_bad_questions_get_clear_errors(chain):
    with pytest.raises(QAError, match="пустой"):
        chain.invoke("   \n ")
    with pytest.raises(QAError, match="слишком длинный"):
        chain.invoke("кража " * 2000)


@pytest.mark.slow
def test_cli_ask_json_on_a_small_corpus(shared_dir, settings, tmp_path):
    """`python -m rag_chain ask --from-dir DIR --json` as a user runs it: it builds the corpus of the one law in
    DIR (the other registry documents are absent: skipped), then answers at once with the lexical searches."""
    import shutil

    source = tmp_path / "adilet"
    for lang in ("rus", "kaz"):
        (source / lang).mkdir(parents=True)
        shutil.copy(shared_dir / "corpus" / lang / "Z1300000094.txt", source / lang)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GROQ_", "OLLAMA_", "PINECONE_"))}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rag_chain",
            "ask",
            "--json",
            "--from-dir",
            str(source),
            "--data-dir",
            str(settings.data_dir),
            "Нужно ли согласие человека на сбор его персональных данных?",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    result = json.loads(out.stdout)
    assert {"answer", "sources", "template", "backend", "grounded", "timings"} <= set(result)
    assert result["backend"] == "extractive" and result["sources"]
    for source in result["sources"]:
        assert {"doc_id", "article", "code", "title", "url", "snippet", "score"} <= set(source)
        assert source["doc_id"] == "Z1300000094" and source["url"].startswith("https://adilet.zan.kz/")
    assert "8" in {s["article"] for s in result["sources"]}  # «Согласие субъекта на сбор, обработку …»
    assert result["searches"] == ["bm25"]  # no index is built before the first answer (issue 14)
    assert "python -m ingest_adilet index --data-dir" in out.stderr
