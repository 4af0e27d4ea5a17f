"""The bilingual lexicon (index/lexicon.py) and the cross-language search (retrieval/crosslang.py): learned from a
real parallel slice of ../shared (two laws in Russian and Kazakh), written and checked like every index file,
and searched with on a real Russian-only code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from config import Settings
from corpus.errors import DataDamaged
from corpus.files import DamagedFile
from corpus.lang import stem_kk, stem_ru
from corpus.records import Chunk
from index.lexicon import FOLDER, LEXICON_FILE, Lexicon, build_lexicon, learn_lexicon, read_lexicon
from index.lexicon import fingerprint as lexicon_fingerprint
from retrieval.analyzer import analyze, tokenize
from retrieval.crosslang import (
    GlossaryTerms,
    load_packaged_glossary,
    translated_terms,
    with_glossary,
    with_glossary_terms,
)

CIVIL_SERVICE = "Z1500000416"  # the Civil Service law: Russian and Kazakh
MILITARY_SERVICE = "Z1200000561"  # the Military Service law: Russian and Kazakh
LABOUR_CODE = "K1500000414"  # Russian only
PARALLEL = (CIVIL_SERVICE, MILITARY_SERVICE)


@pytest.fixture(scope="module")
def slice_settings(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """The two parallel laws and the Labour Code, ingested by the real ingest from ../shared."""
    from ingest_adilet.pipeline import ingest

    settings = Settings(data_dir=tmp_path_factory.mktemp("lexicon") / "data", _env_file=None, learned_ranker=False)
    report = ingest(settings, source_dir=shared_dir / "corpus", doc_ids=[*PARALLEL, LABOUR_CODE], progress=False)
    assert report.ok, report.failures
    return settings


@pytest.fixture(scope="module")
def chunks(slice_settings: Settings) -> list[Chunk]:
    from corpus.store import load_chunks

    return load_chunks(slice_settings.corpus_dir)


def test_the_lexicon_learned_from_two_parallel_laws_maps_kazakh_legal_terms_to_russian(chunks: list[Chunk]) -> None:
    parallel = [c for c in chunks if c.doc_id in PARALLEL]
    assert {c.lang for c in parallel} == {"ru", "kk"}
    lexicon = learn_lexicon(parallel)
    assert lexicon.kk_ru[stem_kk("демалыс")][0] == stem_ru("отпуск")  # leave
    assert lexicon.kk_ru[stem_kk("айлықақы")][0] == stem_ru("оклад")  # salary
    assert lexicon.kk_ru[stem_kk("сот")][0] == stem_ru("суд")  # court
    assert stem_kk("демалыс") in lexicon.ru_kk[stem_ru("отпуск")]  # and back
    # Deterministic: the same texts in another order give the same lexicon; the Russian-only code adds nothing.
    assert learn_lexicon(list(reversed(parallel))) == lexicon
    assert learn_lexicon(chunks) == lexicon
    assert {stem_ru("год"), stem_ru("отпуск")} <= set(lexicon.translate([stem_kk("жыл"), stem_kk("демалыс")], "kk"))


def test_the_index_build_writes_the_lexicon_and_a_rebuild_keeps_it(slice_settings: Settings, chunks) -> None:
    settings = slice_settings.model_copy(update={"data_dir": slice_settings.data_dir.parent / "built"})
    report = build_lexicon(settings, chunks)
    folder = settings.index_dir / FOLDER
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["fingerprint"] == lexicon_fingerprint(chunks) and report.pairs > 500
    assert meta["files"][LEXICON_FILE]["size"] == (folder / LEXICON_FILE).stat().st_size
    body = (folder / LEXICON_FILE).read_bytes()
    assert build_lexicon(settings, chunks).unchanged
    (folder / "meta.json").unlink()
    assert not build_lexicon(settings, chunks).unchanged
    assert (folder / LEXICON_FILE).read_bytes() == body  # learned again, byte for byte the same
    assert read_lexicon(folder, lexicon_fingerprint(chunks)) == learn_lexicon(chunks)
    # Learned from other texts: not used (out of date), never taken for this corpus's.
    assert read_lexicon(folder, lexicon_fingerprint(chunks[:-1])) is None


def test_a_lexicon_of_another_stemmer_is_out_of_date(
    slice_settings: Settings, chunks, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The lexicon is stems: learned with other Kazakh endings its keys are not the stems a question now gets.
    settings = slice_settings.model_copy(update={"data_dir": slice_settings.data_dir.parent / "stemmer"})
    assert not build_lexicon(settings, chunks).unchanged
    assert build_lexicon(settings, chunks).unchanged
    monkeypatch.setattr("index.lexicon.stemmer_id", lambda: "snowball-0:kk-another")
    assert read_lexicon(settings.index_dir / FOLDER, lexicon_fingerprint(chunks)) is None
    assert not build_lexicon(settings, chunks).unchanged


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda f: f.write_bytes(f.read_bytes()[:-5]), "bytes, its build wrote"),
        (lambda f: f.write_bytes(f.read_bytes().replace(b'"version": 1', b'"version": 7')), "sha256 mismatch"),
    ],
    ids=["truncated", "altered"],
)
def test_a_damaged_lexicon_is_refused_naming_the_file_and_the_repair(
    slice_settings: Settings, chunks, tmp_path: Path, damage, problem: str
) -> None:
    from retrieval.pipeline import Retrieval, Stages

    settings = slice_settings.model_copy(update={"data_dir": tmp_path / "data"})
    settings.corpus_dir.parent.mkdir(parents=True)
    build_lexicon(settings, chunks)
    damage(settings.index_dir / FOLDER / LEXICON_FILE)
    with pytest.raises(DamagedFile, match=problem):
        read_lexicon(settings.index_dir / FOLDER, lexicon_fingerprint(chunks))
    with pytest.raises(DataDamaged, match=r"lexicon\.json is damaged .*ingest_adilet index"):
        Retrieval.load(settings, chunks=chunks, stages=Stages(dense=False, rerank=False))


def test_a_lexicon_whose_checksums_match_but_whose_content_is_not_a_lexicon_is_refused(
    slice_settings: Settings, chunks, tmp_path: Path
) -> None:
    from corpus.files import atomic_write

    settings = slice_settings.model_copy(update={"data_dir": tmp_path / "data"})
    build_lexicon(settings, chunks)
    folder = settings.index_dir / FOLDER
    meta = json.loads((folder / "meta.json").read_text())
    for body in (
        '{"version": 1, "kk_ru": {"a": "b"}, "ru_kk": {}}',
        '{"version": 1, "kk_ru": {"a": ["b", "c", "d"]}, "ru_kk": {}}',
    ):
        digest = atomic_write(folder / LEXICON_FILE, body)
        atomic_write(folder / "meta.json", json.dumps({**meta, "files": {LEXICON_FILE: digest.model_dump()}}))
        with pytest.raises(DamagedFile, match="lexicon"):
            read_lexicon(folder, lexicon_fingerprint(chunks))


@pytest.mark.parametrize(
    ("question", "article"),
    [
        ("Жұмыс беруші мені келісімімсіз басқа жұмысқа ауыстыра ала ма?", "38"),  # transfer to other work
        ("Жұмыстан шыққанда пайдаланылмаған демалыс үшін өтемақы төлене ме?", "96"),  # unused leave on leaving
    ],
)
def test_a_kazakh_question_finds_its_article_in_a_russian_only_code(
    slice_settings: Settings, chunks, question: str, article: str
) -> None:
    """The Labour Code exists here only in Russian: the Kazakh words meet only the two laws' Kazakh texts, and
    the cross-language search brings the code's article up (BM25 alone, no vectors; query augmentation off, since
    the synonym map's Kazakh phrasings name these articles too and this is the cross-language search's test)."""
    from retrieval.pipeline import Retrieval, Stages

    stages = Stages(dense=False, rerank=False, augment=False)
    retrieval = Retrieval.load(slice_settings, chunks=chunks, stages=stages)
    assert retrieval.lexicon is not None and retrieval.settings.crosslang_weight > 0
    top = [(d, a) for d, a, _ in retrieval.rank_articles(question, 5)]
    assert (LABOUR_CODE, article) in top
    without = [(d, a) for d, a, _ in retrieval.variant(crosslang_weight=0).rank_articles(question, 10)]
    assert (LABOUR_CODE, article) not in without
    # A Russian question is searched as before: no list of Kazakh stems unless CROSSLANG_RU_WEIGHT says so.
    russian = "Может ли работодатель перевести меня на другую работу без согласия?"
    assert retrieval.rank_articles(russian, 10) == retrieval.variant(crosslang_weight=0).rank_articles(russian, 10)


# --- the glossary: what the parallel laws do not teach --------------------------------------------------------


def test_the_glossary_gives_the_laws_russian_terms_for_words_the_parallel_laws_do_not_teach(chunks) -> None:
    learned = learn_lexicon([c for c in chunks if c.doc_id in PARALLEL])
    text = "бюллетеньде болдым"  # «I was on a sick note»: a loanword no parallel law uses
    sick_leave, words = analyze(text, "kk"), tokenize(text, "kk")
    assert stem_ru("нетрудоспособности") not in learned.translate(sick_leave, "kk", words)
    assert stem_ru("нетрудоспособности") in with_glossary(learned).translate(sick_leave, "kk", words)
    # the learned pairs stay, after the glossary's: «демалыс» is still «отпуск»
    assert stem_ru("отпуск") in with_glossary(learned).translate([stem_kk("демалыс")], "kk", ["демалыс"])


def _glossary_terms(text: str) -> list[str]:
    """The packaged glossary's Russian stems for a Kazakh text."""
    return GlossaryTerms.packaged()(analyze(text, "kk"), tokenize(text, "kk"))


