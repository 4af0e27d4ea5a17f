"""Law routing: which law a question is about, told from the corpus itself, as a prior on the first stage's
article scores.

The first stage ranks articles one by one, so a question whose words also fit another law («работодатель не
выплатил» — the Labour Code, but also the Code on Administrative Offences' fines for it) often gets another law's
article first. Two signals say which law the question is about, neither learned from gold questions:

- **the law's profile** (`LawProfiles`): BM25 of the question over each chapter of each law described by its own
  headings — the law's name, the chapter's section path, and the titles of its articles («Глава 9. Трудовые
  споры: Статья 159. Органы по рассмотрению индивидуальных трудовых споров, …») — and, with `definitions`, over
  the terms the law defines (its «Основные понятия» article: «работник», «совместительство», «сверхурочная
  работа», …), the words a law uses for what it is about. A Kazakh question is read in Kazakh and, through the lexicon
  (index/lexicon.py), in Russian stems too, since most laws have only Russian headings. A law scores its best
  chapter;
- **the candidates' agreement** (`candidate_mass`): how much of the first stage's fused score falls in each law.

Apart from these, **the laws of sanctions** (`SanctionLaws`, on by default): the Criminal Code and the Code on
Administrative Offences answer «what is the punishment»; a question that asks no such thing («можно ли работать
на дому по трудовому договору?») wants the rule, not the fine for breaking it. Which laws are laws of
sanctions is read from the corpus (`sanction_laws`: most of their articles set a punishment or a fine).

Each signal, divided by its best law's, gives every law a gap in [0, 1] (0 for the best law); an article's
fused score is multiplied by exp(-weight × gap) (`LawRouting`, a document compressor after the first stage).
"""

from __future__ import annotations

import logging
import math
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from langchain_core.callbacks import Callbacks
from langchain_core.documents import Document
from langchain_core.documents.compressor import BaseDocumentCompressor
from pydantic import ConfigDict

from index.lexicon import Lexicon
from retrieval.analyzer import analyze, tokenize
from retrieval.articles import ArticleChunks
from retrieval.bm25 import SparseBM25
from retrieval.query import QueryInfo, analyze_query
from retrieval.ranking import ranked_copy, score_of
from retrieval.records import as_query

logger = logging.getLogger(__name__)

SANCTION = re.compile(r"\bнаказыва\w*|\bвлеч[её]т\s+(?:предупреждение|штраф|административный)|\bвлекут\s+штраф")
SANCTION_SHARE = 0.25  # a law of sanctions: at least this share of its articles set a punishment or a fine
# A definitions article («Основные понятия, используемые в настоящем Законе», «Осы Заңда пайдаланылатын негізгі
# ұғымдар», УК's «Разъяснение некоторых понятий…») and its items: «12) работник – физическое лицо, …», the term
# before the dash (a «(далее – …)» inside it dropped).
DEFINITIONS_TITLE = re.compile(r"понят|ұғым", re.IGNORECASE)
DEFINED_TERM = re.compile(r"^\s*\d+(?:-\d+)*\)\s*([^\n]{2,160}?)\s+[–—-]\s", re.MULTILINE)
_STRUCK = re.compile(r"исключ|алып тасталд", re.IGNORECASE)  # an item struck out («3) исключен …»)
_ASIDE = re.compile(r"\((?:далее|бұдан әрі)[^)]*\)", re.IGNORECASE)
MASS_WINDOW = 20  # the best candidates whose fused scores the agreement adds up per law
DIVERSE_WINDOW = 10  # the places diversification reorders


