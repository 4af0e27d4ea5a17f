"""Refresh against a local adilet: one law amended (an article changed, one added, one repealed), the Criminal
Code unchanged. Only the amended law is parsed and only its changed chunks are embedded; a failure anywhere
leaves the previous corpus and index byte for byte, and publishes nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import ingest_adilet.html_parser as html_parser
from config import PROJECT_DIR, Settings
from corpus.store import load_articles, load_chunks
from index.build import build_index, embedding_text, load_vector_store
from index.publish import published
from index.titles import title_texts
from ingest_adilet.pipeline import ingest
from ingest_adilet.refresh import RefreshFailed, refresh
from tests.support.adilet_server import AdiletServer, Reply, serve_adilet
from tests.support.index import KeywordEmbeddings, save_tiny_sentence_transformer
from tests.support.ingest import make_source_dir

LAW = "Z1300000094"  # on personal data: 37 articles
CODE = "K1400000226"  # the Criminal Code: 503 articles, unchanged
DOCS = [LAW, CODE]
WORDS = ["данные", "кража", "защита", "закон"]


def amended(page: str) -> str:
    """The saved page with article 2 reworded, an article 2-1 inserted and article 4 repealed."""
    old = "Целью настоящего Закона является обеспечение защиты"
    assert page.count(old) == 1
    page = page.replace(old, "Целью настоящего Закона является обеспечение надёжной защиты")
    art3 = '<p><b><a name="z4"></a>Статья 3.'
    new = (
        '<p><b><a name="z9001"></a>Статья 2-1. Цифровые права</b></p><p>\n&nbsp;&nbsp;&nbsp;&nbsp;&nbsp; '
        "Каждый вправе знать, кто обрабатывает его персональные данные.</p>\n"
    )
    page = page.replace(art3, new + art3, 1)
    body = page.index("</b></p>", page.index("Статья 4. ")) + len("</b></p>")
    art5 = page.index('<p><b><a name="z11"></a>Статья 5.')
    repeal = "<p>\n&nbsp;&nbsp;&nbsp;&nbsp;&nbsp; Статья 4 исключена Законом РК от 01.11.2026 № 300-VIII.</p>\n"
    return page[:body] + repeal + page[art5:]


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_sentence_transformer(tmp_path_factory.mktemp("st"))


@pytest.fixture
def pages(shared_dir: Path) -> dict[str, str]:
    return {d: (shared_dir / "corpus" / "html" / f"{d}.html").read_text(encoding="utf-8") for d in DOCS}


@pytest.fixture
def adilet() -> Iterator[AdiletServer]:
    with serve_adilet() as server:
        yield server


@pytest.fixture
def live(settings: Settings, adilet: AdiletServer) -> Settings:
    return settings.model_copy(
        update={"adilet_base_url": adilet.base_url, "http_delay": 0.0, "http_backoff": 0.0, "http_retries": 0}
    )


def serve(adilet: AdiletServer, pages: dict[str, str]) -> None:
    for doc_id, page in pages.items():
        adilet.route(f"/rus/docs/{doc_id}", Reply.html(page))


@pytest.fixture
def built(live: Settings, adilet: AdiletServer, pages: dict[str, str]) -> Settings:
    """The first build: both documents ingested from the local adilet, indexed with keyword vectors."""
    serve(adilet, pages)
    assert ingest(live, doc_ids=DOCS, langs=["ru"], progress=False).ok
    build_index(live, embeddings=KeywordEmbeddings(WORDS), progress=False)
    adilet.requests.clear()
    return live


def snapshot(settings: Settings) -> dict[str, bytes]:
    """Every file of the corpus and index, and the publication marker, by relative path."""
    root = Path(settings.data_dir)
    out = {
        str(p.relative_to(root)): p.read_bytes()
        for folder in ("corpus", "index")
        for p in sorted((root / folder).rglob("*"))
        if p.is_file()
    }
    marker = root / "published.json"
    out["published.json"] = marker.read_bytes() if marker.exists() else b""
    return out


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The documents the real HTML parser is run on (it is wrapped, not replaced)."""
    calls: list[str] = []
    real = html_parser.parse_html

    def counting(html: str, doc_id: str, *args: object, **kw: object) -> object:
        calls.append(doc_id)
        return real(html, doc_id, *args, **kw)

    monkeypatch.setattr(html_parser, "parse_html", counting)
    return calls


