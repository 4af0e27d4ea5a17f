"""Russian and Kazakh text analysis for BM25: tokens, stopwords, stems, and language detection."""

from __future__ import annotations

import itertools
import logging
import re
import threading
from collections import Counter
from functools import lru_cache
from typing import Literal

import snowballstemmer
from snowballstemmer.basestemmer import BaseStemmer

logger = logging.getLogger(__name__)

Lang = Literal["ru", "kk"]

KAZAKH_LETTERS = frozenset("әғқңөұүһі")

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

# Case endings written after an abbreviation or number with a hyphen ("ҚК-нің", "188-бабы" keeps "бабы").
_BARE_SUFFIXES = frozenset(
    "ы і сы сі ның нің дың дің тың тің ға ге қа ке на не а е да де та те нда нде дан ден тан тен нан нен "
    "ны ні ды ді ты ті н ын ін мен бен пен ші шы інші ыншы дағы дегі тағы тегі".split()
)

# Kazakh inflectional endings by slot, innermost first (stem + verb form + plural + possessive + case):
# stripping from the right goes case → possessive → plural → verb form. Derivational ones (-лық, -шы) stay.
_KK_SLOTS: tuple[str, ...] = (
    """ған ген қан кен атын етін йтын йтін итін ытын ады еді йды йді ыды іді ып іп у уы уі уға уге уда уде
    удан уден уын уін уына уіне ғандар гендер мақ мек пақ пек бақ бек сыз сіз ғаны гені қаны кені ғанын генін
    қанын кенін ғанына геніне ғаннан геннен""",
    "лар лер дар дер тар тер",
    "ым ім м ың ің ң ымыз іміз мыз міз ыңыз іңіз ңыз ңіз сы сі ы і",
    """ның нің дың дің тың тің ға ге қа ке на не ны ні ды ді ты ті ын ін да де та те нда нде дағы дегі тағы
    тегі ндағы ндегі дан ден тан тен нан нен мен бен пен ымен імен ша ше""",
)
_KK_SLOT = {suffix: slot for slot, words in enumerate(_KK_SLOTS) for suffix in words.split()}
_KK_SUFFIXES = tuple(sorted(_KK_SLOT, key=len, reverse=True))
_KK_MIN_STEM = 3
_KK_VOWELS = frozenset("аәеиоөұүыіуэюя")
# Root-final voicing alternates before vowel endings (бап → бабы, құқық → құқығы, жүрек → жүрегі).
_KK_DEVOICE = {"б": "п", "г": "к", "ғ": "қ"}

# A Snowball stemmer keeps the word being stemmed in its own fields: one shared by the bot's worker threads mixed
# words up (IndexError, wrong stems that lru_cache then kept). One stemmer per thread; as fast as one behind a lock
# (both ~50k words/s from 1 or 8 threads here: the GIL serializes them anyway), and no thread ever waits.
_local = threading.local()


def _ru_stemmer() -> BaseStemmer:
    """This thread's Snowball Russian stemmer."""
    stemmer = getattr(_local, "ru", None)
    if stemmer is None:
        stemmer = _local.ru = snowballstemmer.stemmer("russian")
    return stemmer


_CYR = "а-яәғқңөұүһі"
# adilet's Kazakh texts often type Latin look-alikes inside Cyrillic words ("кодекстiң" with a Latin i).
_HOMOGLYPH_RE = re.compile(rf"(?<=[{_CYR}])[ieoacpxy]+|[ieoacpxy]+(?=[{_CYR}])")
_HOMOGLYPHS = str.maketrans("ieoacpxy", "іеоасрху")


def normalize(text: str) -> str:
    """Lowercase, fold ё into е and Latin look-alikes inside Cyrillic words into Cyrillic (same length)."""
    text = text.lower().replace("ё", "е")
    return _HOMOGLYPH_RE.sub(lambda m: m.group().translate(_HOMOGLYPHS), text)


def has_kazakh_letters(word: str) -> bool:
    """True when the word has a letter only the Kazakh alphabet uses."""
    return not KAZAKH_LETTERS.isdisjoint(word)


