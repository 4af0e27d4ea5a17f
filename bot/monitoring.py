"""The bot's monitoring port (METRICS_PORT): Prometheus metrics at /metrics (prometheus-client's WSGI app over the
default registry, corpus/metrics.py and the answer cache's and LLM budget's) and a health check at /healthz, 200
only while a chain is loaded (503 otherwise), served from a thread in polling and webhook mode alike."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from corpus.errors import UserError

logger = logging.getLogger(__name__)

TEXT = ("Content-Type", "text/plain; charset=utf-8")


class MonitoringPortError(UserError):
    """METRICS_PORT cannot be listened on; the message names it."""


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """wsgiref writes each request to stderr; a scrape every few seconds is not worth a line."""


def monitoring_app(ready: Callable[[], bool]) -> Callable[..., Iterable[bytes]]:
    """The WSGI app: /metrics (Prometheus text format), /healthz (200 "ok" when `ready()`, else 503), else 404."""
    metrics = make_wsgi_app()

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            return metrics(environ, start_response)
        if path == "/healthz":
            try:
                ok = ready()
            except Exception:
                logger.exception("the health check failed")
                ok = False
            # A new header list each time: wsgiref adds Content-Length to the list it is given.
            start_response("200 OK" if ok else "503 Service Unavailable", [TEXT])
            return [b"ok\n" if ok else b"no chain loaded\n"]
        start_response("404 Not Found", [TEXT])
        return [b"not found: /metrics or /healthz\n"]

    return app


class MonitoringServer:
    """Binds at construction (a port in use is a clear error at start), serves from a daemon thread on `start`."""

    def __init__(self, listen: str, port: int, ready: Callable[[], bool]) -> None:
        try:
            self.server = make_server(listen, port, monitoring_app(ready), ThreadingWSGIServer, _Quiet)
        except OSError as err:
            raise MonitoringPortError(
                f"METRICS_PORT {port} on {listen} cannot be listened on ({err.strerror or err}): choose a free port "
                "or unset METRICS_PORT"
            ) from err
        self.thread = threading.Thread(target=self.server.serve_forever, name="metrics", daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def start(self) -> None:
        self.thread.start()
        logger.info("metrics at http://%s:%d/metrics, health at /healthz", *self.server.server_address[:2])

    def stop(self) -> None:
        if self.thread.is_alive():
            self.server.shutdown()
        self.server.server_close()
