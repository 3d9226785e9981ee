"""Loopback fakes of the OpenAI Batch API and the Anthropic Message Batches API (http.server, TCP_NODELAY).

One server speaks both: ``/v1/files`` (multipart upload), ``/v1/batches``, ``/v1/batches/{id}``,
``/v1/files/{id}/content`` (OpenAI) and ``/v1/messages/batches``, ``/v1/messages/batches/{id}``,
``/v1/messages/batches/{id}/results`` (Anthropic).  A batch stays ``in_progress`` while ``hold`` is set
and finishes on the first status check after it is cleared.  Each request is answered by a small
deterministic grader (the grade is the answer's length modulo the scale, so replies differ); a request
whose prompt contains ``FAIL-ME`` gets a per-request error.  ``created`` counts the batches created.
Written for knockout's tests and benchmarks; not a model.
"""

from __future__ import annotations

import json
import re
import threading
import time
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def fake_grade(prompt: str) -> str:
    """A deterministic reply in the format the prompt asks for (individual or pairwise)."""
    m = re.search(r"scale of 0 to (\d+(?:\.\d+)?)", prompt)
    top = float(m.group(1)) if m else 1.0

    def grade(text: str) -> str:
        return f"{(len(text) % (int(top) + 1)) if top >= 1 else 0:g}/{top:g}"

    a1 = re.search(r"Answer 1: (.*)", prompt)
    a2 = re.search(r"Answer 2: (.*)", prompt)
    if a1 and a2 and "Answer 1: X" in prompt:
        return f"Explanation: fake batch grader.\nAnswer 1: {grade(a1.group(1))}\nAnswer 2: {grade(a2.group(1))}"
    ans = re.search(r"The Answer: (.*)", prompt)
    return f"Explanation: fake batch grader.\nScore: {grade(ans.group(1) if ans else prompt)}"


class FakeBatchServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.created: list[str] = []
        self.hold = False
        self.lock = threading.Lock()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> FakeBatchServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()

    def wait_for_batches(self, n: int, timeout: float = 120) -> None:
        deadline = time.time() + timeout
        while len(self.created) < n:
            if time.time() > deadline:
                raise TimeoutError(f"{len(self.created)} batches created, waited for {n}")
            time.sleep(0.05)

    # -- the batch's work ------------------------------------------------------------------------
    def new_batch(self, kind: str, requests: list[dict[str, Any]]) -> dict[str, Any]:
        with self.lock:
            bid = f"batch_{len(self.created) + 1:04d}"
            self.created.append(bid)
            self.batches[bid] = {"kind": kind, "requests": requests, "done": False, "created": int(time.time())}
        return self.view(bid)

    def view(self, bid: str) -> dict[str, Any]:
        b = self.batches[bid]
        if not b["done"] and not self.hold:
            b["done"] = True
        n = len(b["requests"])
        if b["kind"] == "openai":
            out_id, err_id = f"file-out-{bid}", f"file-err-{bid}"
            if b["done"]:
                ok, bad = self.openai_results(b["requests"])
                self.files[out_id], self.files[err_id] = ok, bad
            return {"id": bid, "object": "batch", "endpoint": "/v1/chat/completions", "errors": None,
                    "input_file_id": b.get("input", ""), "completion_window": "24h",
                    "status": "completed" if b["done"] else "in_progress",
                    "output_file_id": out_id if b["done"] else None,
                    "error_file_id": err_id if b["done"] else None,
                    "created_at": b["created"], "request_counts": {"total": n, "completed": n if b["done"] else 0,
                                                                  "failed": 0}}
        return {"id": bid, "type": "message_batch", "processing_status": "ended" if b["done"] else "in_progress",
                "request_counts": {"processing": 0 if b["done"] else n, "succeeded": n if b["done"] else 0,
                                   "errored": 0, "canceled": 0, "expired": 0},
                "created_at": "2026-01-01T00:00:00Z", "expires_at": "2026-01-02T00:00:00Z",
                "ended_at": "2026-01-01T00:01:00Z" if b["done"] else None, "archived_at": None,
                "cancel_initiated_at": None,
                "results_url": f"{self.url}/v1/messages/batches/{bid}/results" if b["done"] else None}

    @staticmethod
    def openai_results(requests: list[dict[str, Any]]) -> tuple[bytes, bytes]:
        ok, bad = [], []
        for r in requests:
            prompt = "\n".join(str(m["content"]) for m in r["body"]["messages"])
            if "FAIL-ME" in prompt:
                bad.append({"id": "x", "custom_id": r["custom_id"], "response": {"status_code": 400, "body": {
                    "error": {"message": "invalid request (fake)"}}}, "error": None})
                continue
            text = fake_grade(prompt)
            ok.append({"id": "x", "custom_id": r["custom_id"], "error": None, "response": {"status_code": 200,
                       "body": {"id": "c", "object": "chat.completion", "created": 0, "model": r["body"]["model"],
                                "choices": [{"index": 0, "finish_reason": "stop",
                                             "message": {"role": "assistant", "content": text}}],
                                "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": 9,
                                          "total_tokens": len(prompt.split()) + 9}}}})
        return (("\n".join(json.dumps(x) for x in ok) + "\n").encode(),
                ("\n".join(json.dumps(x) for x in bad) + "\n").encode() if bad else b"")

    @staticmethod
    def anthropic_results(requests: list[dict[str, Any]]) -> bytes:
        lines = []
        for r in requests:
            p = r["params"]
            prompt = "\n".join(str(m["content"]) for m in p["messages"])
            if "FAIL-ME" in prompt:
                lines.append({"custom_id": r["custom_id"], "result": {"type": "errored", "error": {
                    "type": "error", "error": {"type": "invalid_request_error", "message": "fake"}}}})
                continue
            lines.append({"custom_id": r["custom_id"], "result": {"type": "succeeded", "message": {
                "id": "m", "type": "message", "role": "assistant", "model": p["model"],
                "content": [{"type": "text", "text": fake_grade(prompt)}], "stop_reason": "end_turn",
                "stop_sequence": None, "usage": {"input_tokens": len(prompt.split()), "output_tokens": 9}}}})
        return ("\n".join(json.dumps(x) for x in lines) + "\n").encode()