@dataclass(frozen=True)
class LawProfiles:
    """BM25 over the laws' chapters, each described by the law's name, its section path and its articles'
    titles, in each language the corpus has the law in."""

    scorer: SparseBM25
    doc_of_entry: np.ndarray  # entry → index in `doc_ids`
    doc_ids: tuple[str, ...]

    @classmethod
    def from_articles(cls, articles: ArticleChunks, *, definitions: bool = False) -> LawProfiles:
        """One entry per (law, language, chapter path) from the chunks' metadata (code, path, article title);
        with `definitions`, one more per term its definitions articles define (the term alone: a short entry scores
        a question that uses it whole, where the law's long chapters would dilute it)."""
        entries: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}
        for doc in articles.documents:
            meta = doc.metadata
            path = tuple(meta.get("path") or ())
            key = (meta["doc_id"], meta["lang"], path)
            words = entries.get(key)
            if words is None:
                words = entries[key] = [str(meta.get("code") or ""), *path]
            title = str(meta.get("title") or "")
            if title and (not words or words[-1] != title):
                words.append(title)
            if definitions and DEFINITIONS_TITLE.search(title):
                for term in defined_terms(doc.page_content):  # each an entry: a short one scores its match whole
                    entries.setdefault((meta["doc_id"], meta["lang"], ("\x00defines", term)), [term])
        doc_ids = tuple(sorted({d for d, _, _ in entries}))
        index = {d: i for i, d in enumerate(doc_ids)}
        keys = list(entries)
        corpus = [analyze("\n".join(entries[k]), k[1]) for k in keys]  # type: ignore[arg-type]
        doc_of_entry = np.fromiter((index[k[0]] for k in keys), dtype=np.int32, count=len(keys))
        return cls(SparseBM25(corpus), doc_of_entry, doc_ids)

    def scores(self, terms: Sequence[str]) -> dict[str, float]:
        """Each law's best chapter's BM25 score for these terms (laws with no matching chapter left out)."""
        entry_scores = self.scorer.get_scores(terms)
        best = np.zeros(len(self.doc_ids), dtype=np.float32)
        np.maximum.at(best, self.doc_of_entry, entry_scores)
        return {self.doc_ids[i]: float(best[i]) for i in np.flatnonzero(best > 0)}


def defined_terms(text: str) -> list[str]:
    """The terms a definitions article's items define («1) работник – физическое лицо…» → «работник»)."""
    terms = (m.group(1).strip(' «»",') for m in DEFINED_TERM.finditer(_ASIDE.sub("", text)))
    return [t for t in terms if not _STRUCK.match(t)]


def profile_terms(info: QueryInfo, lexicon: Lexicon | None) -> list[str]:
    """The question as searched (with the titles of the articles its phrases point to), analysed; a Kazakh one
    also as the Russian stems the lexicon gives its own words."""
    terms = analyze(info.augmented)
    if info.lang == "kk" and lexicon is not None:
        terms += lexicon.translate(analyze(info.text, "kk"), "kk", tokenize(info.text, "kk"))
    return terms


def candidate_mass(candidates: Sequence[Document], window: int = MASS_WINDOW) -> dict[str, float]:
    """The fused score of each law's articles among the first `window` candidates, added up."""
    mass: dict[str, float] = defaultdict(float)
    for doc in candidates[:window]:
        mass[doc.metadata["doc_id"]] += score_of(doc)
    return dict(mass)


def gaps(scores: Mapping[str, float]) -> dict[str, float]:
    """1 - score / best score of each law (0 for the best; a law not scored has gap 1)."""
    best = max(scores.values(), default=0.0)
    if best <= 0:
        return {}
    return {d: 1.0 - max(s, 0.0) / best for d, s in scores.items()}


def routed(
    candidates: Sequence[Document], signals: Sequence[tuple[float, Mapping[str, float]]], diversity: float = 1.0
) -> list[Document]:
    """The candidates rescored by each (weight, gaps) signal — fused score × exp(-Σ weight × gap) — and ordered
    by it; with `diversity` below 1, an article's score is further multiplied by diversity ** (the articles of
    its law already placed above it), so the best article of each plausible law comes before a second one of
    the same law."""
    active = [(w, g) for w, g in signals if w and g]
    if not active and diversity >= 1:
        return list(candidates)
    rescored = []
    for doc in candidates:
        d = doc.metadata["doc_id"]
        factor = math.exp(-sum(w * g.get(d, 1.0) for w, g in active))
        rescored.append(ranked_copy(doc, score=score_of(doc) * factor))
    rescored.sort(key=score_of, reverse=True)
    if diversity >= 1:
        return rescored
    return _diversified(rescored, diversity)


def _diversified(ranked: list[Document], diversity: float) -> list[Document]:
    """Greedy over the first DIVERSE_WINDOW places: each goes to the article whose score × diversity ** (its
    law's articles placed) is best; the rest keep their order."""
    placed: dict[str, int] = defaultdict(int)
    rest = list(ranked)
    out: list[Document] = []
    while rest and len(out) < DIVERSE_WINDOW:
        best = max(range(len(rest)), key=lambda i: score_of(rest[i]) * diversity ** placed[rest[i].metadata["doc_id"]])
        doc = rest.pop(best)
        placed[doc.metadata["doc_id"]] += 1
        out.append(doc)
    return [*out, *rest]


