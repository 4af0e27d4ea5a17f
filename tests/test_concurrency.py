"""The real chain asked from many threads at once, as the bot's 16 workers do, answers exactly as from one."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest

from answer.records import QAResult
from corpus.legal import names
from corpus.store import load_articles
from rag_chain import QAChain
from retrieval import analyzer, synonyms

THREADS = 16
RUNS = 10

# Mixed on purpose: Russian and Kazakh, named articles, crimes, labour and consumer questions of the slice.
QUESTIONS = [
    "Что будет за кражу телефона?",
    "Какое наказание за мошенничество в интернете?",
    "статья 188 УК",
    "ҚК-нің 190-бабы",
    "Телефонымды ұрлап кетті, не істеу керек?",
    "Сатып алған тауарым сапасыз болып шықты, ақшамды қайтара ма?",
    "Работодатель не выплачивает зарплату, что делать?",
    "Можно ли вернуть некачественный товар в магазин?",
    "Какая ответственность за грабеж и разбой, статьи 191 и 192?",
    "Жұмыс беруші еңбек шартын бұзды",
    "Угрожали убийством, куда обращаться?",
    "трудовой договор статья 23 ТК",
]
PER_THREAD = 3


def forget_everything(chain: QAChain) -> None:
    """What a freshly loaded process has: no stem, no analysed question, no question encoding remembered."""
    for fn in (analyzer.stem, analyzer.stem_ru, analyzer.stem_kk, analyzer._word_lang):
        fn.cache_clear()
    for fn in (synonyms._phrases, synonyms._stem_sets, names._aliases, names._aliases_by_first_stem):
        fn.cache_clear()
    chain.retrieval.forget_questions()


def ranking(result: QAResult) -> tuple:
    """What must not depend on the threads: the sources in order with their scores, and the answer."""
    return tuple((s.doc_id, s.article, s.lang, s.score) for s in result.sources), result.template, result.answer


@pytest.fixture(scope="module")
def chain(corpus_slice, hybrid_retrieval) -> QAChain:
    return QAChain(corpus_slice.settings, hybrid_retrieval, load_articles(corpus_slice.settings.corpus_dir))


@pytest.fixture
def frequent_switches() -> Iterator[None]:
    """Threads switch every microsecond instead of every 5 ms, as on a loaded server: races show at once."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def ask_at_once(chain: QAChain) -> tuple[list[str], dict[tuple[int, int], tuple]]:
    """THREADS threads released together, each asking PER_THREAD questions: (errors, (thread, i) → result)."""
    start = threading.Barrier(THREADS)
    got: dict[tuple[int, int], tuple] = {}
    errors: list[str] = []

    def ask(n: int) -> None:
        start.wait()
        for i in range(PER_THREAD):
            q = QUESTIONS[(n + 5 * i) % len(QUESTIONS)]
            try:
                got[n, i] = (q, ranking(chain.invoke(q)))
            except Exception as err:
                errors.append(f"{q!r}: {err!r}")

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors, got


def test_sixteen_threads_rank_as_one(chain: QAChain, frequent_switches: None) -> None:
    forget_everything(chain)
    expected = {q: ranking(chain.invoke(q)) for q in QUESTIONS}
    assert all(r[0] for r in expected.values())  # every question found something to compare

    for run in range(RUNS):
        forget_everything(chain)
        errors, got = ask_at_once(chain)
        assert errors == [], f"run {run}"
        differ = sorted({q for q, r in got.values() if r != expected[q]})
        assert differ == [], f"run {run}: rankings differ from one thread's"
        assert len(got) == THREADS * PER_THREAD
