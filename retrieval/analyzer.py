"""Russian and Kazakh text analysis for BM25: tokens, stopwords, stems, and language detection.

The normal form of a word, Kazakh-letter detection and the two stemmers live in corpus/lang.py (legal references
use them too); this module builds search terms on top of them."""

from __future__ import annotations

import itertools
import logging
import re
from collections import Counter
from functools import lru_cache

from corpus.lang import has_kazakh_letters, normalize, stem_kk, stem_ru
from corpus.records import Lang

__all__ = [
    "analyze",
    "analyze_phrases",
    "detect_lang",
    "has_kazakh_letters",
    "normalize",
    "stem",
    "stem_kk",
    "stem_ru",
    "tokenize",
]

logger = logging.getLogger(__name__)

# Numbers keep their hyphenated parts ("188-1" is an article of its own); words split at hyphens below.
_TOKEN_RE = re.compile(r"\d+(?:-\d+)*|[^\W\d_]+(?:-[^\W\d_]+)*")

RU_STOPWORDS = frozenset(
    """
    а б без более бы был была были было быть в вам вас ведь весь во вот впрочем все всегда всего всех
    всю вы где да
    даже для до другой его ее ей ему если есть еще ж же за зачем здесь и из или им иногда их к как какая
    какой каким
    какие какое каков когда конечно кто куда ли либо лучше между меня мне много может мой моя мы на над
    надо нас него
    нее ней нельзя нет ни нибудь никогда ним них ничего но ну о об один он она они оно опять от перед по
    под после
    потом потому почему почти при про раз разве с сам свое свою свой себе себя сейчас со совсем так
    также такой там
    тебя тем теперь то тогда того тоже той только том ты тут у уж уже хоть хорошо чего чей чем через что
    чтоб чтобы
    чуть эта эти это этого этой этом этот эту я
    который которая которое которые которых котором которому которого которой
    здравствуйте подскажите пожалуйста спасибо добрый день вопрос
    """.split()
)

KK_STOPWORDS = frozenset(
    """
    және мен бен пен да де та те ал бірақ немесе әлде үшін бойынша туралы сияқты сондай ақ осы бұл ол
    сол
    мына ма ме ба бе па пе ғой ғана әр барлық бәрі өз өзі өзінің менің сенің оның біз сіз олар біздің
    сіздің
    олардың маған саған оған бізге сізге оларға мені сені оны қандай қалай қай кім кімге неге неліктен
    неше
    қанша ше шейін дейін кейін арқылы сайын тиісті егер онда мұнда сонда осында қазір енді әлі де деп
    дегенмен
    сәлеметсіз сәлем рақмет рахмет
    """.split()
)

STOPWORDS = RU_STOPWORDS | KK_STOPWORDS
# A Russian stopword that is a Kazakh word: «он» is ten («он күн», ten days; «он сегіз жас», eighteen). Of the
# Russian stopwords of two letters or more it is the only one the corpus's Kazakh texts use (1,006 times); a
# Kazakh text keeps it.
KK_TEXT_STOPWORDS = STOPWORDS - {"он"}

# Case endings written after an abbreviation or number with a hyphen ("ҚК-нің", "188-бабы" keeps "бабы").
_BARE_SUFFIXES = frozenset(
    "ы і сы сі ның нің дың дің тың тің ға ге қа ке на не а е да де та те нда нде дан ден тан тен нан нен "
    "ны ні ды ді ты ті н ын ін мен бен пен ші шы інші ыншы дағы дегі тағы тегі".split()
)


@lru_cache(maxsize=1_000_000)
def stem(word: str, lang: Lang = "ru") -> str:
    """Stem a normalized word: Kazakh letters or a Kazakh text pick the Kazakh stemmer, else Snowball."""
    if word.isdigit() or not word.isalpha():
        return word
    if lang == "kk" or has_kazakh_letters(word):
        return stem_kk(word)
    return stem_ru(word)


def tokenize(text: str, lang: Lang | None = None) -> list[str]:
    """Normalized tokens minus stopwords (a Kazakh text's: `KK_TEXT_STOPWORDS`; otherwise either language's):
    numbers ("188-1") whole, hyphenated words split."""
    return _tokenize_normalized(normalize(text), lang)


