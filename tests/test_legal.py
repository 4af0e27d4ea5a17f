"""corpus.legal: headings and citations of real articles read back, references in Russian and Kazakh, /article."""

from __future__ import annotations

from pathlib import Path

import pytest

from corpus.legal import (
    CIVIL_GENERAL_ID,
    CIVIL_SPECIAL_ID,
    ArticleRef,
    article_lang,
    article_ref,
    citation,
    cited_refs,
    code_name,
    heading,
    read_article_args,
    read_references,
    source_url,
    split_article_args,
)
from corpus.legal.registry import ADILET_SOURCES, CRIMINAL_CODE_ID, AdiletSource, source
from corpus.records import Lang
from tests.support.answer import articles

UK = CRIMINAL_CODE_ID
TK = "K1500000414"
KOAP = "K1400000235"
CONST = "K950001000_"
PERSONAL_DATA = "Z1300000094"
LAND = "K030000442_"  # Land Code, Russian and Kazakh in ../shared
NOTARIES = "Z970000155_"  # Law on notaries, Russian and Kazakh

ROUND_TRIP = [
    (UK, "ru"),
    (CIVIL_GENERAL_ID, "ru"),
    (CIVIL_SPECIAL_ID, "ru"),
    (TK, "ru"),
    (CONST, "ru"),
    (PERSONAL_DATA, "ru"),
    (LAND, "kk"),
    (NOTARIES, "kk"),
]


@pytest.mark.parametrize("doc_id,lang", ROUND_TRIP)
def test_heading_of_every_real_article_reads_back_as_that_article(shared_dir: Path, doc_id: str, lang: Lang) -> None:
    found = articles(shared_dir, doc_id, lang)
    assert len(found) > 30
    code = code_name(doc_id, lang)
    for number, article in found.items():
        text = heading(code, number, article.title, lang)
        assert read_references(text).articles()[0] == ArticleRef(doc_id, number), text


@pytest.mark.parametrize("doc_id,lang", [*ROUND_TRIP, (KOAP, "ru"), ("Z100000274_", "kk"), (PERSONAL_DATA, "kk")])
def test_citation_of_every_real_article_is_read_in_an_answer(shared_dir: Path, doc_id: str, lang: Lang) -> None:
    code = code_name(doc_id, lang)
    for number, article in articles(shared_dir, doc_id, lang).items():
        text = f"Согласно [S1] {citation(code, number, article.title, lang)}."
        [ref, *_] = cited_refs(text)
        assert ref.numbers == (number,) and ref.docs is not None and doc_id in ref.docs, text


def test_a_law_named_in_kazakh_in_a_question() -> None:
    assert read_references("Дербес деректер туралы Заңның 8-бабы").articles() == [ArticleRef(PERSONAL_DATA, "8")]


