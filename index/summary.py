"""What a data dir holds, read from its corpus manifest and index metadata without loading either (the bot's /about).

The corpus's counts per language, when it was collected and published, the span of the laws' editions and how each
was dated, and which searches have an index the chain can use: the loader's own checks (check_faiss_index,
check_latent_index) decide, so an index built from another corpus, model or settings is reported out of date, as
the chain leaves it out; a damaged or absent one counts as not built. The same for the title rerank's heading
vectors (index/titles.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial

from config import Settings
from corpus.errors import DataDamaged, IndexNotReady
from corpus.files import DamagedFile
from corpus.records import Chunk
from corpus.store import LangTotals, check_corpus, load_chunks
from index.build import check_latent_index
from index.embeddings import embedding_model_id
from index.faiss_build import check_faiss_index
from index.publish import published
from index.sparse import sparse_enabled
from index.titles import FOLDER as TITLES_FOLDER
from index.titles import fingerprint as title_fingerprint_of
from index.titles import read_titles, title_texts

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
    titles: int | None = None  # headings with a vector for the title rerank (index/titles.py); None: none usable
    titles_stale: bool = False  # title vectors are there, made from other headings or by another model


def summarize(settings: Settings) -> DataSummary:
    """The corpus manifest and the index metadata of a data dir, checked as the chain's loader checks them but
    without loading the index: one built from another corpus, model or settings is out of date (`*_stale`), a
    damaged or absent one counts as not built."""
    corpus = check_corpus(settings.corpus_dir)
    chunks = cache(partial(load_chunks, settings.corpus_dir))  # read once, if the latent terms or headings ask
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
            latent = len(check_latent_index(settings, chunks())["chunk_ids"])
        except DataDamaged:
            pass
        except IndexNotReady:
            latent_stale = True
        except (KeyError, TypeError):  # a meta.json without its rows
            pass
    titles, titles_stale = _titles(settings, chunks)
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
        titles=titles,
        titles_stale=titles_stale,
    )


def _titles(settings: Settings, chunks: Callable[[], list[Chunk]]) -> tuple[int | None, bool]:
    """(headings with a vector, out of date) as the loader decides (load_titles): made from the corpus's headings
    by the configured model; a damaged folder counts as not built."""
    folder = settings.index_dir / TITLES_FOLDER
    if settings.title_weight <= 0 or not (folder / "meta.json").exists():
        return None, False
    expected = title_fingerprint_of(title_texts(chunks()), embedding_model_id(settings))
    try:
        titles = read_titles(folder, expected)
    except DamagedFile:
        return None, False
    return (len(titles.rows), False) if titles is not None else (None, True)


def _ymd(date: str) -> tuple[int, int, int] | None:
    """(year, month, day) of DD.MM.YYYY."""
    try:
        day, month, year = (int(x) for x in date.split("."))
    except ValueError:
        return None
    return (year, month, day)
