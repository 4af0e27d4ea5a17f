"""A local Pinecone data plane on 127.0.0.1 speaking the REST shapes the pinecone 7.x client sends.

Routes: POST /describe_index_stats, /vectors/upsert, /query (cosine, topK, filter with $eq/$in/$and,
includeMetadata/includeValues), /vectors/delete. Every request is recorded for assertions.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class PineconeState:
    dimension: int
    namespaces: dict[str, dict[str, tuple[list[float], dict[str, Any]]]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path == path]


OPERATORS = {
    "$eq": lambda v, a: v == a,
    "$ne": lambda v, a: v != a,
    "$in": lambda v, a: v in a,
    "$nin": lambda v, a: v not in a,
}


def matches(metadata: dict[str, Any], flt: dict[str, Any] | None) -> bool:
    """Pinecone's metadata filter language, the subset the product uses."""
    if not flt:
        return True
    for key, cond in flt.items():
        if key == "$and":
            if not all(matches(metadata, c) for c in cond):
                return False
            continue
        if key == "$or":
            if not any(matches(metadata, c) for c in cond):
                return False
            continue
        value = metadata.get(key)
        ops = cond if isinstance(cond, dict) else {"$eq": cond}
        for op, arg in ops.items():
            if op not in OPERATORS:
                raise ValueError(f"unsupported operator {op}")
            if not OPERATORS[op](value, arg):
                return False
    return True


def _cosine(a: list[float], b: list[float]) -> float:
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(x * x for x in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb) if na and nb else 0.0


def _handler(state: PineconeState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw or b"{}")
            state.requests.append(Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            if self.headers.get("Api-Key") is None:
                return self._send(401, {"code": 16, "message": "missing api key"})
            route = {
                "/describe_index_stats": self._stats,
                "/vectors/upsert": self._upsert,
                "/query": self._query,
                "/vectors/delete": self._delete,
            }.get(self.path)
            if route is None:
                return self._send(404, {"code": 5, "message": f"no route {self.path}"})
            try:
                self._send(200, route(body))
            except ValueError as err:
                self._send(400, {"code": 3, "message": str(err)})

        def _stats(self, body: dict[str, Any]) -> dict[str, Any]:
            spaces = {ns: {"vectorCount": len(v)} for ns, v in state.namespaces.items() if v}
            return {
                "namespaces": spaces,
                "dimension": state.dimension,
                "indexFullness": 0.0,
                "totalVectorCount": sum(s["vectorCount"] for s in spaces.values()),
                "metric": "cosine",
                "vectorType": "dense",
            }

        def _upsert(self, body: dict[str, Any]) -> dict[str, Any]:
            space = state.namespaces.setdefault(body.get("namespace", ""), {})
            for v in body["vectors"]:
                if len(v["values"]) != state.dimension:
                    raise ValueError(f"Vector dimension {len(v['values'])} does not match {state.dimension}")
                space[v["id"]] = (v["values"], v.get("metadata") or {})
            return {"upsertedCount": len(body["vectors"])}

        def _query(self, body: dict[str, Any]) -> dict[str, Any]:
            ns = body.get("namespace", "")
            space = state.namespaces.get(ns, {})
            hits = [
                (vid, _cosine(body["vector"], values), values, meta)
                for vid, (values, meta) in space.items()
                if matches(meta, body.get("filter"))
            ]
            hits.sort(key=lambda h: -h[1])
            out = []
            for vid, score, values, meta in hits[: body["topK"]]:
                m: dict[str, Any] = {
                    "id": vid,
                    "score": score,
                    "values": values if body.get("includeValues") else [],
                }
                if body.get("includeMetadata"):
                    # Pinecone stores numbers as floats: integer metadata comes back as 5.0
                    m["metadata"] = {
                        k: float(x) if isinstance(x, int) and not isinstance(x, bool) else x for k, x in meta.items()
                    }
                out.append(m)
            return {"matches": out, "namespace": ns, "usage": {"readUnits": 1}}

        def _delete(self, body: dict[str, Any]) -> dict[str, Any]:
            space = state.namespaces.get(body.get("namespace", ""), {})
            if body.get("deleteAll"):
                space.clear()
            for vid in body.get("ids") or []:
                space.pop(vid, None)
            return {}

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@contextmanager
def pinecone_server(dimension: int) -> Iterator[tuple[str, PineconeState]]:
    """Serve a fresh index of `dimension` on a free port; yields (host URL, state)."""
    state = PineconeState(dimension)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