# How people name each registry document in a question, written by hand (not derived from the aliases): the
# Kazakh name in the genitive and the dative (a code's head word with and without the possessive, «кодекстің» /
# «кодексіне»; a law's short and official names, «заңның» / «Заңына»), the Russian one in the genitive and the dative.
# The article asked for: 5, or 500 for the Civil Code's special part (its articles start at 406).
NAMED_IN_KAZAKH: dict[str, tuple[str, str]] = {
    "K950001000_": ("Конституцияның", "Ата Заңға"),
    "K940001000_": ("Азаматтық кодекстің", "Азаматтық кодекске"),
    "K990000409_": ("ҚР Азаматтық кодексінің", "Азаматтық кодексіне"),
    "K1500000414": ("Еңбек кодексінің", "Қазақстан Республикасының Еңбек кодексіне"),
    "K1400000235": ("ӘҚБтК-нің", "Әкімшілік құқық бұзушылық туралы Қазақстан Республикасының Кодексіне"),
    "K1400000226": ("Қылмыстық кодекстің", "Қылмыстық кодексіне"),
    "K1100000518": ("Неке және отбасы туралы кодекстің", "Неке (ерлі-зайыптылық) және отбасы туралы Кодекске"),
    "K2000000360": ("Денсаулық кодексінің", "Халық денсаулығы және денсаулық сақтау жүйесі туралы кодекске"),
    "K1500000375": ("Кәсіпкерлік кодекстің", "Кәсіпкерлік кодексіне"),
    "K2000000350": ("Әкімшілік рәсімдік-процестік кодекстің", "ӘРПК-ге"),
    "K2300000224": ("Әлеуметтік кодекстің", "Әлеуметтік кодексіне"),
    "K1500000377": ("Азаматтық процестік кодекстің", "Азаматтық процестік кодексіне"),
    "K1400000231": ("Қылмыстық-процестік кодекстің", "Қылмыстық процестік кодексіне"),
    "K030000442_": ("Жер кодексінің", "Жер кодексіне"),
    "K1700000120": ("Салық кодексінің", "Салық кодексіне"),
    "Z2400000106": ("Мемлекеттік сатып алу туралы заңның", "«Мемлекеттік сатып алу туралы» ҚР Заңына"),
    "Z100000261_": (
        "Атқарушылық іс жүргізу және сот орындаушыларының мәртебесі туралы Заңның",
        "Атқарушылық іс жүргізу туралы заңға",
    ),
    "Z100000274_": ("Тұтынушылардың құқықтарын қорғау туралы Заңның", "Тұтынушылар құқықтарын қорғау туралы заңға"),
    "Z970000094_": ("Тұрғын үй қатынастары туралы заңның", "«Тұрғын үй қатынастары туралы» Заңға"),
    "Z950002444_": (
        "Қазақстан Республикасындағы банктер және банк қызметі туралы Заңның",
        "Банктер және банк қызметі туралы заңға",
    ),
    "Z1200000561": ("Әскери қызмет және әскери қызметшілердің мәртебесі туралы Заңның", "Әскери қызмет туралы заңға"),
    "Z980000220_": (
        "Жауапкершілігі шектеулі және қосымша жауапкершілігі бар серіктестіктер туралы Заңның",
        "ЖШС туралы заңға",
    ),
    "Z970000155_": ("Нотариат туралы заңның", "Нотариат туралы Заңға"),
    "Z070000310_": (
        "Жылжымайтын мүлікке құқықтарды мемлекеттік тіркеу туралы Заңның",
        "Жылжымайтын мүлікке құқықтарды тіркеу туралы заңға",
    ),
    "Z030000446_": (
        "Көлік құралдары иелерінің азаматтық-құқықтық жауапкершілігін міндетті сақтандыру туралы Заңның",
        "«Көлік құралдары иелерінің азаматтық-құқықтық жауапкершілігін міндетті сақтандыру туралы» "
        "Қазақстан Республикасының Заңына",
    ),
    "Z070000319_": ("Білім туралы заңның", "Білім туралы Заңға"),
    "Z1500000416": (
        "Мемлекеттік қызмет туралы заңның",
        "«Қазақстан Республикасының мемлекеттік қызметі туралы» Заңына",
    ),
    "Z020000345_": ("Баланың құқықтары туралы заңның", "Қазақстан Республикасындағы баланың құқықтары туралы Заңына"),
    "Z030000461_": ("Бағалы қағаздар рыногы туралы заңның", "Бағалы қағаздар рыногы туралы Заңға"),
    "Z1700000062": ("Коллекторлық қызмет туралы заңның", "Коллекторлық қызмет туралы Заңға"),
    "Z1400000194": ("Жол жүрісі туралы заңның", "Жол жүрісі туралы Заңға"),
    "Z1800000133": ("Бағалау қызметі туралы заңның", "Қазақстан Республикасындағы бағалау қызметі туралы Заңына"),
    "Z950002198_": (
        "Заңды тұлғаларды мемлекеттік тіркеу және филиалдар мен өкілдіктерді есептік тіркеу туралы Заңның",
        "Заңды тұлғаларды тіркеу туралы заңға",
    ),
    "Z1800000167": ("Валюталық реттеу және валюталық бақылау туралы Заңның", "Валюталық реттеу туралы заңға"),
    "Z2300000193": ("Цифрлық активтер туралы заңның", "Қазақстан Республикасындағы цифрлық активтер туралы Заңына"),
    "Z1300000094": ("Дербес деректер туралы Заңның", "Дербес деректер және оларды қорғау туралы заңға"),
    "Z040000573_": (
        "Кредиттік бюролар және кредиттік тарихты қалыптастыру туралы Заңның",
        "Кредиттік бюролар туралы заңға",
    ),
    "Z1200000056": ("Микроқаржылық қызмет туралы заңның", "Микроқаржы қызметі туралы Заңға"),
    "Z2200000178": (
        "Азаматтардың төлем қабілеттілігін қалпына келтіру және банкроттығы туралы Заңның",
        "Азаматтардың банкроттығы туралы заңға",
    ),
    "Z1400000176": ("Оңалту және банкроттық туралы заңның", "Оңалту және банкроттық туралы Заңға"),
}
NAMED_IN_RUSSIAN: dict[str, tuple[str, str]] = {
    "K950001000_": ("Конституции РК", "Конституции"),
    "K940001000_": ("Гражданского кодекса", "Гражданскому кодексу"),
    "K990000409_": ("Гражданского кодекса РК", "Гражданскому кодексу РК"),
    "K1500000414": ("Трудового кодекса", "Трудовому кодексу"),
    "K1400000235": ("Кодекса об административных правонарушениях", "КоАП"),
    "K1400000226": ("Уголовного кодекса", "Уголовному кодексу"),
    "K1100000518": ("Кодекса о браке и семье", "Кодексу Республики Казахстан о браке (супружестве) и семье"),
    "K2000000360": ("Кодекса о здоровье народа", "Кодексу о здоровье народа и системе здравоохранения"),
    "K1500000375": ("Предпринимательского кодекса", "Предпринимательскому кодексу"),
    "K2000000350": ("Административного процедурно-процессуального кодекса", "АППК"),
    "K2300000224": ("Социального кодекса", "Социальному кодексу"),
    "K1500000377": ("Гражданского процессуального кодекса", "Гражданскому процессуальному кодексу"),
    "K1400000231": ("Уголовно-процессуального кодекса", "Уголовно-процессуальному кодексу"),
    "K030000442_": ("Земельного кодекса", "Земельному кодексу"),
    "K1700000120": ("Налогового кодекса", "Налоговому кодексу"),
    "Z2400000106": ("Закона о госзакупках", "Закону о государственных закупках"),
    "Z100000261_": ("Закона об исполнительном производстве", "Закону об исполнительном производстве"),
    "Z100000274_": ("Закона о защите прав потребителей", "Закону о защите прав потребителей"),
    "Z970000094_": ("Закона о жилищных отношениях", "Закону о жилищных отношениях"),
    "Z950002444_": ("Закона о банках", "Закону о банках и банковской деятельности"),
    "Z1200000561": ("Закона о воинской службе", "Закону о воинской службе и статусе военнослужащих"),
    "Z980000220_": ("Закона о ТОО", "Закону о товариществах с ограниченной и дополнительной ответственностью"),
    "Z970000155_": ("Закона о нотариате", "Закону о нотариате"),
    "Z070000310_": (
        "Закона о регистрации прав на недвижимость",
        "Закону о государственной регистрации прав на недвижимое имущество",
    ),
    "Z030000446_": (
        "Закона об ОГПО ВТС",
        "Закону об обязательном страховании гражданско-правовой ответственности владельцев транспортных средств",
    ),
    "Z070000319_": ("Закона об образовании", "Закону об образовании"),
    "Z1500000416": ("Закона о госслужбе", "Закону о государственной службе"),
    "Z020000345_": ("Закона о правах ребенка", "Закону о правах ребенка"),
    "Z030000461_": ("Закона о рынке ценных бумаг", "Закону о рынке ценных бумаг"),
    "Z1700000062": ("Закона о коллекторской деятельности", "Закону о коллекторской деятельности"),
    "Z1400000194": ("Закона о дорожном движении", "Закону о дорожном движении"),
    "Z1800000133": ("Закона об оценочной деятельности", "Закону об оценочной деятельности"),
    "Z950002198_": ("Закона о регистрации юрлиц", "Закону о государственной регистрации юридических лиц"),
    "Z1800000167": ("Закона о валютном регулировании", "Закону о валютном регулировании и валютном контроле"),
    "Z2300000193": ("Закона о цифровых активах", "Закону о цифровых активах"),
    "Z1300000094": ("Закона о персональных данных", "Закону о персональных данных и их защите"),
    "Z040000573_": ("Закона о кредитных бюро", "Закону о кредитных бюро и формировании кредитных историй"),
    "Z1200000056": ("Закона о микрофинансовой деятельности", "Закону о микрофинансовой деятельности"),
    "Z2200000178": ("Закона о банкротстве граждан", "Закону о восстановлении платежеспособности и банкротстве граждан"),
    "Z1400000176": ("Закона о реабилитации и банкротстве", "Закону о реабилитации и банкротстве"),
}