def test_a_kazakh_word_with_the_privative_the_lexicon_lacks_is_translated_through_its_noun() -> None:
    """«келісімімсіз» (without my consent) was never in the parallel laws; «келісім» (consent) was: the privative
    is read through its noun (Russian says «без», a stopword); a privative the lexicon learned keeps its own
    translation, and a Russian text is not read this way."""
    consent, term, urgent = stem_kk("келісім"), stem_kk("мерзім"), stem_kk("мерзімсіз")
    lexicon = Lexicon(kk_ru={consent: ("соглас",), term: ("срок",), urgent: ("бессрочн",)}, ru_kk={})
    assert lexicon.translate([stem_kk("келісімімсіз")], "kk") == ["соглас"]
    assert lexicon.translate([urgent], "kk") == ["бессрочн"]  # not «срок»: «мерзімсіз» is «бессрочный»
    assert lexicon.translate([stem_kk("келісімімсіз")], "ru") == []


def test_a_glossary_word_the_stemmer_cuts_to_a_short_root_meets_only_its_own_word() -> None:
    """«жылу» (heating) is cut to жыл, the root of «жыл» (a year), «шығын» (a loss) to шық (to go out): such a
    form is matched by its own letters, so a question on the days of leave a year is not searched for heating
    and one on quitting is not searched for losses; a question on heating or losses still is."""
    russian = _glossary_terms
    leave = russian("Жылына қанша күн демалыс беріледі?")
    assert stem_ru("отпуск") in leave and stem_ru("теплоснабжение") not in leave
    assert stem_ru("теплоснабжение") in russian("Пәтерде жылу жоқ, кімге шағымдану керек?")
    assert stem_ru("убытки") not in russian("Жұмыстан шықтым")
    assert stem_ru("убытки") in russian("Көршім маған шығын келтірді")


