"""retrieval.analyzer on real Russian and Kazakh law text: tokens, stopwords, stems, language detection."""

from __future__ import annotations

import re
import sys
import threading
from pathlib import Path

import pytest
import snowballstemmer

from corpus.text import clean_text
from ingest_adilet.text_parser import parse_text
from retrieval.analyzer import analyze, detect_lang, normalize, stem, stem_kk, stem_ru, tokenize
from retrieval.synonyms import same_kazakh_stem


@pytest.fixture(scope="module")
def kaz_words(shared_dir: Path) -> set[str]:
    """Every word of the Kazakh texts in the shared corpus."""
    words: set[str] = set()
    for path in sorted((shared_dir / "corpus" / "kaz").glob("*.txt")):
        words.update(re.findall(r"[^\W\d_]+", normalize(path.read_text(encoding="utf-8"))))
    return words


def test_lowercase_and_yo() -> None:
    assert analyze("ЁЛКА и ещё раз Ёлка") == analyze("елка и еще раз елка")
    assert "ё" not in "".join(analyze("Пасынок ещё учится, всё решено"))


def test_latin_look_alikes_inside_kazakh_words() -> None:
    # adilet's Kazakh texts type "кодекстiң" with a Latin i; Latin words stay Latin
    assert analyze("Кодекстiң негiзгi iс", "kk") == analyze("Кодекстің негізгі іс", "kk")
    assert tokenize("email ipod") == ["email", "ipod"]


def test_article_numbers_stay_whole() -> None:
    assert tokenize("Статья 188-1. Скотокрадство") == ["статья", "188-1", "скотокрадство"]
    assert analyze("ст. 188 УК", "ru") == ["ст", "188", "ук"]
    # Kazakh: the number is a token and the hyphenated ending is not
    assert tokenize("ҚР ҚК-нің 188-бабы") == ["қр", "қк", "188", "бабы"]
    assert analyze("120-125 баптары", "kk") == ["120-125", "бап"]


def test_stopwords_removed_in_both_languages() -> None:
    assert analyze("и в на по что если", "ru") == []
    assert analyze("және үшін бойынша туралы осы", "kk") == []
    assert analyze("кража и грабеж", "ru") == ["краж", "грабеж"]


def test_a_kazakh_text_keeps_ten_which_russian_drops_as_he() -> None:
    # «он» is «he» in Russian and «ten» in Kazakh: «он сегіз жас» (eighteen) is not «сегіз жас» (eight)
    assert analyze("Он сегіз жасқа толмаған", "kk") == ["он", "сегіз", "жас", "толма"]
    assert analyze("Он сегіз жасқа толмаған") == ["он", "сегіз", "жас", "толма"]  # told Kazakh by its letters
    assert analyze("Он меня уволил", "ru") == ["увол"]
    assert analyze("сегіз жас", "kk") != analyze("он сегіз жас", "kk")


def test_russian_stems_are_snowball() -> None:
    snowball = snowballstemmer.stemmer("russian")
    words = "кражу кражи мошенничества увольнении работодателем алиментов наследства".split()
    assert analyze(" ".join(words), "ru") == [snowball.stemWord(w) for w in words]
    assert len(set(analyze("кража кражи кражу кражей", "ru"))) == 1


@pytest.mark.parametrize(
    ("forms", "stem"),
    [
        (["бап", "бабы", "баптың", "баптары", "бабына", "бабында"], "бап"),
        (["кодекс", "кодексі", "кодексінің", "кодекстің", "кодексіне", "кодексте", "кодексінде"], "кодекс"),
        (["заң", "заңның", "заңға", "заңда", "заңнан", "заңдар"], "заң"),
        (["құқық", "құқығы", "құқықтары", "құқықтарын"], "құқық"),
        (["дерек", "деректер", "деректерді", "деректердің"], "дерек"),
        (["субъект", "субъектінің", "субъектіге", "субъектілер"], "субъект"),
        # a noun in -іп/-ып voiced before a vowel: one stem, whichever the form (not тәрт and тәртіп)
        (["тәртіп", "тәртібі", "тәртібін", "тәртіпке", "тәртіппен"], "тәрт"),
        (["тақырып", "тақырыбы"], "тақыр"),
    ],
)
def test_kazakh_suffixes_on_real_words(forms: list[str], stem: str, kaz_words: set[str]) -> None:
    missing = [f for f in forms if f not in kaz_words]
    assert not missing, f"{missing} do not occur in the Kazakh corpus: pick real word forms"
    assert {stem_kk(f) for f in forms} == {stem}


