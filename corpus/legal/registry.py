"""The registry of adilet documents: the laws and codes the assistant ingests, with how adilet names each one
(id, full titles in Russian and Kazakh), how citations name it (short names) and how people name it in questions
(aliases). The table is data, `registry.json` beside this module, read and validated once at import. Legal-reference
data, read by every stage; it imports nothing from `corpus.legal`, whose modules build on it (`names` matches its
aliases, `cited` its code names).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from config import ADILET_BASE_URL

logger = logging.getLogger(__name__)

REGISTRY_FILE = Path(__file__).with_name("registry.json")

Kind = Literal["constitution", "code", "law"]


@dataclass(frozen=True)
class AdiletSource:
    """One document of the registry: how adilet names it, and how people and citations name it."""

    doc_id: str
    title_ru: str
    title_kk: str
    short_ru: str
    short_kk: str
    kind: Kind
    aliases: tuple[str, ...] = ()
    criminal: bool = False

    def url(self, lang: str = "ru") -> str:
        return f"{ADILET_BASE_URL}/{'kaz' if lang == 'kk' else 'rus'}/docs/{self.doc_id}"

    def short(self, lang: str = "ru") -> str:
        return self.short_kk if lang == "kk" else self.short_ru

    def title(self, lang: str = "ru") -> str:
        return self.title_kk if lang == "kk" else self.title_ru


class RegistryError(ValueError):
    """The registry file is unreadable or malformed; the message names the file and what is wrong in it."""


class _Document(BaseModel):
    """One document of registry.json."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    doc_id: str = Field(pattern=r"^[A-Z][0-9_]{10}$")
    title_ru: str = Field(min_length=1)
    title_kk: str = Field(min_length=1)
    short_ru: str = Field(min_length=1)
    short_kk: str = Field(min_length=1)
    kind: Kind
    aliases: tuple[str, ...] = ()
    criminal: bool = False

    @field_validator("aliases")
    @classmethod
    def _lowercase_words(cls, aliases: tuple[str, ...]) -> tuple[str, ...]:
        for alias in aliases:
            if not alias.strip() or alias != alias.lower().strip():
                raise ValueError(f"alias {alias!r} must be lowercase words without surrounding spaces")
        return aliases


class _RegistryFile(BaseModel):
    """registry.json: what it holds (`about`) and the documents, in the order they are ingested."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    about: str = ""
    documents: list[_Document] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_of_each(self) -> _RegistryFile:
        ids = [d.doc_id for d in self.documents]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"documents listed twice: {', '.join(repeated)}")
        criminal = [d.doc_id for d in self.documents if d.criminal]
        if len(criminal) != 1:
            raise ValueError(f"exactly one document must be criminal: true (the Criminal Code), found {criminal}")
        return self


def load_sources(path: Path) -> tuple[AdiletSource, ...]:
    """The documents of a registry file, validated; a RegistryError naming the file when it is unreadable or
    malformed."""
    try:
        parsed = _RegistryFile.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as err:  # json.JSONDecodeError and pydantic's ValidationError are ValueErrors
        detail = str(err) if not isinstance(err, ValidationError) else _first_lines(err)
        raise RegistryError(
            f"{path} is not a valid registry of documents ({detail}): fix it, or restore it "
            "(`git checkout -- corpus/legal/registry.json` in a clone, or reinstall the package)"
        ) from err
    return tuple(AdiletSource(**d.model_dump()) for d in parsed.documents)


def _first_lines(err: ValidationError) -> str:
    """Where each error is in the file («documents.3.kind») and what it is, on one line."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()[:3])


# Aliases are lowercase words people use in questions; short names are what citations print.
ADILET_SOURCES: tuple[AdiletSource, ...] = load_sources(REGISTRY_FILE)
SOURCES_BY_ID: dict[str, AdiletSource] = {s.doc_id: s for s in ADILET_SOURCES}
CRIMINAL_CODE_ID: str = next(s.doc_id for s in ADILET_SOURCES if s.criminal)


def source(doc_id: str) -> AdiletSource:
    """The registry entry for a document id, with a message naming the id when it is unknown."""
    try:
        return SOURCES_BY_ID[doc_id]
    except KeyError:
        raise KeyError(
            f"{doc_id} is not in ADILET_SOURCES (corpus/legal/registry.json); add it there to ingest it"
        ) from None
