"""Eval harness: metrics on hand-made rankings, the gold file reader, and a run over the real slice."""

from __future__ import annotations

import json
import math

import pytest

from cli import ALONE, GLUED, WITH_HISTORY, dialogue_chain, eval_main, evaluate_dialogues, format_comparison
from corpus.errors import UserError
from retrieval.evaluate import format_report, run_eval
from retrieval.gold import read_dialogues, read_questions
from retrieval.metrics import (
    Metrics,
    QuestionResult,
    hit_at,
    make_report,
    ndcg_at,
    percentile,
    recall_at,
    reciprocal_rank,
)
from tests.support.retrieval import TK, UK

A, B, C, D, E = (("X", str(n)) for n in range(1, 6))


def test_metrics_on_a_hand_made_ranking():
    ranked = [A, B, C, D, E]
    relevant = {B, E, ("Y", "9")}  # the third is never found
    assert hit_at(ranked, relevant, 1) == 0.0
    assert hit_at(ranked, relevant, 2) == 1.0
    assert recall_at(ranked, relevant, 2) == pytest.approx(1 / 3)
    assert recall_at(ranked, relevant, 5) == pytest.approx(2 / 3)
    assert reciprocal_rank(ranked, relevant) == 0.5
    dcg = 1 / math.log2(3) + 1 / math.log2(6)
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at(ranked, relevant, 10) == pytest.approx(dcg / ideal)
    assert ndcg_at([B, E], {B, E}, 10) == pytest.approx(1.0)
    assert reciprocal_rank([], relevant) == 0.0 and ndcg_at([], relevant, 10) == 0.0


def test_metrics_average_over_questions_and_subsets():
    def result(qid, lang, explicit, ranked, relevant, ms):
        return QuestionResult(qid, lang, explicit, frozenset(relevant), [(*k, 1.0) for k in ranked], ms)

    results = [
        result("a", "ru", True, [A, B], {A}, 10.0),  # rank 1
        result("b", "ru", False, [B, C, D, E, A], {A}, 20.0),  # rank 5
        result("c", "kk", False, [B], {A}, 30.0),  # missed
    ]
    report = make_report("demo", 20, results)
    m = report.overall
    assert (m.n, m.hit1, m.hit5, m.hit10) == (
        3,
        pytest.approx(1 / 3),
        pytest.approx(2 / 3),
        pytest.approx(2 / 3),
    )
    assert m.mrr == pytest.approx((1 + 0.2 + 0) / 3)
    assert report.subsets["lang=kk"].hit10 == 0.0
    assert report.subsets["lang=ru"] == Metrics.of(results[:2])
    assert report.subsets["explicit refs"].n == 1 and report.subsets["no explicit refs"].n == 2
    assert report.latency_p50_ms == 20.0
    assert percentile([10.0, 20.0, 30.0], 95) == pytest.approx(29.0)
    table = format_report(report)
    assert "demo" in table and "lang=kk" in table and "p50 20 ms" in table


