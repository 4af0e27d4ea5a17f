"""The cross-language search: a Kazakh question searched with the Russian stems its words stand for (and a
Russian one with Kazakh stems), by BM25 over every chunk, fused as a search of its own.

Most codes exist here only in Russian: a Kazakh question's own words meet only the laws translated into Kazakh,
and only the dense vectors and the latent terms reached the rest. The stems come from the lexicon the index
build learns from the corpus's parallel laws (index/lexicon.py).
"""

from __future__ import annotations

import logging

from index.lexicon import Lexicon
from retrieval.analyzer import analyze
from retrieval.records import Query

logger = logging.getLogger(__name__)


def translated_terms(lexicon: Lexicon, text: str, lang: str) -> list[str]:
    """The other language's stems of the words of `text` (written in `lang`), each once, in the order met."""
    return lexicon.translate(analyze(text), "kk" if lang == "kk" else "ru")


def translated_query(lexicon: Lexicon, query: Query) -> str:
    """The BM25 query of the cross-language search: the translated stems of the question as asked,
    space-separated (BM25 reads them with `str.split`: they are stems already)."""
    return " ".join(translated_terms(lexicon, query.info.text, query.info.lang))
