"""A Kazakh–Russian lexicon of word stems, learned from the corpus's own parallel texts: the cross-language search.

Most codes exist here only in Russian, so the words of a Kazakh question never meet their text; the laws that
exist in both languages (their articles aligned by document and number) show which Russian stems a Kazakh stem
stands for. The build pairs each aligned article's parts — titles, headings, and its paragraphs one by one when
both texts have as many, else the whole article — adds the registry's names of each document in both languages,
and keeps the stem pairs that occur together far more often than apart (Dice coefficient over those units, a
minimum count, each stem's best few). Deterministic (sorted, no randomness), versioned, written as
`DATA_DIR/index/lexicon/lexicon.json` beside a meta.json recording its size and sha256 and the corpus it was
learned from; rebuilt by `python -m ingest_adilet index`, checked when loaded, shipped in data packs.
retrieval/crosslang.py turns a question's stems into the other language's with it.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError
from scipy import sparse

from config import Settings
from corpus.files import DamagedFile, FileDigest, atomic_write, check_file, read_json, read_meta, recorded_digest
from corpus.lang import normalize, stem_kk, stem_ru, stemmer_id
from corpus.legal.registry import ADILET_SOURCES
from corpus.records import Chunk, Lang, content_hash

logger = logging.getLogger(__name__)

LEXICON_VERSION = 1  # the learning recipe: a new one makes every built lexicon out of date
FOLDER = "lexicon"
LEXICON_FILE = "lexicon.json"
MAX_TERMS = 200_000  # stems a lexicon may hold per direction (the full corpus: ~10k)

# The recipe (chosen by reading the pairs it keeps, not on gold questions).
MIN_PAIRS = 3  # units both stems occur in
MIN_DICE = 0.3  # 2·both / (units with the first + units with the second)
KEEP = 2  # translations per stem at most, best first
MUTUAL = 3  # a pair is kept only when each stem is among the other's best this many
RELATIVE = 0.6  # a second translation scores at least this share of the first
MAX_SHARE = 0.1  # stems in more than this share of the units (articles' common words) are not learned
_MIN_LEN = 3
# The Kazakh privative («without»): a stem with it the lexicon did not learn («келісімімсіз», without my consent)
# is translated through the word it adds to («келісім»: «соглас»); Russian's «без» is a stopword either way.
KK_PRIVATIVE = ("сыз", "сіз")

_WORD_RE = re.compile(r"[^\W\d_]+")
_NUMBERED_RE = re.compile(r"^\s*(\d+(?:-\d+)*)[.)]")


@dataclass(frozen=True)
class Lexicon:
    """Stem → stems of the other language, best first, both ways; empty when the corpus has no parallel text."""

    kk_ru: dict[str, tuple[str, ...]]
    ru_kk: dict[str, tuple[str, ...]]
    glossary: Callable[[Sequence[str], Sequence[str]], list[str]] | None = None
    """A Kazakh text's stems and words → Russian stems of a hand-made glossary (retrieval/crosslang.py), put
    before the learned."""

    def translate(self, stems: Sequence[str], source: Lang, words: Sequence[str] = ()) -> list[str]:
        """The other language's stems for these `source`-language stems (a text's, in order), each once, in the
        order met (a Kazakh text's glossary terms first, read with its `words`, `tokenize`'s, one per stem; the
        stems stand for them when not given); a pair of adjacent Kazakh stems the lexicon knows is translated as
        one («жұмыс беруш»); a Kazakh stem with the privative it lacks, as the stem before it (`KK_PRIVATIVE`)."""
        table = self.kk_ru if source == "kk" else self.ru_kk
        glossary = self.glossary(stems, words or stems) if self.glossary and source == "kk" else ()
        out: dict[str, None] = dict.fromkeys(glossary)
        i = 0
        while i < len(stems):
            pair = f"{stems[i]} {stems[i + 1]}" if i + 1 < len(stems) else ""
            found = table.get(pair) if pair else None
            for t in found or table.get(stems[i]) or self._without_privative(stems[i], source):
                out.setdefault(t, None)
            i += 2 if found else 1
        return list(out)

    def _without_privative(self, stem: str, source: Lang) -> tuple[str, ...]:
        """A Kazakh stem the lexicon lacks that ends in the privative: the translation of the word before it, as
        it stands or stemmed as far as the stemmer goes («келісімімсіз», without my consent: «келісімім»,
        «келісім», «келіс»)."""
        if source != "kk" or not stem.endswith(KK_PRIVATIVE):
            return ()
        before = stem[:-3]
        while len(before) >= _MIN_LEN:
            if found := self.kk_ru.get(before):
                return found
            shorter = stem_kk(before)
            if shorter == before:
                break
            before = shorter
        return ()

    def __len__(self) -> int:
        return len(self.kk_ru) + len(self.ru_kk)


class LexiconFile(BaseModel):
    """lexicon.json as the build writes it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int
    kk_ru: dict[str, list[str]]
    ru_kk: dict[str, list[str]]


