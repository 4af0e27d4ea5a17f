"""The languages of the corpus: the one `Lang`, telling Kazakh text by its letters, and the normal form and stems
of a word, which legal references (corpus/legal/) and the search analyzer (retrieval/analyzer.py) share."""

from __future__ import annotations

import hashlib
import re
import threading
from functools import cache, lru_cache
from importlib.metadata import version
from pathlib import Path

import snowballstemmer
from snowballstemmer.basestemmer import BaseStemmer

from corpus.records import Lang

LANGS: tuple[Lang, ...] = ("ru", "kk")
KAZAKH_LETTERS = frozenset("әғқңөұүһі")


def lang_of(value: str | None) -> Lang:
    """A language code read from outside (a record, a setting, a request): "kk" is Kazakh, anything else Russian."""
    return "kk" if value == "kk" else "ru"


def script_lang(text: str) -> Lang:
    """Kazakh when the text has a letter only the Kazakh alphabet uses (in either case), else Russian."""
    return "kk" if has_kazakh_letters(text.lower()) else "ru"


# Kazakh inflectional endings by slot, innermost first (stem + verb form + plural + possessive + case):
# stripping from the right goes case → possessive → plural → verb form. Derivational ones (-лық, -шы) stay.
# A question's verbs carry person and mood (бердім, болса, кеткім келеді) where the law says беру, болу, кету: those
# endings, each whole with its person, are verb forms too. A negation (-ма-/-ме-: сақталмайтын, unpaid) is meaning
# and stays (stripped, «жалақысы сақталмайтын демалыс» lost its first place on kk_dev), and so does the privative
# -сыз/-сіз (without): every word of the corpus's Kazakh texts that ends in a vowel and -сыз/-сіз is one («өтеусіз»,
# free of charge, is no «өтеу», compensation; «тіркеусіз», «лицензиясыз», «некесіз»); the polite «you» of a verb
# is cut only after -й- (төлейсіз; a noun in -й with the privative, «үйсіз», was not checked).
_KK_SLOTS: tuple[str, ...] = (
    """ған ген қан кен атын етін йтын йтін итін ытын ады еді йды йді ыды іді ып іп у уы уі уға уге уда уде
    удан уден уын уін уына уіне ғандар гендер мақ мек пақ пек бақ бек йсыз йсіз ғаны гені қаны кені ғанын генін
    қанын кенін ғанына геніне ғаннан геннен
    дым дім тым тім дыңыз діңіз тыңыз тіңіз ймын ймін ймыз йміз йсың йсің
    са се сам сем саң сең саңыз сеңіз ғым гім қым кім""",
    "лар лер дар дер тар тер",
    "ым ім м ың ің ң ымыз іміз мыз міз ыңыз іңіз ңыз ңіз сы сі ы і",
    """ның нің дың дің тың тің ға ге қа ке на не ны ні ды ді ты ті ын ін да де та те нда нде дағы дегі тағы
    тегі ндағы ндегі дан ден тан тен нан нен мен бен пен ымен імен ша ше""",
)
_KK_SLOT = {suffix: slot for slot, words in enumerate(_KK_SLOTS) for suffix in words.split()}
_KK_SUFFIXES = tuple(sorted(_KK_SLOT, key=len, reverse=True))
_KK_CONDITIONAL = frozenset("са се сам сем саң сең саңыз сеңіз".split())  # after any stem
_KK_MIN_STEM = 3
# Verbs whose root has two letters keep it under a verb's ending (алу, алып, алды, алған → ал; ұрды → ұр; өтті → өт;
# талап етсе → ет): below three letters nothing else is cut. A closed class of the language, not learned from data.
_KK_VERB_ROOTS = frozenset("ал ат ас ет жу же ки қу өл өт ту ұр іш".split())
_KK_PAST = frozenset("ды ді ты ті".split())  # the bare past, which the accusative spells alike
_KK_VOWELS = frozenset("аәеиоөұүыіуэюя")
# Endings that begin with т, қ, к, п follow these (б, в, г, д end loanwords and are said voiceless there).
_KK_VOICELESS = frozenset("птқксшфхцчщбвгд")
# Finals that take a vowel's and a voiced consonant's endings alike (беру-дің, қою-дың, шасси-дің, лагерь-лер).
_KK_GLIDES = frozenset("уюийь")
# Endings in н- that follow only the possessive -ы/-і (жұмыс-ы-нда), and those that also follow м, н, ң (заң-ның).
_KK_AFTER_POSSESSIVE = frozenset("на не нда нде ндағы ндегі".split())
_KK_AFTER_NASAL = frozenset("ның нің нан нен".split())
# -ысы/-ісі after these is a noun in -ыс/-іс with its possessive (демалыс-ы, жиналыс-ы, табыс-ы); after the others
# a stem in -ы/-і with -сы (басшы-сы, жалақы-сы, белгі-сі). Counted over the corpus's Kazakh words: the bare forms
# attest 800 of 811 after л, р, н, м, б as nouns in -ыс, 893 of 920 after the others as stems in -ы.
_KK_NOUNS_IN_IS = frozenset("лрнмб")
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
    """Whether a Kazakh ending can follow the stem: an ending's first sound agrees with the stem's last one (-сы,
    -ны, -м after vowels; -ы, -ын after consonants; -ты, -қа, -пен after voiceless ones; -ды, -ға after vowels and
    voiced ones, but the genitive -дың and the plural -дар never after a vowel; -лар after vowels and р, й, у;
    -нда, -на only after the possessive -ы/-і: шыққан-да, not шыққа-нда). An ending the stem's sound rules out is
    part of the word: шарт-ы, not шар-ты; қаңтар-дан, not қаң-тар-дан."""
    last = rest[-1]
    vowel = last in _KK_VOWELS
    head = suffix[0]
    if suffix in _KK_CONDITIONAL or head in "уш":
        return True
    if suffix in ("сы", "сі") and last in "ыі" and rest[-2:-1] in _KK_NOUNS_IN_IS:
        return False  # жұмыс-ы, демалыс-ы, қылмыс-ы: the noun's own -ыс, not a stem in -ы
    if head == "с" or len(suffix) == 1 and head not in _KK_VOWELS:
        return vowel
    if head == "н":
        if suffix in _KK_AFTER_POSSESSIVE:
            return last in "ыі"
        return vowel or suffix in _KK_AFTER_NASAL and last in "мнң"
    if head == "й":
        return vowel
    if head in _KK_VOWELS:
        return not vowel
    if head in "тқкп":
        return last in _KK_VOICELESS
    if last in _KK_GLIDES:
        return True
    if head == "л":
        return vowel or last == "р"
    if head in "дғгбм":
        if not vowel:
            return last not in _KK_VOICELESS and (head != "б" or last in "зжмнң")
        return head in "ғгм" or head == "д" and suffix not in ("дың", "дің", "дар", "дер")
    return True