class _Handler(BaseHTTPRequestHandler):
    disable_nagle_algorithm = True  # TCP_NODELAY
    protocol_version = "HTTP/1.1"
    server: FakeBatchServer

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, obj: Any, status: int = 200) -> None:
        self._send(status, json.dumps(obj).encode())

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_POST(self) -> None:
        s, path, body = self.server, self.path.split("?")[0], self._body()
        if path == "/v1/files":
            msg = BytesParser(policy=HTTP).parsebytes(
                b"Content-Type: " + self.headers["Content-Type"].encode() + b"\r\n\r\n" + body)
            data = next(p.get_payload(decode=True) for p in msg.iter_parts() if p.get_param("name",
                        header="content-disposition") == "file")
            fid = f"file-in-{len(s.files) + 1}"
            s.files[fid] = data
            self._json({"id": fid, "object": "file", "bytes": len(data), "created_at": 0,
                        "filename": "in.jsonl", "purpose": "batch", "status": "processed"})
        elif path == "/v1/batches":
            req = json.loads(body)
            lines = [json.loads(x) for x in s.files[req["input_file_id"]].decode().splitlines() if x.strip()]
            view = s.new_batch("openai", lines)
            s.batches[view["id"]]["input"] = req["input_file_id"]
            self._json(s.view(view["id"]))
        elif path == "/v1/messages/batches":
            self._json(s.new_batch("anthropic", json.loads(body)["requests"]))
        else:
            self._json({"error": {"message": f"no route {path}"}}, 404)

    def do_GET(self) -> None:
        s, path = self.server, self.path.split("?")[0]
        parts = path.strip("/").split("/")
        if len(parts) == 3 and parts[:2] == ["v1", "batches"] and parts[2] in s.batches:
            self._json(s.view(parts[2]))
        elif len(parts) == 4 and parts[:2] == ["v1", "files"] and parts[3] == "content" and parts[2] in s.files:
            self._send(200, s.files[parts[2]], "application/octet-stream")
        elif len(parts) == 4 and parts[:3] == ["v1", "messages", "batches"] and parts[3] in s.batches:
            self._json(s.view(parts[3]))
        elif len(parts) == 5 and parts[4] == "results" and parts[3] in s.batches:
            self._send(200, s.anthropic_results(s.batches[parts[3]]["requests"]), "application/binary")
        else:
            self._json({"error": {"message": f"no route {path}"}}, 404)