# --- learning ------------------------------------------------------------------------------------------------


def _stems(text: str, lang: Lang) -> set[str]:
    """The stems of a text; a Kazakh one's adjacent pairs too («жұмыс беруш»: работодатель, one Russian word)."""
    stem = stem_kk if lang == "kk" else stem_ru
    stems = [stem(w) for w in _WORD_RE.findall(normalize(text)) if len(w) >= _MIN_LEN]
    if lang == "kk":
        stems += [f"{a} {b}" for a, b in itertools.pairwise(stems)]
    return set(stems)


def _article_texts(chunks: Iterable[Chunk]) -> dict[tuple[str, str, Lang], tuple[Chunk, str]]:
    """(doc_id, article, lang) → (its first chunk, its text without the chunks' header lines), parts in order."""
    parts: dict[tuple[str, str, Lang], list[tuple[int, Chunk]]] = defaultdict(list)
    for c in chunks:
        index = c.chunk_id.rsplit(":", 1)[-1]
        parts[(c.doc_id, c.article, c.lang)].append((int(index) if index.isdigit() else 0, c))
    out = {}
    for key, pieces in parts.items():
        pieces.sort(key=lambda p: p[0])
        out[key] = pieces[0][1], "\n".join(c.text.partition("\n")[2] for _, c in pieces)
    return out


def _paragraphs(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip()]


def parallel_units(chunks: Iterable[Chunk]) -> list[tuple[str, str]]:
    """(Kazakh text, Russian text) pairs that say the same: the registry's names of each document, and for each
    article in both languages its title, its headings and its paragraphs (one by one when both texts have as many
    and number them alike, else the whole text)."""
    units: list[tuple[str, str]] = []
    for s in ADILET_SOURCES:
        units += [(s.title_kk, s.title_ru), (s.short_kk, s.short_ru)]
    texts = _article_texts(chunks)
    for doc_id, article, lang in sorted(texts):
        if lang != "kk" or (doc_id, article, "ru") not in texts:
            continue
        kk_chunk, kk_text = texts[(doc_id, article, "kk")]
        ru_chunk, ru_text = texts[(doc_id, article, "ru")]
        if kk_chunk.title and ru_chunk.title:
            units.append((kk_chunk.title, ru_chunk.title))
        if len(kk_chunk.path) == len(ru_chunk.path):
            units += zip(kk_chunk.path, ru_chunk.path, strict=True)
        kk_lines, ru_lines = _paragraphs(kk_text), _paragraphs(ru_text)
        numbers = [_NUMBERED_RE.match(x) for x in kk_lines], [_NUMBERED_RE.match(x) for x in ru_lines]
        aligned = len(kk_lines) == len(ru_lines) and all(
            (a and a.group(1)) == (b and b.group(1)) for a, b in zip(*numbers, strict=True)
        )
        units += zip(kk_lines, ru_lines, strict=True) if aligned else [(kk_text, ru_text)]
    return list(dict.fromkeys(units))  # a heading repeated by every article of a chapter counts once


