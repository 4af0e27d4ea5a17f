"""AdiletFetcher against a local adilet on 127.0.0.1 serving the real saved pages."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from config import Settings
from corpus.errors import AdiletUnreachable, IngestError
from ingest_adilet.fetch import AdiletFetcher, api_text
from tests.support.adilet_server import AdiletServer, Reply, article_body, serve_adilet

DOC = "Z1300000094"
API = f"/api/documents/by-ngr/{DOC}"
PAGE = f"/rus/docs/{DOC}"


@pytest.fixture
def adilet_server() -> Iterator[AdiletServer]:
    with serve_adilet() as server:
        yield server


@pytest.fixture
def local_settings(settings: Settings, adilet_server: AdiletServer) -> Settings:
    """Settings pointed at the local adilet, with a short timeout and no real waiting."""
    return settings.model_copy(
        update={
            "adilet_base_url": adilet_server.base_url,
            "http_timeout": 5.0,
            "http_retries": 3,
            "http_backoff": 0.5,
            "http_delay": 2.0,
        }
    )


class Sleeps(list[float]):
    """Records the waits the fetcher asks for instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def page_html(shared_dir: Path) -> str:
    return (shared_dir / "corpus" / "html" / f"{DOC}.html").read_text(encoding="utf-8")


@pytest.fixture
def api_body(shared_dir: Path) -> str:
    return article_body(shared_dir / "corpus" / "html" / f"{DOC}.html")


def test_api_answer_is_used_and_cached(local_settings, adilet_server, sleeps, api_body):
    adilet_server.route(API, Reply.json({"text_content": api_body, "is_actual": True, "status": "new"}))
    with AdiletFetcher(local_settings, sleep=sleeps) as fetcher:
        html = fetcher.fetch(DOC, "ru")
        cache = fetcher.cache_path(DOC, "ru")

    assert html == api_body.strip()
    assert "Статья 31. Порядок введения в действие настоящего Закона" in html
    [req] = adilet_server.requests
    assert req.path == API
    assert req.query == {"language": ["rus"]}
    assert req.headers["user-agent"] == local_settings.user_agent
    assert cache == local_settings.data_dir / "cache" / "adilet" / "ru" / f"{DOC}.html"
    assert cache.read_text(encoding="utf-8") == html
    meta = json.loads(cache.with_suffix(".json").read_text(encoding="utf-8"))
    assert meta["source_url"] == f"{adilet_server.base_url}{API}?language=rus"
    assert meta["doc_id"] == DOC and meta["lang"] == "ru" and meta["fetched_at"].startswith("20")
    assert sleeps == []  # one request: no delay, no backoff


def test_api_404_falls_back_to_the_page(local_settings, adilet_server, sleeps, page_html):
    adilet_server.route(f"/kaz/docs/{DOC}", Reply.html(page_html))
    with AdiletFetcher(local_settings, sleep=sleeps) as fetcher:
        html = fetcher.fetch(DOC, "kk")

    assert html == page_html
    assert adilet_server.paths() == [API, f"/kaz/docs/{DOC}"]
    assert adilet_server.requests[0].query == {"language": ["kaz"]}
    meta_path = local_settings.cache_dir / "adilet" / "kk" / f"{DOC}.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    assert meta["source_url"] == f"{adilet_server.base_url}/kaz/docs/{DOC}"
    # the polite delay between the two requests, and no backoff (404 is not retried)
    assert len(sleeps) == 1 and 1.5 < sleeps[0] <= local_settings.http_delay


def test_api_without_law_text_falls_back_to_the_page(local_settings, adilet_server, sleeps, page_html):
    adilet_server.route(API, Reply.json({"is_actual": True, "text_content": ""}))
    adilet_server.route(PAGE, Reply.html(page_html))
    with AdiletFetcher(local_settings, sleep=sleeps) as fetcher:
        assert fetcher.fetch(DOC, "ru") == page_html
    assert adilet_server.paths() == [API, PAGE]


def test_404_on_both_raises_without_retries(local_settings, adilet_server, sleeps):
    with AdiletFetcher(local_settings, sleep=sleeps) as fetcher:
        with pytest.raises(IngestError, match=rf"{DOC}: document ID not found on adilet"):
            fetcher.fetch(DOC, "ru")
        assert not fetcher.cache_path(DOC, "ru").exists()
    assert adilet_server.paths() == [API, PAGE]


def test_5xx_is_retried_with_exponential_backoff(local_settings, adilet_server, sleeps, api_body):
    adilet_server.route(API, Reply(503), Reply(502), Reply.json({"text_content": api_body}))
    with AdiletFetcher(local_settings, sleep=sleeps) as fetcher:
        assert fetcher.fetch(DOC, "ru") == api_body.strip()

    assert adilet_server.paths() == [API, API, API]
    backoffs = [s for s in sleeps if s in (0.5, 1.0)]
    assert backoffs == [0.5, 1.0]