def _tokenize_normalized(norm: str, lang: Lang | None = None) -> list[str]:
    stopwords = KK_TEXT_STOPWORDS if lang == "kk" else STOPWORDS
    tokens: list[str] = []
    for match in _TOKEN_RE.findall(norm):
        if match[0].isdigit():
            tokens.append(match)
            continue
        if "-" not in match:
            if len(match) > 1 and match not in stopwords:
                tokens.append(match)
            continue
        first, *rest = match.split("-")
        if len(first) > 1 and first not in stopwords:
            tokens.append(first)
        tokens.extend(p for p in rest if len(p) > 1 and p not in _BARE_SUFFIXES and p not in stopwords)
    return tokens


_CLAUSE_RE = re.compile(r"[,;:.!?()«»\"\n]+|\s[—–-]\s")


def clauses(text: str) -> list[str]:
    """The text cut at its punctuation: a phrase of a glossary or lexicon is matched within one clause, never
    across a comma («телефонды жұлып алып, қашып кетті» is no «алып қашу», a bride's kidnapping)."""
    return [part for part in _CLAUSE_RE.split(text) if part.strip()]


def analyze(text: str, lang: Lang | None = None) -> list[str]:
    """BM25 terms of a text: tokens, stopwords removed, stemmed.

    lang=None detects the language from the text's start; a Kazakh text is then read line by line (a line
    without clues keeps the text's language), as an augmented Kazakh question carries Russian headings on
    lines of their own. Words with Kazakh letters always get the Kazakh stemmer.
    """
    if lang is not None:
        return [stem(t, lang) for t in tokenize(text, lang)]
    norm = normalize(text)
    kk, ru = _lang_scores(norm[:_DETECT_CHARS])
    overall: Lang = "kk" if kk > ru else "ru"
    # In a Russian text only Kazakh-letter words are Kazakh, and the script rule in stem() already sees them.
    if overall == "ru" or "\n" not in norm:
        return [stem(t, overall) for t in _tokenize_normalized(norm, overall)]
    terms: list[str] = []
    for line in norm.split("\n"):
        kk, ru = _lang_scores(line)
        line_lang: Lang = "kk" if kk > ru else "ru" if ru > kk else overall
        terms.extend(stem(t, line_lang) for t in _tokenize_normalized(line, line_lang))
    return terms


def analyze_phrases(text: str) -> list[str]:
    """`analyze` plus each pair of adjacent terms («предварительн_оплат»): BM25 then ranks a passage that keeps
    a phrase together above one that only has its words scattered (stopwords between them do not count)."""
    terms = analyze(text)
    return [*terms, *(f"{a}_{b}" for a, b in itertools.pairwise(terms))]


# Frequent Kazakh words that have no Kazakh-only letter, or are often typed without one.
_KK_MARKERS = frozenset(
    """
    және туралы бойынша үшін қандай кандай калай қалай кашан қашан бар жок жоқ ма ме ба бе па пе керек
    болады
    болама бола ма деген дейді жаза жазасы бап бабы баптары бабына кодексі кодексінің заң заңы заңға бұл
    осы
    ушин жане бойынша туралы кандай канша қанша неше ким кім тиіс тиис жұмыс жумыс жалақы жалакы алу
    беру
    """.split()
)
_RU_MARKERS = frozenset(
    """
    и в во на не что как за по ли если какой какая какие какое каков статья статьи ст кодекс кодекса
    закон закона
    это или для от до при мне меня мой моя можно нужно ли ответственность наказание будет грозит есть
    был была
    """.split()
)


_WORD_RE = re.compile(r"[^\W\d_]+")
_DETECT_CHARS = 500  # enough words to tell the language of a chunk; a question is shorter
_RU_ENDINGS = ("ться", "ость", "ение", "ание", "ого", "его", "ый", "ий")


@lru_cache(maxsize=200_000)
def _word_lang(word: str) -> int:
    """1 for a word that looks Kazakh, -1 for one that looks Russian, 0 for neither."""
    if has_kazakh_letters(word) or word in _KK_MARKERS:
        return 1
    return -1 if word in _RU_MARKERS or word.endswith(_RU_ENDINGS) else 0


def _lang_scores(norm: str) -> tuple[int, int]:
    """Words that look Kazakh, words that look Russian, in a normalized text."""
    kk = ru = 0
    for word, count in Counter(_WORD_RE.findall(norm)).items():
        side = _word_lang(word)
        if side > 0:
            kk += count
        elif side < 0:
            ru += count
    return kk, ru


def detect_lang(text: str) -> Lang:
    """ "kk" when Kazakh letters or frequent Kazakh words outweigh Russian ones, else "ru"."""
    kk, ru = _lang_scores(normalize(text))
    return "kk" if kk > ru else "ru"
