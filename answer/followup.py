"""Understanding a follow-up: the earlier turns of a conversation + a new message → what to search.

Two ways behind one runnable (`FollowupCondenser`), taking {"input": question, "chat_history": [Exchange, ...]}
and returning an `Understood`:

- with a chat model: LangChain's history-aware pattern — a short condense prompt (prompts/condense.<lang>.txt)
  turns the history and the follow-up into one standalone question (a continuation completed, a refinement keeping
  the situation but asking the new aspect, a change of subject returned as written), through the same Groq →
  Ollama fallbacks as the answers; when no model answers (or its reply is unusable), the rule below;
- with none (the offline default), a deterministic rule (`FollowupRule`):
  1. a change of subject said in words («другой вопрос», «тағы бір сұрақ», …; also after a short reply to the
     last answer: «Ладно, другой вопрос: …») → the message alone (without the marker); an aside («кстати»,
     «айтпақшы»: a new question as often as a new fact) is dropped, and the rest read as below;
  2. a message naming its own article of a code («ст. 188 УК») → alone;
  3. otherwise the message is read against the search it would get glued after the previous turn's search
     question, by what retrieval itself says (`Reading`), not by word lists:
     - `share`: how much of the glued search's best BM25 match the message alone explains (the best chunk score
       of the message over that of the glued text; a message naming its own legal object — a code, or an offence
       or institution of the synonym map — counts at least `new_subject`);
     - at least `new_subject`, with most of the message's own top articles outside the documents the previous
       answer cited (or its search landed in): its own legal object lies elsewhere, a *new subject* → glued, its
       own words fused at `new_weight` (above 1 they lead), so that a message the signals misread («А если
       украли из квартиры?» after theft, so read on BM25 alone) still finds what the conversation points to (the
       shipped 1 searches a new subject like a refinement: letting its own words lead, or searching it alone,
       measured worse out of fold);
     - anything else → glued, its own words fused in at `share / lean` (at most 1): a message that says little on
       its own («А если сумма крупная?», «Ол қашан төлеуге міндетті?») *continues* and barely moves the glued
       ranking; one that says more *refines* the situation (a new aspect, an escalated crime, another claim) and
       from `lean` up weighs as much as the glued search, so that the articles its words point to reach the top.
       A weight growing with the share, rather than a threshold between the two, measured better out of fold.
     Either way the best article of the message's own search ranks no lower than `own_best_at` (4): a change of
     subject the signals read as a continuation («Какой штраф, если встал на место для инвалидов?» after a
     question on a sofa) still shows what it asks in the top few, at the cost of one place below the third.

  "Glued" searches the previous turn's search question (which already carries its own context when it was a follow-up)
  followed by the message; an older turn's instead when its answer's documents hold more of the message's own top
  articles (`related`: «Возвращаясь к увольнению: …» after a question on alimony). A follow-up read with context also
  carries a `Followup` for retrieval: the message's own words and their weight, and the remedy route the previous
  answer already gave (not put at the top again). The previous answer's code is not preferred: the message's own terms
  decide where it lands (preferring that code measured worse on both dev sets, docs/evaluation.md). The thresholds and
  weights were chosen by cross-validation over dialogues (`python -m bench.followup --cv`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import Runnable, RunnableBranch, RunnableLambda

from answer.llm import backend_of
from answer.records import Exchange
from config import Settings
from corpus.records import Lang
from retrieval.analyzer import analyze, detect_lang, normalize
from retrieval.articles import ArticleKey
from retrieval.pipeline import Followup
from retrieval.query import analyze_query

logger = logging.getLogger(__name__)

# The word lists: a change of subject said in so many words (whether a message stands on its own is otherwise
# decided by retrieval) ...
TOPIC_CHANGE = (
    "другой вопрос",
    "другая тема",
    "другое",
    "новый вопрос",
    "еще вопрос",
    "еще один вопрос",
    "и еще вопрос",
    "отдельный вопрос",
    "не по теме",
    "вопрос по другой теме",
    "теперь о другом",
    "сменим тему",
    "тағы бір сұрақ",
    "басқа сұрақ",
    "басқа тақырып",
    "жаңа сұрақ",
)
# ... and an aside («by the way»), which opens a new question as often as a new fact of the same situation
# («Айтпақшы, 4 жасар қызымыз бар» after a divorce question): dropped from the message, which is then read by
# retrieval like any other.
ASIDE = (
    "кстати",
    "айтпақшы",
    "тағы бір нәрсе",
)


# What may come before a marker: a reply to the last answer set off by its punctuation — up to two words each
# closed by a comma or a stop («Ладно, другой вопрос», «Хорошо, спасибо. Кстати»), or a sentence of up to four
# words («Спасибо за ответ. Другой вопрос: …»).
_LEAD = r"(?:(?:[\w-]+[,.!]\s*){1,2}|(?:[\w-]+\s+){1,3}[\w-]+[.!]\s*)?"


def _marker_re(markers: Sequence[str]) -> re.Pattern[str]:
    # Longest first, so that «еще один вопрос» wins over «еще вопрос»; a marker is a whole word or words at the
    # start, or after a short reply to the last answer (`_LEAD`).
    alts = "|".join(re.escape(m) for m in sorted(markers, key=len, reverse=True))
    return re.compile(rf"^\s*{_LEAD}(?:{alts})(?![\w-])[\s,:;.!?—–-]*", re.IGNORECASE)


_TOPIC_CHANGE_RE = _marker_re(TOPIC_CHANGE)
_ASIDE_RE = _marker_re(ASIDE)


def _without(match: re.Match[str] | None, question: str) -> str:
    """The message after a marker (as written when nothing is left)."""
    if match is None:
        return question
    rest = question[match.end() :].strip()
    return rest if any(ch.isalnum() for ch in rest) else question


def without_aside(question: str) -> str:
    """The message without an aside at its start («Кстати, …», «Айтпақшы, …»): what the rule reads."""
    return _without(_ASIDE_RE.match(normalize(question)), question)


@dataclass(frozen=True)
class Understood:
    """What to search for a message, whether the conversation shaped it, and why."""

    search_question: str
    used_history: bool
    how: str  # "no history", "topic change", "own article", "continues", "refines", "new subject", "<backend>"
    followup: Followup = Followup()  # what the conversation adds to the search (the rule's; nothing alone)


@dataclass(frozen=True)
class Reading:
    """What retrieval says about a follow-up (the signals of the module docstring's step 3)."""

    message: str  # the message as read: without an aside at its start (`without_aside`)
    glued: str  # the search question of the turn it goes on from, followed by the message
    share: float | None  # best BM25 match of the message alone / of the glued text (None: no BM25)
    own_docs: tuple[str, ...]  # documents of the message's own top articles
    previous_docs: frozenset[str]  # documents the turn it goes on from cited (or its search landed in)
    given: frozenset[ArticleKey]  # remedy-route articles the previous answer gave


def glue(history: Sequence[Exchange], question: str, max_chars: int, to: int = -1) -> str:
    """An earlier turn's search question (the previous one's by default; its head, at most `max_chars`) followed by
    the message."""
    before = history[to].searched
    if len(before) > max_chars:
        before = before[:max_chars].rsplit(" ", 1)[0]
    return f"{before} {question}"


def related(own_docs: Sequence[str], docs: Sequence[frozenset[str]]) -> int:
    """Which earlier turn a message goes on from (an index into the history): the previous one, unless an older
    one's documents hold more of the message's own top articles («Возвращаясь к увольнению: …» after a question
    on alimony goes on from the dismissal); the latest wins a tie."""
    shared = [sum(d in turn for d in own_docs) for turn in docs]
    return max(range(len(docs)), key=lambda i: (shared[i], i)) - len(docs)


@dataclass(frozen=True)
class FollowupRule:
    """The deterministic rule of the module docstring.

    Args:
        search: question → doc_ids of its best articles, best first (the retrieval's own ranking).
        best_match: question → BM25's best chunk score for it (`Retrieval.best_match`; None without BM25).
        top: articles of the message's own search that are looked at.
        max_chars: characters of earlier context glued before a follow-up.
        lean: from this share of the glued search's best match up, the message's own words weigh as much as the
            glued search (below it, in proportion).
        new_subject: from this share up, a message whose own top articles mostly lie outside the documents of the
            previous answer is a new subject.
        new_weight: weight of a new subject's own search fused with the glued one (1); None: it is searched
            alone.
        own_best_at: the best article of the message's own search ranks no lower than this in a glued search
            (`Followup.own_best_at`; None: where the fusion puts it).
    """

    search: Callable[[str], Sequence[str]]
    best_match: Callable[[str], float | None] = lambda question: None
    top: int = 5
    max_chars: int = 600
    lean: float = 0.25
    new_subject: float = 0.4
    new_weight: float | None = 1.0
    own_best_at: int | None = 4

    def __call__(self, question: str, history: Sequence[Exchange]) -> Understood:
        if not history:
            return Understood(question, False, "no history")
        if m := _TOPIC_CHANGE_RE.match(normalize(question)):
            return Understood(_without(m, question), False, "topic change")
        message = without_aside(question)
        if any(ref.doc_id for ref in analyze_query(message).refs):
            return Understood(message, False, "own article")
        return self.decide(self.read(question, history))

    def read(self, question: str, history: Sequence[Exchange]) -> Reading:
        """The signals of a follow-up after `history` (the module docstring's step 3), read against the earlier
        turn it goes on from (`related`); an aside at its start is dropped first."""
        question = without_aside(question)
        own_docs = tuple(list(self.search(question))[: self.top])
        docs = [self.docs_of(ex) for ex in history]
        to = related(own_docs, docs)
        glued = glue(history, question, self.max_chars, to)
        own, whole = self.best_match(question), self.best_match(glued)
        share = None if own is None or whole is None else (own / whole if whole > 0 else 0.0)
        info = analyze_query(question)
        if share is not None and (info.codes or info.synonym_refs):
            # it names its own legal object (a code, an offence or institution of the synonym map): however
            # strong the earlier turn's words match, the message does not lean on them
            share = max(share, self.new_subject)
        # the routes the last answer gave: what the user has just read
        given = frozenset((s.doc_id, s.article) for s in history[-1].sources if s.remedy)
        return Reading(question, glued, share, own_docs, docs[to], given)

    def docs_of(self, exchange: Exchange) -> frozenset[str]:
        """The documents an earlier answer cited (or, citing none, its search landed in)."""
        cited = {s.doc_id for s in exchange.sources if not s.remedy}
        return frozenset(cited or list(self.search(exchange.searched))[: self.top])

    def decide(self, reading: Reading) -> Understood:
        """Continues, refines or changes the subject, by the reading's signals and this rule's settings."""
        question, share = reading.message, reading.share
        elsewhere = sum(doc not in reading.previous_docs for doc in reading.own_docs)
        if share is not None and share >= self.new_subject and 2 * elsewhere > len(reading.own_docs):
            if self.new_weight is None:
                return Understood(question, False, "new subject")
            at = self.own_best_at
            followup = Followup(own=question, given=reading.given, own_weight=self.new_weight, own_best_at=at)
            return Understood(reading.glued, True, "new subject", followup)
        # without BM25 (no share) the message's own words weigh as much as the glued search
        weight = 1.0 if share is None else min(1.0, share / self.lean)
        followup = Followup(own=question, given=reading.given, own_weight=weight, own_best_at=self.own_best_at)
        return Understood(reading.glued, True, "refines" if weight >= 1.0 else "continues", followup)


# --- with a chat model: the condense prompt ---------------------------------------------------------


def load_condense_prompt(settings: Settings, lang: Lang) -> ChatPromptTemplate:
    """prompts/condense.<lang>.txt (a system part) + the conversation + the follow-up ({input})."""
    path = settings.prompts_dir / f"condense.{lang}.txt"
    try:
        system = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} is missing: restore it from the repository's prompts/ folder") from None
    return ChatPromptTemplate.from_messages(
        [("system", system), MessagesPlaceholder("chat_history"), ("human", "{input}")]
    )


