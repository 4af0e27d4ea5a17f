"""A local stand-in for adilet.zan.kz on 127.0.0.1: scripted answers per path, a record of each request."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from html import escape
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


# A heading block of a text snapshot: «1-бап. …», «14-1-бап. …», «1-тарау. …», «2-бөлім. …», «Статья 1. …».
_ARTICLE_LINE = re.compile(r"^(?:\d+(?:-\d+)*-бап\b|Статья\s+\d)")
_PART_LINE = re.compile(r"^(?:\d+(?:-\d+)*-(?:тарау|бөлім)\b|Глава\s+\d|Раздел\s+\d)")
_NBSP = "&nbsp;" * 5


def page_from_text(shell_page: Path, text: str, title: str) -> str:
    """An adilet page for a text whose page ../shared lacks (no Kazakh page is saved there): the real saved page
    `shell_page` (its title block, `<div class="container_gamma text">`, the chrome after the law and the
    footer) with its law text replaced by `text`, a plain-text snapshot (../shared/corpus/kaz/ID.txt, the
    `get_text("\\n")` of such a page) written back in adilet's own markup: chapters as `<h3 id="zN">`, article
    headings as `<p><b><a name="zN"></a>1-бап. …</b></p>`, paragraphs as `<p id="zN">&nbsp;… </p>`, footnotes
    («Ескерту.», «Сноска.») as `<p class="note">`, editor's notes as red `<font>`. A link's text, which the
    snapshot breaks onto its own line, is joined back into its paragraph."""
    html = shell_page.read_text(encoding="utf-8")
    start = html.index(">", html.index("<article")) + 1
    end = html.index("</article>", start)
    body = "\n".join(_markup(text))
    page = html[:start] + body + html[end:]
    h1 = page.index("<h1", page.index("container_alpha slogan"))
    h1_text = page.index(">", h1) + 1
    return page[:h1_text] + escape(title) + page[page.index("</h1>", h1_text) :]


def _markup(text: str) -> Iterator[str]:
    anchor = 0
    for block in re.split(r"\n[ \t\u00a0]*\n", text):
        # a block's lines are one paragraph, except a heading, which stands on its own line
        paragraphs: list[list[str]] = [[]]
        for line in block.split("\n"):
            head = line.strip()
            if _ARTICLE_LINE.match(head) or _PART_LINE.match(head):
                paragraphs += [[head], []]
            else:
                paragraphs[-1].append(line)
        for lines in paragraphs:
            para = " ".join("".join(lines).split())
            if not para:
                continue
            anchor += 1
            if _PART_LINE.match(para):
                yield f'<h3 id="z{anchor}"> {escape(para)}</h3>'
            elif _ARTICLE_LINE.match(para):
                yield f'<p><b><a name="z{anchor}"></a>{escape(para)}</b></p>'
            elif para.startswith(("Ескерту", "Сноска")):
                yield f'<p class="note" id="z{anchor}">\n{_NBSP} {escape(para)}</p>'
            elif para.startswith(("ЗҚАИ-ның ескертпесі", "Примечание ИЗПИ", "Қолданушылар назарына")):
                yield f'<font color="#FF0000">{_NBSP} {escape(para)}</font><br>'
            else:
                yield f'<p id="z{anchor}">\n{_NBSP} {escape(para)}</p>'
