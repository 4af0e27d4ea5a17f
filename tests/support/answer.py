"""Retrieved documents for answer-stage tests, built from the real corpus by the real parser and chunker."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from langchain_core.documents import Document

from corpus.chunking import chunk_article
from corpus.legal.registry import source
from corpus.records import Article, Lang
from ingest_adilet.text_parser import parse_text

UK = "K1400000226"  # Criminal Code (Russian only in ../shared)
GK = "K940001000_"  # Civil Code, general part
PERSONAL_DATA = "Z1300000094"  # Law on personal data, Russian and Kazakh


@lru_cache(maxsize=16)
def articles(shared_dir: Path, doc_id: str, lang: Lang = "ru") -> dict[str, Article]:
    """Articles of one document in one language by number, parsed from ../shared/corpus."""
    folder = "kaz" if lang == "kk" else "rus"
    text = (shared_dir / "corpus" / folder / f"{doc_id}.txt").read_text(encoding="utf-8")
    parsed = parse_text(text, doc_id, lang, url=source(doc_id).url(lang))
    return {a.number: a for a in parsed}


def docs(shared_dir: Path, doc_id: str, numbers: list[str], lang: Lang = "ru") -> list[Document]:
    """One Document per article (its first chunk), best first, as the retrieval stage hands them over."""
    found = articles(shared_dir, doc_id, lang)
    out = []
    for rank, number in enumerate(numbers):
        chunk = chunk_article(found[number], source(doc_id))[0]
        out.append(Document(page_content=chunk.text, metadata={**chunk.metadata(), "score": 1.0 - rank / 10}))
    return out
