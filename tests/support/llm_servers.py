"""Local Groq and Ollama servers on 127.0.0.1 speaking the real protocols, recording what they receive."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import pytest
from pydantic import SecretStr

from config import Settings

Reply = str | Callable[[dict[str, Any]], str]


@dataclass
class Received:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None

    def messages(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("messages", []))

    def text_of(self, role: str) -> str:
        return "\n".join(str(m.get("content", "")) for m in self.messages() if m.get("role") == role)


@dataclass
class _Failure:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


class _Server:
    """A threaded HTTP server whose handler calls `self.handle`; a context manager."""

    def __init__(self, reply: Reply = "Ответ [S1].") -> None:
        self.reply: Reply = reply
        self.failure: _Failure | None = None
        self.delay = 0.0  # seconds to sit on each request before answering: a backend that hangs
        self.received: list[Received] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _read(self) -> Received:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                rec = Received(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                server.received.append(rec)
                return rec

            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self._answer()

            def _answer(self) -> None:
                rec = self._read()
                time.sleep(server.delay)
                try:
                    server.handle(self, rec)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting
                    pass

            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def fail(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        """Answer every request with this error from now on."""
        self.failure = _Failure(status, body, headers or {})

    def answer_text(self, body: dict[str, Any]) -> str:
        return self.reply(body) if callable(self.reply) else self.reply

    def handle(self, h: BaseHTTPRequestHandler, rec: Received) -> None:
        raise NotImplementedError

    @staticmethod
    def send_json(h: BaseHTTPRequestHandler, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj, ensure_ascii=False).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)

    @staticmethod
    def send_stream(
        h: BaseHTTPRequestHandler,
        content_type: str,
        lines: list[bytes],
        delay: float = 0.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        """A streamed body, chunk by chunk (`delay` seconds apart, flushed), as both services send it."""
        h.send_response(200)
        h.send_header("Content-Type", content_type)
        h.send_header("Transfer-Encoding", "chunked")
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        for i, line in enumerate(lines):
            if delay and i:
                time.sleep(delay)
            h.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
            h.wfile.flush()
        h.wfile.write(b"0\r\n\r\n")

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class GroqServer(_Server):
    """`POST /openai/v1/chat/completions` with a Bearer key; JSON, or server-sent events if streaming."""

    model = "llama-3.3-70b-versatile"
    # Sent with every response, as Groq does: -requests are the requests per day, -tokens the tokens per minute.
    ratelimit = {
        "x-ratelimit-limit-requests": "1000",
        "x-ratelimit-remaining-requests": "999",
        "x-ratelimit-reset-requests": "1m26.4s",
        "x-ratelimit-limit-tokens": "12000",
        "x-ratelimit-remaining-tokens": "11850",
        "x-ratelimit-reset-tokens": "750ms",
    }
    stream_chunk_chars = 0  # characters per streamed chunk; 0: the text in two halves
    stream_chunk_delay = 0.0  # seconds between streamed chunks, as a model generating

    def chunks(self, text: str) -> list[str]:
        """The pieces a streamed reply is sent in."""
        size = self.stream_chunk_chars
        if size <= 0:
            return [text[: len(text) // 2], text[len(text) // 2 :]]
        return [text[i : i + size] for i in range(0, len(text), size)]

    def rate_limit(self, retry_after: int = 20) -> None:
        """Answer 429 with retry-after, as Groq's free tier does when its tokens per minute run out."""
        self.fail(
            429,
            {
                "error": {
                    "message": f"Rate limit reached for model `{self.model}`: tokens per minute (TPM). "
                    f"Please try again in {retry_after}s.",
                    "type": "tokens",
                    "code": "rate_limit_exceeded",
                }
            },
            {"retry-after": str(retry_after)},
        )

    def handle(self, h: BaseHTTPRequestHandler, rec: Received) -> None:
        if rec.method != "POST" or rec.path != "/openai/v1/chat/completions":
            return self.send_json(
                h, 404, {"error": {"message": "Unknown request URL", "type": "invalid_request_error"}}
            )
        if not rec.headers.get("authorization", "").startswith("Bearer "):
            return self.send_json(h, 401, {"error": {"message": "Invalid API Key", "type": "invalid_request_error"}})
        if self.failure:
            return self.send_json(h, self.failure.status, self.failure.body, self.ratelimit | self.failure.headers)
        body = rec.body or {}
        text = self.answer_text(body)
        created = int(time.time())
        if body.get("stream"):
            events = [
                {
                    "id": "chatcmpl-local",
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": self.model,
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": piece}, "finish_reason": None}],
                }
                for piece in self.chunks(text)
            ]
            events.append(
                {
                    "id": "chatcmpl-local",
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": self.model,
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                }
            )
            lines = [f"data: {json.dumps(e, ensure_ascii=False)}\n\n".encode() for e in events]
            return self.send_stream(
                h,
                "text/event-stream",
                [*lines, b"data: [DONE]\n\n"],
                delay=self.stream_chunk_delay,
                headers=self.ratelimit,
            )
        self.send_json(
            h,
            200,
            {
                "id": "chatcmpl-local",
                "object": "chat.completion",
                "created": created,
                "model": self.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "logprobs": None,
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150},
                "system_fingerprint": "fp_local",
                "x_groq": {"id": "req_local"},
            },
            self.ratelimit,
        )