def _asked(doc_id: str) -> str:
    return "500" if doc_id == CIVIL_SPECIAL_ID else "5"


def test_the_named_documents_are_the_whole_registry() -> None:
    assert set(NAMED_IN_KAZAKH) == set(NAMED_IN_RUSSIAN) == {s.doc_id for s in ADILET_SOURCES}


@pytest.mark.parametrize("doc_id", list(NAMED_IN_KAZAKH))
def test_every_document_named_in_kazakh_gets_its_article(doc_id: str) -> None:
    genitive, dative = NAMED_IN_KAZAKH[doc_id]
    number = _asked(doc_id)
    for question in (f"{genitive} {number}-бабы не дейді?", f"{dative} сәйкес {number}-бап қалай қолданылады?"):
        assert read_references(question).articles() == [ArticleRef(doc_id, number)], question


@pytest.mark.parametrize("doc_id", list(NAMED_IN_RUSSIAN))
def test_every_document_named_in_russian_gets_its_article(doc_id: str) -> None:
    genitive, dative = NAMED_IN_RUSSIAN[doc_id]
    number = _asked(doc_id)
    for question in (f"Что говорит статья {number} {genitive}?", f"Согласно {dative}, статья {number} — это что?"):
        assert read_references(question).articles() == [ArticleRef(doc_id, number)], question


