"""The answer cache: a repeated question is answered from the database shared by every replica, with no model call.

A cached answer is found by a hash of
- the question, normalised (case, spaces, a trailing «?»),
- the conversation it was asked in (the last HISTORY_TURNS exchanges: a follow-up means something else after
  another answer),
- the published build the chain loaded (index/publication.py): a new build never serves an answer of the old one,
- every setting that shapes an answer (backends, models, prompts and their files, retrieval, context …), but no
  secret, service or Telegram setting: the bot and scripts over one data dir share it.

Only what another asking would get again is kept: a model's answer that passed the grounding check, and the
quotes when no chat model is configured at all (offline). Quotes given because a model failed or its budget was
spent, and the short replies to what cannot be answered, are made afresh.

The rows live in DATABASE_URL's `answer_cache` table (every replica), else DATA_DIR/cache/answers.sqlite
(owner-only): the bot and `invoke_qa` from scripts share it. Why not langchain_community's SQLAlchemyCache: it
is an LLM cache under the chat model, keyed by the whole prompt — retrieval and the follow-up call still run,
and a reply that then fails the grounding check is kept —, its key is the prompt text itself (PostgreSQL's
btree index refuses rows over 2,704 bytes: a Cyrillic prompt is several times that), its rows are read back
through langchain_core.load.loads, and it has no build or age to prune by. `AnswerCache` keeps LangChain's
`BaseCache` contract (lookup/update/clear by prompt and llm_string) over its own table, and stores plain JSON
read back through pydantic.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from langchain_core.caches import RETURN_VAL_TYPE, BaseCache
from langchain_core.outputs import Generation
from prometheus_client import Counter
from pydantic import SecretStr, TypeAdapter, ValidationError
from sqlalchemy import Column, Float, MetaData, String, Table, Text, delete, insert, select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from answer.records import Exchange, QAResult
from config import Settings
from corpus.database import engine

logger = logging.getLogger(__name__)

HITS = Counter("kzlaw_answer_cache_hits", "Questions answered from the answer cache (no model call).")
MISSES = Counter("kzlaw_answer_cache_misses", "Questions looked up in the answer cache and not found there.")

SQLITE_FILE = "answers.sqlite"  # in DATA_DIR/cache when DATABASE_URL is unset
EXTRACTIVE = "extractive"
# Settings that do not change what an answer says: the service, Telegram, ingest transport, the budget, the cache.
_NOT_IN_KEY = {
    "data_dir",
    "source_dir",
    "prompts_dir",  # its files' contents are hashed in instead
    "adilet_base_url",
    "http_timeout",
    "http_retries",
    "http_backoff",
    "http_delay",
    "user_agent",
    "reload_check_seconds",
    "llm_timeout",
    "database_url",
    "background_index_build",
    "answer_cache",
    "answer_cache_days",
    "metrics_port",  # each replica on one host serves its metrics on a port of its own
    "metrics_listen",
}
_PRUNE_EVERY = 3600.0  # seconds between two deletions of old rows by one process
_RESULT = TypeAdapter(QAResult)  # extra="forbid" (answer/records.py)

metadata = MetaData()
answer_cache = Table(
    "answer_cache",
    metadata,
    Column("key", String(64), primary_key=True),  # sha256 of llm_string and prompt
    Column("generation", String(64), nullable=False, index=True),
    Column("created_at", Float, nullable=False, index=True),
    Column("response", Text, nullable=False),  # the QAResult as JSON
)


def normalise(question: str) -> str:
    """The question as the cache compares it: case-folded, single-spaced, without trailing «?», «!», «.»."""
    return " ".join(question.casefold().split()).rstrip(" ?!.…")


def answer_settings(settings: Settings) -> str:
    """A digest of every setting that shapes an answer, the prompt files' contents and which keys are set."""
    shaping = {
        name: value
        for name, value in settings.model_dump(mode="json").items()
        if name not in _NOT_IN_KEY
        and not name.startswith("telegram_")
        and not name.endswith(("_per_minute", "_per_day"))  # the LLM budget
        and not isinstance(getattr(settings, name), SecretStr)
    }
    shaping["keys_set"] = sorted(name for name, value in settings if isinstance(value, SecretStr))
    digest = hashlib.sha256(json.dumps(shaping, sort_keys=True, ensure_ascii=False).encode("utf-8"))
    for path in sorted(settings.prompts_dir.glob("*")):
        if path.is_file():
            digest.update(path.name.encode("utf-8") + b"\0" + path.read_bytes())
    return digest.hexdigest()


def conversation(history: Sequence[Exchange], turns: int) -> list[dict[str, Any]]:
    """The part of a conversation a follow-up is read with: its last `turns` exchanges, each with what it cited."""
    kept = list(history)[-turns:] if turns else []
    return [
        {
            "question": normalise(e.question),
            "searched": normalise(e.searched),
            "answer": e.answer,
            "sources": [[s.doc_id, s.lang, s.article] for s in e.sources],
        }
        for e in kept
    ]


