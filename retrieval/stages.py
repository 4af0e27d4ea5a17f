"""The recipe of the retrieval pipeline: which steps it has (`Stages`). What to load (retrieval/loading.py) and how to
compose it (retrieval/pipeline.py) both follow it; the product has every step, an ablation row fewer."""

from __future__ import annotations

import logging
from dataclasses import dataclass

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stages:
    """The recipe: which steps the composition has. All of them in the product; the ablation bench composes
    fewer."""

    bm25: bool = True
    dense: bool = True
    sparse: bool = True  # latent terms (index/sparse.py), when built and settings.sparse_weight > 0
    explicit: bool = True
    augment: bool = True
    law_aware: bool = True
    routing: bool = True  # the laws of sanctions and law routing (retrieval/routing.py), as settings say
    rerank: bool = True
    titles: bool = True  # the title rerank (retrieval/ranking.py TitleRerank), when its vectors are built
    remedies: bool = True
    learned: bool = True  # the learned second stage (retrieval/learned.py), when its model loads