def _fits(rest: str, suffix: str) -> bool:
    """Whether a Kazakh ending can follow the stem: -сы/-ны/-м after vowels, -ы/-ты/-ын after consonants."""
    last = rest[-1]
    vowel = last in _KK_VOWELS
    head = suffix[0]
    if head == "с" or len(suffix) == 1 and head not in _KK_VOWELS:
        return vowel
    if head == "н":
        return vowel or last in "мнң"
    if head == "т" or suffix in ("ы", "і", "ын", "ін", "ымен", "імен", "ып", "іп"):
        return not vowel
    return True


@lru_cache(maxsize=500_000)
def stem_kk(word: str) -> str:
    """Strip Kazakh inflectional endings iteratively, keeping a stem of three letters or more with a vowel."""
    stem = word
    last = len(_KK_SLOTS)
    for _ in range(6):
        for suffix in _KK_SUFFIXES:
            slot = _KK_SLOT[suffix]
            # the linking vowel of loanwords before a plural ("субъекті-лер") goes too
            in_order = slot < last or (slot == 2 and last == 1 and suffix in ("ы", "і"))
            if in_order and stem.endswith(suffix):
                rest = stem[: -len(suffix)]
                if len(rest) >= _KK_MIN_STEM and not _KK_VOWELS.isdisjoint(rest) and _fits(rest, suffix):
                    stem, last = rest, slot
                    break
        else:
            break
    if stem != word and stem[-1] in _KK_DEVOICE:
        stem = stem[:-1] + _KK_DEVOICE[stem[-1]]
    return stem


@lru_cache(maxsize=500_000)
def stem_ru(word: str) -> str:
    """Snowball Russian stem."""
    return _ru_stemmer().stemWord(word)


@lru_cache(maxsize=1_000_000)
def stem(word: str, lang: Lang = "ru") -> str:
    """Stem a normalized word: Kazakh letters or a Kazakh text pick the Kazakh stemmer, else Snowball."""
    if word.isdigit() or not word.isalpha():
        return word
    if lang == "kk" or has_kazakh_letters(word):
        return stem_kk(word)
    return stem_ru(word)


def tokenize(text: str) -> list[str]:
    """Normalized tokens minus stopwords: numbers ("188-1") whole, hyphenated words split."""
    return _tokenize_normalized(normalize(text))


def _tokenize_normalized(norm: str) -> list[str]:
    tokens: list[str] = []
    for match in _TOKEN_RE.findall(norm):
        if match[0].isdigit():
            tokens.append(match)
            continue
        if "-" not in match:
            if len(match) > 1 and match not in STOPWORDS:
                tokens.append(match)
            continue
        first, *rest = match.split("-")
        if len(first) > 1 and first not in STOPWORDS:
            tokens.append(first)
        tokens.extend(p for p in rest if len(p) > 1 and p not in _BARE_SUFFIXES and p not in STOPWORDS)
    return tokens


def analyze(text: str, lang: Lang | None = None) -> list[str]:
    """BM25 terms of a text: tokens, stopwords removed, stemmed.

    lang=None detects the language from the text's start; a Kazakh text is then read line by line (a line
    without clues keeps the text's language), as an augmented Kazakh question carries Russian headings on
    lines of their own. Words with Kazakh letters always get the Kazakh stemmer.
    """
    if lang is not None:
        return [stem(t, lang) for t in tokenize(text)]
    norm = normalize(text)
    kk, ru = _lang_scores(norm[:_DETECT_CHARS])
    overall: Lang = "kk" if kk > ru else "ru"
    # In a Russian text only Kazakh-letter words are Kazakh, and the script rule in stem() already sees them.
    if overall == "ru" or "\n" not in norm:
        return [stem(t, overall) for t in _tokenize_normalized(norm)]
    terms: list[str] = []
    for line in norm.split("\n"):
        kk, ru = _lang_scores(line)
        line_lang: Lang = "kk" if kk > ru else "ru" if ru > kk else overall
        terms.extend(stem(t, line_lang) for t in _tokenize_normalized(line))
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