def test_refresh_embeds_only_the_changed_chunks_and_names_the_changed_articles(
    built: Settings, adilet: AdiletServer, pages: dict[str, str], parsed: list[str]
) -> None:
    old_chunks = load_chunks(built.corpus_dir)
    before = published(built)
    serve(adilet, {**pages, LAW: amended(pages[LAW])})
    fake = KeywordEmbeddings(WORDS)

    report = refresh(built, doc_ids=DOCS, langs=["ru"], embeddings=fake, progress=False)

    # every document was fetched again, only the amended one was parsed
    assert {f"/rus/docs/{d}" for d in DOCS} <= set(adilet.paths())
    assert parsed == [LAW]
    assert (report.reparsed, report.unchanged) == (1, 1)
    # the change report names the articles
    [law] = report.documents
    assert (law.doc_id, law.lang) == (LAW, "ru")
    assert (law.added, law.changed, law.repealed, law.removed) == (("2-1",), ("2",), ("4",), ())
    # only the chunks whose embedded text changed were embedded: articles 2, 2-1 and 4, one chunk each
    new_chunks = load_chunks(built.corpus_dir)
    old_texts = {embedding_text(c, built) for c in old_chunks}
    expected = sorted(t for c in new_chunks if (t := embedding_text(c, built)) not in old_texts)
    old_titles = set(title_texts(old_chunks).values())  # and the headings that are new (the title rerank's)
    new_titles = {t for t in title_texts(new_chunks).values() if t not in old_titles}
    assert sorted(t for t in fake.embedded if t not in new_titles) == expected
    assert {c.article for c in new_chunks if embedding_text(c, built) in expected} == {"2", "2-1", "4"}
    assert report.embedded == len(expected) == 3
    assert report.reused == report.vectors - 3 == len(new_chunks) - 3
    # published, and what is in place is the new corpus with an index that matches it
    after = published(built)
    assert after is not None and after.by == "refresh" and after != before
    assert report.generation == after.generation
    store = load_vector_store(built, embeddings=KeywordEmbeddings(WORDS), chunks=new_chunks)
    assert len(store.index_to_docstore_id) == len(new_chunks)
    articles = {a.number: a for a in load_articles(built.corpus_dir) if a.doc_id == LAW}
    assert articles["4"].status == "repealed" and "надёжной" in articles["2"].text
    assert not list(Path(built.data_dir).glob(".refresh-*"))


def test_refresh_with_nothing_changed_publishes_nothing(
    built: Settings, adilet: AdiletServer, pages: dict[str, str], parsed: list[str]
) -> None:
    serve(adilet, pages)
    before = snapshot(built)
    fake = KeywordEmbeddings(WORDS)
    report = refresh(built, doc_ids=DOCS, langs=["ru"], embeddings=fake, progress=False)
    assert not report.changed and report.documents == () and report.unchanged == 2
    assert parsed == [] and fake.embedded == [] and report.embedded == 0
    assert snapshot(built) == before


def test_a_document_adilet_fails_to_serve_leaves_everything_as_it_was(
    built: Settings, adilet: AdiletServer, pages: dict[str, str]
) -> None:
    before = snapshot(built)
    serve(adilet, {LAW: amended(pages[LAW])})
    adilet.route(f"/rus/docs/{CODE}", Reply(500, b"Internal Server Error"))
    adilet.route(f"/api/documents/by-ngr/{CODE}", Reply(500, b"Internal Server Error"))
    fake = KeywordEmbeddings(WORDS)
    with pytest.raises(RefreshFailed, match=f"{CODE}.*HTTP 500.*previous corpus and index are in place"):
        refresh(built, doc_ids=DOCS, langs=["ru"], embeddings=fake, progress=False)
    assert snapshot(built) == before
    assert fake.embedded == []
    assert not list(Path(built.data_dir).glob(".refresh-*"))


