"""Typed records of the corpus: an `Article` as adilet publishes it, and the `Chunk`s that are indexed."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

Lang = Literal["ru", "kk"]
Status = Literal["in_force", "repealed"]


def content_hash(*parts: str) -> str:
    """A stable sha256 of the given strings, used to detect changed records and cache embeddings."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8"))
        h.update(b"\x1f")
    return h.hexdigest()


@dataclass(frozen=True)
class Article:
    """One article of one document in one language; `text` is normative text only."""

    doc_id: str
    lang: Lang
    number: str  # a string: "188-1"
    title: str
    text: str
    path: tuple[str, ...] = ()  # part / section / chapter titles, outermost first
    status: Status = "in_force"
    footnotes: tuple[str, ...] = ()  # «Сноска. …» amendment history, moved out of the text
    editor_notes: tuple[str, ...] = ()  # «Примечание ИЗПИ!» and the like: editorial, not law
    url: str = ""  # adilet URL, with #zN when the page has an anchor
    edition_date: str | None = None  # DD.MM.YYYY when known
    hash: str = ""

    @property
    def key(self) -> str:
        return f"{self.doc_id}:{self.number}"

    def with_hash(self) -> Article:
        h = content_hash(self.doc_id, self.lang, self.number, self.title, self.text, self.status, *self.path)
        return Article(**{**asdict(self), "hash": h})

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("path", "footnotes", "editor_notes"):
            d[k] = list(d[k])
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Article:
        return cls(**{**d, **{k: tuple(d.get(k, ())) for k in ("path", "footnotes", "editor_notes")}})


@dataclass(frozen=True)
class Chunk:
    """A piece of one article that stands on its own: `text` starts with «УК РК. Статья 188. Кража»."""

    chunk_id: str  # f"{doc_id}:{lang}:{article}:{part_index}"
    doc_id: str
    lang: Lang
    article: str
    title: str
    code: str  # the short name used in citations, in the chunk's language
    kind: str  # constitution / code / law
    text: str
    url: str
    status: Status = "in_force"
    part: str | None = None  # the numbered part(s) of the article this chunk covers, e.g. "1-3"
    path: tuple[str, ...] = ()
    edition_date: str | None = None
    hash: str = field(default="")

    @property
    def key(self) -> str:
        return f"{self.doc_id}:{self.article}"

    def metadata(self) -> dict[str, Any]:
        """Everything a citation and a metadata filter need; flat and JSON-safe (Pinecone accepts it)."""
        d = self._fields()
        d.pop("text")
        d["path"] = " / ".join(self.path)
        d["article_key"] = self.key
        return {k: v for k, v in d.items() if v is not None}

    def to_json(self) -> dict[str, Any]:
        d = self._fields()
        d["path"] = list(self.path)
        return d

    def _fields(self) -> dict[str, Any]:
        """asdict() without its deep copy (every field is a str, None or a tuple of str): a chain's load and the
        index's staleness check make one per chunk, ~10 times faster (bench/chain_start.py)."""
        return {name: getattr(self, name) for name in _CHUNK_FIELDS}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Chunk:
        return cls(**{**d, "path": tuple(d.get("path", ()))})


_CHUNK_FIELDS = tuple(f.name for f in fields(Chunk))
