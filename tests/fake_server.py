"""A loopback HTTP server that answers like an OpenAI-compatible or Anthropic API, with scripted bodies.

Real sockets on 127.0.0.1 (TCP_NODELAY), real SDK clients on the other side; only the replies are
written by the test.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Reply = tuple[int, bytes]  # (status, body)


def chat_body(text: str, prompt_tokens: int = 5, completion_tokens: int = 3) -> bytes:
    return json.dumps({
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }).encode()


def messages_body(blocks: list[dict[str, Any]]) -> bytes:
    return json.dumps({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": blocks,
        "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 3},
    }).encode()


class FakeAPI:
    """Replies come from ``answer(request_json, hit_number)``; every request body is kept in ``requests``."""

    def __init__(self, answer: Callable[[dict[str, Any], int], Reply]) -> None:
        self.answer = answer
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                with fake.lock:
                    fake.requests.append(body)
                    n = len(fake.requests)
                status, payload = fake.answer(body, n)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @property
    def hits(self) -> int:
        return len(self.requests)


@contextmanager
def fake_api(answer: Callable[[dict[str, Any], int], Reply]) -> Iterator[FakeAPI]:
    fake = FakeAPI(answer)
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()
