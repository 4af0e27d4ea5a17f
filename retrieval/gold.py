"""Gold files: the records of a gold question or dialogue (the relevant articles, keyed by (doc_id, article)) and
their JSONL readers, which name the first bad line."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from corpus.errors import UserError

logger = logging.getLogger(__name__)

Key = tuple[str, str]  # (doc_id, article)
T = TypeVar("T", bound=BaseModel)


class GoldArticle(BaseModel):
    """One relevant article of a gold question."""

    model_config = ConfigDict(extra="ignore")  # gold files come from elsewhere and carry extra keys

    doc_id: str
    article: str


class GoldQuestion(BaseModel):
    """One line of a gold JSONL file."""

    model_config = ConfigDict(extra="ignore")

    id: str
    query: str
    lang: str | None = None
    relevant: list[GoldArticle]

    @property
    def relevant_keys(self) -> set[Key]:
        return {(r.doc_id, r.article) for r in self.relevant}


class GoldDialogue(BaseModel):
    """One line of a gold dialogue file: the turns of a conversation, gold for the last one."""

    model_config = ConfigDict(extra="ignore")

    id: str
    lang: str | None = None
    turns: list[str] = Field(min_length=1)
    relevant: list[GoldArticle]

    @property
    def relevant_keys(self) -> set[Key]:
        return {(r.doc_id, r.article) for r in self.relevant}


def _read_jsonl(path: Path, model: type[T], what: str, shape: str) -> list[T]:
    """Validated lines of a JSONL file, with the line number of the first bad line in the error."""
    if not path.is_file():
        raise UserError(f"No {what} file at {path}: pass a JSONL file of {shape} lines.")
    items: list[T] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(model.model_validate_json(line))
        except ValidationError as err:
            raise UserError(f"{path}:{n} is not a gold {what} ({err.errors()[0]['msg']}): fix or remove it.") from err
    if not items:
        raise UserError(f"{path} holds no {what}s.")
    return items


def read_questions(path: Path) -> list[GoldQuestion]:
    """Gold questions of a JSONL file, with the line number of the first bad line in the error."""
    return _read_jsonl(path, GoldQuestion, "question", "{id, query, relevant: [...]}")


def read_dialogues(path: Path) -> list[GoldDialogue]:
    """Gold dialogues of a JSONL file, with the line number of the first bad line in the error."""
    return _read_jsonl(path, GoldDialogue, "dialogue", "{id, lang, turns: [...], relevant: [...]}")
