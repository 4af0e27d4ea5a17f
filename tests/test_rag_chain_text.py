"""Text from outside at the chain's edge: invalid UTF-8 (lone surrogates), controls and invisible characters never
reach the embedder, through invoke() and through the CLI."""

from __future__ import annotations

import time

import pytest

import cli
import rag_chain
from config import Settings
from corpus.store import load_articles
from rag_chain import QAChain

# `printf 'кража \xff\xfe телефона'` as Python hands it over from argv (surrogateescape) or from JSON escapes
BROKEN = "кража \udcff\udcfe телефона"
UK = "K1400000226"


@pytest.fixture(scope="module")
def chain(corpus_slice, hybrid_retrieval) -> QAChain:
    return QAChain(corpus_slice.settings, hybrid_retrieval, load_articles(corpus_slice.settings.corpus_dir))


def test_invalid_utf8_question_is_answered(chain: QAChain) -> None:
    result = chain.invoke(BROKEN)
    assert result.question == "кража \ufffd\ufffd телефона"
    assert (UK, "188") in {(s.doc_id, s.article) for s in result.sources}
    result.question.encode("utf-8")  # everything it carries encodes
    result.answer.encode("utf-8")


def test_invisible_and_control_characters_do_not_change_the_answer(chain: QAChain) -> None:
    # a NUL would cut the text short inside the C embedder; a soft hyphen splits «кража» in two for BM25
    plain = chain.invoke("кража телефона")
    dirty = chain.invoke("кра\u00adжа\u200b \x00телефона\ufeff")
    assert [(s.doc_id, s.article, s.score) for s in dirty.sources] == [
        (s.doc_id, s.article, s.score) for s in plain.sources
    ]


def test_article_lookup_with_a_surrogate(chain: QAChain) -> None:
    article = chain.article("УК\udcff", "188")
    assert article is not None and (article.doc_id, article.number) == (UK, "188")


def test_cli_ask_with_invalid_utf8(
    settings: Settings, corpus_slice, hybrid_retrieval, monkeypatch, capsys, restore_loggers
) -> None:
    data_dir = corpus_slice.settings.data_dir
    # the chain `ask --data-dir` loads, built from the slice once (loading it from disk would embed nothing new)
    cli_settings = Settings(data_dir=data_dir)
    key = rag_chain._key(cli_settings)
    chain = QAChain(cli_settings, hybrid_retrieval, load_articles(data_dir / "corpus"))
    monkeypatch.setitem(rag_chain._chains, key, rag_chain._Held(chain, time.monotonic()))
    assert cli.main(["ask", "--data-dir", str(data_dir), BROKEN]) == 0
    out = capsys.readouterr().out
    assert "Статья 188. Кража" in out


def test_settings_differing_only_in_a_key_do_not_share_a_chain(tmp_path) -> None:
    # model_dump_json() masks SecretStr: keyed on it, a chain loaded with one Groq key served another's settings
    keys = {
        rag_chain._key(Settings(data_dir=tmp_path, _env_file=None, groq_api_key=value))
        for value in ("gsk_one", "gsk_two", None)
    }
    assert len(keys) == 3
    assert all("gsk_one" not in str(k) for k in keys)
    same = Settings(data_dir=tmp_path, _env_file=None, groq_api_key="gsk_one")
    assert rag_chain._key(same) in keys