@pytest.mark.parametrize("entry", ADILET_SOURCES, ids=lambda s: s.doc_id)
def test_every_alias_names_its_own_document_alone(entry: AdiletSource) -> None:
    # No alias is shared with another document (the Civil Code's two parts are one code) and none is swallowed by
    # a longer alias of another; a bare «заң», «закон», «кодекс» names nothing.
    for alias in entry.aliases:
        [ref] = read_references(f"статья 1 {alias}").articles()
        assert ref.doc_id and source(ref.doc_id).short_ru == entry.short_ru, alias
    for generic in ("заң", "заңы", "закон", "кодекс", "кодексі", "туралы заң", "о законе"):
        assert read_references(f"{generic} 5-бабы").articles() == [ArticleRef("", "5")], generic


def test_only_the_states_name_may_stand_inside_a_documents_name() -> None:
    official = "«Дербес деректер және оларды қорғау туралы» Қазақстан Республикасының Заңының 8-бабы"
    assert read_references(official).articles() == [ArticleRef(PERSONAL_DATA, "8")]
    other_words = "Дербес деректер туралы өтініш және заңның 8-бабы"
    assert read_references(other_words).articles() == [ArticleRef("", "8")]


def test_headings_and_citations_in_both_languages() -> None:
    assert heading("УК РК", "188", "Кража", "ru") == "УК РК. Статья 188. Кража"
    assert heading("ҚР ҚК", "188", "Ұрлық", "kk") == "ҚР ҚК. 188-бап. Ұрлық"
    assert heading("УК РК", "47", "", "ru") == "УК РК. Статья 47"
    assert citation("ҚР ҚК", "188-1", "Ұрлық", "kk") == "ҚР ҚК, 188-1-бап. Ұрлық"
    assert code_name(UK, "kk") == "ҚР ҚК" and code_name("Z000", "ru") == "Z000"
    assert source_url(UK, "kk") == "https://adilet.zan.kz/kaz/docs/K1400000226"


