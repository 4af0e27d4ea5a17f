"""A local stand-in for adilet.zan.kz on 127.0.0.1: scripted answers per path, a record of each request."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Reply:
    """One scripted answer: status, body, content type, and how long to stall before answering."""

    status: int = 200
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    delay: float = 0.0

    @classmethod
    def html(cls, text: str, status: int = 200) -> Reply:
        return cls(status, text.encode("utf-8"))

    @classmethod
    def json(cls, obj: object, status: int = 200) -> Reply:
        body = json.dumps(obj, ensure_ascii=False).encode("utf-8")
        return cls(status, body, "application/json; charset=utf-8")


NOT_FOUND = Reply(404, b"<html><body>404 Not Found</body></html>")


@dataclass(frozen=True)
class Received:
    """What the server saw of one request."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


@dataclass
class AdiletServer:
    """Answers each path with its queue of replies (the last one repeats); unknown paths get 404."""

    routes: dict[str, list[Reply]] = field(default_factory=dict)
    requests: list[Received] = field(default_factory=list)
    base_url: str = ""

    def route(self, path: str, *replies: Reply) -> None:
        self.routes[path] = list(replies)

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]

    def _next(self, path: str) -> Reply:
        queue = self.routes.get(path)
        if not queue:
            return NOT_FOUND
        return queue.pop(0) if len(queue) > 1 else queue[0]


def _handler(server: AdiletServer) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            with lock:
                headers = {k.lower(): v for k, v in self.headers.items()}
                server.requests.append(Received("GET", parts.path, parse_qs(parts.query), headers))
                reply = server._next(parts.path)
            if reply.delay:
                time.sleep(reply.delay)
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to answer

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@contextmanager
def serve_adilet() -> Iterator[AdiletServer]:
    """A running local adilet on a free port; `base_url` goes into Settings.adilet_base_url."""
    state = AdiletServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.base_url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def article_body(page: Path) -> str:
    """The inner HTML of a saved page's `<article>`: what the API's `text_content` is reported to carry."""
    html = page.read_text(encoding="utf-8")
    start = html.index(">", html.index("<article")) + 1
    return html[start : html.index("</article>", start)]
