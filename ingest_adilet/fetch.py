"""Download the law HTML of one adilet document: JSON API first, the HTML page as fallback, cached on disk."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from config import Settings
from corpus.errors import AdiletUnreachable, IngestError
from corpus.files import DamagedFile, FileDigest, atomic_write, check_file
from corpus.records import Lang
from ingest_adilet.html_parser import page_problem

logger = logging.getLogger(__name__)
SITE_LANG: dict[str, str] = {"ru": "rus", "kk": "kaz"}
_DOC_ID = re.compile(r"^[A-Za-z0-9_]{5,20}$")
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


class _ApiDocument(BaseModel):
    """The part of `/api/documents/by-ngr/{ID}` we use; the rest of its (unverified) shape is ignored."""

    model_config = ConfigDict(extra="ignore")

    text_content: str | None = None


def api_text(payload: bytes) -> str | None:
    """The law HTML inside a JSON API answer, or None when the answer does not carry any."""
    try:
        doc = _ApiDocument.model_validate_json(payload)
    except ValidationError as err:
        logger.warning("adilet API answer is not the expected JSON: %s", err.errors()[:1])
        return None
    text = (doc.text_content or "").strip()
    return text or None


class _NotFound(Exception):
    """The server answered 404."""


class AdiletFetcher:
    """Fetches law HTML from adilet politely (delay, retries with backoff) and keeps raw downloads on disk."""

    def __init__(
        self,
        settings: Settings,
        *,
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """Args:
        settings: base URL, timeout, retries, backoff, delay, User-Agent and DATA_DIR (for the cache).
        client: an httpx client to use (not closed by `close()`); a new one is made when omitted.
        sleep: how to wait between requests and retries (tests pass a recorder).
        """
        self.settings = settings
        self.base_url = settings.adilet_base_url.rstrip("/")
        self.cache_root = settings.cache_dir / "adilet"
        self._own_client = client is None
        self.client = client or httpx.Client(follow_redirects=True)
        self._sleep = sleep
        self._last_request: float | None = None

    def close(self) -> None:
        if self._own_client:
            self.client.close()

    def __enter__(self) -> AdiletFetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def cache_path(self, doc_id: str, lang: Lang) -> Path:
        return self.cache_root / lang / f"{doc_id}.html"

    def fetch(self, doc_id: str, lang: Lang, *, refresh: bool = False) -> str:
        """The law HTML of `doc_id` in `lang` (API `text_content` or the page); cached unless `refresh`."""
        if not _DOC_ID.match(doc_id):
            raise IngestError(f"{doc_id!r} is not an adilet document id (like K1400000226 or K940001000_)")
        if lang not in SITE_LANG:
            raise ValueError(f"lang must be one of {sorted(SITE_LANG)}, not {lang!r}")
        path = self.cache_path(doc_id, lang)
        if path.exists() and not refresh and (html := self._cached(path)) is not None:
            logger.debug("%s/%s from cache %s", doc_id, lang, path)
            return html

        html, url = self._from_api(doc_id, lang)
        if html is None:
            html, url = self._from_page(doc_id, lang)
        self._store(path, html, doc_id=doc_id, lang=lang, url=url)
        return html

    def _from_api(self, doc_id: str, lang: Lang) -> tuple[str | None, str]:
        """Law HTML from the JSON API, or None (with the reason logged) so that the page is tried instead."""
        url = f"{self.base_url}/api/documents/by-ngr/{doc_id}"
        params = {"language": SITE_LANG[lang]}
        try:
            response = self._get(url, params=params, doc_id=doc_id)
        except _NotFound:
            logger.info("%s: not in the adilet API (404), trying the HTML page", doc_id)
            return None, url
        except AdiletUnreachable:
            raise
        except IngestError as err:
            logger.warning("%s: adilet API failed (%s), trying the HTML page", doc_id, err)
            return None, url
        text = api_text(response.content)
        if text is None or page_problem(text):
            logger.warning("%s: adilet API answer carries no law text, trying the HTML page", doc_id)
            return None, url
        return text, str(response.url)

    def _from_page(self, doc_id: str, lang: Lang) -> tuple[str, str]:
        url = f"{self.base_url}/{SITE_LANG[lang]}/docs/{doc_id}"
        try:
            response = self._get(url, doc_id=doc_id)
        except _NotFound:
            raise IngestError(
                f"{doc_id}: document ID not found on adilet ({url} answers 404); "
                "check the id in ADILET_SOURCES (corpus/legal/registry.json)"
            ) from None
        html = response.text
        if problem := page_problem(html):
            raise IngestError(f"{doc_id}: adilet served {problem} at {url}; try again later")
        return html, str(response.url)

    def _get(self, url: str, *, doc_id: str, params: dict[str, str] | None = None) -> httpx.Response:
        """GET after a polite delay; timeouts, dropped connections, 429 and 5xx are retried with backoff. A
        connection that cannot be made at all (name resolution failed, refused) raises AdiletUnreachable at once:
        retrying it would only make a machine without network wait for minutes."""
        s = self.settings
        attempts = 1 + max(0, s.http_retries)
        problem = ""
        for attempt in range(attempts):
            if attempt:
                self._sleep(s.http_backoff * 2 ** (attempt - 1))
            self._wait_politely()
            try:
                response = self.client.get(
                    url, params=params, headers={"User-Agent": s.user_agent}, timeout=s.http_timeout
                )
            except httpx.ConnectError as err:
                host = urlsplit(self.base_url).hostname or self.base_url
                raise AdiletUnreachable(
                    f"{host} is unreachable; use --from-dir DIR or a data pack ({err or type(err).__name__}; DIR "
                    "holds a copy of the texts: rus/ID.txt, kaz/ID.txt, html/ID.html)"
                ) from None
            except (httpx.TimeoutException, httpx.TransportError) as err:
                problem = f"{type(err).__name__} after {s.http_timeout:g} s"
                logger.warning("%s: %s (attempt %d/%d) %s", doc_id, problem, attempt + 1, attempts, url)
                continue
            finally:
                self._last_request = time.monotonic()
            if response.status_code == 404:
                raise _NotFound(url)
            if response.status_code in _RETRY_STATUS:
                problem = f"HTTP {response.status_code}"
                logger.warning("%s: %s (attempt %d/%d) %s", doc_id, problem, attempt + 1, attempts, url)
                continue
            if response.is_error:
                raise IngestError(f"{doc_id}: adilet answered HTTP {response.status_code} at {url}")
            return response
        raise IngestError(f"{doc_id}: adilet did not answer ({problem}, {attempts} attempts) at {url}; try again later")

    def _wait_politely(self) -> None:
        if self._last_request is None:
            return
        wait = self.settings.http_delay - (time.monotonic() - self._last_request)
        if wait > 0:
            self._sleep(wait)

    def _cached(self, path: Path) -> str | None:
        """A cached download if it is what was written (size and sha256 in its .json); None (logged) when it
        is damaged or its meta is: it is fetched again."""
        try:
            meta = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
            recorded = meta.get("file")
            check_file(path, FileDigest.model_validate(recorded) if recorded else None)
            return path.read_text(encoding="utf-8")
        except (OSError, ValueError, DamagedFile) as err:  # ValueError: bad JSON, bad UTF-8, bad meta
            logger.warning("cached download %s is damaged (%s): fetching it again", path, err)
            return None

    def _store(self, path: Path, html: str, *, doc_id: str, lang: str, url: str) -> None:
        """Write the download, then its meta with the download's size and sha256, each atomically."""
        digest = atomic_write(path, html)
        meta = {
            "doc_id": doc_id,
            "lang": lang,
            "source_url": url,
            "fetched_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "chars": len(html),
            "file": digest.model_dump(),
        }
        atomic_write(path.with_suffix(".json"), json.dumps(meta, ensure_ascii=False))
        logger.info("%s/%s fetched from %s (%d chars)", doc_id, lang, url, len(html))