def test_reader_ignores_extra_keys_and_names_the_bad_line(tmp_path):
    path = tmp_path / "gold.jsonl"
    good = {
        "id": "q1",
        "query": "кража",
        "lang": "ru",
        "relevant": [{"doc_id": UK, "article": "188", "x": 1}],
    }
    path.write_text(json.dumps({**good, "source_url": "http://x", "unmapped": []}) + "\n\n", encoding="utf-8")
    [q] = read_questions(path)
    assert q.relevant_keys == {(UK, "188")}
    path.write_text(json.dumps(good) + "\n" + json.dumps({"id": "q2"}) + "\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"gold\.jsonl:2"):
        read_questions(path)
    with pytest.raises(UserError, match="No question file"):
        read_questions(tmp_path / "missing.jsonl")


def _gold(tmp_path):
    lines = [
        {
            "id": "theft",
            "query": "Какое наказание за кражу телефона?",
            "relevant": [{"doc_id": UK, "article": "188"}],
        },
        {
            "id": "range",
            "query": "ст. 190-192 УК РК",
            "lang": "ru",
            "relevant": [{"doc_id": UK, "article": "191"}],
        },
        {
            "id": "leave",
            "query": "Сколько дней ежегодного оплачиваемого трудового отпуска положено работнику?",
            "relevant": [{"doc_id": TK, "article": "88"}],
        },
    ]
    path = tmp_path / "unseen.jsonl"
    path.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n", encoding="utf-8")
    return path


def test_run_eval_on_an_unseen_file_writes_rankings(bm25_retrieval, tmp_path):
    out = tmp_path / "out" / "rankings.jsonl"
    report = run_eval(bm25_retrieval.settings, _gold(tmp_path), k=7, out=out, retrieval=bm25_retrieval)
    assert report.overall.n == 3
    assert report.overall.hit5 == 1.0
    assert report.subsets["explicit refs"].n == 1 and report.subsets["explicit refs"].hit1 == 0.0  # 190 comes first
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [x["id"] for x in lines] == ["theft", "range", "leave"]
    for line in lines:
        keys = [(h["doc_id"], h["article"]) for h in line["hits"]]
        assert len(keys) == len(set(keys)) == 7
        scores = [h["score"] for h in line["hits"]]
        assert scores == sorted(scores, reverse=True)
    assert lines[0]["hits"][0] == {"doc_id": UK, "article": "188", "score": lines[0]["hits"][0]["score"]}
    assert [h["article"] for h in lines[1]["hits"][:3]] == ["190", "191", "192"]


DIGITAL_ASSETS = "Z2300000193"  # 14 articles in Russian and 15 in Kazakh: a whole data dir indexed in seconds


def test_cli_evaluates_a_data_dir_and_writes_rankings(shared_dir, tmp_path, capsys):
    from config import Settings
    from index.build import build_index
    from ingest_adilet.pipeline import ingest

    data = Settings(data_dir=tmp_path / "data", _env_file=None)
    assert ingest(data, source_dir=shared_dir / "corpus", doc_ids=[DIGITAL_ASSETS], progress=False).ok
    build_index(data, progress=False)
    gold = tmp_path / "mining.jsonl"
    lines = [
        {
            "id": "ru",
            "query": "Нужна ли лицензия на цифровой майнинг?",
            "relevant": [{"doc_id": DIGITAL_ASSETS, "article": "9"}],
        },
        {
            "id": "kk",
            "query": "Цифрлық майнингке лицензия алу керек пе?",
            "relevant": [{"doc_id": DIGITAL_ASSETS, "article": "9"}],
        },
    ]
    gold.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines), encoding="utf-8")
    out = tmp_path / "rankings.jsonl"
    elsewhere = Settings(data_dir=tmp_path / "unused", _env_file=None)
    code = eval_main(
        ["--questions", str(gold), "--data-dir", str(data.data_dir), "--k", "5", "--out", str(out)], elsewhere
    )
    printed = capsys.readouterr().out
    assert code == 0
    assert "mining" in printed and "lang=kk" in printed and "hit@10" in printed
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == ["ru", "kk"]
    for r in rows:
        assert r["hits"][0]["article"] == "9" and len(r["hits"]) == 5
        assert {h["doc_id"] for h in r["hits"]} == {DIGITAL_ASSETS}


def test_cli_errors_say_what_to_fix(corpus_slice, tmp_path, capsys):
    # the slice has no vector index: the lexical searches are measured, and the CLI says so and which command
    # builds the rest (issue 14: a missing index no longer stops retrieval)
    code = eval_main(
        ["--questions", str(_gold(tmp_path)), "--data-dir", str(corpus_slice.settings.data_dir)],
        corpus_slice.settings,
    )
    err = capsys.readouterr().err
    assert code == 0 and "searches that ran: bm25." in err and "python -m ingest_adilet index --data-dir" in err
    assert eval_main(["--questions", str(tmp_path / "nope.jsonl")], corpus_slice.settings) == 1
    assert "No question file" in capsys.readouterr().err


# --- dialogues ------------------------------------------------------------------------------------


