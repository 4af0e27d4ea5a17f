"""Does a sentence state a norm as its source states it? Polarity, punishments and figures, Russian and Kazakh.

A model can keep every word of a norm and still reverse it: «наказывается» → «не наказывается», «жазаланады» →
«жазаланбайды»; or add a punishment («смертной казнью») or a term («до десяти лет») the source does not set.
Lexical overlap cannot see either. Here a text is read into the facts that matter (`NormFacts`) and a sentence's
facts are compared with its sources' (`conflicts`):

- polarity: a norm predicate (Russian «наказывается», «допускается», «вправе», «обязан», «является …»; Kazakh
  verbs negated by -ма/-ме/-ба/-бе/-па/-пе, a word before «емес», «құқығы жоқ») that the sentence negates while
  the source states it only positively, or the reverse. A predicate the source does not use is not judged.
- punishments: each one the sentence names (смертная казнь, пожизненное лишение свободы, лишение свободы,
  ограничение свободы, штраф, арест, исправительные / общественные работы, конфискация; Kazakh too) must be
  named by the source, unless the sentence says it is not set («без конфискации», «не предусмотрена»).
- figures: each number the sentence gives with a unit (years, months, days, hours, МРП, tenge, percent), in
  digits or in words («до 3 лет» = «до трех лет», «1000 МРП» = «одной тысячи месячных расчетных показателей»),
  must be a figure of the source with that unit, or a number of the question.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from corpus.records import Lang

logger = logging.getLogger(__name__)

_TOKEN_RE = re.compile(r"\d+(?:[\u00a0\u202f ]\d{3})*(?:[.,]\d+)?|%|[^\W\d_]+", re.U)

# --- polarity ---------------------------------------------------------------------------------------------------

# Russian norm predicates (whole words); those marked True are judged with the word that follows («является
# уголовным …», «может быть назначено …», «вправе требовать»): alone they are copulas or modals whose subject
# changes from one sentence to the next («работодатель обязан …», «работник не обязан …»).
_RU_PREDICATES: tuple[tuple[re.Pattern[str], str, bool], ...] = tuple(
    (re.compile(rx), key, with_object)
    for rx, key, with_object in (
        (r"наказыва(?:ется|ются)|наказуем\w*", "наказывается", False),
        (r"допуска(?:ется|ются)|допустим[оаы]?", "допускается", False),
        (r"вправе", "вправе", True),
        (r"обязан[аоы]?", "обязан", True),
        (r"подлеж(?:ит|ат)", "подлежит", True),
        (r"разреша(?:ется|ются)|разрешен[оаы]?", "разрешается", False),
        (r"вле(?:чет|кут)", "влечет", True),
        (r"явля(?:ется|ются)", "является", True),
        (r"призна(?:ется|ются)", "признается", True),
        (r"счита(?:ется|ются)", "считается", True),
        (r"может|могут|нельзя", "может", True),
        (r"име(?:ет|ют)", "имеет", True),
        (r"применя(?:ется|ются)", "применяется", True),
        (r"назнача(?:ется|ются)", "назначается", True),
        (r"освобожда(?:ется|ются)", "освобождается", True),
    )
)
_RU_FILLERS = frozenset("быть бы ли же только лишь также уже".split())

# Kazakh: a verb negated by -ма/-ме/-ба/-бе/-па/-пе before its ending («жазаланбайды», «берілмейді», «төлемеу»)
_KK_NEGATED_RE = re.compile(
    r"^(?P<stem>[^\W\d_]{3,}?)(?:ма|ме|ба|бе|па|пе)"
    r"(?:йды|йді|йтын|йтін|ған|ген|у|уы|уі|уға|уге|уына|уіне|уын|уін|уда|уде)$"
)
# the same verb stated: a finite form or a participle («жазаланады», «беріледі», «қолданылған»), not a noun
# made of it («қолданылуы» in a title)
_KK_STATED_ENDINGS = frozenset("ады еді йды йді ды ді ты ті ған ген қан кен атын етін йтын йтін".split())
_KK_NOT = ("емес", "жоқ")  # «міндетті емес», «құқығы жоқ»: the word before is negated


def _ru_predicates(tokens: list[str]) -> list[tuple[str, bool]]:
    """(predicate key, positive?) for each norm predicate of a Russian text («нельзя» is «не может»)."""
    found: list[tuple[str, bool]] = []
    for i, tok in enumerate(tokens):
        match = next(((key, obj) for rx, key, obj in _RU_PREDICATES if rx.fullmatch(tok)), None)
        if match is None:
            continue
        key, with_object = match
        positive = tok != "нельзя" and not (i > 0 and tokens[i - 1] == "не")
        if with_object:
            nxt = next((t for t in tokens[i + 1 : i + 4] if t not in _RU_FILLERS), None)
            if nxt is None:
                continue
            key = f"{key} {nxt[:5]}…"
        found.append((key, positive))
    return found


def _kk_predicates(tokens: list[str]) -> list[tuple[str, bool]]:
    """(key, False) for each negation of a Kazakh text: a negated verb's stem («беріл»), or «мінде емес» for
    the word «емес» / «жоқ» negates. Positive uses are read from the tokens when compared (`_kk_states`)."""
    found: list[tuple[str, bool]] = []
    for i, tok in enumerate(tokens):
        if m := _KK_NEGATED_RE.match(tok):
            found.append((m.group("stem"), False))
        elif tok in _KK_NOT and i > 0 and len(tokens[i - 1]) >= 3 and tokens[i - 1][0].isalpha():
            found.append((f"{tokens[i - 1][:5]} {tok}", False))
    return found


def _kk_states(tokens: list[str], key: str) -> bool:
    """Whether a Kazakh text states positively what `key` negates: the verb in a finite form, or the word not
    followed by «емес» / «жоқ»."""
    stem, _, word_negator = key.partition(" ")
    for i, tok in enumerate(tokens):
        if not tok.startswith(stem):
            continue
        if word_negator:
            if not (i + 1 < len(tokens) and tokens[i + 1] in _KK_NOT):
                return True
        elif tok[len(stem) :] in _KK_STATED_ENDINGS:
            return True
    return False


# --- punishments ------------------------------------------------------------------------------------------------

_PUNISHMENTS: dict[str, str] = {
    "смертная казнь": r"смертн\w*\s+казн|\bказн[ьиюей]\b|өлім\s+жаза",
    "пожизненное лишение свободы": r"пожизненн\w*\s+лишени\w*\s+свобод|өмір\s+бойы\s+бас\s+бостандығынан",
    "лишение свободы": r"лиш\w*\s+свобод|тюрем|тюрьм|бас\s+бостандығынан\s+айыр",
    "ограничение свободы": r"ограничени\w*\s+свобод|бас\s+бостандығын\s+шектеу",
    "штраф": r"штраф|айыппұл",
    "арест": r"\bарест(?!\w*\s+(?:на\s+)?(?:\w+\s+)?имуществ)|қамаққа\s+ал",
    "исправительные работы": r"исправительн\w*\s+работ|түзеу\s+жұмыс",
    "общественные работы": r"общественн\w*\s+работ|қоғамдық\s+жұмыс",
    "конфискация": r"конфиск|тәркіле",
}
_PUNISHMENT_RES = {name: re.compile(rx, re.I) for name, rx in _PUNISHMENTS.items()}
# «без конфискации», «не может быть назначен штраф»: a punishment named as not set needs no source
_NOT_SET_BEFORE_RE = re.compile(r"(?:\b(?:не|без|нет|кроме|вместо)\b|емес|жоқ)[^.;:!?]{0,25}$", re.I)
_NOT_SET_AFTER_RE = re.compile(
    r"^[^.;:!?]{0,40}\b(?:не\s+(?:предусм|примен|назнач|грозит|может)|нет\b)|^[^.;:!?]{0,40}(?:қарастырылмаған|"
    r"қолданылмайды|тағайындалмайды|жоқ\b|емес\b)",
    re.I,
)


def _punishments(text: str, *, skip_not_set: bool) -> set[str]:
    found: set[str] = set()
    for name, rx in _PUNISHMENT_RES.items():
        for m in rx.finditer(text):
            if skip_not_set and (
                _NOT_SET_BEFORE_RE.search(text[: m.start()]) or _NOT_SET_AFTER_RE.search(text[m.end() :])
            ):
                continue
            found.add(name)
    return found


# --- figures ----------------------------------------------------------------------------------------------------

_RU_NUMBER_WORDS: dict[int, str] = {
    1: "один одна одно одного одной одному одним одну одном",
    2: "два две двух двум двумя",
    3: "три трех трёх трем трём тремя",
    4: "четыре четырех четырёх четырем четырём четырьмя",
    5: "пять пяти пятью",
    6: "шесть шести шестью",
    7: "семь семи семью",
    8: "восемь восьми восемью",
    9: "девять девяти девятью",
    10: "десять десяти десятью",
    11: "одиннадцать",
    12: "двенадцать",
    13: "тринадцать",
    14: "четырнадцать",
    15: "пятнадцать",
    16: "шестнадцать",
    17: "семнадцать",
    18: "восемнадцать",
    19: "девятнадцать",
    20: "двадцать",
    30: "тридцать",
    40: "сорок сорока",
    50: "пятьдесят пятидесяти",
    60: "шестьдесят шестидесяти",
    70: "семьдесят семидесяти",
    80: "восемьдесят восьмидесяти",
    90: "девяносто девяноста",
    100: "сто ста",
    200: "двести двухсот двумстам",
    300: "триста трехсот трёхсот",
    400: "четыреста четырехсот четырёхсот",
    500: "пятьсот пятисот",
    600: "шестьсот шестисот",
    700: "семьсот семисот",
    800: "восемьсот восьмисот",
    900: "девятьсот девятисот",
    1000: "тысяча тысячи тысяч тысячу тысячей тысячам тысячами тыс",
    1_000_000: "миллион миллиона миллионов миллионам млн",
}
_KK_NUMBER_WORDS: dict[int, str] = {
    1: "бір",
    2: "екі",
    3: "үш",
    4: "төрт",
    5: "бес",
    6: "алты",
    7: "жеті",
    8: "сегіз",
    9: "тоғыз",
    10: "он",
    20: "жиырма",
    30: "отыз",
    40: "қырық",
    50: "елу",
    60: "алпыс",
    70: "жетпіс",
    80: "сексен",
    90: "тоқсан",
    100: "жүз",
    1000: "мың",
    1_000_000: "миллион",
}


def _number_words() -> dict[str, int]:
    words: dict[str, int] = {}
    for value, forms in (*_RU_NUMBER_WORDS.items(), *_KK_NUMBER_WORDS.items()):
        for form in forms.split():
            words[form] = value
            if 11 <= value <= 30 and form.endswith("ть"):
                words[form[:-1] + "и"] = value  # «пятнадцати», «двадцати»
    return words


NUMBER_WORDS = _number_words()
_SCALES = (1000, 1_000_000)

# unit of a figure by how the word after the number starts (Kazakh numerals are not declined, their nouns are)
_UNITS: tuple[tuple[str, str], ...] = (
    ("месячн", "МРП"),
    ("мрп", "МРП"),
    ("айлық", "МРП"),
    ("аек", "МРП"),
    ("жыл", "год"),
    ("месяц", "месяц"),
    ("сут", "день"),
    ("тәулік", "день"),
    ("күн", "день"),
    ("сағат", "час"),
    ("тенге", "тенге"),
    ("теңге", "тенге"),
    ("процент", "%"),
    ("%", "%"),
    ("пайыз", "%"),
)
_EXACT_UNITS = {
    **dict.fromkeys("ай айға айдан айы айын айлар айдың".split(), "месяц"),
    **dict.fromkeys("лет год года году годам годами годах годы".split(), "год"),
    **dict.fromkeys("день дня дней дням днями".split(), "день"),
    **dict.fromkeys("час часа часов часам часами".split(), "час"),
}
# words that may stand between a number and its unit: «от двух до семи лет», «десяти календарных дней»,
# «бес жылдан он жылға дейін»
_BETWEEN = frozenset(
    "до от и или либо не более менее свыше календарных рабочих полных дейін бастап астам кем жұмыс".split()
)
_LOOKAHEAD = 6


def _unit(tok: str) -> str | None:
    if tok in _EXACT_UNITS:
        return _EXACT_UNITS[tok]
    for start, unit in _UNITS:
        if tok.startswith(start):
            return unit
    return None


def _digit_value(tok: str) -> float | None:
    if not tok[0].isdigit():
        return None
    return float(re.sub(r"[\u00a0\u202f ]", "", tok).replace(",", "."))


def _numbers(tokens: list[str]) -> list[tuple[int, float]]:
    """(index of the run's last token, value) for each number written in digits or words."""
    out: list[tuple[int, float]] = []
    i = 0
    while i < len(tokens):
        digit = _digit_value(tokens[i])
        if digit is None and tokens[i] not in NUMBER_WORDS:
            i += 1
            continue
        total, current, last = 0.0, 0.0, i
        while i < len(tokens):
            tok = tokens[i]
            digit = _digit_value(tok)
            if digit is not None:
                if current:
                    break  # «до 3 7 лет» is two numbers
                current = digit
            elif tok in NUMBER_WORDS:
                value = NUMBER_WORDS[tok]
                if value in _SCALES:
                    total += (current or 1) * value
                    current = 0
                elif value == 100 and 0 < current < 10:
                    current *= 100  # «екі жүз»
                elif current and value >= current:
                    break  # «двух трех» is two numbers
                else:
                    current += value
            else:
                break
            last = i
            i += 1
        out.append((last, total + current))
    return out


def _figures(tokens: list[str]) -> set[tuple[float, str]]:
    """(value, unit) of each number followed by a unit within a few connecting words."""
    found: set[tuple[float, str]] = set()
    numbers = _numbers(tokens)
    number_ends = {end for end, _ in numbers}
    number_tokens = {j for j, tok in enumerate(tokens) if _digit_value(tok) is not None or tok in NUMBER_WORDS}
    for end, value in numbers:
        for j in range(end + 1, min(end + 1 + _LOOKAHEAD, len(tokens))):
            tok = tokens[j]
            if (unit := _unit(tok)) is not None:
                found.add((value, unit))
                break
            if tok in _BETWEEN or j in number_tokens or j in number_ends:
                continue
            break
    return found


# --- facts and conflicts ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NormFacts:
    """What a text says about norms: its predicates with polarity, punishments named, figures with units."""

    tokens: tuple[str, ...]
    lang: Lang
    predicates: dict[str, set[bool]] = field(default_factory=dict)
    punishments: frozenset[str] = frozenset()
    figures: frozenset[tuple[float, str]] = frozenset()
    numbers: frozenset[float] = frozenset()

    @classmethod
    def of(cls, text: str, lang: Lang, *, sentence: bool = False) -> NormFacts:
        """The facts of `text`; a `sentence` does not count punishments it says are not set."""
        tokens = [t.lower().replace("ё", "е") for t in _TOKEN_RE.findall(text)]
        predicates: dict[str, set[bool]] = {}
        for key, positive in _ru_predicates(tokens) if lang == "ru" else _kk_predicates(tokens):
            predicates.setdefault(key, set()).add(positive)
        return cls(
            tuple(tokens),
            lang,
            predicates,
            frozenset(_punishments(text.replace("ё", "е"), skip_not_set=sentence)),
            frozenset(_figures(tokens)),
            frozenset(v for _, v in _numbers(tokens)),
        )

    def __or__(self, other: NormFacts) -> NormFacts:
        predicates = {k: set(v) for k, v in self.predicates.items()}
        for k, v in other.predicates.items():
            predicates.setdefault(k, set()).update(v)
        return NormFacts(
            self.tokens + ("\n",) + other.tokens,
            self.lang,
            predicates,
            self.punishments | other.punishments,
            self.figures | other.figures,
            self.numbers | other.numbers,
        )


def _fmt(value: float) -> str:
    return f"{value:g}"


def conflicts(
    sentence: NormFacts, source: NormFacts, *, same_lang: NormFacts | None, question: NormFacts | None = None
) -> list[str]:
    """How `sentence` departs from the norms of its cited sources: reversed polarity (against `same_lang`, the
    facts of those in the sentence's language, when there are any), punishments and figures that `source` (the
    facts of all of them) does not have. Empty when it does not depart."""
    out: list[str] = []
    if same_lang is not None and sentence.lang == "ru":
        for key, polarities in sentence.predicates.items():
            said = same_lang.predicates.get(key)
            if said and not polarities & said:
                out.append(f"«{'' if True in polarities else 'не '}{key}» where the source says the opposite")
    elif same_lang is not None:
        source_tokens, sentence_tokens = list(same_lang.tokens), list(sentence.tokens)
        for key in sentence.predicates:
            if key not in same_lang.predicates and _kk_states(source_tokens, key):
                out.append(f"«{key}» where the source states it")
        # the reverse for verbs only: a word before «емес» is too often stated elsewhere in its plain sense
        for key in same_lang.predicates:
            if " " in key or len(key) < 4 or key in sentence.predicates:
                continue
            if _kk_states(sentence_tokens, key) and not _kk_states(source_tokens, key):
                out.append(f"«{key}…» stated where the source negates it")
    for name in sorted(sentence.punishments - source.punishments):
        out.append(f"punishment «{name}» not in the source")
    allowed_numbers = question.numbers if question is not None else frozenset()
    for value, unit in sorted(sentence.figures - source.figures):
        if value not in allowed_numbers:
            out.append(f"«{_fmt(value)} {unit}» not in the source")
    return out
