"""Judge backends against real parts: the embedded GGUF in process, and a llama.cpp server on loopback."""

from __future__ import annotations

import asyncio
import json
import struct
import time
import zlib
from pathlib import Path

import pytest

from knockout.errors import ConfigError
from knockout.judges import GenParams, JudgeRequest, Message, make_judge, parse_spec
from knockout.judges._models import MODELS, verify
from tests.conftest import SMALL_MODEL, needs_model

PROMPT = [
    Message(role="user", content="You are a grader. The question: What is 2+2? The answer: 4. "
            "Give your grade in the format: Explanation: [explanation] Score: [score]/1")
]


def tiny_png(path: Path) -> Path:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"\x00\xff\x00\x00"
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    path.write_bytes(png)
    return path


def test_spec_parsing() -> None:
    assert parse_spec("openai:gpt-4o?base_url=http://127.0.0.1:1/v1") == (
        "openai", "gpt-4o", {"base_url": "http://127.0.0.1:1/v1"})
    assert parse_spec("llamacpp") == ("llamacpp", "", {})
    with pytest.raises(ConfigError, match="unknown judge backend"):
        parse_spec("nope:x")
    with pytest.raises(ConfigError, match="needs a model"):
        make_judge("openai")
    with pytest.raises(ConfigError, match="unknown embedded model"):
        make_judge("llamacpp:no-such-model")


@needs_model
def test_embedded_model_is_verified(small_gguf: Path) -> None:
    m = MODELS[SMALL_MODEL]
    assert small_gguf.stat().st_size == m.size
    assert verify(small_gguf, m.sha256)


@needs_model
def test_embedded_backend_real_call(small_gguf: Path, tmp_path: Path) -> None:
    judge = make_judge(f"llamacpp:{SMALL_MODEL}")
    png = tiny_png(tmp_path / "fig.png")
    msgs = [Message(role="user", content=PROMPT[0].content, images=(str(png),))]
    comp = asyncio.run(judge.complete(JudgeRequest(msgs, GenParams(temperature=0, max_tokens=40))))
    assert comp.text.strip()
    assert comp.prompt_tokens > 10 and 0 < comp.completion_tokens <= 40
    assert comp.images_dropped == 1  # text-only judge: the image is left out and counted


@needs_model
def test_openai_backend_against_llama_server(llama_server: str) -> None:
    judge = make_judge(f"openai:small?base_url={llama_server}")

    async def go() -> list[str]:
        reqs = [JudgeRequest(PROMPT, GenParams(temperature=0, max_tokens=32, seed=1)) for _ in range(2)]
        outs = await asyncio.gather(*(judge.complete(r) for r in reqs))
        await judge.aclose()
        return [o.text for o in outs]

    t0 = time.time()
    texts = asyncio.run(go())
    assert all(t.strip() for t in texts)
    assert texts[0] == texts[1]  # temperature 0, same seed
    assert time.time() - t0 < 120


@needs_model
def test_openai_backend_sends_image_parts(llama_server: str, tmp_path: Path) -> None:
    """A server without vision rejects image parts; with images=no they are left out and counted."""
    png = tiny_png(tmp_path / "fig.png")
    msgs = [Message(role="user", content=PROMPT[0].content, images=(str(png),))]
    judge = make_judge(f"openai:small?base_url={llama_server}&images=no")
    comp = asyncio.run(judge.complete(JudgeRequest(msgs, GenParams(temperature=0, max_tokens=16))))
    assert comp.images_dropped == 1 and comp.text.strip()
    from knockout.judges._openai_compat import _content

    parts = _content(msgs[0], True)
    assert parts[1]["type"] == "image_url" and parts[1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_anthropic_image_blocks(tmp_path: Path) -> None:
    from knockout.judges._anthropic_backend import _blocks

    png = tiny_png(tmp_path / "f.png")
    blocks = _blocks(Message(role="user", content="hi", images=(str(png),)))
    assert blocks[0]["type"] == "image" and blocks[0]["source"]["media_type"] == "image/png"
    assert blocks[-1] == {"type": "text", "text": "hi"}
    json.dumps(blocks)


def test_backend_retries_429_and_5xx_on_loopback(tmp_path: Path) -> None:
    """A real HTTP server on 127.0.0.1 that answers 429, then 503, then a completion."""
    import http.server
    import threading

    hits: list[int] = []

    class H(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            hits.append(1)
            code = {1: 429, 2: 503}.get(len(hits), 200)
            body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": "Score: 1/1"}}],
                               "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}
                              if code == 200 else {"error": {"message": "busy"}}).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if code == 429:
                self.send_header("retry-after-ms", "10")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        judge = make_judge(f"openai:m?base_url={url}&retries=3")
        comp = asyncio.run(judge.complete(JudgeRequest(PROMPT)))
        assert comp.text == "Score: 1/1" and len(hits) == 3 and comp.prompt_tokens == 5
    finally:
        server.shutdown()
