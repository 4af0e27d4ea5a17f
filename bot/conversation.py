"""Which earlier exchanges a new message in a chat continues, read from the bot's feedback database.

Each exchange (an answered question, what it was searched as, its sources as JSON) records the exchange it
continued, so a thread is followed, not the chat. `feedback.FeedbackStore` writes the exchanges and reads a
conversation through `read_conversation`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sqlite3
from dataclasses import dataclass

from answer.records import Exchange, Source

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
    db: sqlite3.Connection, chat_id: int, *, turns: int, idle_seconds: float, reply_to: int | None, now: float
) -> Conversation:
    """The last `turns` exchanges a new message of `chat_id` continues (see `FeedbackStore.conversation`)."""
    head = None
    if reply_to is not None:
        row = db.execute(
            "SELECT question_id FROM answer_messages WHERE chat_id = ? AND message_id = ?",
            (chat_id, reply_to),
        ).fetchone()
        head = row[0] if row else None
    if head is None:
        row = db.execute(
            "SELECT question_id FROM exchanges WHERE chat_id = ? AND created_at >= ? AND created_at >"
            " COALESCE((SELECT reset_at FROM conversation_resets WHERE chat_id = ?), 0)"
            " ORDER BY created_at DESC, question_id DESC LIMIT 1",
            (chat_id, now - idle_seconds, chat_id),
        ).fetchone()
        head = row[0] if row else None
    thread: list[Exchange] = []
    current = head
    while current is not None and len(thread) < turns:
        row = db.execute(
            "SELECT q.question, q.answer, e.search_question, e.sources, e.parent_id FROM exchanges e"
            " JOIN questions q ON q.id = e.question_id WHERE e.question_id = ? AND e.chat_id = ?",
            (current, chat_id),
        ).fetchone()
        if row is None:  # deleted by retention: the thread ends there
            break
        question, answer, searched, sources, parent = row
        thread.append(Exchange(question, answer or "", sources_of(sources), searched))
        current = parent
    if not thread:
        return Conversation()
    return Conversation(tuple(reversed(thread)), head)
