"""`python -m rag_chain chat` as a user runs it: questions on stdin, answers as `ask` prints them, a follow-up
understood in the context of the conversation, `/new` to start over, end of input to quit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from config import Settings

ROOT = Path(__file__).resolve().parents[1]
DIGITAL_ASSETS = "Z2300000193"  # 14 articles in Russian and 15 in Kazakh: a whole data dir indexed in seconds
FIRST = "Нужна ли лицензия на цифровой майнинг?"
FOLLOW_UP = "А на какой срок её выдают?"


@pytest.fixture(scope="module")
def data_dir(shared_dir, tmp_path_factory) -> Path:
    from index.build import build_index
    from ingest_adilet.pipeline import ingest

    data = Settings(data_dir=tmp_path_factory.mktemp("chat") / "data", _env_file=None)
    assert ingest(data, source_dir=shared_dir / "corpus", doc_ids=[DIGITAL_ASSETS], progress=False).ok
    build_index(data, progress=False)
    return data.data_dir


def chat(data_dir: Path, *lines: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GROQ_", "OLLAMA_", "PINECONE_"))}
    return subprocess.run(
        [sys.executable, "-m", "rag_chain", "chat", "--data-dir", str(data_dir)],
        input="".join(f"{line}\n" for line in lines),  # then end of input, as Ctrl-D
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_conversation_keeps_its_history_until_new(data_dir):
    done = chat(data_dir, FIRST, "", FOLLOW_UP, "/new", FOLLOW_UP, "слово " * 1000)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    understood = f"Понял вопрос так: {FIRST} {FOLLOW_UP}"
    assert out.count(understood) == 1  # the follow-up in context, not again after /new
    assert "Новый разговор" in out and out.index(understood) < out.index("Новый разговор")
    assert out.count("Источники") == 3  # three questions answered, each with its sources as `ask` prints them
    assert "adilet.zan.kz/rus/docs/Z2300000193" in out
    assert "слишком длинный" in done.stderr  # a bad question is explained, and the chat goes on to the end


def test_without_an_index_the_chat_answers_and_says_how_to_build_it(shared_dir, tmp_path):
    from ingest_adilet.pipeline import ingest

    data = Settings(data_dir=tmp_path / "data", _env_file=None)
    assert ingest(data, source_dir=shared_dir / "corpus", doc_ids=[DIGITAL_ASSETS], progress=False).ok
    done = chat(data.data_dir, FIRST, FOLLOW_UP)
    assert done.returncode == 0, done.stderr
    # Issue 14: answered at once with the lexical searches, and told once what the index lacks and how to build it.
    [line] = [x for x in done.stderr.splitlines() if "ingest_adilet index" in x]
    assert f"python -m ingest_adilet index --data-dir {data.data_dir}" in line
    out = " ".join(done.stdout.split())
    assert out.count("searched: bm25, not yet: dense, latent") == 2 and "adilet.zan.kz/rus/docs/Z2300000193" in out


def test_chat_installs_a_pack_into_a_fresh_data_dir(data_dir, tmp_path):
    """`chat --pack`, as `ask --pack`: a pack made on the connected machine, installed by the first run, then a
    conversation on its full index (vectors and latent terms, nothing left to build)."""
    from ingest_adilet.pack import pack

    packed = tmp_path / "kz-law.pack.tar.gz"
    pack(Settings(data_dir=data_dir, _env_file=None), packed)
    office = tmp_path / "office"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GROQ_", "OLLAMA_", "PINECONE_"))}
    done = subprocess.run(
        [sys.executable, "-m", "rag_chain", "chat", "--pack", str(packed), "--data-dir", str(office)],
        input=f"{FIRST}\n{FOLLOW_UP}\n",
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert f"Installed {packed} into {office}: 2 documents" in done.stderr
    assert "ingest_adilet index" not in done.stderr and "not yet" not in done.stdout  # the pack's index is used
    assert done.stdout.count("Источники") == 2 and f"Понял вопрос так: {FIRST} {FOLLOW_UP}" in done.stdout
    assert "adilet.zan.kz/rus/docs/Z2300000193" in done.stdout
    assert (office / "corpus" / "chunks.jsonl").exists() and (office / "index" / "faiss" / "meta.json").exists()
