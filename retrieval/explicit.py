"""Explicit references («ст. 188 УК», «статьи 190-192 УК РК», «ҚК-нің 188-бабы»): the retriever of the named
articles, and the compressor that puts them first in the ranking (`ExplicitFirst`)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence

from langchain_core.callbacks import CallbackManagerForRetrieverRun, Callbacks
from langchain_core.documents import Document
from langchain_core.documents.compressor import BaseDocumentCompressor
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from corpus.lang import has_kazakh_letters, script_lang
from corpus.legal.registry import ADILET_SOURCES
from retrieval.analyzer import analyze, normalize
from retrieval.articles import ArticleChunks, ArticleKey, key_of
from retrieval.query import ArticleRef, QueryInfo, analyze_query
from retrieval.ranking import ranked_copy, score_of, via
from retrieval.records import as_query

logger = logging.getLogger(__name__)

SUGGESTIONS = 3
YEARS = range(1900, 2101)  # existing articles offered as "possibly" for one that does not exist

# «Кодекс о космосе», «Космический кодекс», «Ғарыш кодексі»: the word "code" with what names it (a word before it,
# or «о/об …» after it). Whether that name is one of the registry's is the query analyzer's call, not this list's.
_CODE_WORD = re.compile(r"(?<![^\W\d_])кодекс[^\W\d_]*")
_WORD = re.compile(r"[^\W\d_]+")
_RU_ADJECTIVE = re.compile(r"(?:ий|ый|ой|ого|ому|ом|ая|ую|ое|ым|ых|ее|его|ему)$")
_ABOUT = frozenset({"о", "об", "про"})
_STATE = frozenset({"рк", "қр", "республики", "казахстан", "республикасының", "қазақстан"})
# Words before «кодекс» that point at a code without naming one («по какому кодексу», «осы кодекс»).
_POINTERS = frozenset(
    "какой какого какому каком какая какую какие этот этого этому этом этот данный данного данному данном "
    "тот того том настоящий настоящего настоящему соответствующий соответствующего соответствующему "
    "который которого которому любой любого другой другого новый новому нового действующий действующего "
    "весь всего всему казахский казахского казахском казахстанский казахстанского казахстанском "
    "қай қандай осы бұл сол тиісті барлық жаңа".split()
)


class ExplicitRetriever(BaseRetriever):
    """The articles a question names itself, in the order it names them, each from its beginning.

    A reference without a code («статья 15» in a question naming no code) is ambiguous: it is left to the
    search; `ExplicitFirst` lifts that number among the articles it found (see `unresolved`).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    articles: ArticleChunks
    """The corpus, by article."""
    analyze: Callable[[str], QueryInfo]
    """Question → QueryInfo (the pipeline's cached `analyze_query`), for a question given as a plain `str`."""
    max_chars: int = 1800
    """Characters of each article's Document."""

    def keys(self, info: QueryInfo) -> list[ArticleKey]:
        """The referenced articles that exist in the corpus, in the order asked (missing ones are logged)."""
        out: list[ArticleKey] = []
        for ref in info.refs:
            key = (ref.doc_id, ref.article)
            if not ref.doc_id or key in out:
                continue
            if key in self.articles:
                out.append(key)
            else:
                logger.info("Question names %s article %s, which the corpus lacks", ref.doc_id, ref.article)
        return out

    def missing(self, info: QueryInfo) -> list[ArticleRef]:
        """Referenced articles that do not exist: of the named code, or (no code named) of any document.

        A number from 1900 to 2100 with no code is more likely a year the analysis took for a reference («в 2023
        статья была отменена», «по статье от 2015 года»): it is not called a missing article."""
        return [
            ref
            for ref in dict.fromkeys(info.refs)
            if (
                (ref.doc_id, ref.article) not in self.articles
                if ref.doc_id
                else _number(ref.article) not in YEARS and not self.articles.documents_with_number(ref.article)
            )
        ]

    def nearest(self, ref: ArticleRef, n: int = SUGGESTIONS) -> list[ArticleKey]:
        """The n existing articles of the referenced code whose numbers are closest to the reference's."""
        target = _number(ref.article)
        keys = [k for k in self.articles.by_article if k[0] == ref.doc_id]
        return sorted(keys, key=lambda k: (abs(_number(k[1]) - target), _number(k[1])))[:n]

    @staticmethod
    def unresolved(info: QueryInfo) -> list[str]:
        """Article numbers referred to without a code."""
        return list(dict.fromkeys(ref.article for ref in info.refs if not ref.doc_id))

    def documents(self, info: QueryInfo) -> list[Document]:
        """One Document per referenced article (question's language when the article has it), score 1.0."""
        return [
            self.articles.article_document(key, info.lang, self.max_chars, score=1.0, explicit=True)
            for key in self.keys(info)
        ]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return self.documents(as_query(query, self.analyze).info)


