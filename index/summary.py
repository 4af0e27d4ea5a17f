"""What a data dir holds, read from its corpus manifest and index metadata without loading either (the bot's /about).

The corpus's counts per language, when it was collected and published, the span of the laws' editions and how each
was dated, and which searches have an index built (a damaged or absent index counts as not built).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from config import Settings
from corpus.files import DamagedFile
from corpus.store import LangTotals, check_corpus
from index.faiss_store import read_faiss_meta
from index.publish import published

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DataSummary:
    """What a data dir's answers rest on: the corpus (counts per language, dates, editions) and the searches
    whose index is built."""

    totals: dict[str, LangTotals]
    ingested_at: str | None  # the latest document ingest (ISO)
    published_at: str | None  # the current build's publication (index/publish.py), if any
    oldest_edition: str | None  # DD.MM.YYYY over the documents' editions
    newest_edition: str | None
    editions_as_of: int  # documents whose page states its edition («по состоянию на»)
    editions_amended: int  # documents dated by their latest amending act («с изменениями по»)
    vectors: int | None  # None: no vector index
    latent_rows: int | None  # None: no latent-term index


def summarize(settings: Settings) -> DataSummary:
    """The corpus manifest and the index metadata of a data dir, read without loading the index (a damaged or
    absent index counts as not built)."""
    corpus = check_corpus(settings.corpus_dir)
    dates = sorted(
        (_ymd(d.edition_date), d.edition_date) for d in corpus.documents if d.edition_date and _ymd(d.edition_date)
    )
    try:
        vectors: int | None = int(read_faiss_meta(settings.index_dir / "faiss").get("count", 0))
    except (FileNotFoundError, DamagedFile):
        vectors = None
    try:
        sparse_meta = json.loads((settings.index_dir / "sparse" / "meta.json").read_text(encoding="utf-8"))
        latent: int | None = len(sparse_meta["chunk_ids"])
    except (OSError, ValueError, KeyError, TypeError):
        latent = None
    publication = published(settings)
    return DataSummary(
        totals=corpus.totals,
        ingested_at=max((d.ingested_at for d in corpus.documents), default=None),
        published_at=publication.published_at if publication else None,
        oldest_edition=dates[0][1] if dates else None,
        newest_edition=dates[-1][1] if dates else None,
        editions_as_of=sum(d.edition_basis == "as_of" for d in corpus.documents),
        editions_amended=sum(d.edition_basis == "amended_through" for d in corpus.documents),
        vectors=vectors,
        latent_rows=latent,
    )


def _ymd(date: str) -> tuple[int, int, int] | None:
    """(year, month, day) of DD.MM.YYYY."""
    try:
        day, month, year = (int(x) for x in date.split("."))
    except ValueError:
        return None
    return (year, month, day)
