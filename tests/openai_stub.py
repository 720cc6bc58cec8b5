"""A local OpenAI-compatible chat-completions server for tests: scripted replies, recorded requests.

In a test, use the ``openai_stub`` fixture (a :class:`StubServer` on 127.0.0.1, port 0, in a daemon
thread)::

    openai_stub.route(user="CONDITIONS:", replies=['{"choice": 1}'])        # judge calls
    openai_stub.route(system="Output contract:", replies=["a draft"])       # produce calls
    openai_stub.route(user="Summarize", replies=[Reply(status=429), "ok"])  # one 429, then success

Routes are tried in the order they were added; the first whose substrings all occur (``user`` in the
last user message, ``system`` in the system message) answers.  Its replies are a queue: each request
takes the next one and the last repeats forever.  Chat completions are answered under any path ending in
``/chat/completions`` (a gateway may carry a key in the path before it); a reply's ``error_message`` may
name the request's path as ``{path}``, as servers that name the URL they refused do.  A request no route
matches gets ``default``.  Every request is recorded (headers and JSON body) in ``requests``.

Standalone, for command-line tests::

    python tests/openai_stub.py SCRIPT.json

prints the port on the first stdout line and serves until killed.  SCRIPT.json is
``{"routes": [{"user": "...", "system": "...", "replies": [REPLY, ...]}], "default": REPLY}`` where a
REPLY is a string (the content) or an object with the fields of :class:`Reply`.  A request with
``"stream": true`` is answered with server-sent events, a word per chunk (or ``chunk_size`` characters;
``chunk_delay`` apart), and the usage in a last chunk when ``stream_options.include_usage`` asks for it.
``GET /_requests`` returns the recorded requests as JSON.  Nothing here ever reaches the internet.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHAT_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class Reply:
    """One scripted answer: a completion (status 200) or an HTTP error (any other status)."""

    content: str = "ok"
    status: int = 200
    finish_reason: str = "stop"
    prompt_tokens: int = 10
    completion_tokens: int = 5
    error_message: str | None = None  # the error body's message; defaults to a generic one per status
    chunk_delay: float = 0.0  # asked to stream: the seconds the server takes before each word it sends
    chunk_size: int = 0  # asked to stream: characters per chunk (0: a word per chunk)

    @classmethod
    def of(cls, value: Reply | str | dict[str, Any]) -> Reply:
        if isinstance(value, Reply):
            return value
        if isinstance(value, str):
            return cls(content=value)
        return cls(**value)


@dataclass
class Route:
    user: tuple[str, ...]
    system: tuple[str, ...]
    replies: list[Reply]
    hits: int = 0

    def matches(self, user_text: str, system_text: str) -> bool:
        return all(s in user_text for s in self.user) and all(s in system_text for s in self.system)

    def take(self) -> Reply:
        reply = self.replies[min(self.hits, len(self.replies) - 1)]
        self.hits += 1
        return reply


@dataclass
class Recorded:
    """One request the stub received, and what it answered."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    reply: Reply | None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def system(self) -> str:
        return next((str(m.get("content") or "") for m in self.messages if m.get("role") == "system"), "")

    @property
    def user(self) -> str:
        """The last user message."""
        return next((str(m.get("content") or "") for m in reversed(self.messages) if m.get("role") == "user"), "")

    @property
    def is_judge(self) -> bool:
        return "CONDITIONS:" in self.user

    @property
    def is_produce(self) -> bool:
        return "Output contract:" in self.system

    @property
    def ok(self) -> bool:
        return self.reply is not None and self.reply.status == 200