def test_a_glossary_form_longer_than_the_texts_word_is_another_word() -> None:
    """A text's stem may carry an ending the stemmer left («демалыста»), but «жұмыс» (work) is not «жұмысшы» (a
    worker) or «жұмыссыз» (unemployed), and «бере» (gives) is not «берешек» (a debt)."""
    terms = _glossary_terms("Жұмыстан шықсам, өтемақы бере ме?")
    assert stem_ru("компенсация") in terms
    assert not {stem_ru("работник"), stem_ru("безработный"), stem_ru("задолженность")} & set(terms)
    assert stem_ru("отпуск") in _glossary_terms("Демалыста")


def test_a_glossary_form_the_stemmer_cut_less_than_the_texts_word_still_meets_it() -> None:
    """The stemmer cuts «жалақы» (a wage) to жалақ but «жалақысы» to жалақы: the form «жалақысы сақталмайтын
    демалыс» (unpaid leave) meets a question's «жалақы сақталмайтын демалыс», whose words start with its stems,
    and only the more specific entry is read there; a question on the days of leave a year is not about it."""
    unpaid = _glossary_terms("Жалақы сақталмайтын демалысты бала үш жасқа толғанға дейін алуға бола ма?")
    assert stem_ru("сохранения") in unpaid and stem_ru("ежегодный") not in unpaid
    assert stem_ru("сохранения") not in _glossary_terms("Жылына қанша күн демалыс беріледі?")


