"""Understanding a follow-up: the earlier turns of a conversation + a new message → what to search.

Two ways behind one runnable (`FollowupCondenser`), taking {"input": question, "chat_history": [Exchange, ...]}
and returning an `Understood`:

- with a chat model: LangChain's history-aware pattern — a short condense prompt (prompts/condense.<lang>.txt)
  turns the history and the follow-up into one standalone question, through the same Groq → Ollama fallbacks as
  the answers; when no model answers (or its reply is unusable), the rule below;
- with none (the offline default), a deterministic rule (`FollowupRule`):
  1. a change of subject said in words («другой вопрос», «кстати», «тағы бір сұрақ», …) → the message alone
     (without the marker);
  2. a message naming its own article of a code («ст. 188 УК») → alone;
  3. a message opening as a continuation («а», «и», «ещё», «а если», «ал», «ал егер», «тағы», …) → with context;
  4. a message that names a legal topic of its own (a synonym entry, a code, a crime after a non-crime), or is
     long (≥ 6 search terms) without leaning on the conversation with a pronoun («ему», «её», «ол», …), and whose
     own search is focused on one document (most of its top 5 articles in it) that the previous answer did not
     cite — a question with strong matches of its own elsewhere — → alone;
  5. anything else (short, elliptical, or the same area of law) → with context.

  "With context" searches the previous turn's search question (which already carries its own context when it
  was a follow-up) glued before the message, so the conversation's words pull the search to the area of law the
  previous answer was about. It also carries a `Followup` for retrieval: the code the previous answer cited most
  (preferred like a named code), the message's own words (searched too and fused in, so the aspect it asks about
  is not drowned by the earlier turn's words) and the remedy route the previous answer already gave (not put at
  the top again).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
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
from retrieval.pipeline import Followup
from retrieval.query import analyze_query

logger = logging.getLogger(__name__)

# Only discourse markers are word lists; whether a message stands on its own is decided by retrieval.
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
    "кстати",
    "теперь о другом",
    "сменим тему",
    "тағы бір сұрақ",
    "басқа сұрақ",
    "басқа тақырып",
    "жаңа сұрақ",
    "айтпақшы",
    "тағы бір нәрсе",
)
CONTINUATION = (
    "а",
    "и",
    "но",
    "еще",
    "также",
    "тогда",
    "то есть",
    "значит",
    "а если",
    "а что",
    "а как",
    "а когда",
    "а сколько",
    "а мне",
    "ал",
    "ал егер",
    "тағы",
    "және",
    "сонда",
    "онда",
    "ендеше",
    "егер де",
    "сондай-ақ",
)
ANAPHORA = frozenset(
    """он она оно они его ее ему ей им их него нее нему ней ним них этот эта это эти этого этой этому этим этих
    этом такой такая такое такие такого такому таком там тогда туда тот та те того тому тем
    ол оның оған оны онда одан олар олардың оларға оларды бұл бұның бұған мұны мұнда осы сол соның соған""".split()
)


def _marker_re(markers: Sequence[str]) -> re.Pattern[str]:
    # Longest first, so that «а если» wins over «а»; a marker is a whole word or words at the very start.
    alts = "|".join(re.escape(m) for m in sorted(markers, key=len, reverse=True))
    return re.compile(rf"^\s*(?:{alts})(?![\w-])[\s,:;.!?—–-]*", re.IGNORECASE)


_TOPIC_CHANGE_RE = _marker_re(TOPIC_CHANGE)
_CONTINUATION_RE = _marker_re(CONTINUATION)
_WORD_RE = re.compile(r"[^\W\d_]+")


@dataclass(frozen=True)
class Understood:
    """What to search for a message, whether the conversation shaped it, and why."""

    search_question: str
    used_history: bool
    how: str  # "no history", "topic change", "own article", "continuation", "own subject", "context", "<backend>"
    followup: Followup = Followup()  # what the conversation adds to the search (the rule's; nothing alone)


def glue(history: Sequence[Exchange], question: str, max_chars: int) -> str:
    """The previous turn's search question (its head, at most `max_chars`) followed by the message."""
    before = history[-1].searched
    if len(before) > max_chars:
        before = before[:max_chars].rsplit(" ", 1)[0]
    return f"{before} {question}"


@dataclass(frozen=True)
class FollowupRule:
    """The deterministic rule of the module docstring.

    Args:
        search: question → doc_ids of its best articles, best first (the retrieval's own ranking).
        top: articles of the message's own search that are looked at.
        focus: share of them in one document that makes the search "focused" there.
        max_chars: characters of earlier context glued before a follow-up.
        long_terms: search terms that make a message long enough to carry its own subject.
        prefer: a follow-up read with context prefers the documents the previous answer cited (retrieval's
            law-aware step boosts them like a code the question names) and does not get the remedy route the
            previous answer already gave at the top again.
    """

    search: Callable[[str], Sequence[str]]
    top: int = 5
    focus: float = 0.6
    max_chars: int = 600
    long_terms: int = 6
    prefer: bool = True

    def __call__(self, question: str, history: Sequence[Exchange]) -> Understood:
        if not history:
            return Understood(question, False, "no history")
        norm = normalize(question)
        if m := _TOPIC_CHANGE_RE.match(norm):
            rest = question[m.end() :].strip()
            return Understood(rest if any(ch.isalnum() for ch in rest) else question, False, "topic change")
        info = analyze_query(question)
        if any(ref.doc_id for ref in info.refs):
            return Understood(question, False, "own article")
        previous = history[-1]
        # Naming the code the previous answer cited most, so that the search prefers it, measured worse
        # (followup_dev hit@5 0.7 -> 0.6, BM25: a family question's previous answer cited the Civil Code).
        search = glue(history, question, self.max_chars)
        followup = self.followup(previous, question)
        if _CONTINUATION_RE.match(norm):
            return Understood(search, True, "continuation", followup)
        words = _WORD_RE.findall(norm)
        leans = not ANAPHORA.isdisjoint(words)
        own_topic = bool(info.codes or info.synonym_refs) or (
            info.is_criminal and not analyze_query(previous.searched).is_criminal
        )
        long = len(set(analyze(question))) >= self.long_terms
        if (own_topic or long and not leans) and (focused := self.focused_doc(question)) is not None:
            if focused not in self.previous_docs(previous):
                return Understood(question, False, "own subject")
        return Understood(search, True, "context", followup)

    def focused_doc(self, question: str) -> str | None:
        """The document most of the message's own top articles come from, if they agree enough."""
        docs = list(self.search(question))[: self.top]
        if not docs:
            return None
        doc, n = Counter(docs).most_common(1)[0]
        return doc if n / self.top >= self.focus else None

    def followup(self, previous: Exchange, question: str) -> Followup:
        """The document the previous answer cited most (the first cited on a tie), the message's own words and
        the remedy-route articles the previous answer gave."""
        if not self.prefer:
            return Followup()
        cited = Counter(s.doc_id for s in previous.sources if not s.remedy)
        given = frozenset((s.doc_id, s.article) for s in previous.sources if s.remedy)
        return Followup(prefer_docs=tuple(d for d, _ in cited.most_common(1)), own=question, given=given)

    def previous_docs(self, exchange: Exchange) -> set[str]:
        """The documents the previous answer cited (or, when it cited none, where its search landed)."""
        cited = {s.doc_id for s in exchange.sources if not s.remedy}
        return cited or set(list(self.search(exchange.searched))[: self.top])


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
        used = normalize(text).strip(" ?.!") != normalize(x["input"]).strip(" ?.!")
        return Understood(text, used, backend_of(x["condensed"]))