class OllamaServer(_Server):
    """`POST /api/chat` answering NDJSON lines (one JSON object when stream is false), `GET /api/tags`."""

    model = "llama3.1:8b"

    def handle(self, h: BaseHTTPRequestHandler, rec: Received) -> None:
        if rec.method == "GET" and rec.path == "/api/tags":
            return self.send_json(h, 200, {"models": [{"name": self.model, "model": self.model, "size": 4920753328}]})
        if rec.method != "POST" or rec.path != "/api/chat":
            return self.send_json(h, 404, {"error": "404 page not found"})
        if self.failure:
            return self.send_json(h, self.failure.status, self.failure.body, self.failure.headers)
        body = rec.body or {}
        text = self.answer_text(body)
        base = {"model": body.get("model", self.model), "created_at": "2026-01-01T00:00:00Z"}
        done = {
            **base,
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "total_duration": 1000,
            "prompt_eval_count": 100,
            "eval_count": 50,
        }
        if body.get("stream") is False:
            return self.send_json(h, 200, {**done, "message": {"role": "assistant", "content": text}})
        words = text.split(" ")
        lines = [
            {
                **base,
                "message": {"role": "assistant", "content": w + (" " if i < len(words) - 1 else "")},
                "done": False,
            }
            for i, w in enumerate(words)
        ]
        self.send_stream(
            h,
            "application/x-ndjson",
            [json.dumps(x, ensure_ascii=False).encode() + b"\n" for x in [*lines, done]],
        )


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens: a backend that is down."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# Registered for every test module by conftest.py (pytest_plugins), under the short names.
@pytest.fixture(name="groq_server")
def groq_server_fixture() -> Iterator[GroqServer]:
    with GroqServer() as server:
        yield server


@pytest.fixture(name="ollama_server")
def ollama_server_fixture() -> Iterator[OllamaServer]:
    with OllamaServer() as server:
        yield server


def with_backends(settings: Settings, *, groq: str | None = None, ollama: str | None = None, **more: Any) -> Settings:
    """Settings pointing Groq (with a test key) and/or Ollama at the given base URLs; the others left out."""
    update: dict[str, Any] = {"ollama_enabled": ollama is not None, **more}
    if groq is not None:
        update |= {"groq_api_key": SecretStr("gsk_test_key"), "groq_base_url": groq}
    if ollama is not None:
        update["ollama_base_url"] = ollama
    return settings.model_copy(update=update)
