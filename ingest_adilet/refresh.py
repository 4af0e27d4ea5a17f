"""Refresh: fetch the registry documents again (or read a newer local copy), re-parse what changed, re-embed only
the changed chunks, and publish the new corpus and index together.

Everything is built in a staging folder inside the data dir (`DATA_DIR/.refresh-*`): a copy of the corpus and
index, with the real `cache/` linked in so that the embedding cache (keyed by content hash) gives every unchanged
chunk its vector. Only when the staged corpus and index are both complete are they moved in (two renames of
folders on one file system) and the build published (`index/stage.py`: `swap_in`, which a writer killed at any
point of it is recovered from against the publication); a running reader reloads on that
marker, so it never takes the new corpus with the old index. A refresh that fails anywhere before the moves —
a document adilet will not serve, a parse error, the index build raising — leaves the data dir's corpus and index
as they were, byte for byte, and publishes nothing.

With VECTOR_STORE=pinecone the remote namespace is updated in place during the build (it cannot be staged); the
local corpus is still staged and swapped.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from rich.table import Table

from config import Settings
from corpus.errors import DataDamaged, UserError
from corpus.records import Article, Lang, content_hash
from corpus.store import ARTICLES_FILE, Manifest, load_articles, read_manifest
from ingest_adilet.pipeline import IngestReport, ingest

logger = logging.getLogger(__name__)

STAGE_PREFIX = ".refresh-"
_MOVED = ("corpus", "index")  # the folders a refresh replaces; cache/ is shared, published.json is written last
_PREVIOUS = "previous"  # in a stage: the replaced folders until the new build is published


class RefreshFailed(UserError):
    """A refresh stopped before publishing: the message says why, and that the previous build is still in place."""


@dataclass(frozen=True)
class DocumentChanges:
    """What changed in one re-parsed document: article numbers added, changed (text or title), repealed (now
    marked repealed) and removed (no longer in the text at all)."""

    doc_id: str
    lang: str
    title: str
    edition_date: str | None
    previous_edition_date: str | None
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    repealed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    before: int = 0  # articles the document had before this refresh

    @property
    def any(self) -> bool:
        return bool(self.added or self.changed or self.repealed or self.removed)


@dataclass(frozen=True)
class RefreshReport:
    """What a refresh did; `generation` is the published build's id, None when nothing changed."""

    data_dir: Path
    documents: tuple[DocumentChanges, ...]  # the re-parsed documents whose articles changed
    reparsed: int  # documents whose input changed (parsed again)
    unchanged: int  # documents whose input was the same (not parsed)
    skipped: int  # not in --from-dir
    chunks: int  # chunks in the new corpus
    vectors: int  # chunks with a vector
    embedded: int  # vectors computed by this refresh
    reused: int  # vectors taken from the embedding cache
    latent_encoded: int  # chunks given latent terms by this refresh
    generation: str | None
    seconds: float

    @property
    def changed(self) -> bool:
        return self.generation is not None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["data_dir"] = str(self.data_dir)
        d["changed"] = self.changed
        return d