def _stem_left(rest: str, slot: int, suffix: str) -> bool:
    """Whether what an ending leaves is a stem: three letters or more with a vowel, or a two-letter verb root
    under a verb's ending."""
    if len(rest) >= _KK_MIN_STEM:
        return not _KK_VOWELS.isdisjoint(rest)
    return rest in _KK_VERB_ROOTS and (slot == 0 or suffix in _KK_PAST)


@lru_cache(maxsize=500_000)
def stem_kk(word: str) -> str:
    """Strip Kazakh inflectional endings iteratively, keeping a stem of three letters or more with a vowel (or a
    two-letter verb root under a verb's ending: `_stem_left`)."""
    stem = word
    last = len(_KK_SLOTS)
    for _ in range(6):
        for suffix in _KK_SUFFIXES:
            slot = _KK_SLOT[suffix]
            # the linking vowel of loanwords before a plural ("субъекті-лер") goes too
            in_order = slot < last or (slot == 2 and last == 1 and suffix in ("ы", "і"))
            if in_order and stem.endswith(suffix):
                rest = stem[: -len(suffix)]
                if _stem_left(rest, slot, suffix) and _fits(rest, suffix):
                    stem, last = rest, slot
                    break
        else:
            break
    if stem != word and stem[-1] in _KK_DEVOICE:
        stem = stem[:-1] + _KK_DEVOICE[stem[-1]]
        # a noun in -ып/-іп, voiced before a vowel (тәртібі), is cut as its bare form is (тәртіп → тәрт)
        rest, suffix = stem[:-2], stem[-2:]
        if suffix in ("ып", "іп") and _stem_left(rest, 0, suffix) and _fits(rest, suffix):
            stem = rest
    return stem


@lru_cache(maxsize=500_000)
def stem_ru(word: str) -> str:
    """Snowball Russian stem."""
    return _ru_stemmer().stemWord(word)


@cache
def stemmer_id() -> str:
    """What makes the stems: Snowball's version and a digest of this module (the Kazakh stripper's endings). The
    lexicon, a file of stems, records it and is learned again when it changes (BM25's analyzer id digests this
    module too)."""
    return f"snowball-{version('snowballstemmer')}:kk-{_SOURCE_DIGEST}"


# Read when the module is loaded, not when first asked: a build running for an hour whose source was edited meanwhile
# must not stamp what its loaded code made with the edited code's digest (its lexicon and BM25 were, 2026-12-07).
_SOURCE_DIGEST = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