def _texts(value: str | Sequence[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


@dataclass
class StubState:
    """The route table and the request log; shared by every handler thread."""

    routes: list[Route] = field(default_factory=list)
    default: Reply = field(default_factory=Reply)
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def route(
        self,
        *,
        user: str | Sequence[str] | None = None,
        system: str | Sequence[str] | None = None,
        replies: Sequence[Reply | str | dict[str, Any]] = ("ok",),
    ) -> Route:
        if not replies:
            raise ValueError("a route needs at least one reply")
        added = Route(_texts(user), _texts(system), [Reply.of(r) for r in replies])
        with self.lock:
            self.routes.append(added)
        return added

    def reset(self) -> None:
        with self.lock:
            self.routes.clear()
            self.requests.clear()
            self.default = Reply()

    def answer(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Reply | None:
        recorded = Recorded(path, headers, body, None)
        with self.lock:
            if is_chat_path(path):
                route = next((r for r in self.routes if r.matches(recorded.user, recorded.system)), None)
                recorded.reply = route.take() if route else self.default
            self.requests.append(recorded)
        return recorded.reply


def is_chat_path(path: str) -> bool:
    """Whether a request path asks for a chat completion: ``/v1/chat/completions``, or that under a prefix."""
    return path.split("?", 1)[0].endswith(CHAT_PATH.removeprefix("/v1"))


def completion_json(reply: Reply, model: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.content},
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


def stream_events(reply: Reply, model: str, include_usage: bool) -> Iterator[dict[str, Any]]:
    """The server-sent events of a streamed completion, as OpenAI sends them: the role, the content a
    word at a time, the finish reason, then (when asked for) a last chunk with the usage and no choices."""
    ident, created = f"chatcmpl-{uuid.uuid4().hex[:12]}", int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    yield chunk({"role": "assistant", "content": ""})
    if reply.chunk_size:
        pieces = [reply.content[at : at + reply.chunk_size] for at in range(0, len(reply.content), reply.chunk_size)]
    else:
        pieces = re.findall(r"\s*\S+\s*|\s+", reply.content)
    for piece in pieces:
        yield chunk({"content": piece})
    yield chunk({}, reply.finish_reason)
    if include_usage:
        yield {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": {
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "total_tokens": reply.prompt_tokens + reply.completion_tokens,
            },
        }


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "server_error",
}


def error_json(reply: Reply, path: str = CHAT_PATH) -> dict[str, Any]:
    message = (reply.error_message or f"stub error {reply.status}").replace("{path}", path)
    return {
        "error": {
            "message": message,
            "type": _ERROR_TYPES.get(reply.status, "server_error"),
            "param": None,
            "code": None,
        }
    }


def _handler(state: StubState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

        def _send(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, reply: Reply, model: str, include_usage: bool) -> None:
            """Answer as server-sent events, one chunk per word (chunked transfer: the length is not known)."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def send(data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            for event in stream_events(reply, model, include_usage):
                if event["choices"] and event["choices"][0]["delta"].get("content"):
                    time.sleep(reply.chunk_delay)  # the server's own pace, as a model writes
                send(f"data: {json.dumps(event)}\n\n".encode())
            send(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def do_GET(self) -> None:
            if self.path == "/_requests":
                with state.lock:
                    payload = [
                        {
                            "path": r.path,
                            "headers": r.headers,
                            "body": r.body,
                            "reply": asdict(r.reply) if r.reply else None,
                        }
                        for r in state.requests
                    ]
                self._send(200, payload)
            else:
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"_unparsed": raw.decode("utf-8", "replace")}
            headers = {name.lower(): value for name, value in self.headers.items()}
            reply = state.answer(self.path, headers, body if isinstance(body, dict) else {"_body": body})
            if reply is None:
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            elif reply.status != 200:
                self._send(reply.status, error_json(reply, self.path))
            elif body.get("stream"):
                options = body.get("stream_options") or {}
                self._stream(reply, str(body.get("model") or "stub-model"), bool(options.get("include_usage")))
            else:
                self._send(200, completion_json(reply, str(body.get("model") or "stub-model")))

    return Handler


class StubServer(StubState):
    """The stub on 127.0.0.1 (a free port), served from a daemon thread."""

    def __init__(self) -> None:
        super().__init__()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="openai-stub", daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        """The api_base to give litellm."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> StubServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def load_script(self, script: dict[str, Any]) -> None:
        for entry in script.get("routes") or []:
            self.route(user=entry.get("user"), system=entry.get("system"), replies=entry.get("replies") or ["ok"])
        if "default" in script:
            self.default = Reply.of(script["default"])

    # -- views of the log, for assertions -------------------------------------------

    @property
    def chat(self) -> list[Recorded]:
        with self.lock:
            return [r for r in self.requests if is_chat_path(r.path)]

    @property
    def produce_requests(self) -> list[Recorded]:
        return [r for r in self.chat if r.is_produce]

    @property
    def judge_requests(self) -> list[Recorded]:
        return [r for r in self.chat if r.is_judge]

    def usage(self) -> dict[str, int]:
        """Tokens of every successful completion served so far."""
        served = [r.reply for r in self.chat if r.ok and r.reply is not None]
        return {
            "input_tokens": sum(r.prompt_tokens for r in served),
            "output_tokens": sum(r.completion_tokens for r in served),
        }


@contextmanager
def running_stub() -> Iterator[StubServer]:
    stub = StubServer().start()
    try:
        yield stub
    finally:
        stub.stop()


def main(argv: Sequence[str]) -> int:
    stub = StubServer()
    if argv:
        with open(argv[0], encoding="utf-8") as handle:
            stub.load_script(json.load(handle))
    print(stub.port, flush=True)
    try:
        stub.server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        stub.server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