def history_messages(history: Sequence[Exchange], turns: int, answer_chars: int = 400) -> list[BaseMessage]:
    """The last `turns` exchanges as chat messages; answers cut short and ending with what they cited."""
    out: list[BaseMessage] = []
    for ex in history[-turns:] if turns > 0 else []:
        answer = ex.answer if len(ex.answer) <= answer_chars else ex.answer[:answer_chars].rsplit(" ", 1)[0] + " …"
        cited = "; ".join(s.citation() for s in ex.sources[:5])
        out += [HumanMessage(ex.question), AIMessage(f"{answer}\n[{cited}]" if cited else answer)]
    return out


def _standalone(max_chars: int) -> Callable[[str], str]:
    def check(text: str) -> str:
        line = " ".join(text.strip().strip("«»\"'").split())
        if not line or len(line) > max_chars:
            raise ValueError(f"the model's standalone question is unusable ({len(line)} characters)")
        return line

    return check


class FollowupCondenser:
    """{"input": question, "chat_history": [Exchange, ...]} → `Understood`, by the model when one is given and
    answers, else by the rule (see the module docstring)."""

    def __init__(self, settings: Settings, rule: FollowupRule, chat_model: Runnable | None = None) -> None:
        """Args: settings: prompts_dir, history_turns; rule: the offline rule (also the model's fallback);
        chat_model: Groq/Ollama with fallbacks (answer.llm.build_chat_model), or None."""
        self.settings = settings
        self.rule = rule
        by_rule: Runnable[dict[str, Any], Understood] = RunnableLambda(
            lambda x: self.rule(x["input"], x["chat_history"]), name="followup_rule"
        )
        no_history: Runnable[dict[str, Any], bool] = RunnableLambda(lambda x: not x["chat_history"])
        alone: Runnable[dict[str, Any], Understood] = RunnableLambda(
            lambda x: Understood(x["input"], False, "no history")
        )
        understand: Runnable = by_rule
        if chat_model is not None:
            understand = (
                RunnableLambda(self._condense_input)
                | {
                    "condensed": RunnableLambda(self._prompt) | chat_model,
                    "input": RunnableLambda(lambda x: x["input"]),
                }
                | RunnableLambda(self._understood)
            )
            understand = understand.with_fallbacks([by_rule])
        self.chat_model = chat_model
        self.runnable: Runnable = RunnableBranch((no_history, alone), understand)

    def invoke(self, question: str, history: Sequence[Exchange] = ()) -> Understood:
        return self.runnable.invoke({"input": question, "chat_history": list(history)})

    def _condense_input(self, x: dict[str, Any]) -> dict[str, Any]:
        lang = detect_lang(x["input"])
        messages = history_messages(x["chat_history"], self.settings.history_turns)
        return {"input": x["input"], "chat_history": messages, "lang": lang}

    def _prompt(self, x: dict[str, Any]) -> Any:
        prompt = load_condense_prompt(self.settings, x["lang"])
        return prompt.invoke({"input": x["input"], "chat_history": x["chat_history"]})

    def _understood(self, x: dict[str, Any]) -> Understood:
        text = _standalone(max(4 * len(x["input"]), self.rule.max_chars))(StrOutputParser().invoke(x["condensed"]))
        # a message returned as written (a change of subject, perhaps without its «кстати») did not use the history
        used = not set(analyze(text)) <= set(analyze(x["input"]))
        return Understood(text, used, backend_of(x["condensed"]))