def refresh(
    settings: Settings,
    *,
    source_dir: Path | None = None,
    doc_ids: Sequence[str] | None = None,
    langs: Sequence[Lang] | None = None,
    embeddings: Embeddings | None = None,
    progress: bool = True,
    allow_removal: bool = False,
) -> RefreshReport:
    """Refresh the corpus and index in settings.data_dir (see the module docstring); RefreshFailed when it stops,
    with the previous build untouched. A document whose new text would remove most of its articles is refused
    unless `allow_removal` (see `_removals`)."""
    from index.build import build_index
    from index.publish import DataDirBusy, writing
    from index.stage import InterruptedStage, swap_in
    from retrieval.bm25_index import build_bm25_index

    started = time.perf_counter()
    data_dir = Path(settings.data_dir)
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(writing(data_dir, "refresh"))
        except (DataDirBusy, InterruptedStage) as err:
            raise RefreshFailed(str(err)) from None
        stage = Path(tempfile.mkdtemp(prefix=STAGE_PREFIX, dir=data_dir))
        try:
            staged = _stage(settings, stage)
            try:
                ingested = ingest(
                    staged, source_dir=source_dir, doc_ids=doc_ids, langs=langs, progress=progress, refetch=True
                )
            except UserError as err:
                raise RefreshFailed(f"{err}; {_KEPT}") from err
            if not ingested.ok:
                failed = "; ".join(f"{r.doc_id} ({r.lang}): {r.reason}" for r in ingested.failures)
                raise RefreshFailed(f"{len(ingested.failures)} document(s) failed: {failed}; {_KEPT}")
            try:
                built = build_index(staged, embeddings=embeddings, progress=progress)
                if not built.unchanged or any(r.outcome == "ingested" for r in ingested.results):
                    build_bm25_index(staged)  # BM25's analysis of what will be published, kept beside its index
            except UserError as err:
                raise RefreshFailed(f"the index build failed: {err}; {_KEPT}") from err
            except Exception as err:
                logger.debug("index build failed", exc_info=True)
                raise RefreshFailed(f"the index build failed ({type(err).__name__}: {err}); {_KEPT}") from err
            reparsed = [r for r in ingested.results if r.outcome == "ingested"]
            changes = _changes(settings.corpus_dir, staged.corpus_dir, {(r.doc_id, r.lang) for r in reparsed})
            if not allow_removal and (cut := _removals(changes)):
                raise RefreshFailed(
                    f"{cut}: a cut page or a parse gone wrong looks like this; check the document on adilet and "
                    f"run refresh again with --allow-removal if the law really lost these articles; {_KEPT}"
                )
            generation = None
            if reparsed or not built.unchanged:
                try:
                    generation = swap_in(settings, stage, stage, stage / _PREVIOUS, _MOVED, "refresh")
                except OSError as err:
                    raise RefreshFailed(f"the new build could not be moved into {data_dir} ({err}); {_KEPT}") from err
                logger.info("refresh published generation %s", generation)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
    return RefreshReport(
        data_dir=data_dir,
        documents=tuple(c for c in changes if c.any),
        reparsed=len(reparsed),
        unchanged=_count(ingested, "unchanged"),
        skipped=_count(ingested, "skipped"),
        chunks=built.chunks,
        vectors=built.vectors,
        embedded=built.embedded,
        reused=built.from_cache,
        latent_encoded=built.latent_encoded,
        generation=generation,
        seconds=time.perf_counter() - started,
    )


_KEPT = "nothing was published: the previous corpus and index are in place, unchanged"


REMOVAL_LIMIT = 0.5  # share of a document's articles a refresh may remove without --allow-removal


def _removals(changes: Sequence[DocumentChanges]) -> str:
    """The documents whose new text removes more than REMOVAL_LIMIT of their articles, described for the error
    message ("" when none). Laws are amended by repealing articles (they stay, marked repealed) and adding
    new ones; an article vanishing from the text is rare, so most of a document vanishing at once means a truncated
    page or a parser that lost its way, never a real amendment."""
    cut = []
    for c in changes:
        old = c.before
        if c.removed and len(c.removed) > REMOVAL_LIMIT * old:
            cut.append(
                f"{c.doc_id} ({c.lang}) would lose {len(c.removed)} of its {old} articles "
                f"({old - len(c.removed)} left; removed: {_numbers(list(c.removed), 10)})"
            )
    return "; ".join(cut)


def _count(report: IngestReport, outcome: str) -> int:
    return sum(r.outcome == outcome for r in report.results)


def _stage(settings: Settings, stage: Path) -> Settings:
    """Settings rooted in `stage`, which holds a copy of the corpus and index and a link to the real cache."""
    data_dir = Path(settings.data_dir)
    for name in _MOVED:
        if (data_dir / name).is_dir():
            shutil.copytree(data_dir / name, stage / name, symlinks=True)  # copy2: sizes and mtimes kept
    cache = Path(settings.cache_dir).resolve()
    cache.mkdir(parents=True, exist_ok=True)
    (stage / "cache").symlink_to(cache, target_is_directory=True)
    return settings.model_copy(update={"data_dir": stage})


# --- what changed --------------------------------------------------------------------------------------------


