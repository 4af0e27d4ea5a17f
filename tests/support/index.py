"""Index test helpers: a hand-checkable fake Embeddings, a tiny sentence-transformers model, chunks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
from langchain_core.embeddings import Embeddings

from corpus.legal import heading
from corpus.records import Chunk, Lang


class KeywordEmbeddings(Embeddings):
    """One dimension per keyword: a text's vector counts keyword occurrences, L2-normalized.

    The vector of «кража кража грабеж» is (2, 1, 0, …)/√5, so every score in a test can be worked out by hand.
    `calls` records what was embedded, to assert on cache hits and misses.
    """

    def __init__(self, keywords: list[str], *, fail_after: int | None = None) -> None:
        self.keywords = [k.lower() for k in keywords]
        self.model_id = "keywords:" + ",".join(self.keywords)
        self.dim = len(self.keywords) + 1
        self.calls: list[list[str]] = []
        self.fail_after = fail_after  # raise after this many passages were embedded: an interrupted build

    def vector(self, text: str) -> list[float]:
        words = re.findall(r"\w+", text.lower())
        v = np.array([words.count(k) for k in self.keywords] + [0.01], dtype=np.float64)
        return (v / np.linalg.norm(v)).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        done = sum(len(c) for c in self.calls)
        if self.fail_after is not None and done + len(texts) > self.fail_after:
            raise RuntimeError("injected failure mid-build")
        self.calls.append(list(texts))
        return [self.vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.vector(text)

    @property
    def embedded(self) -> list[str]:
        return [t for c in self.calls for t in c]


def make_chunk(doc_id: str, lang: Lang, article: str, title: str, body: str, part: int = 0, **kw: object) -> Chunk:
    """A chunk as the chunker makes it: header line «УК РК. Статья N. Title», then the body."""
    code = kw.pop("code", "УК РК" if lang == "ru" else "ҚР ҚК")
    header = heading(str(code), article, title, lang)
    return Chunk(
        chunk_id=f"{doc_id}:{lang}:{article}:{part}",
        doc_id=doc_id,
        lang=lang,
        article=article,
        title=title,
        code=str(code),
        kind=str(kw.pop("kind", "code")),
        text=f"{header}\n{body}",
        url=f"https://adilet.zan.kz/{'rus' if lang == 'ru' else 'kaz'}/docs/{doc_id}",
        path=tuple(kw.pop("path", ())),  # type: ignore[arg-type]
        hash="",
        **kw,  # type: ignore[arg-type]
    )


def load_chunks_jsonl(path: Path) -> list[Chunk]:
    """Chunks from DATA_DIR/corpus/chunks.jsonl (one JSON object per line)."""
    with path.open(encoding="utf-8") as f:
        return [Chunk.from_json(json.loads(line)) for line in f if line.strip()]


def write_chunks_jsonl(path: Path, chunks: list[Chunk]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for c in chunks:
            f.write(json.dumps(c.to_json(), ensure_ascii=False) + "\n")


def save_tiny_sentence_transformer(folder: Path) -> Path:
    """A random 2-layer BERT with a tiny word-piece vocabulary, saved as a sentence-transformers folder."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    torch.manual_seed(0)
    raw = folder / "raw"
    raw.mkdir(parents=True)
    letters = "abcdefghijklmnopqrstuvwxyzабвгдеёжзийклмнопрстуфхцчшщъыьэюяәғқңөұүһі0123456789:.,"
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *letters, *(f"##{c}" for c in letters)]
    (raw / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizerFast(vocab=str(raw / "vocab.txt"), do_lower_case=True).save_pretrained(raw)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        initializer_range=0.5,
    )  # large random weights: different inputs give distinct vectors
    BertModel(config).save_pretrained(raw)
    transformer = Transformer(str(raw), max_seq_length=128)
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
    out = folder / "tiny-e5"
    SentenceTransformer(modules=[transformer, pooling], device="cpu").save(str(out))
    return out


def criminal_code_chunks(shared_dir: Path, numbers: list[str]) -> list[Chunk]:
    """Chunks of the given articles of the Criminal Code (ru), made by the real parser and chunker."""
    from corpus.chunking import chunk_article
    from corpus.legal.registry import CRIMINAL_CODE_ID, source
    from ingest_adilet.text_parser import parse_text

    text = (shared_dir / "corpus" / "rus" / f"{CRIMINAL_CODE_ID}.txt").read_text(encoding="utf-8")
    wanted = set(numbers)
    articles = [a for a in parse_text(text, CRIMINAL_CODE_ID, "ru") if a.number in wanted]
    return [c for a in articles for c in chunk_article(a, source(CRIMINAL_CODE_ID))]
