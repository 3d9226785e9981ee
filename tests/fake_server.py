"""A loopback HTTP server that answers like an OpenAI-compatible or Anthropic API, with scripted bodies.

Real sockets on 127.0.0.1 (TCP_NODELAY), real SDK clients on the other side; only the replies are
written by the test.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

Reply = tuple[int, bytes]  # (status, body)
#: Special statuses an ``answer`` may return: close the connection without a reply, reply only after
#: ``FakeAPI.hang_s`` seconds (past the client's time-out), or send a 200 with the body one byte every
#: ``FakeAPI.trickle_s`` seconds (status line and headers included: each read is quick, the reply is not).
DROP = -1
HANG = -2
TRICKLE = -3


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
    """Replies come from ``answer(request_json, hit_number)``; every request body is kept in ``requests``, its
    ``Authorization`` header in ``authorizations``."""

    def __init__(self, answer: Callable[[dict[str, Any], int], Reply], hang_s: float = 5.0,
                 trickle_s: float = 0.2) -> None:
        self.answer = answer
        self.hang_s = hang_s
        self.trickle_s = trickle_s
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        self.paths: list[str] = []  # each request's path
        self.open_requests = 0  # being answered now
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
                    fake.authorizations.append(self.headers.get("Authorization"))
                    fake.paths.append(self.path)
                    n = len(fake.requests)
                    fake.open_requests += 1
                try:
                    status, payload = fake.answer(body, n)
                    if status == DROP:
                        self.close_connection = True
                        return
                    if status == HANG:
                        time.sleep(fake.hang_s)
                        status = 200
                    if status == TRICKLE:
                        head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                f"Content-Length: {len(payload)}\r\n\r\n").encode()
                        for byte in head + payload:  # OSError once the client has gone away
                            self.wfile.write(bytes([byte]))
                            time.sleep(fake.trickle_s)
                        return
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    if status in (429, 500, 502, 503):
                        self.send_header("retry-after-ms", "10")  # the SDKs honour it: fast retries in tests
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the client gave up (time-out) or went away (killed)
                    self.close_connection = True
                finally:
                    with fake.lock:
                        fake.open_requests -= 1

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
def fake_api(answer: Callable[[dict[str, Any], int], Reply], hang_s: float = 5.0,
             trickle_s: float = 0.2) -> Iterator[FakeAPI]:
    fake = FakeAPI(answer, hang_s, trickle_s)
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()


def write_exam(path: Path, questions: int, answers: int) -> Path:
    """A JSONL exam written for the loopback tests and benches: ``questions`` x ``answers`` short answers."""
    rows: list[dict[str, Any]] = []
    for q in range(questions):
        rows.append({"type": "question", "id": f"q{q}", "text": f"Question {q}: what does a router do?",
                     "max_points": 2})
        for a in range(answers):
            rows.append({"type": "answer", "id": f"q{q}/a{a}", "question_id": f"q{q}", "examinee": f"e{a}",
                         "text": f"Answer {a} to question {q}: it forwards packets ({'x' * a}).",
                         "human_score": (q + a) % 3})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