def test_the_most_specific_glossary_form_at_a_place_wins() -> None:
    """«жалақы» (a wage) carries «жала» (slander) as a stem with an ending; the longer form is the word meant."""
    assert stem_ru("заработная") in _glossary_terms("Жалақымды уақытында бермейді")
    assert stem_ru("клевета") not in _glossary_terms("Жалақы неше күнде төленеді?")
    assert stem_ru("клевета") in _glossary_terms("Көршім маған жала жапты")


def test_registering_alone_is_no_residence_registration() -> None:
    """«тіркелу» (to register) is said of a business, a marriage, a car and a residence alike: alone it means none
    of them; «тіркелмей кәсіп жүргізу» (trading without registering) is the Criminal Code's unlawful business."""
    terms = GlossaryTerms.packaged().phrases("Тіркелмей кәсіп жүргізіп, салық төлемеген жағдайда не болады?")
    assert "незаконное предпринимательство" in terms and "регистрация по месту жительства" not in terms
    assert "регистрация по месту жительства" in GlossaryTerms.packaged().phrases("Уақытша тіркеу қалай жасалады?")


def test_a_glossary_phrase_is_read_within_its_clause() -> None:
    """«жұлып алып, қашып кетті» (snatched it and ran off) has the words of «алып қашу» (a bride's kidnapping)
    on either side of a comma: the phrase is not read across it, in the cross-language search's terms or in
    the e5 query's; said in one clause, it is."""
    glossary_only = with_glossary(Lexicon(kk_ru={}, ru_kk={}))
    kidnapping = stem_ru("похищение")
    snatched = "Ол телефонды қолымнан жұлып алып, қашып кетті."
    assert kidnapping not in translated_terms(glossary_only, snatched, "kk")
    assert "похищение человека" not in GlossaryTerms.packaged().phrases(snatched)
    taken = "Көршінің қызын алып қашып кетті."
    assert kidnapping in translated_terms(glossary_only, taken, "kk")
    assert "похищение человека" in GlossaryTerms.packaged().phrases(taken)


