"""FlashRank cross-encoder reranking via LangChain's `FlashrankRerank`, only from a model folder on disk; in the
pipeline over the head of the ranking (`HeadRerank`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from langchain_community.document_compressors import FlashrankRerank
from langchain_core.callbacks import Callbacks
from langchain_core.documents import Document
from langchain_core.documents.compressor import BaseDocumentCompressor

from config import Settings

logger = logging.getLogger(__name__)

# Besides the ONNX file named in flashrank's model_file_map, Ranker reads these.
MODEL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


class FloatFlashrankRerank(FlashrankRerank):
    """`FlashrankRerank` with Python-float scores that keeps Document ids and never touches its inputs."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        if not documents:
            return []
        from flashrank import RerankRequest

        passages = [{"id": i, "text": d.page_content} for i, d in enumerate(documents)]
        ranked = self.client.rerank(RerankRequest(query=query, passages=passages))[: self.top_n]
        out: list[Document] = []
        for r in ranked:
            score = float(r["score"])  # numpy float32 is not JSON-serializable
            if score < self.score_threshold:
                continue
            doc = documents[r["id"]]
            out.append(
                Document(
                    page_content=doc.page_content,
                    metadata={**doc.metadata, self.prefix_metadata + "relevance_score": score},
                    id=doc.id,
                )
            )
        return out


class HeadRerank(BaseDocumentCompressor):
    """The first `reranker.top_n` documents ordered by the reranker, their score its relevance score; the rest
    keep their order below them, each scored at most the lowest reranked score (scores stay non-increasing)."""

    reranker: FloatFlashrankRerank

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        if not documents:
            return []
        n = self.reranker.top_n
        head = [
            d.model_copy(update={"metadata": {**d.metadata, "score": d.metadata["relevance_score"]}})
            for d in self.reranker.compress_documents(documents[:n], str(query), callbacks)
        ]
        floor = min((d.metadata["score"] for d in head), default=0.0)
        tail = [
            d.model_copy(update={"metadata": {**d.metadata, "score": min(floor, d.metadata.get("score", 0.0))}})
            for d in documents[n:]
        ]
        return [*head, *tail]


def model_dir(settings: Settings) -> Path:
    """Where the FlashRank model folder is expected: settings.flashrank_dir/<model name>."""
    return settings.flashrank_dir / settings.flashrank_model


def missing_model_files(settings: Settings) -> list[str]:
    """Files the FlashRank model folder lacks (all of them when the model name is unknown to flashrank)."""
    from flashrank.Config import model_file_map

    onnx = model_file_map.get(settings.flashrank_model)
    if onnx is None:
        return [f"<{settings.flashrank_model} is not in flashrank's model_file_map>"]
    folder = model_dir(settings)
    return [name for name in (onnx, *MODEL_FILES) if not (folder / name).is_file()]


def load_reranker(settings: Settings, *, top_n: int | None = None) -> FloatFlashrankRerank | None:
    """The reranker if its model folder is complete on disk, else None and one log line (never downloads)."""
    missing = missing_model_files(settings)
    if missing:
        logger.info(
            "Reranking off: FlashRank folder %s lacks %s (put the unzipped %s model there to enable it)",
            model_dir(settings),
            ", ".join(missing),
            settings.flashrank_model,
        )
        return None
    from flashrank import Ranker

    # Ranker() calls logging.basicConfig: undo that, logging is configured by the entry points only.
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        client = Ranker(model_name=settings.flashrank_model, cache_dir=str(settings.flashrank_dir))
    finally:
        for h in root.handlers[:]:
            if h not in handlers:
                root.removeHandler(h)
        root.setLevel(level)
    logger.info("Reranker: FlashRank %s from %s", settings.flashrank_model, model_dir(settings))
    return FloatFlashrankRerank(client=client, top_n=top_n or settings.rerank_top_n, model=settings.flashrank_model)