@pytest.mark.parametrize(
    ("forms", "stem"),
    [
        (["шарт", "шарты", "шартқа", "шартты", "шарттың"], "шарт"),  # -ты only after a voiceless sound: not шар-ты
        (["қаңтар", "қаңтарға", "қаңтардан"], "қаңтар"),  # -тар is no plural after ң: not қаң-тар
        (["резидент", "резиденті"], "резидент"),
        (["орган", "органда", "органдағы"], "орган"),  # -нда follows only the possessive -ы/-і: not орга-нда
        (["мекен", "мекенде"], "мекен"),
        (["демалыс", "демалысы", "демалысын"], "демалыс"),  # a noun in -ыс with its possessive: not демалы-сы
        (["жүйе", "жүйесі"], "жүйе"),  # a stem in a vowel with -сы
    ],
)
def test_kazakh_endings_agree_with_the_stems_last_sound(forms: list[str], stem: str, kaz_words: set[str]) -> None:
    missing = [f for f in forms if f not in kaz_words]
    assert not missing, f"{missing} do not occur in the Kazakh corpus: pick real word forms"
    assert {stem_kk(f) for f in forms} == {stem}


def test_kazakh_locative_after_a_participle() -> None:
    # «жұмыстан шыққанда» (on leaving the job): шық-қан-да, the participle's ending and the locative
    assert stem_kk("шыққанда") == stem_kk("шыққан") == "шық"
    assert stem_kk("жұмысында") == "жұмыс"  # and -нда after the possessive


@pytest.mark.parametrize(
    ("forms", "stem"),
    [
        (["болса", "болсам", "болсаңыз"], "бол"),  # conditional, with its person
        (["бердім", "берсе"], "бер"),  # past with its person; conditional
        (["ұсталдым", "ұсталса"], "ұстал"),
        (["кеткім", "кетсе"], "кет"),  # «кеткім келеді»: I want to leave
        (["істеймін", "істейміз"], "істе"),  # present, first person
        (["қорқытса", "қорқытып"], "қорқыт"),
        (["алдым", "алып", "алған", "алады"], "ал"),  # a two-letter root: сатып алдым meets сатып алу
        (["ұрды", "ұрып", "ұрған"], "ұр"),  # «ұрып-соқты»: the law's ұру
        (["өтті", "өткен", "өтсе"], "өт"),  # «мерзімі өтті»: a time limit passed
    ],
)
def test_kazakh_verbs_inflected_for_person_and_mood(forms: list[str], stem: str) -> None:
    # a question's verbs (бердім, болса, кеткім келеді) meet the stems of the law's verbal nouns (беру, болу, кету)
    assert {stem_kk(f) for f in forms} == {stem}
    assert stem_kk(f"{stem}у") == stem


def test_kazakh_negation_is_kept() -> None:
    # «жалақысы сақталмайтын демалыс» is unpaid leave: the negation is the meaning, not an ending to drop
    assert stem_kk("сақталмайтын") != stem_kk("сақталатын")
    assert stem_kk("төлемейді") != stem_kk("төлейді")


def test_the_kazakh_privative_is_kept(kaz_words: set[str]) -> None:
    # «өтеусіз» (free of charge) is not «өтеу» (compensation), «тіркеусіз» (unregistered) not «тіркеу»: the corpus's
    # Kazakh words in a vowel and -сыз/-сіз are all privatives; a verb's polite «you» after -й- is still cut
    for without, word in (
        ("өтеусіз", "өтеу"),
        ("тіркеусіз", "тіркеу"),
        ("лицензиясыз", "лицензия"),
        ("ақшасыз", "ақша"),
    ):
        assert {without, word} <= kaz_words
        assert stem_kk(without) != stem_kk(word)
        assert not same_kazakh_stem(stem_kk(without), stem_kk(word))  # nor does the map's loose match join them
    assert stem_kk("төлейсіз") == stem_kk("төлейді") == "төле"
    assert same_kazakh_stem("шарты", "шарт") and not same_kazakh_stem("шартсыз", "шарт")


def test_kazakh_stemmer_keeps_short_stems() -> None:
    assert stem_kk("ата") == "ата"  # not "ат"
    assert stem_kk("жаза") == "жаза"
    assert stem_kk("жазасы") == "жаза"
    assert stem_kk("ұрлығы") == "ұрлық"  # root-final ғ back to қ
    assert stem_kk("ұрлық") == "ұрлық"
    # a two-letter verb root is kept only under a verb's ending: the nouns around it are not cut to it
    assert stem_kk("аты") == "аты"  # its name
    assert stem_kk("ішінде") == "іші"  # within
    assert stem_kk("алдында") == "алд"  # before


def test_stemmer_follows_the_script_of_each_word() -> None:
    # A Kazakh word in a Russian question still goes to the Kazakh stemmer, and the reverse.
    assert analyze("штраф за ұрлығы", "ru") == ["штраф", "ұрлық"]
    assert analyze("кодексінің 52-бабы", "ru")[:2] == ["кодекс", "52"]
    # a Kazakh text stems its words without Kazakh letters as Kazakh too
    assert analyze("кодексінің 52-бабы", "kk") == ["кодекс", "52", "бап"]
    assert analyze("кодексінің 52-бабы") == ["кодекс", "52", "бап"]