def _articles(corpus_dir: Path, keys: set[tuple[str, str]]) -> dict[tuple[str, str], list[Article]]:
    """The articles of the given (doc_id, lang) in a corpus; none when it has no corpus or a damaged one."""
    if not (Path(corpus_dir) / ARTICLES_FILE).exists():
        return {}
    try:
        articles = load_articles(corpus_dir)
    except DataDamaged as err:
        logger.warning("%s: every article of a re-parsed document counts as added", err)
        return {}
    out: dict[tuple[str, str], list[Article]] = {}
    for a in articles:
        if (a.doc_id, a.lang) in keys:
            out.setdefault((a.doc_id, a.lang), []).append(a)
    return out


def _manifest(corpus_dir: Path) -> Manifest:
    try:
        return read_manifest(corpus_dir)
    except DataDamaged:
        return Manifest()


def _by_number(articles: Sequence[Article]) -> dict[str, Article]:
    """Articles by number; a number that occurs twice (a parser quirk) gets «#2», «#3» after the first."""
    out: dict[str, Article] = {}
    for a in articles:
        key, n = a.number, 1
        while key in out:
            n += 1
            key = f"{a.number}#{n}"
        out[key] = a
    return out


def _text_hash(a: Article) -> str:
    return content_hash(a.title, a.text)


def _changes(old_dir: Path, new_dir: Path, keys: set[tuple[str, str]]) -> list[DocumentChanges]:
    """Per re-parsed document, its articles added / changed / repealed / removed, compared by number."""
    if not keys:
        return []
    old, new = _articles(old_dir, keys), _articles(new_dir, keys)
    old_manifest, new_manifest = _manifest(old_dir), _manifest(new_dir)
    out = []
    for doc_id, lang in sorted(keys):
        before, after = _by_number(old.get((doc_id, lang), [])), _by_number(new.get((doc_id, lang), []))
        added, changed, repealed = [], [], []
        for number, a in after.items():
            b = before.get(number)
            if b is None:
                added.append(number)
            elif a.status == "repealed" and b.status != "repealed":
                repealed.append(number)
            elif a.status != b.status or _text_hash(a) != _text_hash(b):
                changed.append(number)  # a changed text, or an article put back in force
        removed = [n for n in before if n not in after]
        entry, previous = new_manifest.entry(doc_id, lang), old_manifest.entry(doc_id, lang)
        out.append(
            DocumentChanges(
                doc_id=doc_id,
                lang=lang,
                title=entry.title if entry else doc_id,
                edition_date=entry.edition_date if entry else None,
                previous_edition_date=previous.edition_date if previous else None,
                added=tuple(added),
                changed=tuple(changed),
                repealed=tuple(repealed),
                removed=tuple(removed),
                before=len(before),
            )
        )
    return out


# --- printing ------------------------------------------------------------------------------------------------


def _numbers(numbers: Sequence[str], most: int = 30) -> str:
    shown = ", ".join(numbers[:most])
    return shown + (f" … (+{len(numbers) - most})" if len(numbers) > most else "")


def report_tables(report: RefreshReport) -> list[Table | str]:
    """What the CLI prints: the changed articles per document, then the index counts and what was published."""
    out: list[Table | str] = []
    if report.documents:
        table = Table(title=f"Changed articles ({report.reparsed} document(s) re-parsed, {report.unchanged} unchanged)")
        for col in ("document", "lang", "edition", "added", "changed", "repealed", "removed"):
            table.add_column(col, overflow="fold")
        for d in report.documents:
            edition = d.edition_date or "—"
            if d.previous_edition_date and d.previous_edition_date != d.edition_date:
                edition = f"{d.previous_edition_date} → {edition}"
            title = d.title if len(d.title) <= 40 else d.title[:39] + "…"
            table.add_row(
                f"{d.doc_id} {title}",
                d.lang,
                edition,
                *(_numbers(n) for n in (d.added, d.changed, d.repealed, d.removed)),
            )
        out.append(table)
    else:
        out.append(
            f"No article changed ({report.reparsed} document(s) re-parsed, {report.unchanged} unchanged, "
            f"{report.skipped} skipped)."
        )
    out.append(
        f"Index: {report.vectors} vectors for {report.chunks} chunks: {report.embedded} embedded now, "
        f"{report.reused} reused from the cache; latent terms encoded now: {report.latent_encoded}."
    )
    out.append(
        f"Published build {report.generation} in {report.data_dir} ({report.seconds:.1f} s)."
        if report.changed
        else f"Nothing changed: the build in {report.data_dir} stays as it is ({report.seconds:.1f} s)."
    )
    return out
