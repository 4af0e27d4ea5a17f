"""The bot's tables (SQLAlchemy Core, one schema for SQLite and PostgreSQL) and their versioned migrations.

`schema_version` holds one row per component ("bot" here; the answer cache and the LLM budget may add their own),
with the version its tables are at. A database written before versions existed (questions, ratings, exchanges,
answer_messages, conversation_resets, user_state, as SQLite files of releases up to 2026-11) is version 1 and is
upgraded in place, its rows kept; a version newer than `SCHEMA_VERSION` stops the bot before it touches anything.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    Connection,
    Engine,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    inspect,
    select,
    text,
)

from corpus.errors import UserError

logger = logging.getLogger(__name__)

COMPONENT = "bot"
SCHEMA_VERSION = 2
# Telegram ids pass 2**31 (chat ids of supergroups are -100…); SQLite's rowid alias must be spelt INTEGER.
Id = BigInteger().with_variant(Integer, "sqlite")

metadata = MetaData()

schema_version = Table(
    "schema_version",
    metadata,
    Column("component", String(64), primary_key=True),
    Column("version", Integer, nullable=False),
)

# --- version 1: the tables of the SQLite store before versions --------------------------------------------------
questions = Table(
    "questions",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("created_at", Float, nullable=False),
    Column("user_id", BigInteger),
    Column("chat_id", BigInteger),
    Column("lang", Text),
    Column("question", Text, nullable=False),
    Column("answer", Text),
    Column("sources", Text),  # JSON list of {citation, url}
    Column("backend", Text),
    Column("template", Text),
    Column("grounded", Integer),
    Column("latency", Float),  # seconds from the question to the answer, chain only
    Column("error", Text),  # set when no answer was given
    sqlite_autoincrement=True,
)
ratings = Table(
    "ratings",
    metadata,
    Column("question_id", Id, ForeignKey("questions.id"), primary_key=True),
    Column("user_id", BigInteger, primary_key=True),
    Column("rating", Integer, CheckConstraint("rating IN (-1, 1)"), nullable=False),
    Column("created_at", Float, nullable=False),
)
exchanges = Table(
    "exchanges",
    metadata,
    Column("question_id", Id, ForeignKey("questions.id"), primary_key=True, autoincrement=False),
    Column("chat_id", BigInteger, nullable=False),
    Column("parent_id", Id),  # the exchange whose conversation this one continued; NULL: it began one
    Column("search_question", Text, nullable=False),
    Column("sources", Text, nullable=False),  # JSON list of the answer's Source records
    Column("created_at", Float, nullable=False),  # when the question arrived (from version 2; before: answered)
    Index("exchanges_by_chat", "chat_id", "created_at"),
)
answer_messages = Table(  # the bot's messages carrying each answer: a reply to one continues from its exchange
    "answer_messages",
    metadata,
    Column("chat_id", BigInteger, primary_key=True),
    Column("message_id", BigInteger, primary_key=True),
    Column("question_id", Id, ForeignKey("exchanges.question_id"), nullable=False),
)
conversation_resets = Table(  # /new: earlier exchanges are not continued by themselves
    "conversation_resets",
    metadata,
    Column("chat_id", BigInteger, primary_key=True, autoincrement=False),
    Column("reset_at", Float, nullable=False),
)
user_state = Table(
    "user_state",
    metadata,
    Column("user_id", BigInteger, primary_key=True, autoincrement=False),
    Column("data", Text, nullable=False),  # JSON object: the user's PTB user_data ({"lang": "kk"})
    Column("updated_at", Float, nullable=False),  # the user's last activity; retention deletes older rows
)
V1 = (questions, ratings, exchanges, answer_messages, conversation_resets, user_state)

# --- version 2: what replicas share ------------------------------------------------------------------------------
updates = Table(  # each Telegram update claimed by one process: handled once, a chat's questions in order
    "updates",
    metadata,
    Column("update_id", BigInteger, primary_key=True, autoincrement=False),
    Column("chat_id", BigInteger),  # set for a question: the chat's questions are answered one at a time, in order
    Column("holder", String(64), nullable=False),  # the process handling it
    Column("lease_until", Float, nullable=False),  # renewed while handled; a dead holder's claim lapses
    Column("done_at", Float),
    Column("created_at", Float, nullable=False),
    Index("updates_by_chat", "chat_id", "update_id"),
)
rate_limits = Table(  # the per-user sliding window, one row per user seen in the last window
    "rate_limits",
    metadata,
    Column("user_id", BigInteger, primary_key=True, autoincrement=False),
    Column("events", Text, nullable=False),  # JSON list of the accepted questions' times
    Column("told_at", Float),  # when the user was last told they are limited
    Column("updated_at", Float, nullable=False),
)
V2 = (updates, rate_limits)


class SchemaTooNew(UserError):
    """The database was written by a newer release: this one must not touch it."""


def _create(tables: tuple[Table, ...]) -> Callable[[Connection], None]:
    def step(conn: Connection) -> None:
        for table in tables:
            table.create(conn, checkfirst=True)

    return step


# MIGRATIONS[n] takes a database at version n to n + 1.
MIGRATIONS: dict[int, Callable[[Connection], None]] = {0: _create(V1), 1: _create(V2)}


def current_version(conn: Connection) -> int:
    """The bot's schema version in the database: 0 when empty, 1 for a store written before versions."""
    names = set(inspect(conn).get_table_names())
    if "schema_version" in names:
        found = conn.execute(select(schema_version.c.version).where(schema_version.c.component == COMPONENT))
        version = found.scalar_one_or_none()
        if version is not None:
            return version
    return 1 if "questions" in names else 0


def migrate(engine: Engine, where: str) -> int:
    """Bring the bot's tables to SCHEMA_VERSION (one process at a time); returns the version found.

    SchemaTooNew when the database is at a later version, naming both (`where` says which database).
    """
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":  # replicas starting together: one migrates, the others wait
            conn.execute(text("SELECT pg_advisory_xact_lock(20200520)"))
        else:  # a write first: SQLite's write lock is held for the whole migration
            schema_version.create(conn, checkfirst=True)
            conn.execute(
                schema_version.update()
                .where(schema_version.c.component == COMPONENT)
                .values(version=schema_version.c.version)
            )
        found = current_version(conn)
        if found > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"the bot's database ({where}) is at schema version {found}, written by a newer release; this one "
                f"reads version {SCHEMA_VERSION} at most: run a release whose bot schema is version {found} or later "
                "(or point DATABASE_URL at another database)"
            )
        if found == SCHEMA_VERSION:
            return found
        schema_version.create(conn, checkfirst=True)
        for version in range(found, SCHEMA_VERSION):
            MIGRATIONS[version](conn)
        conn.execute(schema_version.delete().where(schema_version.c.component == COMPONENT))
        conn.execute(schema_version.insert().values(component=COMPONENT, version=SCHEMA_VERSION))
    if found:
        logger.info("the bot's database (%s) upgraded from schema version %d to %d", where, found, SCHEMA_VERSION)
    return found
