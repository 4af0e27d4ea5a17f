"""retrieval.query: explicit references, code names, the crime check, the synonym map against the corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from corpus.legal import CIVIL_GENERAL_ID, CIVIL_GENERAL_LAST_ARTICLE, CIVIL_SPECIAL_ID
from corpus.legal.registry import CRIMINAL_CODE_ID
from ingest_adilet.text_parser import parse_text
from retrieval.analyzer import analyze
from retrieval.query import ArticleRef, analyze_query
from retrieval.synonyms import load_synonyms
from tests.support.retrieval import corpus_titles

UK = CRIMINAL_CODE_ID
KOAP = "K1400000235"
TK = "K1500000414"
KOBS = "K1100000518"
CONST = "K950001000_"
ZPP = "Z100000274_"
GK = "K940001000_"  # the Civil Code, general part


def refs(*pairs: tuple[str, str]) -> tuple[ArticleRef, ...]:
    return tuple(ArticleRef(d, a) for d, a in pairs)


@pytest.mark.parametrize(
    ("question", "expected", "is_range"),
    [
        ("ст. 188 УК", refs((UK, "188")), False),
        ("Что грозит по статье 188 УК РК?", refs((UK, "188")), False),
        ("статьи 188-1 УК", refs((UK, "188-1")), False),
        ("ст.ст. 190, 191 УК", refs((UK, "190"), (UK, "191")), False),
        ("статьи 190-192 УК РК", refs((UK, "190"), (UK, "191"), (UK, "192")), True),
        ("статьи с 120 по 125 УК", refs(*((UK, str(n)) for n in range(120, 126))), True),
        ("статья 608 КоАП", refs((KOAP, "608")), False),
        ("ч. 2 ст. 73-3 КоАП РК", refs((KOAP, "73-3")), False),
        ("ҚР ҚК 188-бабы не дейді?", refs((UK, "188")), False),
        ("ҚК-нің 188-бабы", refs((UK, "188")), False),
        ("Қылмыстық кодексінің 99-бабы", refs((UK, "99")), False),
        ("Қылмыстық кодексiнiң 99-бабы", refs((UK, "99")), False),  # Latin i, as adilet types it
        ("188-1-бабы бойынша жаза қандай?", refs((UK, "188-1")), False),
        ("136 УК", refs((UK, "136")), False),
        ("статья 15 Трудового кодекса", refs((TK, "15")), False),
        ("по статье 52 трудового кодекса уволили", refs((TK, "52")), False),
        ("Конституция статья 29", refs((CONST, "29")), False),
        ("статья 29 Конституции РК", refs((CONST, "29")), False),
        ("Уголовному кодексу статья 99", refs((UK, "99")), False),
        ("Кодекса об административных правонарушениях статья 434", refs((KOAP, "434")), False),
        ("статья 14 Закона о защите прав потребителей", refs((ZPP, "14")), False),
        ("статья 52 ТК и статья 87 КоАП", refs((TK, "52"), (KOAP, "87")), False),
        ("ст. 188 УК и 608 КоАП", refs((UK, "188"), (KOAP, "608")), False),
        ("Семейного кодекса статья 139", refs((KOBS, "139")), False),
        # the code named elsewhere in the question, once
        ("В Трудовом кодексе что сказано в статье 52?", refs((TK, "52")), False),
        # no code: the Criminal Code only for a crime, else any document
        ("За кражу по 188 статье что будет?", refs((UK, "188")), False),
        ("120-125 баптары ұрлық туралы", refs(*((UK, str(n)) for n in range(120, 126))), True),
        ("что написано в 188 статье?", refs(("", "188")), False),
        ("188-бап", refs(("", "188")), False),
        ("статья 52 ТК и статья 10 КоАП, а также статья 5", refs((TK, "52"), (KOAP, "10"), ("", "5")), False),
        # numbers that are not articles
        ("часть 2 статьи 188 УК", refs((UK, "188")), False),
        ("пункт 3 статьи 52 ТК", refs((TK, "52")), False),
        ("Мне 25 лет, работаю 3 года", (), False),
        ("Бабушка 2 бабушки", (), False),
        # «ст» only as a whole word: «стало 2027» is not «ст. 2027» with the code «ало»
        ("Окончание было в 2026, теперь стало 2027. Дают ли отсрочку?", (), False),
        ("стало 5 лет, сталь 10 тонн, стажу 3 года", (), False),
        ("ст 188 УК", refs((UK, "188")), False),
        ("ст.188 УК", refs((UK, "188")), False),
        ("ст.ст.190, 191 УК", refs((UK, "190"), (UK, "191")), False),
    ],
)
def test_explicit_references(question: str, expected: tuple[ArticleRef, ...], is_range: bool) -> None:
    info = analyze_query(question)
    assert info.refs == expected
    assert info.is_range is is_range


@pytest.fixture(scope="module")
def civil_parts(shared_dir: Path) -> dict[str, list[str]]:
    """Article numbers of the two Civil Code documents, parsed from the real texts."""
    out = {}
    for doc_id in (CIVIL_GENERAL_ID, CIVIL_SPECIAL_ID):
        text = (shared_dir / "corpus" / "rus" / f"{doc_id}.txt").read_text(encoding="utf-8")
        out[doc_id] = [a.number for a in parse_text(text, doc_id, "ru")]
    return out


def test_civil_code_split_matches_the_corpus(civil_parts: dict[str, list[str]]) -> None:
    general = {int(n.split("-")[0]) for n in civil_parts[CIVIL_GENERAL_ID]}
    special = {int(n.split("-")[0]) for n in civil_parts[CIVIL_SPECIAL_ID]}
    assert max(general) == CIVIL_GENERAL_LAST_ARTICLE
    assert min(special) == CIVIL_GENERAL_LAST_ARTICLE + 1


@pytest.mark.parametrize(
    ("question", "doc_id"),
    [
        ("ст. 917 ГК", CIVIL_SPECIAL_ID),
        ("ст. 405 ГК РК", CIVIL_GENERAL_ID),
        ("статья 406 Гражданского кодекса", CIVIL_SPECIAL_ID),
        ("статья 157-1 ГК", CIVIL_GENERAL_ID),
        ("АК 1072-1-бабы", CIVIL_SPECIAL_ID),
    ],
)
def test_civil_code_reference_goes_to_its_part(question: str, doc_id: str, civil_parts: dict[str, list[str]]) -> None:
    (ref,) = analyze_query(question).refs
    assert ref.doc_id == doc_id
    assert ref.article in civil_parts[doc_id]


def test_codes_named_in_the_question() -> None:
    assert analyze_query("Что говорит Трудовой кодекс и КоАП про зарплату?").codes == (TK, KOAP)
    assert analyze_query("по ГК").codes == ()  # a bare ambiguous abbreviation
    assert analyze_query("статья ГК о займе").codes == (CIVIL_GENERAL_ID, CIVIL_SPECIAL_ID)
    # УК = управляющая компания, ЖК = жилой комплекс: not codes here
    info = analyze_query("Купил квартиру в ЖК, УК не убирает подъезд")
    assert info.codes == () and not info.is_criminal


CRIMINAL = [
    "Мой сосед украл велосипед из подъезда, что ему будет?",
    "Сколько лет дают за убийство по неосторожности?",
    "Какое наказание за мошенничество с кредитами?",
    "Знакомый взял взятку в акимате, могут ли его посадить?",
    "Если продавал наркотики через закладки, какой срок?",
    "Меня ограбили на улице и отобрали телефон",
    "Угнали машину со двора, куда обращаться?",
    "Возбудили уголовное дело против брата, что делать?",
    "Может ли подозреваемый отказаться давать показания?",
    "Грозит ли лишение свободы за побои?",
    "Что грозит за организацию финансовой пирамиды?",
    "Ағамның көлігін ұрлап кетті, не істеу керек?",
    "Алаяқтар картамнан ақша алып қойды",
    "Кісі өлтіргені үшін қандай жаза бар?",
    "Пара бергені үшін қылмыстық жауапкершілік қандай?",
    "Есірткі сатқаны үшін қанша жыл түрмеге отырады?",
    "Какой срок лишения свободы могут дать?",  # the phrase, its words in a row
    "Бас бостандығынан айыру неше жылға дейін?",
    "ст. 190 УК РК часть 2",
]
NOT_CRIMINAL = [
    "Какой административный штраф за превышение скорости?",
    "Какое наказание за превышение скорости на 40 км/ч?",
    "Работодатель задерживает зарплату третий месяц",
    "Как подать на развод, если муж не согласен?",
    "Сколько дней ежегодного отпуска положено по закону?",
    "Как вступить в наследство после смерти отца?",
    "Магазин отказывается вернуть деньги за бракованный телефон",
    "Какой размер алиментов на двоих детей?",
    "Можно ли уволить беременную по сокращению штата?",
    "Коллекторы звонят родственникам, законно ли это?",
    "Что такое срок исковой давности?",
    "Жұмыс беруші жалақыны үш ай бойы төлемей жүр",
    "Ажырасу үшін қандай құжаттар керек?",
    "Мұраны қалай қабылдауға болады?",
    "Жылдамдықты асырғаны үшін айыппұл қанша?",
    "статья 52 ТК РК",
    "Начальник хочет наказать меня за прогул, в какой срок он может это сделать?",  # discipline, not a crime
    # a word of a crime phrase alone is no crime: «лишение» (of parental rights), «бас» (in «басқа», another, and
    # «бас тарту», to refuse), «айыру» (to deprive)
    "Как происходит лишение родительских прав?",
    "Басқа сұрақ: баланы мектепке неше жастан қабылдайды?",
    "Жұмыс беруші жалақы төлеуден бас тартты",
    "Ата-ана құқығынан қандай жағдайларда айыруға болады?",
]


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("Күйеуім мені ұрады. Оны жауапқа тартуға бола ма?", True),  # «жауапқа тарту»: to hold liable
        ("Жұмыс беруші жалақы төлеуден бас тартты", False),  # «бас тарту», to refuse: no «тарту» of liability
        ("Жұмыс беруші мені келісімімсіз үстеме жұмысқа тарта ала ма?", False),  # «жұмысқа тарту», to call to work
    ],
)
def test_a_liability_phrase_asks_about_a_sanction_its_words_apart_do_not(question: str, asks: bool) -> None:
    assert analyze_query(question).asks_sanction is asks


@pytest.mark.parametrize("question", CRIMINAL)
def test_criminal_questions(question: str) -> None:
    assert analyze_query(question).is_criminal


@pytest.mark.parametrize("question", NOT_CRIMINAL)
def test_not_criminal_questions(question: str) -> None:
    assert not analyze_query(question).is_criminal


def test_crime_check_reads_the_original_question_not_the_augmented_one() -> None:
    info = analyze_query("статья 52 ТК", titles=lambda ref: "Уголовный кодекс, лишение свободы")
    assert "лишение свободы" in info.augmented
    assert not info.is_criminal


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Какая ответственность за создание финансовой пирамиды?", (UK, "217")),
        ("Ребенка подменили в роддоме, что делать?", (UK, "136")),
        ("Нәрестені ауыстырғаны үшін жаза бар ма?", (UK, "136")),
        ("Что будет, если украду шоколадку?", (UK, "188")),
        ("Ұрлық жасағаны үшін не болады?", (UK, "188")),
        ("Врачебная ошибка привела к смерти мамы", (UK, "317")),
        ("Поймали пьяным за рулем", (KOAP, "608")),
        ("Мас күйінде көлік жүргізгені үшін айыппұл", (KOAP, "608")),
        ("Бывший муж не платит алименты уже год", (UK, "139")),
        ("Зарплату не выплачивают два месяца", (TK, "113")),
        ("Хочу вернуть товар в магазин без чека", (ZPP, "14")),
        ("Как поделить совместно нажитое имущество?", (KOBS, "37")),
        ("Если украли невесту, это преступление?", (UK, "125")),
        # Kazakh endings the stemmer strips unevenly: «пирамиданы», «пирамидасын» still meet «пирамида»
        ("Қаржы пирамидасын ұйымдастырса не болады?", (UK, "217")),
        ("Қаржылық пирамиданы құрған адамға қандай жаза бар?", (UK, "217")),
        # a weapon's threat: robbery when something is taken (and the threat itself), in either language
        ("Отобрали телефон, угрожая ножом", (UK, "192")),
        ("Телефонымды пышақ кезеп тартып алды", (UK, "192")),
        ("Мне угрожал ножом сосед", (UK, "115")),
        # «how long ago» for a debt is the limitation period; a thing bought that broke, the consumer law
        ("Прошло пять лет, можно ли взыскать долг?", (GK, "178")),
        ("Бес жыл өтті, қарызды өндіріп алуға бола ма?", (GK, "178")),
        ("Купил пылесос, через неделю сломался", (ZPP, "15")),
        # an employee's discipline is the Labour Code's
        ("Начальник хочет наказать меня за прогул", (TK, "64")),
        ("Жұмысқа кешігіп келдім, маған қандай жаза береді?", (TK, "64")),
        # Kazakh as it is typed in a chat: first person, past, the everyday verb
        ("Өз еркіммен жұмыстан шықтым, екі апта жұмыс істеуім керек пе?", (TK, "56")),
        ("Жалақымды үш ай бермей жүр", (TK, "113")),
        ("Түнде біреу машинамды айдап кетті", (UK, "200")),
        # what happened, told as it happened: the act decides the offence
        ("Он выдернул у меня из рук сумку и убежал", (UK, "191")),
        ("Телефонымды қолымнан жұлып алды", (UK, "191")),
        ("В травмпункте сказали, что мне сломали нос", (UK, "107")),
        ("Сосед ночью поджёг мою машину", (UK, "202")),
        ("Көршім көлігімді өртеп жіберді", (UK, "202")),
        # a crime told as it happened, not named (retrieval/data/synonyms.json's narrative phrasings)
        ("Во время ссоры его пырнул ножом сосед", (UK, "106")),
        ("Гаишник попросил денег, чтобы не оформлять протокол", (UK, "366")),
        # everyday civil and family situations told as they happened
        ("Хочу развестись, но муж не согласен на развод. Что делать?", (KOBS, "20")),
        ("Купила телевизор, а чек потеряла — примут ли его обратно?", ("Z100000274_", "18")),
        # an employee's situation told as it happened
        ("Нас заставляют работать в выходные без доплаты", (TK, "85")),
        ("Жүкті кезімде мені жұмыстан шығарды", (TK, "54")),
        # money, debt and enforcement told as they happened: collectors, credit history, a bankrupt employer, bailiffs
        ("Коллектор звонит мне ночью и угрожает", ("Z1700000062", "5")),
        ("Несие тарихым бүлінген, қалай түзетуге болады?", ("Z040000573_", "31")),
        ("Работодатель обанкротился и не выплатил зарплату", ("Z1400000176", "100")),
        ("Сот орындаушысы жалғыз пәтерімді қарызға алады ма?", ("Z100000261_", "61")),
        # special laws of everyday life: a photo posted, leaving an LLP, the housing queue, expulsion, a licence
        ("Бывшая подруга выложила мое фото без разрешения в инстаграм", ("K940001000_", "145")),
        ("Как выйти из ТОО, если второй учредитель против?", ("Z980000220_", "29")),
        ("Әкімдіктен пәтер кезегіне қалай тұрамын?", ("Z970000094_", "69")),
        ("Мені университеттен шығарып жіберді, қайта оқуға бола ма?", ("Z070000319_", "47")),
        ("Жүргізуші куәлігінің мерзімі өтіп кетті, не істеймін?", ("Z1400000194", "75")),
        # dealings with the state told as they happened: a fine, a silent akimat, an inspection, a seized passport
        ("Айыппұлмен келіспеймін, қалай шағымданамын?", (KOAP, "826-2")),
        ("Акимат уже месяц не отвечает на моё заявление, что делать?", ("K2000000350", "76")),
        ("Әкімдікті сотқа беруге бола ма?", ("K2000000350", "131")),
        ("В мой магазин пришла внеплановая проверка без предупреждения, законно ли это?", ("K1500000375", "144")),
        ("Работодатель забрал мой паспорт и не отдает", (KOAP, "494")),
        # social protection, health, land and procedure told as they happened
        ("Күйеуім қайтыс болды, балаларға асыраушысынан айырылу жәрдемақысы бар ма?", ("K2300000224", "234")),
        ("Врач рассказал мой диагноз на работе, это законно?", ("K2000000360", "273")),
        ("Сосед передвинул забор и захватил часть моего участка", ("K030000442_", "164-1")),
        ("Жауапкер сотқа келмеді, сот не шешеді?", ("K1500000377", "196")),
        ("Сына задержали, держат уже больше 72 часов, это законно?", ("K1400000231", "14")),
        # a civil dispute told as it happened: the Civil Code's rule that answers it
        ("Внес задаток за квартиру, продавец передумал. Вернет ли он задаток в двойном размере?", (GK, "338")),
        ("Досыма несие алуға кепілгер болдым, ол төлемей жүр, банк менен талап етеді", (GK, "332")),
        ("Оставил машину на платной стоянке, а утром ее повредили", (CIVIL_SPECIAL_ID, "779")),
        ("Жалға алған пәтерден шықтым, пәтер иесі депозитті ұстап қалды", (GK, "338-6")),
        ("Живем в доме деда 20 лет без документов, как оформить в собственность?", (GK, "240")),
        # a procedural term of a formal question: the procedure code's or enforcement law's article that governs it
        ("Суд отказал в принятии искового заявления, как обжаловать это определение?", ("K1500000377", "151")),
        ("Жауапкер мүлкін сатып жатыр, талап қоюды қамтамасыз ету шаралары қандай?", ("K1500000377", "155")),
        ("Прошу разъяснить порядок отмены незаконного административного акта акимата", ("K2000000350", "84")),
        ("Атқарушылық іс жүргізуді тоқтата тұруға бола ма?", ("Z100000261_", "42")),
        # a formal question naming the legal term: the article that governs the institution it names
        ("Прошу разъяснить, можно ли восстановить срок исковой давности, пропущенный из-за болезни", (GK, "185")),
        ("Брат избивал отца, может ли суд признать его недостойным наследником?", (CIVIL_SPECIAL_ID, "1045")),
        ("Әкесі бір жыл кешіктірді, алимент бойынша тұрақсыздық айыбын қалай есептейді?", (KOBS, "171")),
        ("Өздігінен салынған құрылысқа меншік құқығын тану тәртібін түсіндіріп беріңіз", (GK, "244")),
        # the second question about one aspect of a situation (a deadline, an amount, who pays, where to file): the
        # article that answers the aspect, not the situation's own
        ("Меня уволили по сокращению. Какой срок обжалования увольнения в суде?", (TK, "160")),
        ("Сөгіс қанша уақыт күшінде болады, қашан алынады?", (TK, "66")),
        ("Алиментке қай сотқа беру керек, баланың әкесі басқа қалада тұрады", ("K1500000377", "30")),
        ("Нотариус мұра куәлігін бермей жатыр, алты ай өтпеді дейді", (CIVIL_SPECIAL_ID, "1073")),
        ("За сколько должен предупредить хозяин квартиры, если просит нас съехать?", ("Z970000094_", "24")),
        ("Сдал телефон в ремонт по гарантии, сколько дней его могут ремонтировать?", (ZPP, "30")),
        ("Микрокредит бойынша ескіру мерзімі қанша жыл?", ("Z1200000056", "10")),
        ("Сот орындаушысы түнде үйге келді, бұл заңды ма?", ("Z100000261_", "53")),
        ("Айыппұлға шағымдану мерзімін өткізіп алдым, енді не істеймін?", (KOAP, "829-4")),
        (
            "Страховая оценила ущерб в 300 тысяч, а ремонт стоит 700, могу ли я взыскать разницу с виновника?",
            ("Z030000446_", "24"),
        ),
        # Kazakh (and verb-variant) phrasings of existing entries
        ("Көршім қарызы үшін көлігімді күштеп тартып алды, бұл заңды ма?", (UK, "389")),
        ("Мектепте баламды сыныптастары мазақ етеді, не істеуге болады?", (KOAP, "127-2")),
        ("Жұмыста мертіктім, жұмыс беруші өтемақы төлей ме?", (TK, "122")),
        ("Көшеден біреудің әмиянын тауып алдым, не істеуім керек?", (GK, "245")),
        ("Работодатель кинул с зарплатой, что делать?", (TK, "113")),
        ("Жұмыс берушім жеке куәлігімді бермей жүр, не істеймін?", (KOAP, "494")),
        ("Сот орындаушысы үйімді аукционға қойды, бұл заңды ма?", ("Z100000261_", "74")),
        ("Жалдаушылар пәтерді бүлдіріп кетті, залалды қалай өндіремін?", (CIVIL_SPECIAL_ID, "561")),
        ("Сот талап арызымды қайтарып берді, енді не істеймін?", ("K1500000377", "152")),
        ("Проверяющие пришли без предупреждения в мой магазин", ("K1500000375", "144")),
        # Everyday situations new to the map
        ("Вызвали скорую помощь, а она не приехала через час, куда жаловаться?", ("K2000000360", "121")),
        ("Жұмыста қан тапсырдым, донорға демалыс күні беріле ме?", (TK, "126")),
        ("Сосед сверху не пускает сантехника в квартиру, а у нас течет стояк", ("Z970000094_", "38")),
        ("Знакомый попросил передать ему мою карту в пользование за деньги, что мне за это будет?", (UK, "232-1")),
        ("Көршінің учаскесі арқылы өту үшін сервитут белгілеу керек пе?", ("K030000442_", "67")),
        # «is it too late?»: a debt's limitation period, in a citizen's words
        ("Друг занял у меня деньги пять лет назад, не поздно подать в суд?", (GK, "178")),
        ("Көршім 3 жыл бұрын қарыз алған, енді қарызды өндіруге кеш пе?", (GK, "178")),
        # ... and a dismissal's own term
        ("Мені жұмыстан шығарғанына үш ай болды, сотқа берсем кеш емес пе?", (TK, "160")),
        ("Сын соседей разбил нам окно, кто заплатит?", (CIVIL_SPECIAL_ID, "926")),
        ("Куртка с браком, хочу оставить себе, но чтобы вернули часть денег — можно?", ("Z100000274_", "15")),
        ("Дүкенде үлкен өлшемі қалмаса, ақшамды қайтара ма?", ("Z100000274_", "14")),
        ("Сколько платить на ребенка после развода?", (KOBS, "139")),
        ("Должна ли я отвечать по долгам мужа после развода?", (KOBS, "44")),
        ("Права дома забыл, остановили на посту — какой штраф?", (KOAP, "612")),
        ("Жүргізуші куәлігін үйде қалдырдым, айыппұл бар ма?", (KOAP, "612")),
        ("Банк передал мой номер телефона другой компании, я не соглашался", ("Z1300000094", "7")),
        ("Слышал про банкротство физлиц, как его пройти?", ("Z2200000178", "5")),
        ("В первый класс не берут, говорят мест нет — что делать?", ("Z070000319_", "26")),
        # Everyday situations new to the map
        ("Начальник лишил меня премии за опоздание, законно ли это?", (TK, "107")),
        ("Жұмыс беруші зейнетақы жарнасын аудармайды, не істеу керек?", ("K2300000224", "248")),
        ("Атыма несие берілмесін деп қалай тыйым қоямын?", ("Z040000573_", "22")),
        ("Мама лежит в больнице, можно вызвать нотариуса на дом?", ("Z970000155_", "21")),
        ("Әскерде неше ай қызмет етеді қазір?", ("Z1200000561", "24")),
        ("Отец умер, остались кредиты, должен ли я платить?", (CIVIL_SPECIAL_ID, "1081")),
        ("Несиені бес жыл төлемедім, банк енді өндіре ала ма?", (GK, "178")),
        ("Не плачу взносы в ОСИ, что мне будет?", ("Z970000094_", "34-1")),
        ("Көршінің малы бақшамды жеп кетті, кім өтейді?", (KOAP, "408")),
        ("Как поставить запрет на получение кредитов на себя?", ("Z040000573_", "22")),
    ],
)
def test_synonyms_suggest_articles(question: str, expected: tuple[str, str]) -> None:
    info = analyze_query(question)
    assert ArticleRef(*expected) in info.synonym_refs


def test_a_phrase_inside_a_longer_phrase_gives_way() -> None:
    # "украли" alone means theft; "украли невесту" is kidnapping, not theft
    info = analyze_query("Если украли невесту, это преступление?")
    assert ArticleRef(UK, "188") not in info.synonym_refs


def test_wages_paid_late_are_not_being_late_for_work() -> None:
    # «кешіктіреді» (the employer delays) and «кешігіп келдім» (I came late) share a stem: only the second is
    # discipline
    refs = analyze_query("Жұмыс берушім жалақыны үнемі кешіктіреді").synonym_refs
    assert ArticleRef(TK, "113") in refs and ArticleRef(TK, "64") not in refs


@pytest.mark.parametrize(
    ("question", "robbery"),
    [
        # «разбил» (broke) and «разбой» (robbery) share the stemmer's «разб»: a broken window is no robbery
        ("В кафе пьяный посетитель разбил витрину и ударил официанта", False),
        ("Сын нечаянно разбил телефон одноклассника", False),
        ("Что грозит за разбой?", True),
        ("Разбой с ножом: какой срок?", True),
    ],
)
def test_a_short_noun_meets_its_own_forms_not_a_verb_of_its_stem(question: str, robbery: bool) -> None:
    assert (ArticleRef(UK, "192") in analyze_query(question).synonym_refs) is robbery


def test_no_synonyms_for_an_unrelated_question() -> None:
    assert analyze_query("Какая сегодня погода в Алматы?").synonym_refs == ()
    # a Kazakh-only word typed in a Russian question does not fire ("пара" is a bribe in Kazakh)
    assert analyze_query("Купил пару ботинок").synonym_refs == ()
    # «ата-ана» (parents) is no «анаша» (cannabis) and «айыру» (to deprive) no «айырылысу» (to part)
    refs = analyze_query("Ата-ана құқығынан қандай жағдайларда айыруға болады?").synonym_refs
    assert refs and {r.doc_id for r in refs} == {KOBS}


@pytest.mark.parametrize(
    ("question", "wrong"),
    [
        # a Kazakh stem shared by two words: «жалған» (false, forged) and «жалға» (for rent) are both «жал»
        ("Жалға алу шартына қандай құжат керек?", (UK, "385")),
        # a bank card in a question on a loan is no selling of one's card
        ("Передал другу деньги на карту, он не возвращает долг", (UK, "232-1")),
        # the loose Kazakh match does not see a negation: «мұраны қабылдамай қайтыс болды» (died before accepting)
        # is read in «қайтыс болғанына … мұраны қабылдау»
        ("Әкем қайтыс болғанына бес ай болды. Мұраны қабылдау мерзімі қанша?", (CIVIL_SPECIAL_ID, "1072-4")),
        # «пайызсыз» (interest-free) meets «пайыз» (interest)
        ("Займ алдым, пайызы өте жоғары", (CIVIL_SPECIAL_ID, "718")),
        # a girl's phone stolen is no bride kidnapping («украли девушку»)
        ("У моей девушки украли телефон", (UK, "125")),
        # «балаларымнан алимент» (alimony from my grown children) is no child support
        ("Балаға алимент өндіру үшін қайда бару керек?", (KOBS, "145")),
        # «другой» is a stopword: «передать дело в другой суд» is any «передать дело в суд»
        ("Полиция передала дело в суд", ("K1500000377", "34")),
        # a share of one's wages paid for the children is alimony, not wages withheld («не платят зарплату»)
        ("Какую часть зарплаты я должен платить на детей после развода?", (TK, "113")),
        # «too late to sue» after a dismissal is the labour dispute's term, not the civil limitation period
        ("Меня уволили три месяца назад, не поздно подать в суд?", (GK, "178")),
        # «некесіз» (out of wedlock) is «неке» to the stemmer: children born in a marriage are not those born out of it
        ("Некеде туған балаларымыз бар, ажырасқанда кіммен қалады?", (KOBS, "52")),
        # «подрезали» with a knife is a stabbing, not a driver cutting in
        ("Его подрезали ножом в драке", (KOAP, "606")),
    ],
)
def test_a_phrase_does_not_fire_on_another_subject(question: str, wrong: tuple[str, str]) -> None:
    assert ArticleRef(*wrong) not in analyze_query(question).synonym_refs


def test_infecting_with_hiv_stays_criminal() -> None:
    # the patients' entry on HIV («у меня обнаружили вич») does not take a question on infecting someone
    assert analyze_query("Заразил жену ВИЧ, какое наказание?").is_criminal


def test_augmented_query_injects_numbers_titles_and_code() -> None:
    titles = {ArticleRef(UK, "136"): "Подмена ребенка"}
    info = analyze_query("Какая статья УК РК за подмену ребенка?", titles=titles.get)
    assert info.augmented.splitlines() == [
        "Какая статья УК РК за подмену ребенка?",
        "УК РК статья 136 Подмена ребенка",
    ]
    kk = analyze_query("ҚК-нің 190-192 баптары", titles=lambda ref: None)
    assert kk.augmented.splitlines()[1:] == [
        line for n in ("190", "191", "192") for line in (f"ҚР ҚК {n}-бап", f"УК РК статья {n}")
    ]
    assert analyze_query("что в 188 статье?").augmented.endswith("\nстатья 188")


def test_augmented_kazakh_question_stems_russian_headings_as_russian() -> None:
    titles = {ArticleRef(UK, "136"): "Подмена ребенка"}
    info = analyze_query("Нәрестені ауыстырғаны үшін қандай жаза бар?", titles=titles.get)
    terms = analyze(info.augmented)
    heading = analyze("УК РК. Статья 136. Подмена ребенка")  # how a chunk header is indexed
    assert set(heading) <= set(terms)
    assert "нәресте" in terms


@pytest.fixture(scope="module")
def corpus_articles(shared_dir: Path) -> dict[tuple[str, str], tuple[str, str]]:
    """(doc_id, number) → (title, status) for every document the synonym map cites, by the real parser."""
    return corpus_titles(shared_dir, {r.doc_id for e in load_synonyms().entries for r in e.refs})


def test_every_synonym_article_exists_in_force_with_its_title(
    corpus_articles: dict[tuple[str, str], tuple[str, str]],
) -> None:
    entries = load_synonyms().entries
    assert len(entries) >= 60
    wrong = []
    for entry in entries:
        assert entry.refs and (entry.phrases_ru or entry.phrases_kk), entry.topic
        for ref in entry.refs:
            found = corpus_articles.get((ref.doc_id, ref.article))
            if found != (ref.title, "in_force"):
                wrong.append(f"{entry.topic}: {ref.doc_id} {ref.article} {ref.title!r} → corpus {found}")
    assert not wrong, "\n".join(wrong)


def test_criminal_entries_cite_the_criminal_code() -> None:
    for entry in load_synonyms().entries:
        if entry.criminal:
            assert any(r.doc_id == UK for r in entry.refs), entry.topic


def test_every_phrase_finds_its_own_entry() -> None:
    missing = []
    for entry in load_synonyms().entries:
        expected = {ArticleRef(r.doc_id, r.article) for r in entry.refs}
        for phrase in entry.phrases_ru:
            found = set(analyze_query(f"Вопрос: {phrase}?").synonym_refs)
            if not expected <= found:
                missing.append(f"ru {phrase!r} ({entry.topic})")
        for phrase in entry.phrases_kk:
            found = set(analyze_query(f"{phrase} туралы сұрақ бар").synonym_refs)
            if not expected <= found:
                missing.append(f"kk {phrase!r} ({entry.topic})")
    assert not missing, "\n".join(missing)
