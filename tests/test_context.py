"""Retrieved documents → sources and the labelled context block, on real articles of the Criminal Code."""

from __future__ import annotations

from pathlib import Path

from langchain_core.documents import Document

from answer.context import clip, format_context, to_sources
from config import Settings
from tests.support.answer import UK, articles, docs


def test_sources_are_labelled_in_order_with_citation_fields(settings: Settings, shared_dir: Path):
    sources = to_sources(docs(shared_dir, UK, ["188", "190", "47"]), settings)
    assert [s.source_id for s in sources] == ["S1", "S2", "S3"]
    s1 = sources[0]
    assert (s1.doc_id, s1.article, s1.code, s1.title) == (UK, "188", "УК РК", "Кража")
    assert s1.url == "https://adilet.zan.kz/rus/docs/K1400000226"
    assert s1.snippet.startswith("1. Кража, то есть тайное хищение чужого имущества")  # header line dropped
    assert s1.score > sources[1].score
    assert sources[2].status == "repealed"


def test_later_chunks_of_a_seen_article_are_dropped(settings: Settings, shared_dir: Path):
    d = docs(shared_dir, UK, ["188", "190"])
    again = Document(page_content=d[0].page_content, metadata={**d[0].metadata, "chunk_id": "other"})
    assert [s.article for s in to_sources([d[0], again, d[1]], settings)] == ["188", "190"]


def test_context_block_labels_each_source_and_limits_its_text(settings: Settings, shared_dir: Path):
    small = settings.model_copy(update={"context_max_chars": 400})
    sources = to_sources(docs(shared_dir, UK, ["188", "47", "190"]), small)
    block = format_context(sources, small)
    assert block.startswith("[S1] УК РК, Статья 188. Кража\n1. Кража")
    assert "[S2] УК РК, Статья 47. Смертная казнь (утратила силу)\n" in block
    assert "[S3] УК РК, Статья 190. Мошенничество\n" in block
    assert all(len(s.snippet) <= 400 for s in sources)
    assert sources[0].snippet.endswith(" …")


def test_clip_cuts_at_a_boundary():
    text = "Первое предложение. Второе предложение длиннее. Третье."
    assert clip(text, 100) == text
    assert clip(text, 28) == "Первое предложение. …"
    # a sentence end too early would waste the room: the cut falls between words instead
    assert clip(text, 45) == "Первое предложение. Второе предложение …"


def test_prompt_sources_keep_the_part_the_question_asks_about(settings: Settings, shared_dir: Path):
    question = "Какое наказание за кражу из нефтегазопровода?"
    small = settings.model_copy(update={"prompt_source_chars": 600})
    [first] = docs(shared_dir, UK, ["188"])  # the whole article, as the assembly gives it when it fits
    whole = [
        Document(
            page_content=f"УК РК. Статья 188. Кража\n{articles(shared_dir, UK)['188'].text}", metadata=first.metadata
        )
    ]
    [full] = to_sources(whole, small)
    [s1] = to_sources(whole, small, question=question)
    assert "из нефтегазопровода" not in full.snippet[:600]  # the old prompt's first 600 characters miss part 4
    assert len(s1.snippet) <= 600
    assert s1.snippet.startswith("1. Кража, то есть тайное хищение чужого имущества")  # the definition first
    assert "4. Кража, совершенная:\n1) преступной группой;\n2) из нефтегазопровода;" in s1.snippet
    assert "предварительному сговору" not in s1.snippet  # part 2 skipped …
    assert "\n…\n4. Кража" in s1.snippet  # … and marked
    assert to_sources(whole, small, question=question) == (s1,)  # deterministic
