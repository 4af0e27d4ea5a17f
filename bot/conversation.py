"""Which earlier exchanges a new message in a chat continues, read from the bot's feedback database.

Each exchange (an answered question, what it was searched as, its sources as JSON) records the exchange it
continued, so a thread is followed, not the chat. `feedback.FeedbackStore` writes the exchanges and reads a
conversation through `read_conversation`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass

from sqlalchemy import Connection, func, select

from answer.records import Exchange, Source
from bot.schema import answer_messages, conversation_resets, exchanges, questions

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Conversation:
    """What a new message in a chat continues: the exchanges to read it with (oldest first) and the last one's id."""

    history: tuple[Exchange, ...] = ()
    parent_id: int | None = None  # the exchange the new one continues (recorded as its parent)


def sources_json(sources: tuple[Source, ...]) -> str:
    """An exchange's sources as the database keeps them (a JSON list of `Source` fields)."""
    return json.dumps([dataclasses.asdict(s) for s in sources], ensure_ascii=False)


def sources_of(raw: str) -> tuple[Source, ...]:
    """Sources read back from JSON; a row that does not fit `Source` any more is dropped (the question stays)."""
    names = {f.name for f in dataclasses.fields(Source)}
    out = []
    try:
        items = json.loads(raw)
    except (TypeError, ValueError):
        return ()
    for item in items if isinstance(items, list) else ():
        try:
            out.append(Source(**{k: v for k, v in item.items() if k in names}))
        except (AttributeError, TypeError):
            continue
    return tuple(out)


def read_conversation(
    conn: Connection, chat_id: int, *, turns: int, idle_seconds: float, reply_to: int | None, now: float
) -> Conversation:
    """The last `turns` exchanges a new message of `chat_id` continues (see `FeedbackStore.conversation`)."""
    head = None
    if reply_to is not None:
        head = conn.execute(
            select(answer_messages.c.question_id).where(
                answer_messages.c.chat_id == chat_id, answer_messages.c.message_id == reply_to
            )
        ).scalar_one_or_none()
    if head is None:
        reset = select(conversation_resets.c.reset_at).where(conversation_resets.c.chat_id == chat_id).scalar_subquery()
        head = conn.execute(
            select(exchanges.c.question_id)
            .where(
                exchanges.c.chat_id == chat_id,
                exchanges.c.created_at >= now - idle_seconds,
                exchanges.c.created_at > func.coalesce(reset, 0),
            )
            .order_by(exchanges.c.created_at.desc(), exchanges.c.question_id.desc())
            .limit(1)
        ).scalar_one_or_none()
    thread: list[Exchange] = []
    current = head
    while current is not None and len(thread) < turns:
        row = conn.execute(
            select(
                questions.c.question,
                questions.c.answer,
                exchanges.c.search_question,
                exchanges.c.sources,
                exchanges.c.parent_id,
            )
            .select_from(exchanges.join(questions, questions.c.id == exchanges.c.question_id))
            .where(exchanges.c.question_id == current, exchanges.c.chat_id == chat_id)
        ).one_or_none()
        if row is None:  # deleted by retention: the thread ends there
            break
        question, answer, searched, sources, parent = row
        thread.append(Exchange(question, answer or "", sources_of(sources), searched))
        current = parent
    if not thread:
        return Conversation()
    return Conversation(tuple(reversed(thread)), head)
