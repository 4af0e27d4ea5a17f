"""The project's own dev and held-out sets (bench/data): every gold article exists in the shared corpus and is in
force, by the real parser; ids are unique; a dialogue says what its last turn does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from config import PROJECT_DIR
from tests.support.retrieval import corpus_titles

SETS = sorted((PROJECT_DIR / "bench" / "data").glob("*.jsonl"))
KINDS = {"continue", "refine", "switch", "back", "older"}


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("path", SETS, ids=lambda p: p.stem)
def test_every_gold_article_is_in_the_corpus_and_in_force(path: Path, shared_dir: Path) -> None:
    rows = records(path)
    assert rows and len({r["id"] for r in rows}) == len(rows)
    gold = {(g["doc_id"], g["article"]) for r in rows for g in r["relevant"]}
    articles = corpus_titles(shared_dir, {doc_id for doc_id, _ in gold})
    wrong = sorted(key for key in gold if articles.get(key, ("", "missing"))[1] != "in_force")
    assert not wrong, f"{path.name}: not in force or missing: {wrong}"
    for r in rows:
        assert r["lang"] in ("ru", "kk") and r["relevant"], r["id"]
        if "turns" in r:
            assert len(r["turns"]) >= 2 and r["kind"] in KINDS, r["id"]


def test_the_sets_are_all_there() -> None:
    names = {p.stem for p in SETS}
    dialogues = {"dialogues_dev", "dialogues_blind", "dialogues_blind2", "dialogues_blind3", "dialogues_blind4"}
    assert dialogues | {"kk_dev"} <= names