def test_an_index_build_that_raises_leaves_everything_as_it_was(
    built: Settings, adilet: AdiletServer, pages: dict[str, str]
) -> None:
    before = snapshot(built)
    serve(adilet, {**pages, LAW: amended(pages[LAW])})
    failing = KeywordEmbeddings(WORDS, fail_after=0)  # the batch of changed chunks raises
    with pytest.raises(RefreshFailed, match="index build failed.*injected failure"):
        refresh(built, doc_ids=DOCS, langs=["ru"], embeddings=failing, progress=False)
    assert snapshot(built) == before
    assert not list(Path(built.data_dir).glob(".refresh-*"))

    # the next refresh succeeds and publishes
    report = refresh(built, doc_ids=DOCS, langs=["ru"], embeddings=KeywordEmbeddings(WORDS), progress=False)
    assert report.changed and report.documents[0].changed == ("2",)


def cut(page: str) -> str:
    """The saved page with articles 4 up to the last one gone (a truncated page): 4 of its articles are left."""
    start = page.index('<p><b><a name="z8"></a>Статья 4. ')
    last = page.rindex("></a>Статья ", start)
    return page[:start] + page[page.rindex("<p><b><a name=", start, last) :]


def test_a_refresh_that_would_remove_most_of_a_document_is_refused_without_the_flag(
    built: Settings, adilet: AdiletServer, pages: dict[str, str]
) -> None:
    before = snapshot(built)
    old = sum(a.doc_id == LAW for a in load_articles(built.corpus_dir))
    serve(adilet, {**pages, LAW: cut(pages[LAW])})
    with pytest.raises(RefreshFailed) as refused:
        refresh(built, doc_ids=DOCS, langs=["ru"], embeddings=KeywordEmbeddings(WORDS), progress=False)
    message = str(refused.value)
    assert f"{LAW} (ru) would lose {old - 4} of its {old} articles (4 left; removed: 4, 5," in message
    assert "--allow-removal" in message and "previous corpus and index are in place" in message
    assert snapshot(built) == before
    assert not list(Path(built.data_dir).glob(".refresh-*"))

    # said so: published
    report = refresh(
        built, doc_ids=DOCS, langs=["ru"], embeddings=KeywordEmbeddings(WORDS), progress=False, allow_removal=True
    )
    assert report.changed and len(report.documents[0].removed) == old - 4
    assert sum(a.doc_id == LAW for a in load_articles(built.corpus_dir)) == 4


