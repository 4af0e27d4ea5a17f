"""What else the learned stage was tried with, out of fold: each variant beside the shipped features and the fusion.

    python -m bench.learned_variants [--data-dir DIR] [--samples DIR] [--seeds 17 1 2] [--out bench/learned_variants.md]

The candidates of every gold question are collected once through the real pipeline (`retrieval.train.collect`,
5–15 min on the full corpus, by load) and kept in `--samples DIR` as JSON + npz (nothing pickled): a rerun only
trains.
Every variant is scored on the same folds (`retrieval.train.folds_of`: a question and its translation share one),
for several fold seeds, and across files (trained without one jurhelp file, scored on it). A variant's extra
features for a question are computed from its training questions only — for a training question, from the
training questions outside its own fold group — so nothing it is scored on leaks into what it learned.

Variants:
- neighbours: the articles and codes cited by the 20 training questions most like this one (TF-IDF of the BM25
  terms, cosine), weighted by similarity.
- citation prior: how often the training gold cites the article, and its code's share of the training questions.
- graded labels: the gold article 2, an article of a gold code 1 (teaches the code as well as the article).
- blend with fusion: reciprocal-rank blend of the learned order and the fused order (k = 20).
- code classifier: the probability of the candidate's code from a logistic regression over the question's TF-IDF
  (one-vs-rest over the codes the training gold cites; a training question's own from inner folds).
- neighbouring articles: the best fused score among the candidate's code's articles within 3 numbers of it, and
  how many of them are in the fused top 20 (a chapter the first stage keeps finding).
- title similarity: e5 similarity of the question to the article's title (in the question's language where the
  corpus has it), itself and relative to the pool's best; needs the data dir (`--data-dir`), not only `--samples`.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import logging
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from config import PROJECT_DIR, Settings
from retrieval.analyzer import analyze
from retrieval.features import COLUMN, FEATURE_NAMES, FEATURE_SCHEMA, Pool, article_number
from retrieval.gold import GoldQuestion, Key
from retrieval.train import (
    DEFAULT_GOLD,
    GOLD_DIR,
    SEED,
    Sample,
    TrainConfig,
    collect,
    fold_groups,
    folds_of,
    ranking_metrics,
    read_gold,
)

logger = logging.getLogger(__name__)

NEIGHBOURS = 20
BLEND_K = 20


def save_samples(samples: Sequence[Sample], folder: Path) -> None:
    """The samples as JSON (questions, keys, rankings) and npz (feature matrices)."""
    folder.mkdir(parents=True, exist_ok=True)
    matrices: dict[str, Any] = {f"m{i}": s.pool.matrix for i, s in enumerate(samples)}
    np.savez_compressed(folder / "matrices.npz", **matrices)
    rows = [
        {
            "source": s.source,
            "question": s.question.model_dump(),
            "keys": s.pool.keys,
            "named": s.named,
            "numbers": s.numbers,
            "fusion": s.fusion,
        }
        for s in samples
    ]
    meta = {"feature_schema": FEATURE_SCHEMA, "features": FEATURE_NAMES, "samples": rows}
    (folder / "samples.json").write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")


def load_samples(folder: Path) -> list[Sample] | None:
    """Samples saved by `save_samples`, or None when there are none or they have other features."""
    if not (folder / "samples.json").is_file() or not (folder / "matrices.npz").is_file():
        return None
    meta = json.loads((folder / "samples.json").read_text(encoding="utf-8"))
    if meta.get("feature_schema") != FEATURE_SCHEMA or meta.get("features") != list(FEATURE_NAMES):
        logger.info("Samples in %s have other features: collecting again", folder)
        return None
    with np.load(folder / "matrices.npz") as matrices:
        return [
            Sample(
                question=GoldQuestion.model_validate(row["question"]),
                source=row["source"],
                pool=Pool([tuple(k) for k in row["keys"]], [], matrices[f"m{i}"], frozenset()),
                named=tuple(tuple(k) for k in row["named"]),
                numbers=tuple(row["numbers"]),
                fusion=tuple(tuple(k) for k in row["fusion"]),
            )
            for i, row in enumerate(meta["samples"])
        ]


Extra = Callable[[int], np.ndarray]  # a question's extra feature columns


@dataclass(frozen=True)
class Variant:
    """A way to train and rank: extra feature columns learned from the training questions (`extra(samples,
    groups, train)` gives each question's columns), labels, and the final order."""

    name: str
    extra: Callable[[Sequence[Sample], list[str], list[int]], Extra] | None = None
    labels: Callable[[Sample], np.ndarray] = Sample.labels
    blend: bool = False


_terms = functools.cache(analyze)  # each question is analysed once, not once per fold and variant


def _neighbours(samples: Sequence[Sample], groups: list[str], train: list[int]) -> Extra:
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(analyzer=_terms, sublinear_tf=True)
    matrix = vectorizer.fit_transform([samples[m].question.query for m in train])
    train_groups = np.asarray([groups[m] for m in train])

    def columns(i: int) -> np.ndarray:
        sims = (matrix @ vectorizer.transform([samples[i].question.query]).T).toarray().ravel()
        sims[train_groups == groups[i]] = 0.0  # never itself, nor its translation
        top = [j for j in np.argsort(-sims)[:NEIGHBOURS] if sims[j] > 0]
        total = float(sum(sims[j] for j in top)) or 1.0
        articles: collections.Counter[Key] = collections.Counter()
        codes: collections.Counter[str] = collections.Counter()
        for j in top:
            cited = samples[train[j]].question.relevant_keys
            for k in cited:
                articles[k] += sims[j]
            for c in {k[0] for k in cited}:
                codes[c] += sims[j]
        return np.asarray([[articles[k] / total, codes[k[0]] / total] for k in samples[i].pool.keys], np.float32)

    return columns


def _citation_prior(samples: Sequence[Sample], groups: list[str], train: list[int]) -> Extra:
    articles: collections.Counter[Key] = collections.Counter()
    codes: collections.Counter[str] = collections.Counter()
    by_group: dict[str, list[int]] = collections.defaultdict(list)
    for m in train:
        by_group[groups[m]].append(m)
        articles.update(samples[m].question.relevant_keys)
        codes.update({k[0] for k in samples[m].question.relevant_keys})

    def columns(i: int) -> np.ndarray:
        own = by_group.get(groups[i], [])  # a training question's own group is taken out of its counts
        a = articles - collections.Counter(k for m in own for k in samples[m].question.relevant_keys)
        c = codes - collections.Counter(x for m in own for x in {k[0] for k in samples[m].question.relevant_keys})
        n = max(len(train) - len(own), 1)
        return np.asarray([[np.log1p(a[k]), c[k[0]] / n] for k in samples[i].pool.keys], dtype=np.float32)

    return columns


def _graded(sample: Sample) -> np.ndarray:
    gold = sample.question.relevant_keys
    codes = {k[0] for k in gold}
    return np.asarray([2 if k in gold else int(k[0] in codes) for k in sample.pool.keys], dtype=np.int32)


def _code_classifier(samples: Sequence[Sample], groups: list[str], train: list[int]) -> Extra:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MultiLabelBinarizer

    binarizer = MultiLabelBinarizer().fit([{k[0] for k in samples[m].question.relevant_keys} for m in train])

    def fitted(on: Sequence[int]) -> Any:
        texts = [samples[m].question.query for m in on]
        labels = binarizer.transform([{k[0] for k in samples[m].question.relevant_keys} for m in on])
        model = make_pipeline(
            TfidfVectorizer(analyzer=_terms, sublinear_tf=True),
            OneVsRestClassifier(LogisticRegression(C=10.0, max_iter=1000)),
        )
        with warnings.catch_warnings():  # a code no question of these cites: a constant predictor, as it should
            warnings.filterwarnings("ignore", message="Label (not )?.* is present in all training examples")
            return model.fit(texts, labels)

    probability: dict[int, np.ndarray] = {}  # a training question's, from a model that never saw its group
    split = GroupKFold(n_splits=5, shuffle=True, random_state=SEED).split(train, groups=[groups[m] for m in train])
    for inner, held in split:
        model = fitted([train[j] for j in inner])
        for j, p in zip(held, model.predict_proba([samples[train[j]].question.query for j in held]), strict=True):
            probability[train[j]] = p
    full = fitted(train)
    codes = {c: n for n, c in enumerate(binarizer.classes_)}

    def columns(i: int) -> np.ndarray:
        p = probability[i] if i in probability else full.predict_proba([samples[i].question.query])[0]
        return np.asarray([[p[codes[k[0]]] if k[0] in codes else 0.0] for k in samples[i].pool.keys], np.float32)

    return columns


def _neighbouring(samples: Sequence[Sample], groups: list[str], train: list[int]) -> Extra:
    def columns(i: int) -> np.ndarray:
        keys, x = samples[i].pool.keys, samples[i].pool.matrix
        fused = np.nan_to_num(x[:, COLUMN["fused_rel"]])
        top = np.nan_to_num(x[:, COLUMN["fused_rank"]], nan=np.inf) <= 20
        numbers = np.asarray([article_number(k[1]) for k in keys])
        codes = np.asarray([k[0] for k in keys])
        out = np.zeros((len(keys), 2), dtype=np.float32)
        for j in range(len(keys)):
            near = (codes == codes[j]) & (np.abs(numbers - numbers[j]) <= 3)
            near[j] = False
            if near.any():
                out[j] = fused[near].max(), (near & top).sum()
        return out

    return columns


def title_similarity(samples: Sequence[Sample], settings: Settings) -> Extra:
    """Per sample, e5 similarity of the question to each candidate's title, and that minus the pool's best."""
    from corpus.store import load_articles
    from index.embeddings import make_embeddings
    from retrieval.searches import dense_query

    titles: dict[tuple[str, str, str], str] = {
        (a.doc_id, a.number, a.lang): a.title for a in load_articles(settings.corpus_dir) if a.title
    }
    embeddings = make_embeddings(settings)
    wanted: list[list[tuple[str, str, str]]] = []  # per sample, per candidate: the title's key
    for s in samples:
        lang = s.question.lang or "ru"
        wanted.append([(*k, lang) if (*k, lang) in titles else (*k, "ru") for k in s.pool.keys])
    keys = sorted({key for per in wanted for key in per if key in titles})
    vectors = np.asarray(embeddings.embed_documents([titles[k] for k in keys]), dtype=np.float32)
    row = {k: n for n, k in enumerate(keys)}
    out = []
    for s, per in zip(samples, wanted, strict=True):
        query = np.asarray(embeddings.embed_query(dense_query(s.question.query, settings.dense_query_max_chars)))
        sims = np.asarray([vectors[row[k]] @ query if k in row else np.nan for k in per], dtype=np.float32)
        best = np.nanmax(sims) if np.isfinite(sims).any() else np.nan
        out.append(np.column_stack([sims, sims - best]).astype(np.float32))
    return out.__getitem__


VARIANTS = (
    Variant("learned (shipped features)"),
    Variant("+ neighbours' citations", extra=_neighbours),
    Variant("+ citation prior", extra=_citation_prior),
    Variant("graded labels (code 1, article 2)", labels=_graded),
    Variant("blend with fusion (RRF)", blend=True),
    Variant("+ neighbouring articles", extra=_neighbouring),
    Variant("+ code classifier", extra=_code_classifier),
)


def _matrix(sample: Sample, extra: Extra | None, i: int) -> np.ndarray:
    return np.hstack([sample.pool.matrix, extra(i)]) if extra else sample.pool.matrix


def _scores(variant: Variant, booster: Any, x: np.ndarray) -> np.ndarray:
    scores = booster.predict(x)
    if not variant.blend:
        return scores
    learned = np.empty(len(scores))
    learned[np.argsort(-scores)] = np.arange(1, len(scores) + 1)
    fused = np.nan_to_num(x[:, COLUMN["fused_rank"]], nan=len(scores) + 1)
    return 1 / (BLEND_K + learned) + 1 / (BLEND_K + fused)


def rank_held_out(
    variant: Variant, samples: Sequence[Sample], groups: list[str], train: list[int], held: list[int]
) -> dict[int, list[Key]]:
    """The held-out questions ranked by the variant trained on `train` only."""
    import lightgbm

    config = TrainConfig()
    extra = variant.extra(samples, groups, train) if variant.extra else None
    useful = [i for i in train if samples[i].labels().any()]
    x = np.vstack([_matrix(samples[i], extra, i) for i in useful])
    y = np.concatenate([variant.labels(samples[i]) for i in useful])
    data = lightgbm.Dataset(x, y, group=[len(samples[i].pool.keys) for i in useful], free_raw_data=False)
    booster = lightgbm.train(config.params(), data, num_boost_round=config.rounds)
    return {i: samples[i].ranking(_scores(variant, booster, _matrix(samples[i], extra, i))) for i in held}


def table(samples: Sequence[Sample], seeds: Sequence[int], variants: Sequence[Variant] = VARIANTS) -> list[str]:
    """Markdown: per variant, out-of-fold figures (mean over fold seeds) and cross-file figures."""
    groups = fold_groups(samples)
    everyone = list(range(len(samples)))
    by_file = collections.defaultdict(list)
    for i, s in enumerate(samples):
        by_file[s.source].append(i)
    jurhelp = [i for i, s in enumerate(samples) if s.source.startswith("jurhelp")]
    cross = [f for f in ("jurhelp_dev", "jurhelp_train") if f in by_file and len(by_file) > 1]
    fusion = {i: s.fusion for i, s in enumerate(samples)}

    def cells(
        rankings: Sequence[Mapping[int, Sequence[Key]]], cross_runs: Mapping[str, Mapping[int, Sequence[Key]]]
    ) -> str:
        def mean(picked: list[int], field: str) -> float:
            return float(np.mean([getattr(ranking_metrics(samples, r, picked), field) for r in rankings]))

        hit10 = [ranking_metrics(samples, r, jurhelp).hit10 for r in rankings]
        out = [mean(jurhelp, f) for f in ("hit1", "hit5", "hit10", "mrr")]
        text = [f"{v:.3f}" for v in out] + [f"{np.std(hit10):.3f}"]
        for name in ("citizen_dev", "followup_dev"):
            text += [f"{mean(by_file[name], f):.3f}" if by_file.get(name) else "–" for f in ("hit1", "mrr")]
        for name in cross:
            m = ranking_metrics(samples, cross_runs[name], by_file[name])
            text += [f"{m.hit10:.3f}", f"{m.mrr:.3f}"]
        return " | ".join(text)

    head = "| variant | jurhelp hit@1 | hit@5 | hit@10 | MRR | sd hit@10 | citizen hit@1 | MRR | followup hit@1 | MRR |"
    head += "".join(f" {name.removeprefix('jurhelp_')} only: hit@10 | MRR |" for name in cross)
    rule = "|---|" + "---:|" * (9 + 2 * len(cross))
    lines = [head, rule, f"| fusion (no learned stage) | {cells([fusion], dict.fromkeys(cross, fusion))} |"]
    for variant in variants:
        start = time.perf_counter()
        runs = []
        for seed in seeds:
            ranked: dict[int, list[Key]] = {}
            for held in folds_of(samples, 5, seed):
                ranked |= rank_held_out(variant, samples, groups, sorted(set(everyone) - set(held)), held)
            runs.append(ranked)
        cross_runs = {
            name: rank_held_out(
                variant, samples, groups, [i for i in everyone if i not in by_file[name]], by_file[name]
            )
            for name in cross
        }
        lines.append(f"| {variant.name} | {cells(runs, cross_runs)} |")
        logger.info("%s in %.0f s", variant.name, time.perf_counter() - start)
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.learned_variants", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="corpus and index (default: DATA_DIR or ./data)")
    parser.add_argument("--gold", type=Path, action="append", help="gold JSONL (repeatable); default ../shared/eval")
    parser.add_argument("--samples", type=Path, help="keep the collected candidates here and reuse them")
    parser.add_argument("--seeds", type=int, nargs="+", default=[SEED, 1, 2], help="fold seeds to average over")
    parser.add_argument("--out", type=Path, default=PROJECT_DIR / "bench" / "learned_variants.md")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    samples = load_samples(args.samples) if args.samples else None
    if samples is None:
        from retrieval.pipeline import Retrieval, Stages

        files = args.gold or [GOLD_DIR / f"{n}.jsonl" for n in DEFAULT_GOLD]
        retrieval = Retrieval.load(settings, stages=Stages(learned=False, rerank=False))
        samples = collect(retrieval, {p.stem: read_gold(p) for p in files}, TrainConfig.pool_k)
        if args.samples:
            save_samples(samples, args.samples)
    variants = list(VARIANTS)
    if settings.corpus_dir.is_dir():
        titles = title_similarity(samples, settings)
        variants.append(Variant("+ title similarity (e5)", extra=lambda samples, groups, train: titles))
    else:
        logger.info("No corpus in %s: the title-similarity variant is left out", settings.corpus_dir)
    counts = collections.Counter(s.source for s in samples)
    lines = [
        "# The learned stage: variants tried, out of fold",
        "",
        f"`python -m bench.learned_variants` — {len(samples)} gold questions "
        f"({', '.join(f'{n} {c}' for n, c in counts.items())}), candidates {TrainConfig.pool_k} deep per search, "
        f"5 folds grouped as in `retrieval.train`, figures the mean over fold seeds {', '.join(map(str, args.seeds))}"
        " (sd: of jurhelp hit@10 across seeds). The cross-file columns train on every other question and score one"
        " jurhelp file. jurhelp = jurhelp_dev + jurhelp_train. The shipped default is the fusion.",
        "",
        *table(samples, args.seeds, variants),
        "",
    ]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))  # noqa: T201 (CLI output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
