"""The learned second stage: a LightGBM lambdarank model that reorders the first stage's candidate articles.

The model is LightGBM's text format (`ranker.txt`, readable, never pickled) with a JSON sidecar (`ranker.json`:
feature names, feature-schema version, candidate depth, the gold files it was trained on). Both are trained by
`python -m retrieval.train`. A missing or damaged pair is logged once and the pipeline ranks by the fusion.
In the pipeline it is a document compressor over the first stage's candidates (`LearnedRerank`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from langchain_core.callbacks import Callbacks
from langchain_core.documents import Document
from langchain_core.documents.compressor import BaseDocumentCompressor
from pydantic import BaseModel, ConfigDict, ValidationError

from retrieval.features import FEATURE_NAMES, FEATURE_SCHEMA, Pool

if TYPE_CHECKING:
    import lightgbm

    from config import Settings

logger = logging.getLogger(__name__)

REPAIR = "python -m retrieval.train"


class RankerMeta(BaseModel):
    """ranker.json: what the model expects and what it was trained on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    feature_schema: int
    feature_names: list[str]
    pool_k: int  # each first-stage search's depth the candidates were drawn from
    searches: list[str]  # the first-stage searches that were on at training
    trained_on: dict[str, int]  # gold file → questions
    params: dict[str, float | int | str | bool]
    rounds: int
    sha256: str = ""  # of the model text: LightGBM aborts the process on a damaged one, so it is checked first


def packaged_path() -> Path:
    """retrieval/data/ranker.txt (its sidecar beside it)."""
    return Path(str(resources.files("retrieval").joinpath("data/ranker.txt")))


def sidecar(path: Path) -> Path:
    return path.with_suffix(".json")


@dataclass(frozen=True)
class LearnedRanker:
    """A loaded model and its sidecar; `scores` scores a question's candidates (`LearnedRerank` orders them)."""

    booster: lightgbm.Booster
    meta: RankerMeta
    path: Path | None = None

    @property
    def pool_k(self) -> int:
        return self.meta.pool_k

    def save(self, path: Path) -> None:
        """Write the model (LightGBM text) and its sidecar (JSON)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        text = self.booster.model_to_string()
        path.write_text(text, encoding="utf-8")
        meta = self.meta.model_copy(update={"sha256": hashlib.sha256(text.encode()).hexdigest()})
        sidecar(path).write_text(
            json.dumps(meta.model_dump(), ensure_ascii=False, indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )

    @classmethod
    def read(cls, path: Path) -> LearnedRanker:
        """Load and check a model and its sidecar; ValueError says what is wrong."""
        import lightgbm

        if not path.is_file() or not sidecar(path).is_file():
            raise FileNotFoundError(f"no {path.name} with {sidecar(path).name} in {path.parent}")
        try:
            meta = RankerMeta.model_validate_json(sidecar(path).read_text(encoding="utf-8"))
        except ValidationError as err:
            raise ValueError(f"{sidecar(path).name}: {err.errors()[0]['msg']}") from err
        if meta.feature_schema != FEATURE_SCHEMA or tuple(meta.feature_names) != FEATURE_NAMES:
            raise ValueError(
                f"trained on feature schema {meta.feature_schema} ({len(meta.feature_names)} features); "
                f"this code computes schema {FEATURE_SCHEMA} ({len(FEATURE_NAMES)})"
            )
        text = path.read_bytes()
        if hashlib.sha256(text).hexdigest() != meta.sha256:
            raise ValueError(f"{path.name} does not match the digest in {sidecar(path).name} (damaged or replaced)")
        try:
            booster = lightgbm.Booster(model_str=text.decode("utf-8"))
        except (lightgbm.basic.LightGBMError, UnicodeDecodeError) as err:
            raise ValueError(f"{path.name} is not a LightGBM model ({str(err).splitlines()[0]})") from err
        if tuple(booster.feature_name()) != FEATURE_NAMES:
            raise ValueError(f"{path.name} names other features than its sidecar")
        return cls(booster, meta, path)

    @classmethod
    def load(cls, settings: Settings, searches: Sequence[str]) -> LearnedRanker | None:
        """The model at settings.ranker_path (default: the packaged one) when settings.learned_ranker is on;
        None, with one log line, when it is off, missing or damaged (the pipeline then ranks by the fusion)."""
        if not settings.learned_ranker:
            return None
        path = settings.ranker_path or packaged_path()
        try:
            ranker = cls.read(path)
        except (OSError, ValueError) as err:
            logger.warning("Learned ranker not used (%s): ranking by the fusion; `%s` rebuilds it", err, REPAIR)
            return None
        if list(searches) != ranker.meta.searches:
            logger.warning(
                "Learned ranker %s was trained with searches %s, these are %s: features of the others are absent",
                path.name,
                "+".join(ranker.meta.searches),
                "+".join(searches),
            )
        return ranker

    def scores(self, matrix: np.ndarray) -> np.ndarray:
        """The model's score of each feature row (higher is better)."""
        if len(matrix) == 0:
            return np.zeros(0)
        return np.asarray(self.booster.predict(matrix, num_threads=1))  # an array for a dense matrix


class LearnedRerank(BaseDocumentCompressor):
    """The first stage's candidates and the question's remedy-route articles, best first by the model: copies
    with `metadata["score"]` (the model's score squashed to 0-1), `learned_score`, and `remedy` on route
    articles; nothing for no candidates."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    scores: Callable[[np.ndarray], np.ndarray]
    """Feature rows → the model's scores (`LearnedRanker.scores`)."""
    pool: Callable[[str, Sequence[Document]], Pool]
    """(question, candidates) → their features (retrieval.features.candidate_pool of the pipeline)."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        if not documents:
            return []
        pool = self.pool(query, documents)
        return ordered(pool, self.scores(pool.matrix))


def ordered(pool: Pool, scores: np.ndarray) -> list[Document]:
    """The pool's Documents sorted by score (ties keep the fused order), scores in their metadata."""
    order = sorted(range(len(pool.keys)), key=lambda j: -scores[j])
    out = []
    for j in order:
        d = pool.docs[j]
        meta = {**d.metadata, "score": 1 / (1 + math.exp(-float(scores[j]))), "learned_score": float(scores[j])}
        if pool.keys[j] in pool.remedy:
            meta["remedy"] = True
        out.append(Document(page_content=d.page_content, metadata=meta, id=d.id))
    return out
