"""Split an article into chunks that stand on their own: each starts with «УК РК. Статья 188. Кража».

A chunk never crosses an article. A long article is cut at its numbered parts («1.», «2.» opening a
paragraph), a part longer than the limit at its paragraphs, a paragraph at its sentences; consecutive pieces
are packed greedily up to `max_chars` (the body, without the header line) and, header included, within
the embedding model's 512-token window by an estimate of its tokenizer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from corpus.legal import heading
from corpus.legal.registry import AdiletSource
from corpus.records import Article, Chunk, content_hash

_PART = re.compile(r"^(\d+(?:-\d+)*)\.\s")  # «1. …», «3-1. …»; «1) …» are sub-items and stay inside the part
# multilingual-e5 reads 512 tokens, «passage: » and the special tokens included. The estimate below was
# fitted on this corpus with the e5 tokenizer (words and punctuation count one token each, letters and digits
# add subword pieces); it overshoots by ~30 tokens on average and undershoots by at most ~45, hence 460.
MAX_TOKENS = 460
_LETTER = re.compile(r"[^\W\d_]")
_DIGIT = re.compile(r"\d")
_MARK = re.compile(r"[^\w\s]")
_SPACE = re.compile(r"\s")
# A sentence ends at . ; : ! ? after a word (not after the «1.» numbering a part), before a capital or digit.
_SENTENCE_END = re.compile(r"(?<=[^\W\d_)»\"][.;:!?])\s+(?=[«\"(]?[А-ЯЁӘІҢҒҮҰҚӨҺA-Z0-9])")


@dataclass(frozen=True)
class _Piece:
    text: str
    part: str | None  # the numbered part it belongs to, None before the first one
    inline: bool = False  # continues the paragraph of the piece before it (a sentence split off)

    @cached_property
    def tokens(self) -> float:
        return estimate_tokens(self.text)


def header(article: Article, source: AdiletSource) -> str:
    """The citation line a chunk starts with: «УК РК. Статья 188. Кража» / «ҚР ҚК. 188-бап. Ұрлық»."""
    return heading(source.short(article.lang), article.number, article.title, article.lang)


def _parts(text: str) -> list[_Piece]:
    """The article's numbered parts (with the paragraphs that follow each), preamble first."""
    pieces: list[_Piece] = []
    current: list[str] = []
    part: str | None = None
    for para in text.split("\n"):
        m = _PART.match(para)
        if m and current:
            pieces.append(_Piece("\n".join(current), part))
            current = []
        if m:
            part = m.group(1)
        current.append(para)
    if current:
        pieces.append(_Piece("\n".join(current), part))
    return pieces


def estimate_tokens(text: str) -> float:
    """Roughly how many e5 tokens `text` makes (see MAX_TOKENS)."""
    return (
        0.11 * len(_LETTER.findall(text))
        + 0.15 * len(_DIGIT.findall(text))
        + len(_MARK.findall(text))
        + len(_SPACE.findall(text))
    )


Fits = Callable[[list[_Piece]], bool]


def _hard_split(text: str, fits: Fits) -> list[str]:
    """Cut a sentence too long for a chunk at spaces (a word too long for one is cut anywhere)."""
    out: list[str] = []
    while not fits([_Piece(text, None)]):
        cut = len(text)
        while cut > 1 and not fits([_Piece(text[:cut], None)]):
            space = text.rfind(" ", 0, int(cut * 0.9))
            cut = space if space > 0 else int(cut * 0.9)
        out.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text:
        out.append(text)
    return out


def _fit(piece: _Piece, fits: Fits) -> list[_Piece]:
    """The piece if it fits, else its paragraphs, sentences, then words, each fitting a chunk."""
    if fits([piece]):
        return [piece]
    out: list[_Piece] = []
    paras = piece.text.split("\n")
    if len(paras) > 1:
        for para in paras:
            out.extend(_fit(_Piece(para, piece.part), fits))
        return out
    for sentence in _SENTENCE_END.split(piece.text):
        out.extend(_Piece(s, piece.part, inline=True) for s in _hard_split(sentence, fits))
    return [_Piece(out[0].text, out[0].part, piece.inline), *out[1:]]


def _join(pieces: list[_Piece]) -> str:
    out = ""
    for i, p in enumerate(pieces):
        out += ("" if i == 0 else " " if p.inline else "\n") + p.text
    return out


def _pack(parts: list[list[_Piece]], fits: Fits) -> list[list[_Piece]]:
    """Group consecutive parts into chunks; a part that fits in one chunk is never cut across two.

    A part too long for one chunk starts a chunk of its own and its pieces are packed greedily; the next
    part may join its last chunk.
    """
    groups: list[list[_Piece]] = []
    for pieces in parts:
        if groups and fits([*groups[-1], *pieces]):
            groups[-1].extend(pieces)
        elif fits(pieces):
            groups.append(list(pieces))
        else:
            groups.append([pieces[0]])
            for piece in pieces[1:]:
                if fits([*groups[-1], piece]):
                    groups[-1].append(piece)
                else:
                    groups.append([piece])
    return groups


def _label(group: list[_Piece]) -> str | None:
    parts = [p.part for p in group if p.part is not None]
    if not parts:
        return None
    return parts[0] if parts[0] == parts[-1] else f"{parts[0]}-{parts[-1]}"


def chunk_article(article: Article, source: AdiletSource, max_chars: int = 1500) -> list[Chunk]:
    """The chunks of one article in order; chunk 0 holds its beginning, a repealed article gives one chunk."""
    head = header(article, source)
    # Some titles run to 400 characters: the body gives way so that the whole chunk stays within the window.
    body_tokens = max(MAX_TOKENS / 3, MAX_TOKENS - estimate_tokens(head) - 1)

    def fits(pieces: list[_Piece]) -> bool:
        joints = len(pieces) - 1  # each joint is one newline or space: one character, about one token
        return (
            sum(len(p.text) for p in pieces) + joints <= max_chars
            and sum(p.tokens for p in pieces) + joints <= body_tokens
        )

    body = article.text.strip()
    if article.status == "repealed" or not body:
        groups = [[_Piece(body, None)]]
    else:
        groups = _pack([_fit(part, fits) for part in _parts(body)], fits)
    chunks = []
    for i, group in enumerate(groups):
        text = "\n".join(p for p in (head, _join(group)) if p)
        chunk_id = f"{article.doc_id}:{article.lang}:{article.number}:{i}"
        chunks.append(
            Chunk(
                chunk_id=chunk_id,
                doc_id=article.doc_id,
                lang=article.lang,
                article=article.number,
                title=article.title,
                code=source.short(article.lang),
                kind=source.kind,
                text=text,
                url=article.url or source.url(article.lang),
                status=article.status,
                part=_label(group),
                path=article.path,
                edition_date=article.edition_date,
                hash=content_hash(chunk_id, text, article.status),
            )
        )
    return chunks
