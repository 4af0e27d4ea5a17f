"""What a data dir holds, read from its corpus manifest and index metadata without loading either (the bot's /about).

The corpus's counts per language, when it was collected and published, the span of the laws' editions and how each
was dated, and which searches have an index the chain can use: the loader's own checks (check_faiss_index,
check_latent_index) decide, so an index built from another corpus, model or settings is reported out of date, as
the chain leaves it out; a damaged or absent one counts as not built.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from config import Settings
from corpus.errors import DataDamaged, IndexNotReady
from corpus.store import LangTotals, check_corpus, load_chunks
from index.build import check_latent_index
from index.embeddings import embedding_model_id
from index.faiss_build import check_faiss_index
from index.publish import published
from index.sparse import sparse_enabled

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
    vectors: int | None  # None: no vector index the chain can use
    latent_rows: int | None  # None: no latent-term index the chain can use
    vectors_stale: bool = False  # a vector index is there, built from another corpus, model or settings
    latent_stale: bool = False  # likewise for the latent terms


def summarize(settings: Settings) -> DataSummary:
    """The corpus manifest and the index metadata of a data dir, checked as the chain's loader checks them but
    without loading the index: one built from another corpus, model or settings is out of date (`*_stale`), a
    damaged or absent one counts as not built."""
    corpus = check_corpus(settings.corpus_dir)
    dates = sorted(
        (_ymd(d.edition_date), d.edition_date) for d in corpus.documents if d.edition_date and _ymd(d.edition_date)
    )
    vectors: int | None = None
    vectors_stale = False
    if settings.vector_store == "faiss":
        try:
            vectors = int(check_faiss_index(settings, embedding_model_id(settings), None).get("count", 0))
        except DataDamaged:
            pass
        except IndexNotReady:
            vectors_stale = (settings.index_dir / "faiss" / "meta.json").exists()
    latent: int | None = None
    latent_stale = False
    if sparse_enabled(settings) and (settings.index_dir / "sparse" / "meta.json").exists():
        try:
            latent = len(check_latent_index(settings, load_chunks(settings.corpus_dir))["chunk_ids"])
        except DataDamaged:
            pass
        except IndexNotReady:
            latent_stale = True
        except (KeyError, TypeError):  # a meta.json without its rows
            pass
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
        vectors_stale=vectors_stale,
        latent_stale=latent_stale,
    )


def _ymd(date: str) -> tuple[int, int, int] | None:
    """(year, month, day) of DD.MM.YYYY."""
    try:
        day, month, year = (int(x) for x in date.split("."))
    except ValueError:
        return None
    return (year, month, day)