class AnswerCache(BaseCache):
    """Answers by (question and conversation, build and settings), in the database every replica shares."""

    def __init__(self, settings: Settings) -> None:
        """Args: settings: database_url (else the SQLite file in DATA_DIR/cache), history_turns,
        answer_cache_days, and every setting that shapes an answer (hashed into each key)."""
        self.settings = settings
        self.settings_digest = answer_settings(settings)
        self.has_model = any(
            (name == "groq" and settings.groq_api_key is not None) or (name == "ollama" and settings.ollama_enabled)
            for name in settings.llm_backends
        )
        self.engine = engine(settings, settings.cache_dir / SQLITE_FILE)
        self._ready = False  # the table is made at first use: a database away at start stops no answer
        self._off: str | None = None  # why the cache is off for this process (a data dir it may not write)
        self._pruned = 0.0
        self._lock = threading.Lock()

    def _ensure(self) -> bool:
        """Make the SQLite file (owner-only) and the table once; False when the cache cannot be used here."""
        if self._ready or self._off:
            return self._ready
        try:
            if self.settings.database_url is None:
                _private_sqlite(self.settings.cache_dir / SQLITE_FILE)
        except OSError as err:
            self._off = f"{type(err).__name__}: {err}"
            logger.warning("answer cache off: %s cannot be written (%s)", self.settings.cache_dir, self._off)
            return False
        metadata.create_all(self.engine)  # SQLAlchemyError: the caller logs it, the next question tries again
        self._ready = True
        return True

    # --- LangChain's BaseCache contract: generations by (prompt, llm_string) ---------------------------------

    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        if not self._ensure():
            return None
        with self.engine.connect() as conn:
            row = conn.execute(
                select(answer_cache.c.response).where(answer_cache.c.key == _key(prompt, llm_string))
            ).first()
        return None if row is None else [Generation(text=row[0])]

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        if not self._ensure():
            return
        [generation] = return_val
        row = {
            "key": _key(prompt, llm_string),
            "generation": llm_string.split(":", 1)[0],
            "created_at": time.time(),
            "response": generation.text,
        }
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(answer_cache).values(row))
        except IntegrityError:  # another replica answered the same question at the same time: its row stands
            pass
        self._prune()

    def clear(self, **kwargs: Any) -> None:
        if not self._ensure():
            return
        with self.engine.begin() as conn:
            conn.execute(delete(answer_cache))

    # --- answers ----------------------------------------------------------------------------------------------

    def fetch(self, question: str, history: Sequence[Exchange], generation: str | None) -> QAResult | None:
        """The cached answer to `question` after `history` from build `generation`, as if asked now; None on a
        miss (or with no published build, whose answers cannot be told apart)."""
        if generation is None or self._off:
            return None
        try:
            found = self.lookup(self._prompt(question, history), self._llm_string(generation))
        except SQLAlchemyError as err:  # the database is away: the question is answered without it
            logger.warning("answer cache unavailable, answering afresh: %s: %s", type(err).__name__, err)
            return None
        if found is None:
            MISSES.inc()
            return None
        try:
            result = _RESULT.validate_json(found[0].text)
        except ValidationError as err:  # written by another version, or damaged: answered afresh, then replaced
            logger.warning("a cached answer could not be read, answering afresh: %s", err.errors()[:1])
            MISSES.inc()
            return None
        HITS.inc()
        search = result.search_question if result.used_history else question
        return dataclasses.replace(result, question=question, search_question=search, cached=True, timings={})

    def store(self, question: str, history: Sequence[Exchange], generation: str | None, result: QAResult) -> bool:
        """Keep `result` for the next asking when another asking would get it again; True if kept."""
        if generation is None or self._off or not self.cacheable(result):
            return False
        # The question is the key's (hashed); the row keeps what the answer says, not what the user typed.
        kept = dataclasses.replace(
            result, question="", search_question=result.search_question if result.used_history else "", timings={}
        )
        try:
            self.update(
                self._prompt(question, history),
                self._llm_string(generation),
                [Generation(text=_RESULT.dump_json(kept).decode("utf-8"))],
            )
        except SQLAlchemyError as err:
            logger.warning("answer cache unavailable, the answer is not kept: %s: %s", type(err).__name__, err)
            return False
        return True

    def cacheable(self, result: QAResult) -> bool:
        """A grounded model answer; quotes only when no model is configured (else they stand in for a failure)."""
        if result.status != "answered" or not result.grounded:
            return False
        return result.backend != EXTRACTIVE or not self.has_model

    def _prompt(self, question: str, history: Sequence[Exchange]) -> str:
        asked = {"question": normalise(question), "history": conversation(history, self.settings.history_turns)}
        return json.dumps(asked, ensure_ascii=False, sort_keys=True)

    def _llm_string(self, generation: str) -> str:
        return f"{generation}:{self.settings_digest}"

    def _prune(self) -> None:
        """Delete rows older than ANSWER_CACHE_DAYS, at most once an hour per process."""
        days = self.settings.answer_cache_days
        with self._lock:
            if not days or (self._pruned and time.monotonic() - self._pruned < _PRUNE_EVERY):
                return
            self._pruned = time.monotonic()
        with self.engine.begin() as conn:
            gone = conn.execute(delete(answer_cache).where(answer_cache.c.created_at < time.time() - days * 86400))
        if gone.rowcount:
            logger.info("answer cache: %d answers older than %g days deleted", gone.rowcount, days)


def _key(prompt: str, llm_string: str) -> str:
    return hashlib.sha256(f"{llm_string}\0{prompt}".encode()).hexdigest()


def _private_sqlite(path: os.PathLike[str]) -> None:
    """The SQLite file created owner-only in an owner-only folder: its rows are answers to users' questions."""
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