def test_a_kazakh_questions_e5_query_carries_the_glossarys_russian_terms() -> None:
    """The vectors are Russian: a Kazakh question is embedded with the law's Russian terms for its words after it
    (whole terms, at most CROSSLANG_DENSE_CHARS characters); a Russian one as it is."""
    from retrieval.query import analyze_query
    from retrieval.records import Query

    lexicon = with_glossary(Lexicon(kk_ru={}, ru_kk={}))  # the glossary alone: nothing learned
    kazakh = Query("Жылына қанша күн демалыс беріледі?", analyze_query("Жылына қанша күн демалыс беріледі?"))
    text = with_glossary_terms(lexicon, 100, kazakh)
    assert text.startswith(kazakh.info.text) and "трудовой отпуск" in text and "теплоснабжение" not in text
    assert len(text) - len(kazakh.info.augmented) <= 100 + 3
    assert with_glossary_terms(lexicon, 0, kazakh) == kazakh.info.augmented
    russian = Query("Сколько дней отпуска в год?", analyze_query("Сколько дней отпуска в год?"))
    assert with_glossary_terms(lexicon, 100, russian) == russian.info.augmented


def test_a_kazakh_questions_e5_query_says_each_thing_once_in_russian() -> None:
    """Every token of the e5 query costs time: the Kazakh citation lines («ҚР ЕК 68-бап») are left out beside their
    Russian ones, and a glossary term the article titles already say is not repeated."""
    from retrieval.query import analyze_query
    from retrieval.records import Query

    lexicon = with_glossary(Lexicon(kk_ru={}, ru_kk={}))
    question = "Қалыпты жұмыс уақытының\nұзақтығы аптасына қанша сағат?"  # two lines: both kept
    bare = Query(question, analyze_query(question))
    assert "ҚР ЕК 68-бап" in bare.info.augmented
    text = with_glossary_terms(lexicon, 100, bare)
    assert text.startswith(f"{question}\nТК РК статья 68") and "бап" not in text
    assert "нормальная продолжительность рабочего времени" in text
    title = "Нормальная продолжительность рабочего времени"
    titled = Query(question, analyze_query(question, titles=lambda ref: title))
    text = with_glossary_terms(lexicon, 100, titled)
    assert text.startswith(f"{question}\nТК РК статья 68 {title}")
    assert "нормальная продолжительность" not in text


def test_every_glossary_term_is_a_word_of_the_russian_corpus(shared_dir: Path) -> None:
    """The glossary's Russian side is the law's own wording: each term's stems occur in the corpus texts (a
    misspelt or invented term would match nothing)."""
    import re

    vocabulary: set[str] = set()
    for path in sorted((shared_dir / "corpus" / "rus").glob("*.txt")):
        vocabulary |= set(re.findall(r"[а-яё]+", path.read_text(encoding="utf-8").lower()))
    stems = {stem_ru(w) for w in vocabulary}
    entries = load_packaged_glossary().entries
    assert len(entries) >= 300
    unknown = sorted({t for e in entries for t in e.ru if not set(analyze(t, "ru")) <= stems})
    assert not unknown, unknown
    forms = [" ".join(analyze(f, "kk")) for e in entries for f in e.kk]
    assert all(forms)


@pytest.mark.parametrize(
    ("question", "article"),
    [
        ("Ауырып, бюллетеньде болдым. Ол күндерді кім төлейді?", "133"),  # sick pay
        ("Бәсекелестік жасамау туралы қағазға қол қоюға міндеттімін бе?", "29"),  # non-compete (2026-11-29 entry)
    ],
)
def test_a_kazakh_question_in_a_citizens_words_finds_its_article_with_the_glossary(
    slice_settings: Settings, chunks, question: str, article: str
) -> None:
    from retrieval.pipeline import Retrieval, Stages

    stages = Stages(dense=False, rerank=False)
    retrieval = Retrieval.load(slice_settings, chunks=chunks, stages=stages)
    assert (LABOUR_CODE, article) in [(d, a) for d, a, _ in retrieval.rank_articles(question, 5)]
    plain = slice_settings.model_copy(update={"crosslang_glossary": False})
    without = Retrieval.load(plain, chunks=chunks, stages=stages)
    assert (LABOUR_CODE, article) not in [(d, a) for d, a, _ in without.rank_articles(question, 10)]