class LawRouting(BaseDocumentCompressor):
    """The first stage's articles rescored by the law the question is about (module docstring): fused score ×
    exp(-profile_weight × profile gap - mass_weight × mass gap); copies, never the inputs."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    profiles: LawProfiles | Callable[[], LawProfiles]
    """BM25 over the laws' chapters (headings and article titles), or what builds it at the first question
    routed (~0.5 s on the full corpus, which a replica's start does not pay)."""
    lexicon: Lexicon | None = None
    """Kazakh → Russian stems for a Kazakh question's profile search; None: its own words only."""
    profile_weight: float = 1.0
    mass_weight: float = 0.0
    diversity: float = 1.0
    """Below 1: a second article of one law counts this many times its score (see `routed`)."""
    max_chars: int = 150
    """Only a question shorter than this is routed (a long one tells a story touching several laws); 0: all."""
    langs: tuple[str, ...] = ("ru", "kk")
    """Only a question in one of these languages is routed."""
    analyze: Callable[[str], QueryInfo] = analyze_query
    """Question → QueryInfo, for a question given as a plain `str`."""

    def law_profiles(self) -> LawProfiles:
        if not isinstance(self.profiles, LawProfiles):
            self.profiles = self.profiles()
        return self.profiles

    def signals(self, info: QueryInfo, candidates: Sequence[Document]) -> dict[str, dict[str, float]]:
        """Each law's gap by each signal: {"profile": …, "mass": …}."""
        return {
            "profile": gaps(self.law_profiles().scores(profile_terms(info, self.lexicon)))
            if self.profile_weight
            else {},
            "mass": gaps(candidate_mass(candidates)) if self.mass_weight else {},
        }

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        if not documents:
            return []
        q = as_query(query, self.analyze)
        info = q.info
        # A question naming its article or code settles the law itself (the explicit and law-aware steps), and so
        # does a conversation for a follow-up read with it (its law routed, dialogues_dev lost two firsts: «Мас
        # күйінде көлік жүргізіп ұсталдым…» went from КоАП to УК); a long one is not routed (max_chars).
        settled = info.refs or info.codes or q.followup.prefer_docs or q.followup.own
        if settled or 0 < self.max_chars <= len(info.text):
            return list(documents)
        if info.lang not in self.langs:
            return list(documents)
        s = self.signals(info, documents)
        return routed(documents, [(self.profile_weight, s["profile"]), (self.mass_weight, s["mass"])], self.diversity)


def sanction_laws(articles: ArticleChunks) -> frozenset[str]:
    """The laws at least SANCTION_SHARE of whose articles (their Russian text) set a punishment or a fine."""
    found: dict[str, set[str]] = defaultdict(set)
    punishing: dict[str, set[str]] = defaultdict(set)
    for doc in articles.documents:
        meta = doc.metadata
        if meta["lang"] != "ru":
            continue
        found[meta["doc_id"]].add(meta["article"])
        text = doc.page_content
        if ("наказыва" in text or "влеч" in text) and SANCTION.search(text):
            punishing[meta["doc_id"]].add(meta["article"])
    return frozenset(d for d, arts in found.items() if len(punishing[d]) >= SANCTION_SHARE * len(arts))


class SanctionLaws(BaseDocumentCompressor):
    """A question that asks about no sanction (`QueryInfo.asks_sanction`) and names no article or code: the
    articles of the laws of sanctions are scored exp(-weight) times their fused score (module docstring);
    copies, never the inputs."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    laws: frozenset[str]
    weight: float = 0.4
    analyze: Callable[[str], QueryInfo] = analyze_query

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        q = as_query(query, self.analyze)
        info = q.info
        # A question naming its article or code, or a follow-up on the codes the previous answer cited, settles
        # the law itself. (Unlike routing, a follow-up read with its conversation still asks a rule or a sanction
        # of its own: the follow-up figures of docs/evaluation.md were measured with this stage on for it.)
        settled = info.refs or info.codes or q.followup.prefer_docs
        if not documents or not (self.weight and self.laws) or info.asks_sanction or settled:
            return list(documents)
        gap = {d: float(d in self.laws) for d in {doc.metadata["doc_id"] for doc in documents}}
        return routed(documents, [(self.weight, gap)])