class ExplicitFirst(BaseDocumentCompressor):
    """The ranking with the articles the question names first (`explicit`'s Documents, score 1, via
    "explicit", in the order named), then the found articles whose number the question names without a code
    («статья 15»; score 1), then the other found ones in their order."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    explicit: ExplicitRetriever
    """The named articles' retriever (and the question's analysis for a plain `str`)."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        info = as_query(query, self.explicit.analyze).info
        out = [ranked_copy(d, via="explicit", found=False) for d in self.explicit.documents(info)]
        seen = {key_of(d) for d in out}
        numbers = ExplicitRetriever.unresolved(info)
        lifted = [d for d in documents if d.metadata["article"] in numbers and key_of(d) not in seen]
        for d in lifted:
            out.append(ranked_copy(d, score=1.0, via="found"))
            seen.add(key_of(d))
        for d in documents:
            if key_of(d) not in seen:
                seen.add(key_of(d))
                out.append(ranked_copy(d, score=score_of(d), via=via(d)))
        return out


def _number(article: str) -> float:
    """«188-1» → 188.001: articles ordered as the code orders them."""
    main, _, sub = article.partition("-")
    return int(main) + (int(sub) / 1000 if sub.isdigit() else 0.0) if main.isdigit() else float("inf")


def unknown_codes(question: str) -> tuple[str, ...]:
    """Names of codes the question refers to that the registry does not know («Кодекс о космосе»), as written.

    A name counts when «кодекс» comes with what names it: an adjective before it (Russian), any word but a
    pointer before it (Kazakh: «Ғарыш кодексі»), or «о/об …» after it; the query analyzer, which knows every
    name of every registered code, then finds no code in it.
    """
    norm = normalize(question)
    out: list[str] = []
    for m in _CODE_WORD.finditer(norm):
        before = _WORD.findall(norm[: m.start()])
        while before and before[-1] in _STATE:
            before.pop()
        after = [w for w in _WORD.findall(norm[m.end() :])[:6]]
        while after and after[0] in _STATE:
            after.pop(0)
        kazakh = has_kazakh_letters(norm)
        named_before = (
            bool(before) and before[-1] not in _POINTERS and (kazakh or bool(_RU_ADJECTIVE.search(before[-1])))
        )
        named_after = bool(after) and after[0] in _ABOUT and len(after) > 1
        if not (named_before or named_after):
            continue
        start = norm.rfind(before[-1], 0, m.start()) if named_before else m.start()
        end = m.end()
        if named_after:
            tail = re.search(rf"{re.escape(after[1])}", norm[m.end() :])
            end = m.end() + tail.end() if tail else m.end()
            # «о браке и семье»: the words joined by «и/және» belong to the name too
            rest = re.match(r"(?:\s*(?:,|и|және)\s*[^\W\d_]+)+", norm[end:])
            end += rest.end() if rest else 0
        phrase = question[start:end]
        if analyze_query(question[start:]).codes or _in_a_title(phrase):
            continue
        out.append(phrase.strip())
    return tuple(dict.fromkeys(out))


def _in_a_title(phrase: str) -> bool:
    """Whether a registered document's full title has every word of the name («Кодекс РК о браке и семье»,
    a form the aliases lack): then it is not an unknown code."""
    lang = script_lang(phrase)
    stems = set(analyze(phrase, lang)) - set(analyze(" ".join(_STATE) + " кодекс кодексі", lang))
    return bool(stems) and any(stems <= _title_stems(s.doc_id) for s in ADILET_SOURCES)


def _title_stems(doc_id: str) -> frozenset[str]:
    src = next(s for s in ADILET_SOURCES if s.doc_id == doc_id)
    return frozenset(analyze(src.title_ru, "ru")) | frozenset(analyze(src.title_kk, "kk"))