@pytest.mark.parametrize(
    "text,refs,is_range",
    [
        ("ст. 188 УК", [(UK, "188")], False),
        ("статьи 187-190 УК РК", [(UK, "187"), (UK, "188"), (UK, "189"), (UK, "190")], True),
        ("статьей с 120 по 122 Трудового кодекса", [(TK, "120"), (TK, "121"), (TK, "122")], True),
        ("188-1 статья УК", [(UK, "188-1")], False),  # an article of its own, not a range
        ("статьи 1-400 ТК", [(TK, "1"), (TK, "400")], False),  # wider than MAX_RANGE: the two ends
        ("ҚК-нің 9999-бабы", [(UK, "9999")], False),
        ("Қылмыстық кодекстің 188-бабы", [(UK, "188")], False),
        ("120-125 баптары ЕК", [(TK, str(n)) for n in range(120, 126)], True),
        ("136 КоАП", [(KOAP, "136")], False),
        ("ст. 9 ГК и ст. 500 ГК", [(CIVIL_GENERAL_ID, "9"), (CIVIL_SPECIAL_ID, "500")], False),
        ("статья 188", [("", "188")], False),  # no code named: any document
        ("часть 2 статьи 7", [("", "7")], False),  # «2» is a part, not an article
    ],
)
def test_references_in_russian_and_kazakh(text: str, refs: list[tuple[str, str]], is_range: bool) -> None:
    found = read_references(text)
    assert found.articles() == [ArticleRef(d, n) for d, n in refs]
    assert found.is_range is is_range


def test_ambiguous_abbreviation_names_a_code_only_next_to_a_reference() -> None:
    assert read_references("моя УК не чинит крышу").codes == ()
    assert read_references("по ст. 188 УК").codes == (UK,)
    assert read_references("статья 188").articles(default_doc=UK) == [ArticleRef(UK, "188")]


@pytest.mark.parametrize(
    ("args", "code", "number", "ignored"),
    [
        ("УК 188 часть 2", "УК", "188", "часть 2"),
        ("УК 188 189", "УК", "188", "189"),
        ("УК ч. 3 ст. 188", "УК", "188", "ч. 3"),
        ("УК 188 ч.2 п.1", "УК", "188", "ч.2 п.1"),
        ("ҚК 188 2-бөлік", "ҚК", "188", "2-бөлік"),
        ("ҚК 188-бап 3-тармағы", "ҚК", "188", "3-тармағы"),
        ("ТК РК ст. 22", "ТК РК", "22", ""),
    ],
)
def test_article_arguments_take_the_article_and_name_what_is_ignored(args, code, number, ignored) -> None:
    read = read_article_args(args.split())
    assert read is not None and (read.code, read.number, read.ignored) == (code, number, ignored)
    assert split_article_args(args.split()) == (code, number)


def test_article_command_arguments_resolve_once() -> None:
    assert split_article_args(["ТК", "РК", "ст.", "22"]) == ("ТК РК", "22")
    assert split_article_args(["ҚК", "188-1-бап"]) == ("ҚК", "188-1")
    assert split_article_args(["УК", "кража"]) is None
    assert article_ref("ҚК", "188-1") == ArticleRef(UK, "188-1")
    assert article_ref("ГК", "500") == ArticleRef(CIVIL_SPECIAL_ID, "500")
    assert article_ref("КоАП РК", "608.") == ArticleRef(KOAP, "608")
    assert article_ref("нет такого", "1") is None
    # a law by its Kazakh short name, as the bot's sources print it
    assert article_ref(code_name(PERSONAL_DATA, "kk"), "8") == ArticleRef(PERSONAL_DATA, "8")
    # a code named in Kazakh shows the Kazakh text, capitals included
    assert article_lang("ҚК", "ru") == "kk" and article_lang("УК", "kk") == "kk" and article_lang("УК", "ru") == "ru"


def test_citations_in_an_answer_name_their_code() -> None:
    [ru] = cited_refs("согласно статьям 188, 189 и 190-1 Уголовного кодекса")
    assert ru.numbers == ("188", "189", "190-1") and ru.docs == frozenset({UK})
    [kk] = cited_refs("Еңбек кодексінің 22-бабы")
    assert kk.numbers == ("22",) and kk.docs == frozenset({TK})
    [bare] = cited_refs("статья 7 настоящего Закона")
    assert bare.docs is None


def test_registry_urls_match_the_record_urls(shared_dir: Path) -> None:
    [first, *_] = articles(shared_dir, NOTARIES, "kk").values()
    assert first.url.startswith(source_url(NOTARIES, "kk")) and source(NOTARIES).url("kk") == source_url(NOTARIES, "kk")
