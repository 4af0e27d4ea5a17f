"""Law-aware first stage: a question about a crime always gets Criminal Code articles among its candidates."""

from __future__ import annotations

import logging
from collections.abc import Callable

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from config import CRIMINAL_CODE_ID
from retrieval.articles import key_of
from retrieval.query import QueryInfo

logger = logging.getLogger(__name__)


class LawAwareRetriever(BaseRetriever):
    """Runs `base` on the augmented question; when the ORIGINAL question is about a crime and fewer than
    `min_docs` Criminal Code articles came back, adds the best ones of `criminal` (the same search limited to
    the Criminal Code).

    Added articles keep the score the Criminal-Code-only fusion gave them, so a strong match there ranks among
    the strong matches of the whole corpus rather than after all of them.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    base: BaseRetriever
    """The first stage over the whole corpus (the dense + BM25 ensemble)."""
    criminal: BaseRetriever
    """The same first stage limited to the Criminal Code."""
    analyze: Callable[[str], QueryInfo]
    """Question → QueryInfo (decides `is_criminal` and gives the augmented text)."""
    min_docs: int = 12
    """Criminal Code articles a crime question must have among its candidates."""
    code_id: str = CRIMINAL_CODE_ID

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        info = self.analyze(query)
        docs = self.base.invoke(info.augmented, config={"callbacks": run_manager.get_child("base")})
        if not info.is_criminal:
            return docs
        have = {key_of(d) for d in docs if d.metadata["doc_id"] == self.code_id}
        if len(have) >= self.min_docs:
            return docs
        added: list[Document] = []
        for doc in self.criminal.invoke(
            info.augmented, config={"callbacks": run_manager.get_child("criminal")}
        ):
            key = key_of(doc)
            if key in have:
                continue
            have.add(key)
            added.append(
                Document(
                    page_content=doc.page_content, metadata={**doc.metadata, "law_aware": True}, id=doc.id
                )
            )
            if len(have) >= self.min_docs:
                break
        logger.debug("Crime question: %d Criminal Code articles added", len(added))
        return sorted([*docs, *added], key=lambda d: d.metadata.get("score", 0.0), reverse=True)
