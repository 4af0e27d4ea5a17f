"""Fixtures for the retrieval tests: a tiny FlashRank cross-encoder built on the spot (more below)."""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path

import numpy as np

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
        (folder / "tokenizer_config.json").write_text(
            json.dumps({"model_max_length": 128, "pad_token": "[PAD]"})
        )
        (folder / "special_tokens_map.json").write_text(
            json.dumps(
                {"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]"}
            )
        )

        class Logits(torch.nn.Module):
            """Only the logits, under the input names FlashRank feeds."""

            def __init__(self, bert: torch.nn.Module) -> None:
                super().__init__()
                self.bert = bert

            def forward(self, input_ids, attention_mask, token_type_ids):  # noqa: ANN001
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