def test_a_move_that_fails_half_way_puts_the_previous_build_back(
    built: Settings, adilet: AdiletServer, pages: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new corpus is moved in, then moving the new index in fails (a full disk, a permission): the previous
    corpus goes back beside the previous index, nothing is published."""
    before = snapshot(built)
    serve(adilet, {**pages, LAW: amended(pages[LAW])})
    real_replace = os.replace

    def failing_replace(src: os.PathLike, dst: os.PathLike) -> None:
        if Path(src).name == "index" and Path(src).parent.name.startswith(".refresh-"):
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(RefreshFailed, match="could not be moved.*No space left.*previous corpus and index"):
        refresh(built, doc_ids=DOCS, langs=["ru"], embeddings=KeywordEmbeddings(WORDS), progress=False)
    monkeypatch.setattr(os, "replace", real_replace)
    assert snapshot(built) == before


_KILLER = """
import os, signal, sys
from pathlib import Path

import index.stage
from config import Settings
from ingest_adilet.refresh import refresh
from tests.support.index import KeywordEmbeddings

point, docs, words = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
data = Path(os.environ["DATA_DIR"])
real_publish, real_replace = index.stage.publish, os.replace


def publish(*args, **kw):
    record = real_publish(*args, **kw)
    if point == "after-publish":
        os.kill(os.getpid(), signal.SIGKILL)
    return record


def replace(src, dst):
    real_replace(src, dst)
    if point == "corpus-moved-out" and Path(src) == data / "corpus":
        os.kill(os.getpid(), signal.SIGKILL)


index.stage.publish, os.replace = publish, replace  # swap_in publishes through index.stage
refresh(Settings(), doc_ids=docs, langs=["ru"], embeddings=KeywordEmbeddings(words), progress=False)
"""


def killed_refresh(settings: Settings, point: str, cwd: Path) -> None:
    """Run a refresh in another process and SIGKILL it at `point`: right after it published, or right after it
    moved the current corpus out (before the new one is moved in)."""
    base = {k: v for k, v in os.environ.items() if k not in ("DATA_DIR", "SOURCE_DIR")}
    env = {"DATA_DIR": str(settings.data_dir), "ADILET_BASE_URL": settings.adilet_base_url, "HTTP_DELAY": "0"}
    run = subprocess.run(
        [sys.executable, "-c", _KILLER, point, ",".join(DOCS), ",".join(WORDS)],
        cwd=cwd,
        env={**base, **env, "PYTHONPATH": str(PROJECT_DIR)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == -9, run.stderr


def failing_refresh(settings: Settings, adilet: AdiletServer) -> None:
    adilet.route(f"/rus/docs/{CODE}", Reply(500, b"Internal Server Error"))
    adilet.route(f"/api/documents/by-ngr/{CODE}", Reply(500, b"Internal Server Error"))
    with pytest.raises(RefreshFailed, match="previous corpus and index are in place"):
        refresh(settings, doc_ids=DOCS, langs=["ru"], embeddings=KeywordEmbeddings(WORDS), progress=False)


def test_a_refresh_killed_after_publishing_keeps_its_build_through_a_failed_refresh(
    built: Settings, adilet: AdiletServer, pages: dict[str, str], tmp_path: Path
) -> None:
    """Killed between publishing and removing its stage: the published build is the one in place; a failed
    refresh after it used to put the replaced build back under a `published.json` naming the new one."""
    serve(adilet, {**pages, LAW: amended(pages[LAW])})
    killed_refresh(built, "after-publish", tmp_path)
    publication = published(built)
    assert publication is not None and publication.by == "refresh"
    in_place = snapshot(built)
    assert any("надёжной" in a.text for a in load_articles(built.corpus_dir) if a.doc_id == LAW)

    failing_refresh(built, adilet)

    assert snapshot(built) == in_place and published(built) == publication
    assert not list(Path(built.data_dir).glob(".refresh-*"))


def test_a_refresh_killed_between_the_corpus_renames_is_named_to_readers_and_never_rolls_back_an_unpack(
    built: Settings,
    adilet: AdiletServer,
    pages: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Killed with the current corpus moved out and the new one not yet in: `ask` says so (it said adilet was
    unreachable); an unpack then recovers first and installs its build, which a later refresh keeps (it used to
    put the pre-kill corpus back over the unpacked one)."""
    import cli
    from ingest_adilet.pack import pack
    from ingest_adilet.unpack import unpack

    # a pack of the amended build, made in another data dir
    other = built.model_copy(update={"data_dir": tmp_path / "other"})
    shutil.copytree(built.data_dir, other.data_dir)
    serve(adilet, {**pages, LAW: amended(pages[LAW])})
    assert refresh(other, doc_ids=DOCS, langs=["ru"], embeddings=KeywordEmbeddings(WORDS), progress=False).changed
    packed = tmp_path / "amended.pack.tar.gz"
    pack(other, packed, embeddings=KeywordEmbeddings(WORDS))

    killed_refresh(built, "corpus-moved-out", tmp_path)
    data = Path(built.data_dir)
    assert not (data / "corpus").exists()

    monkeypatch.setenv("ADILET_BASE_URL", "http://127.0.0.1:9")  # nothing listens: a fetch would fail
    monkeypatch.delenv("DATA_DIR", raising=False)
    code = cli.main(["ask", "--json", "--data-dir", str(data), "что такое персональные данные"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2, err
    assert f"error: interrupted refresh in {data}" in err
    assert f"run `python -m ingest_adilet refresh --data-dir {data}`" in err
    assert "unreachable" not in err and "Traceback" not in err

    unpack(built, packed, embeddings=KeywordEmbeddings(WORDS))
    unpacked = snapshot(built)
    assert any("надёжной" in a.text for a in load_articles(built.corpus_dir) if a.doc_id == LAW)
    assert not list(data.glob(".refresh-*")) and not list(data.glob(".unpack-*"))

    failing_refresh(built, adilet)
    assert snapshot(built) == unpacked


def test_a_stage_from_an_older_version_with_folders_set_aside_is_refused(
    built: Settings, adilet: AdiletServer, pages: dict[str, str]
) -> None:
    """No record of what it was moving in: the writer cannot tell which build is the published one, so it
    refuses and says what to do, touching nothing."""
    serve(adilet, pages)
    data = Path(built.data_dir)
    crashed = data / ".refresh-killed"
    (crashed / "previous").mkdir(parents=True)
    os.replace(data / "corpus", crashed / "previous" / "corpus")
    with pytest.raises(RefreshFailed, match="interrupted write.*previous/corpus.*move its folders back by hand"):
        refresh(built, doc_ids=DOCS, langs=["ru"], embeddings=KeywordEmbeddings(WORDS), progress=False)
    assert (crashed / "previous" / "corpus").is_dir() and not (data / "corpus").exists()


def _cli(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("DATA_DIR", "SOURCE_DIR")}
    return subprocess.run(
        [sys.executable, "-m", "ingest_adilet", *args],
        cwd=cwd,
        env={**base, **env, "PYTHONPATH": str(PROJECT_DIR)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cli_refresh_from_a_newer_local_copy(
    settings: Settings, tmp_path: Path, shared_dir: Path, tiny_model_dir: Path
) -> None:
    """`refresh --from-dir --json`: the changed article reported, one chunk embedded by a real (tiny) model;
    a broken copy: exit 1, the reason, the build kept."""
    doc = "Z2300000193"
    source = make_source_dir(tmp_path / "src", shared_dir, [doc])
    env = {"EMBEDDING_BACKEND": "sentence-transformers", "EMBEDDING_MODEL": str(tiny_model_dir)}
    local = settings.model_copy(
        update={"embedding_backend": "sentence-transformers", "embedding_model": str(tiny_model_dir)}
    )
    assert ingest(local, source_dir=source, doc_ids=[doc], langs=["ru"], progress=False).ok
    first = build_index(local, progress=False)
    text = source / "rus" / f"{doc}.txt"
    old = "Статья 2. Законодательство Республики Казахстан о цифровых активах"
    assert old in text.read_text(encoding="utf-8")
    text.write_text(
        text.read_text(encoding="utf-8").replace(old, old + "\nНовый первый абзац статьи.", 1), encoding="utf-8"
    )
    common = ("--from-dir", str(source), "--data-dir", str(local.data_dir), "--docs", doc, "--lang", "ru")

    run = _cli("refresh", *common, "--json", cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["ok"] and out["changed"] and out["embedded"] == 1 and out["reused"] == first.vectors - 1
    assert [(d["doc_id"], d["changed"], d["added"]) for d in out["documents"]] == [(doc, ["2"], [])]

    text.write_text("nothing that parses\n", encoding="utf-8")
    before = snapshot(local)
    failed = _cli("refresh", *common, "--no-progress", cwd=tmp_path, env=env)
    assert failed.returncode == 1
    assert "refresh failed" in failed.stderr and doc in failed.stderr and "previous corpus and index" in failed.stderr
    assert snapshot(local) == before
