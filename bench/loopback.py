"""A loopback OpenAI-compatible chat server that answers every request after a fixed latency: the judge of
the throughput benchmarks (``bench/peers.py``), so that what is measured is the client's own overhead.

    python bench/loopback.py --port 0 --latency-ms 100 [--reply "Score: 1/2"]

prints ``PORT`` on its first line, then serves until killed; ``GET /count`` answers how many chat
completions it has answered.  asyncio streams, HTTP/1.1 keep-alive,
TCP_NODELAY on every connection (without it Nagle's algorithm adds about 40 ms to each reply); one process,
so its CPU time is not the client's.  Every request gets the same chat completion (``usage`` included).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys


def body(reply: str) -> bytes:
    return json.dumps({
        "id": "chatcmpl-loopback", "object": "chat.completion", "created": 0, "model": "loopback",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": reply}}],
        "usage": {"prompt_tokens": 60, "completion_tokens": 12, "total_tokens": 72},
    }).encode()


async def serve(port: int, latency: float, reply: str) -> None:
    payload = body(reply)
    served = [0]
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: keep-alive\r\n"
            b"content-length: " + str(len(payload)).encode() + b"\r\n\r\n")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                lines = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in lines.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:].strip())
                if length:
                    await reader.readexactly(length)
                if lines.startswith(b"GET"):  # GET /count: the chat completions answered so far
                    count = str(served[0]).encode()
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: " + str(len(count)).encode() + b"\r\n\r\n"
                                 + count)
                    await writer.drain()
                    continue
                await asyncio.sleep(latency)
                served[0] += 1
                writer.write(head + payload)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--latency-ms", type=float, default=100.0)
    p.add_argument("--reply", default="The answer is partly right.\nScore: 1/2")
    a = p.parse_args()
    try:
        asyncio.run(serve(a.port, a.latency_ms / 1000, a.reply))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
