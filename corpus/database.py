"""The SQL database a process shares with its replicas: PostgreSQL at DATABASE_URL, or a SQLite file of its own.

One engine per URL and process (SQLAlchemy pools its connections); the bot's store, the answer cache and the LLM
budget all go through `engine`, so that with DATABASE_URL set every replica reads and writes the same rows.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

from config import Settings


def database_url(settings: Settings, sqlite_file: Path) -> str:
    """DATABASE_URL (postgresql://… read through psycopg 3), or `sqlite_file` when it is unset."""
    if settings.database_url is None:
        return f"sqlite:///{sqlite_file}"
    url = make_url(settings.database_url.get_secret_value())
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    return url.render_as_string(hide_password=False)


def engine(settings: Settings, sqlite_file: Path) -> Engine:
    """The process's engine for `database_url(settings, sqlite_file)`."""
    return _engine(database_url(settings, sqlite_file))


@functools.cache
def _engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        made = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})
        event.listen(made, "connect", _sqlite_pragmas)
        return made
    return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5)


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    """WAL (readers never wait for the writer) and a busy timeout, on every new connection."""
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def sqlite_engine(path: Path) -> Engine:
    """The process's engine for the SQLite file `path` (what `engine` gives when DATABASE_URL is unset)."""
    return _engine(f"sqlite:///{path}")
