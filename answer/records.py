"""Typed records of an answer: the `Source`s it cites and the `QAResult` every face receives."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import ConfigDict, with_config

from corpus.legal import citation
from corpus.records import Lang
from corpus.store import edition_label


# with_config: read back from the shared answer cache (answer/cache.py), a stored record must be exactly this one.
@with_config(ConfigDict(extra="forbid"))
@dataclass(frozen=True)
class Source:
    """One retrieved article an answer may cite."""

    source_id: str  # the label the model must cite, e.g. "S1"
    doc_id: str
    article: str
    code: str  # short name: «УК РК», «ҚР ҚК»
    title: str
    url: str
    snippet: str
    score: float
    lang: Lang = "ru"
    status: str = "in_force"
    remedy: bool = False  # how to defend the right (a remedy route's article), not the substance
    edition_date: str | None = None  # the cited document's edition (DD.MM.YYYY), from the corpus manifest
    edition_basis: str | None = None  # "as_of" (the page's own date) or "amended_through" (latest amendment cited)
    repealed_by: str | None = None  # the document's own note that it was repealed as a whole (corpus manifest)
    # The answer's language when the corpus has the article only in another one (a Kazakh answer quoting the
    # Russian text of a code): `code` and the citation are then in it («ҚР ЕК, 113-бап. …»), and `note`, one line
    # in it, says that the text is in the other language and links the document's page in the answer's language.
    cite_lang: Lang | None = None
    note: str = ""

    def citation(self) -> str:
        """«УК РК, Статья 188. Кража» / «ҚР ҚК, 188-бап. Ұрлық» (corpus.legal.citation), in `cite_lang` when set."""
        return citation(self.code, self.article, self.title, self.cite_lang or self.lang)

    def edition(self, lang: Lang | None = None) -> str:
        """«редакция по состоянию на 20.03.2026» / «редакция с изменениями по 16.01.2026» in `lang` (default: the
        citation's), followed by the document's repeal note when it was repealed as a whole (in the text's own
        language, as adilet says it); "" when neither is known."""
        label = edition_label(self.edition_date, self.edition_basis, lang or self.cite_lang or self.lang)
        return "; ".join(part for part in (label, self.repealed_by) if part)


@dataclass(frozen=True)
class Answer:
    """What the answer stage returns: the text shown to the user and how it was made."""

    text: str
    sources: tuple[Source, ...]
    template: str  # universal / criminal / range
    backend: str  # groq / ollama / extractive
    grounded: bool  # the text rests only on the sources (a passing model answer, or quotes of the norms)
    notes: tuple[str, ...] = ()  # grounding findings and fallbacks, for logs and eval
    # milliseconds: context_ms, llm_ms, grounding_ms, extractive_ms, answer_ms (the whole stage); the
    # "_ms" names match the retrieval stage's, so that both merge into QAResult.timings
    timings: dict[str, float] = field(default_factory=dict)
    status: str = "answered"  # or what retrieval found unanswerable: no_such_article / unknown_code / off_topic


@with_config(ConfigDict(extra="forbid"))
@dataclass(frozen=True)
class QAResult:
    """What `invoke_qa()` returns."""

    question: str
    answer: str
    sources: tuple[Source, ...]
    template: str  # universal / criminal / range
    backend: str  # groq / ollama / extractive
    lang: Lang
    grounded: bool
    grounding_notes: tuple[str, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)  # milliseconds per stage (name_ms)
    # "answered", or why nothing is quoted: "no_such_article" (the named article does not exist; the nearest
    # existing ones are named in the answer only as "possibly"), "unknown_code" (a code the registry lacks; the
    # answer lists the known ones), "off_topic" (no legal content: the answer asks what the user wants to know)
    status: str = "answered"
    search_question: str = ""  # what was searched: the question, or a follow-up read with the conversation
    used_history: bool = False  # the earlier turns of the conversation shaped `search_question`
    # the first-stage searches that ran: ("bm25", "dense", "latent"), fewer while the index is not built
    searches: tuple[str, ...] = ()
    cached: bool = False  # answered from the answer cache (answer/cache.py), with no model call

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["sources"] = [asdict(s) for s in self.sources]
        d["grounding_notes"] = list(self.grounding_notes)
        d["searches"] = list(self.searches)
        return d


@dataclass(frozen=True)
class Exchange:
    """One earlier turn of a conversation, as `invoke_qa(..., history=...)` takes it."""

    question: str
    answer: str = ""
    sources: tuple[Source, ...] = ()
    search_question: str = ""  # what was searched for it ("" = the question itself)

    @classmethod
    def of(cls, result: QAResult) -> Exchange:
        """The exchange a `QAResult` records."""
        return cls(result.question, result.answer, result.sources, result.search_question or result.question)

    @property
    def searched(self) -> str:
        return self.search_question or self.question