def test_real_articles_analyze_in_both_languages(shared_dir: Path) -> None:
    ru = (shared_dir / "corpus" / "rus" / "K1400000226.txt").read_text(encoding="utf-8")
    articles = {a.number: a for a in parse_text(ru, "K1400000226", "ru")}
    terms = analyze(f"Статья 188-1. {articles['188-1'].title}\n{articles['188-1'].text}", "ru")
    assert terms[:3] == ["стат", "188-1", "скотокрадств"]
    assert all(terms) and "и" not in terms

    kk = (shared_dir / "corpus" / "kaz" / "Z1300000094.txt").read_text(encoding="utf-8")
    article = next(a for a in parse_text(kk, "Z1300000094", "kk") if a.number == "8")
    kk_terms = analyze(f"{article.number}-бап. {article.title}\n{article.text}")
    assert kk_terms[:2] == ["8", "бап"]
    assert "дерек" in kk_terms and "және" not in kk_terms


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("Какое наказание за кражу телефона?", "ru"),
        ("Ұрлық үшін қандай жаза бар?", "kk"),
        ("жалақы қашан төленеді", "kk"),
        ("жалакы кашан толенеди бойынша", "kk"),  # typed without Kazakh letters
        ("кандай жауапкершилик бар", "kk"),
        ("ст. 188 УК РК", "ru"),
        ("ҚР ҚК 188-бабы", "kk"),
        ("Можно ли уволить беременную по статье 52 ТК?", "ru"),
        ("Еңбек кодексінің 52-бабы бойынша жұмыстан шығаруға бола ма?", "kk"),
        ("Что значит ұрлық?", "ru"),
        ("Алименты на ребенка: қанша төлеу керек?", "kk"),
    ],
)
def test_detect_lang(text: str, lang: str) -> None:
    assert detect_lang(text) == lang


def test_each_line_is_stemmed_in_its_own_language() -> None:
    terms = analyze("Ұрлық үшін қандай жаза бар?\nУК РК статья 188 Кража")
    assert terms == ["ұрлық", "жаза", "бар", "ук", "рк", "стат", "188", "краж"]
    # a line without clues takes the language of the whole text
    assert analyze("Жалақы қашан төленеді\nбабы") == ["жалақ", "қашан", "төлен", "бап"]


@pytest.fixture(scope="module")
def rus_words(shared_dir: Path) -> list[str]:
    """~10k distinct Russian words of the Criminal and Labour codes, in a fixed order."""
    words: dict[str, None] = {}
    for doc_id in ("K1400000226", "K1500000414", "K1400000235"):
        text = normalize((shared_dir / "corpus" / "rus" / f"{doc_id}.txt").read_text(encoding="utf-8"))
        words.update(dict.fromkeys(w for w in re.findall(r"[а-я]+", text) if len(w) > 2))
    return list(words)[:10_000]


def test_russian_stems_are_the_same_from_many_threads(rus_words: list[str]) -> None:
    # The bot answers from 16 worker threads: a stemmer shared between them mixed up its state (IndexError,
    # «указаны» → «одежд»), and lru_cache kept the wrong stem for the life of the process.
    reference = snowballstemmer.stemmer("russian")
    expected = {w: reference.stemWord(w) for w in rus_words}
    assert len(rus_words) == 10_000
    stem_ru.cache_clear()
    stem.cache_clear()
    errors: list[BaseException] = []
    got: list[dict[str, str]] = []
    start = threading.Barrier(8)

    def work(n: int) -> None:
        order = rus_words[n::8] + rus_words  # each thread starts on its own share, then stems them all
        start.wait()
        out = {}
        for w in order:
            try:
                out[w] = stem_ru(w)
            except Exception as err:
                errors.append(err)
        got.append(out)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, as a loaded server does
    try:
        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    wrong = {w: s for out in got for w, s in out.items() if s != expected[w]}
    assert wrong == {}
    # and what is remembered afterwards is right too
    assert {w: stem(w, "ru") for w in rus_words} == expected


def test_clean_text_makes_outside_text_safe() -> None:
    # invalid UTF-8 from argv or JSON escapes comes as lone surrogates, which no encoder accepts
    assert clean_text("кража \udcff\udcfe телефона") == "кража \ufffd\ufffd телефона"
    assert clean_text("\ud83d\ude00") == "😀"  # a pair written as two escapes is its character
    assert clean_text("кра\u00adжа\u200b\x00тел\ufeff") == "кража тел"
    assert clean_text("и\u0306 ") == "й "  # NFC
    assert clean_text("строка\nи\tтаб") == "строка\nи\tтаб"