def _dialogues(tmp_path):
    lines = [
        {
            "id": "fraud",
            "lang": "ru",
            "turns": ["Что будет за мошенничество?", "А если сумма крупная?"],
            "relevant": [{"doc_id": UK, "article": "190"}],
        },
        {
            "id": "switch",
            "lang": "ru",
            "turns": ["Что будет за кражу?", "Другой вопрос: сколько может длиться испытательный срок?"],
            "relevant": [{"doc_id": TK, "article": "36"}],
        },
        {
            "id": "single",
            "turns": ["Какое наказание за кражу телефона?"],
            "relevant": [{"doc_id": UK, "article": "188"}],
        },
    ]
    path = tmp_path / "talks.jsonl"
    path.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n", encoding="utf-8")
    return path


def test_dialogue_reader_names_the_bad_line(tmp_path):
    path = _dialogues(tmp_path)
    assert [d.id for d in read_dialogues(path)] == ["fraud", "switch", "single"]
    path.write_text(path.read_text(encoding="utf-8") + json.dumps({"id": "x", "turns": [], "relevant": []}) + "\n")
    with pytest.raises(UserError, match=r"talks\.jsonl:4 is not a gold dialogue"):
        read_dialogues(path)
    with pytest.raises(UserError, match="No dialogue file"):
        read_dialogues(tmp_path / "missing.jsonl")


def test_dialogues_rank_the_last_turn_three_ways(bm25_retrieval, tmp_path):
    chain = dialogue_chain(bm25_retrieval.settings, bm25_retrieval)
    reports = evaluate_dialogues(chain, read_dialogues(_dialogues(tmp_path)), k=10, name="talks")
    ranks = {way: [reciprocal_rank(r.keys, set(r.relevant)) for r in report.results] for way, report in reports.items()}
    assert reports[WITH_HISTORY].overall.hit5 == 1.0
    assert ranks[ALONE][0] < 0.2  # «А если сумма крупная?» alone does not find fraud
    assert ranks[WITH_HISTORY][1] == ranks[ALONE][1]  # a change of subject: searched as the new question
    assert ranks[WITH_HISTORY][2] == ranks[ALONE][2] == ranks[GLUED][2]  # one turn: nothing to understand
    assert reports[WITH_HISTORY].name == "talks" and reports[ALONE].name == "talks (last turn alone)"
    table = format_comparison("talks", reports)
    assert table.index(ALONE) < table.index(GLUED) < table.index(WITH_HISTORY) and "MRR" in table


def test_cli_evaluates_dialogues(shared_dir, tmp_path, capsys):
    from config import Settings
    from index.build import build_index
    from ingest_adilet.pipeline import ingest

    data = Settings(data_dir=tmp_path / "data", _env_file=None)
    assert ingest(data, source_dir=shared_dir / "corpus", doc_ids=[DIGITAL_ASSETS], progress=False).ok
    build_index(data, progress=False)
    gold = tmp_path / "mining_talks.jsonl"
    line = {
        "id": "m",
        "lang": "ru",
        "turns": ["Что такое цифровой майнинг?", "Нужна ли на него лицензия?"],
        "relevant": [{"doc_id": DIGITAL_ASSETS, "article": "9"}],
    }
    gold.write_text(json.dumps(line, ensure_ascii=False) + "\n", encoding="utf-8")
    out = tmp_path / "rankings.jsonl"
    code = eval_main(["--dialogues", str(gold), "--data-dir", str(data.data_dir), "--k", "5", "--out", str(out)], data)
    printed = capsys.readouterr().out
    assert code == 0
    assert "mining_talks: article-level retrieval" in printed and "the last turn searched three ways" in printed
    assert all(way in printed for way in (ALONE, GLUED, WITH_HISTORY))
    [row] = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert row["id"] == "m" and len(row["hits"]) == 5


def test_cli_needs_questions_or_dialogues(settings):
    with pytest.raises(SystemExit) as exit_info:
        eval_main([], settings)
    assert exit_info.value.code == 2