def learn_lexicon(chunks: Iterable[Chunk]) -> Lexicon:
    """The lexicon of the corpus's parallel texts (see the module docstring); the same chunks give the same one."""
    units = [(_stems(kk, "kk"), _stems(ru, "ru")) for kk, ru in parallel_units(chunks)]
    units = [(k, r) for k, r in units if k and r]
    limit = max(MIN_PAIRS, MAX_SHARE * len(units))
    # Only stems frequent enough to make a pair and rare enough to mean something get a column.
    kk_df, ru_df = Counter(s for k, _ in units for s in k), Counter(s for _, r in units for s in r)
    kk_words = sorted(s for s, n in kk_df.items() if MIN_PAIRS <= n <= limit)
    ru_words = sorted(s for s, n in ru_df.items() if MIN_PAIRS <= n <= limit)
    if not kk_words or not ru_words:
        return Lexicon({}, {})
    kk_vocab = {s: i for i, s in enumerate(kk_words)}
    ru_vocab = {s: i for i, s in enumerate(ru_words)}
    kk_m = _incidence([sorted(kk_vocab[s] for s in k if s in kk_vocab) for k, _ in units], len(kk_vocab))
    ru_m = _incidence([sorted(ru_vocab[s] for s in r if s in ru_vocab) for _, r in units], len(ru_vocab))
    both = (kk_m.T @ ru_m).tocoo()  # units each pair occurs in
    f_kk = np.asarray(kk_m.sum(axis=0)).ravel()
    f_ru = np.asarray(ru_m.sum(axis=0)).ravel()
    dice = 2 * both.data / (f_kk[both.row] + f_ru[both.col])
    keep = (both.data >= MIN_PAIRS) & (dice >= MIN_DICE)
    rows, cols, scores = both.row[keep], both.col[keep], dice[keep]
    # Only pairs each side ranks among its best MUTUAL: a common stem that co-occurs with everything drops out.
    # A Russian stem ranks Kazakh single stems and Kazakh pairs apart (every pair holds a single stem too).
    is_pair = np.fromiter((" " in w for w in kk_words), bool, len(kk_words))[rows]
    mutual = (_rank_within(rows, scores) < MUTUAL) & (_rank_within(cols * 2 + is_pair, scores) < MUTUAL)
    rows, cols, scores = rows[mutual], cols[mutual], scores[mutual]
    kk_ru, best = _best(rows, cols, scores, kk_words, ru_words)
    # A pair stays only where it translates better than either of its stems alone («жұмыс беруш»: работодател).
    for pair in [w for w in kk_ru if " " in w]:
        if best[pair] <= max(best.get(part, 0.0) for part in pair.split(" ")):
            del kk_ru[pair]
    single = ~is_pair[mutual]
    ru_kk, _ = _best(cols[single], rows[single], scores[single], ru_words, kk_words)
    return Lexicon(kk_ru, ru_kk)


def _rank_within(groups: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Each entry's rank (0: best score) among the entries of its group; ties by position (deterministic)."""
    order = np.lexsort((np.arange(len(scores)), -scores, groups))
    ranks = np.empty(len(scores), dtype=np.int64)
    sorted_groups = groups[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_groups)) + 1]
    first = np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    ranks[order] = np.arange(len(order)) - first
    return ranks


def _incidence(rows: Sequence[Sequence[int]], width: int) -> sparse.csr_matrix:
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(r) for r in rows])
    indices = np.fromiter((i for r in rows for i in r), dtype=np.int32, count=int(indptr[-1]))
    data = np.ones(len(indices), dtype=np.float32)
    return sparse.csr_matrix((data, indices, indptr), shape=(len(rows), width))


def _best(
    src: np.ndarray, dst: np.ndarray, scores: np.ndarray, src_words: list[str], dst_words: list[str]
) -> tuple[dict[str, tuple[str, ...]], dict[str, float]]:
    """Each source stem's best KEEP targets (ties by the target's spelling), the second within RELATIVE; and
    the best one's score."""
    ranked: dict[int, list[tuple[float, str]]] = defaultdict(list)
    for s, d, score in zip(src.tolist(), dst.tolist(), scores.tolist(), strict=True):
        ranked[s].append((-round(score, 6), dst_words[d]))
    out, top = {}, {}
    for s in sorted(ranked, key=lambda i: src_words[i]):
        best = sorted(ranked[s])[:KEEP]
        out[src_words[s]] = tuple(w for score, w in best if score <= RELATIVE * best[0][0])
        top[src_words[s]] = -best[0][0]
    return out, top


# --- the file ------------------------------------------------------------------------------------------------


def fingerprint(chunks: Iterable[Chunk]) -> str:
    """What the lexicon is learned from: the recipe's version, the stemmer and the texts of the articles in both
    languages."""
    chunks = list(chunks)
    langs: dict[tuple[str, str], set[str]] = defaultdict(set)
    for c in chunks:
        langs[(c.doc_id, c.article)].add(c.lang)
    parallel = sorted(
        (c.chunk_id, c.hash or content_hash(c.text, c.title, *c.path))
        for c in chunks
        if len(langs[(c.doc_id, c.article)]) == 2
    )
    names = [f"{s.title_kk}|{s.title_ru}|{s.short_kk}|{s.short_ru}" for s in ADILET_SOURCES]
    return content_hash(f"lexicon-v{LEXICON_VERSION}", stemmer_id(), *names, *(f"{i}={h}" for i, h in parallel))


