"""The corpus as articles: every chunk of an article by language, and the one Document that stands for it."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from langchain_core.documents import Document

from corpus.records import Chunk

logger = logging.getLogger(__name__)

ArticleKey = tuple[str, str]  # (doc_id, article)


def chunk_document(chunk: Chunk) -> Document:
    """A chunk as a LangChain Document: its full text, its metadata, its chunk_id as id."""
    return Document(id=chunk.chunk_id, page_content=chunk.text, metadata=chunk.metadata())


def key_of(doc: Document) -> ArticleKey:
    """The (doc_id, article) a chunk Document belongs to, whatever its language."""
    return doc.metadata["doc_id"], doc.metadata["article"]


@dataclass(frozen=True)
class ArticleChunks:
    """All chunk Documents of the corpus grouped by article and language, in reading order."""

    documents: tuple[Document, ...]
    by_article: dict[ArticleKey, dict[str, tuple[int, ...]]]  # positions in `documents`, by language

    @classmethod
    def from_chunks(cls, chunks: Iterable[Chunk]) -> ArticleChunks:
        docs = tuple(chunk_document(c) for c in chunks)
        grouped: dict[ArticleKey, dict[str, list[int]]] = {}
        for i, d in enumerate(docs):
            grouped.setdefault(key_of(d), {}).setdefault(d.metadata["lang"], []).append(i)
        by_article = {k: {lang: tuple(v) for lang, v in langs.items()} for k, langs in grouped.items()}
        return cls(docs, by_article)

    def __contains__(self, key: ArticleKey) -> bool:
        return key in self.by_article

    def languages(self, key: ArticleKey) -> list[str]:
        return list(self.by_article.get(key, {}))

    def positions(self, key: ArticleKey, lang: str) -> tuple[int, ...]:
        """Chunk positions of the article in `lang`, falling back to Russian, then to any language it has."""
        langs = self.by_article.get(key, {})
        return langs.get(lang) or langs.get("ru") or next(iter(langs.values()), ())

    def documents_with_number(self, article: str) -> list[str]:
        """doc_ids having an article with this number."""
        return sorted({d for d, a in self.by_article if a == article})

    def article_document(
        self,
        key: ArticleKey,
        lang: str,
        max_chars: int,
        *,
        order: Sequence[int] | None = None,
        score: float = 0.0,
        **extra: object,
    ) -> Document:
        """One Document for the article: its header, then the bodies of its best chunks (`order`, best
        first; else from the beginning) in reading order, up to max_chars; metadata + `score`."""
        positions = self.positions(key, lang)
        ranked = [p for p in (order or ()) if p in positions] or list(positions)
        first = self.documents[positions[0]]
        header = first.page_content.partition("\n")[0]
        budget = max_chars - len(header)
        chosen: list[int] = []
        for p in ranked:  # the best chunks that fit; the first one always (trimmed if it must be)
            size = len(self._body(p)) + 1
            if chosen and size > budget:
                continue
            chosen.append(p)
            budget -= size
            if budget <= 0:
                break
        bodies = [self._body(p) for p in sorted(chosen)]
        text = "\n".join([header, *(b for b in bodies if b)])
        if len(text) > max_chars:
            text = text[: max_chars - 1].rsplit(" ", 1)[0] + "…"
        meta = {**first.metadata, "score": float(score), **extra}
        for name in ("chunk_id", "part", "hash"):
            meta.pop(name, None)  # these describe one chunk; the Document is the article
        meta["chunk_ids"] = [self.documents[p].id for p in sorted(chosen)]
        return Document(page_content=text, metadata=meta, id=f"{key[0]}:{meta['lang']}:{key[1]}")

    def _body(self, position: int) -> str:
        return self.documents[position].page_content.partition("\n")[2].strip()