def test_5xx_everywhere_gives_up_after_the_retries(local_settings, adilet_server, sleeps):
    settings = local_settings.model_copy(update={"http_retries": 2})
    adilet_server.route(API, Reply(500))
    adilet_server.route(PAGE, Reply(503))
    with AdiletFetcher(settings, sleep=sleeps) as fetcher:
        with pytest.raises(IngestError, match=rf"{DOC}: adilet did not answer \(HTTP 503, 3 attempts\)"):
            fetcher.fetch(DOC, "ru")
        assert not fetcher.cache_path(DOC, "ru").exists()
    assert adilet_server.paths() == [API] * 3 + [PAGE] * 3


def test_timeout_is_retried(local_settings, adilet_server, sleeps, api_body):
    settings = local_settings.model_copy(update={"http_timeout": 0.3})
    ok = Reply.json({"text_content": api_body})
    adilet_server.route(API, Reply(ok.status, ok.body, ok.content_type, delay=1.5), ok)
    with AdiletFetcher(settings, sleep=sleeps) as fetcher:
        assert fetcher.fetch(DOC, "ru") == api_body.strip()
    assert adilet_server.paths() == [API, API]
    assert 0.5 in sleeps  # the first backoff


def test_empty_shell_raises_and_is_not_cached(local_settings, adilet_server, sleeps, shared_dir):
    shell = (shared_dir / "corpus" / "html" / "K030000442_.html").read_text(encoding="utf-8")
    adilet_server.route("/rus/docs/K030000442_", Reply.html(shell))
    with AdiletFetcher(local_settings, sleep=sleeps) as fetcher:
        with pytest.raises(IngestError, match=r"K030000442_: adilet served an empty JavaScript shell"):
            fetcher.fetch("K030000442_", "ru")
        assert not fetcher.cache_path("K030000442_", "ru").exists()
    assert adilet_server.paths() == ["/api/documents/by-ngr/K030000442_", "/rus/docs/K030000442_"]


def test_cache_hit_makes_no_request_and_refresh_refetches(local_settings, adilet_server, sleeps, api_body):
    adilet_server.route(API, Reply.json({"text_content": api_body}))
    with AdiletFetcher(local_settings, sleep=sleeps) as fetcher:
        first = fetcher.fetch(DOC, "ru")
    with AdiletFetcher(local_settings, sleep=sleeps) as fetcher:  # a re-run
        assert fetcher.fetch(DOC, "ru") == first
        assert len(adilet_server.requests) == 1
        assert fetcher.fetch(DOC, "ru", refresh=True) == first
    assert adilet_server.paths() == [API, API]


def test_given_client_is_used_and_left_open(local_settings, adilet_server, sleeps, api_body):
    adilet_server.route(API, Reply.json({"text_content": api_body}))
    with httpx.Client() as client:
        with AdiletFetcher(local_settings, client=client, sleep=sleeps) as fetcher:
            fetcher.fetch(DOC, "ru")
        assert not client.is_closed
    assert adilet_server.requests[0].headers["user-agent"] == local_settings.user_agent


def test_bad_document_id_is_refused_before_any_request(local_settings, adilet_server, sleeps):
    with AdiletFetcher(local_settings, sleep=sleeps) as fetcher:
        with pytest.raises(IngestError, match="not an adilet document id"):
            fetcher.fetch("../../etc/passwd", "ru")
    assert adilet_server.requests == []


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b'{"text_content": "<p>x</p>", "is_actual": true, "status": {"code": 1}}', "<p>x</p>"),
        (b'{"text_content": null}', None),
        (b'{"data": []}', None),
        (b"<html>not json</html>", None),
    ],
)
def test_api_text(payload, expected):
    assert api_text(payload) == expected


def _refused_port() -> int:
    """A port on 127.0.0.1 that nothing listens on: bound, then closed."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_refused_connection_fails_at_once_without_retries(settings, sleeps):
    """No network: one attempt, no backoff, one message saying what to do instead (was: retried for minutes)."""
    import time

    unreachable = settings.model_copy(
        update={"adilet_base_url": f"http://127.0.0.1:{_refused_port()}", "http_retries": 3, "http_backoff": 10.0}
    )
    started = time.perf_counter()
    with AdiletFetcher(unreachable, sleep=sleeps) as fetcher, pytest.raises(AdiletUnreachable) as err:
        fetcher.fetch(DOC, "ru")
    assert time.perf_counter() - started < 5 and sleeps == []
    assert "127.0.0.1 is unreachable" in str(err.value) and "use --from-dir DIR" in str(err.value)
    assert "data pack" in str(err.value)
    assert not fetcher.cache_path(DOC, "ru").exists()


def test_a_damaged_cached_download_is_fetched_again(local_settings, adilet_server, sleeps, api_body):
    adilet_server.route(API, Reply.json({"text_content": api_body}))
    with AdiletFetcher(local_settings, sleep=sleeps) as fetcher:
        first = fetcher.fetch(DOC, "ru")
        path = fetcher.cache_path(DOC, "ru")
        assert json.loads(path.with_suffix(".json").read_text())["file"]["size"] == path.stat().st_size
        path.write_bytes(path.read_bytes()[:1000])  # a truncated download would parse into fewer articles
        assert fetcher.fetch(DOC, "ru") == first
    assert adilet_server.paths() == [API, API]
    assert path.read_text(encoding="utf-8") == first