@dataclass(frozen=True)
class LexiconReport:
    pairs: int  # Kazakh stems with a translation
    seconds: float
    unchanged: bool = False


def build_lexicon(settings: Settings, chunks: Sequence[Chunk]) -> LexiconReport:
    """Learn the lexicon and write it (meta.json last, recording the file's size and sha256); nothing when the
    one on disk was learned from these chunks and is whole."""
    start = time.perf_counter()
    folder = settings.index_dir / FOLDER
    print_ = fingerprint(chunks)
    if _unchanged(folder, print_):
        return LexiconReport(0, time.perf_counter() - start, unchanged=True)
    lexicon = learn_lexicon(chunks)
    body = LexiconFile(
        version=LEXICON_VERSION,
        kk_ru={k: list(v) for k, v in lexicon.kk_ru.items()},
        ru_kk={k: list(v) for k, v in lexicon.ru_kk.items()},
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "meta.json").unlink(missing_ok=True)
    digest = atomic_write(folder / LEXICON_FILE, json.dumps(body.model_dump(), ensure_ascii=False, sort_keys=True))
    meta = {"version": LEXICON_VERSION, "fingerprint": print_, "files": {LEXICON_FILE: digest.model_dump()}}
    atomic_write(folder / "meta.json", json.dumps(meta, sort_keys=True))
    seconds = time.perf_counter() - start
    logger.info(
        "Lexicon: %d Kazakh and %d Russian stems in %s, %.1f s", len(body.kk_ru), len(body.ru_kk), folder, seconds
    )
    return LexiconReport(len(body.kk_ru), seconds)


def read_lexicon(folder: Path, expected: str | None = None) -> Lexicon | None:
    """The lexicon in `folder` (DATA_DIR/index/lexicon): None when not built, or (given the `expected`
    fingerprint) learned from another corpus or by another recipe; DamagedFile when its meta.json or lexicon.json
    is not what the build wrote (size, sha256, structure)."""
    meta = read_meta(folder)
    if not meta or (expected is not None and meta.get("fingerprint") != expected):
        return None
    path = folder / LEXICON_FILE
    check_file(path, _recorded(folder, meta))
    try:
        body = LexiconFile.model_validate(read_json(path))
    except ValidationError:
        raise DamagedFile(path, "not a lexicon (its fields or values are not what the build writes)") from None
    if body.version != LEXICON_VERSION:
        return None
    if max(len(body.kk_ru), len(body.ru_kk)) > MAX_TERMS or any(
        len(v) > KEEP for table in (body.kk_ru, body.ru_kk) for v in table.values()
    ):
        raise DamagedFile(path, f"holds more than {MAX_TERMS} stems or {KEEP} translations of one")
    return Lexicon(
        {k: tuple(v) for k, v in body.kk_ru.items()},
        {k: tuple(v) for k, v in body.ru_kk.items()},
    )


def load_lexicon(settings: Settings, chunks: Sequence[Chunk]) -> Lexicon:
    """The built lexicon when it was learned from these chunks; else (not built yet, or out of date) learned now
    from them (a few seconds, logged); DamagedFile when a file of it is damaged."""
    lexicon = read_lexicon(settings.index_dir / FOLDER, fingerprint(chunks))
    if lexicon is not None:
        return lexicon
    start = time.perf_counter()
    lexicon = learn_lexicon(chunks)
    logger.info(
        "No lexicon built from this corpus in %s: learned in memory (%d stems, %.1f s); `ingest_adilet index` "
        "writes it",
        settings.index_dir / FOLDER,
        len(lexicon),
        time.perf_counter() - start,
    )
    return lexicon


def _recorded(folder: Path, meta: dict[str, Any]) -> FileDigest:
    """The lexicon's recorded digest: a lexicon is never older than the checksums, so a missing one is damage."""
    if (digest := recorded_digest(folder, meta, LEXICON_FILE)) is None:
        raise DamagedFile(folder / "meta.json", f"its entry for {LEXICON_FILE} is missing or garbled")
    return digest


def _unchanged(folder: Path, print_: str) -> bool:
    try:
        meta = read_meta(folder)
        if meta.get("fingerprint") != print_:
            return False
        return read_lexicon(folder, print_) is not None
    except DamagedFile as err:
        logger.warning("%s is damaged (%s): learning the lexicon again", err.path, err.problem)
        return False
