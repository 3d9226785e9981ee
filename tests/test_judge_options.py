"""Typed judge options, cache identity (server + model; a GGUF's SHA-256) and malformed 200 replies."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from knockout.errors import ConfigError, JudgeError
from knockout.judges import JudgeRequest, Message, backend_options, make_judge
from knockout.judges._models import DIGESTS_FILE
from tests.conftest import SMALL_MODEL, needs_model
from tests.fake_server import chat_body, fake_api, messages_body

EXE = [sys.executable, "-m", "knockout.cli"]
PROMPT = [Message(role="user", content="Grade: 2+2=4. End with Score: X/1")]


def knockout(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


# ---------------------------------------------------------------- typed options


@pytest.mark.parametrize(
    ("spec", "parts"),
    [
        ("scripted?nosie=0.5", ["unknown option 'nosie'", "judge backend 'scripted'",
                                "accepted: noise, bias, inflation, invalid, delay, seed"]),
        ("scripted:bias=1", ["'bias=1' is an option, not a model name", "scripted?bias=1"]),
        ("scripted?noise=abc", ["option 'noise'", "valid number", "got 'abc'"]),
        ("scripted?noise=nan", ["option 'noise'", "finite"]),
        ("scripted?bias=inf", ["option 'bias'", "finite"]),
        ("scripted?invalid=1.5", ["option 'invalid'", "less than or equal to 1"]),
        ("scripted?seed=1.5", ["option 'seed'", "integer"]),
        ("openai:m?timeout=abc", ["option 'timeout'", "backend 'openai'", "got 'abc'"]),
        ("openai:m?base_url=http://127.0.0.1:1/v1&timeout=0", ["option 'timeout'", "greater than 0"]),
        ("openai:m?base_url=http://127.0.0.1:1/v1&timeout=inf", ["option 'timeout'", "finite"]),
        ("openai:m?base_url=http://127.0.0.1:1/v1&retries=-1", ["option 'retries'", "greater than or equal to 0"]),
        ("openai:m?base_url=http://127.0.0.1:1/v1&concurrency=0", ["option 'concurrency'", "or equal to 1"]),
        ("openai:m?base_url=http://127.0.0.1:1/v1&images=maybe", ["option 'images'", "valid boolean"]),
        ("openai:m?base_url=ftp://host/v1", ["option 'base_url'", "http://"]),
        ("openai:m?base_url=http://127.0.0.1:1/v1&temperature=0", ["unknown option 'temperature'", "accepted:"]),
        ("anthropic:m?api_key=k&concurrency=-2", ["option 'concurrency'", "backend 'anthropic'"]),
        ("llamacpp?n_ctx=big", ["option 'n_ctx'", "integer"]),
        ("llamacpp?threads=0", ["option 'threads'", "greater than or equal to 1"]),
        ("llamacpp?gpu=1", ["unknown option 'gpu'", "accepted: n_ctx, threads"]),
    ],
)
def test_bad_options_name_the_option(spec: str, parts: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        make_judge(spec)
    for p in parts:
        assert p in str(info.value), (spec, str(info.value))


def test_api_key_is_never_echoed() -> None:
    with pytest.raises(ConfigError) as info:
        make_judge("openai:m?base_url=http://127.0.0.1:1/v1&api_key=sk-secret&timeout=x")
    assert "sk-secret" not in str(info.value)
    judge = make_judge("openai:m?base_url=http://127.0.0.1:1/v1&api_key=sk-secret")
    assert "sk-secret" not in repr(judge.options)


def test_options_are_typed() -> None:
    j = make_judge("scripted?noise=0.25&seed=3&delay=0", {"bias": "0.1"})  # --judge-opt merges over the spec
    assert (j.noise, j.seed, j.bias) == (0.25, 3, 0.1)
    o = make_judge("openai:m?base_url=http://127.0.0.1:1/v1&images=no&retries=0&concurrency=2&timeout=2.5")
    assert (o.supports_images, o.options.retries, o.default_concurrency(), o.options.timeout) == (False, 0, 2, 2.5)
    names = [d["name"] for d in backend_options("openai")]
    assert {"base_url", "api_key", "timeout", "retries", "concurrency", "images"} <= set(names)


def test_cli_bad_option_exit_2_one_line_nothing_written(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"type": "question", "id": "q", "text": "?", "max_points": 1}) + "\n"
                    + json.dumps({"type": "answer", "id": "a", "question_id": "q", "text": "x"}) + "\n")
    store = tmp_path / "s.db"
    for args in (["--judge", "scripted?nosie=0.5"], ["--judge", "scripted", "--judge-opt", "concurrency=0"],
                 ["--judge", "scripted:bias=1"], ["--judge", "openai:m?timeout=abc"]):
        res = knockout("grade", str(data), *args, "-o", str(store), "--quiet")
        assert res.returncode == 2, (args, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr, res.stderr
        assert not store.exists()


def test_judges_json_lists_options() -> None:
    js = json.loads(knockout("judges", "--json").stdout)
    scripted = {o["name"]: o for o in js["options"]["scripted"]}
    assert list(scripted) == ["noise", "bias", "inflation", "invalid", "delay", "seed", "slot"]
    assert scripted["noise"]["type"] == "float" and scripted["noise"]["default"] == 0.1
    openai = {o["name"]: o for o in js["options"]["openai"]}
    assert openai["retries"] == {**openai["retries"], "type": "int", "default": 4, "constraints": ">= 0, <= 100"}
    assert openai["concurrency"]["constraints"].startswith(">= 1")
    assert openai["api_key"]["type"] == "str (secret) | None"
    assert [o["name"] for o in js["options"]["llamacpp"]] == ["n_ctx", "threads", "parallel", "flash_attn"]


# ---------------------------------------------------------------- cache identity


def test_openai_identity_is_server_and_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    a = make_judge("openai:m?base_url=http://127.0.0.1:8000/v1").identity()
    assert a == {"backend": "openai", "server": "http://127.0.0.1:8000/v1", "model": "m"}
    assert make_judge("openai:m?base_url=HTTP://127.0.0.1:8000/v1/").identity() == a  # one spelling
    assert make_judge("openai:m?base_url=http://127.0.0.1:8001/v1").identity() != a
    assert make_judge("openai:m").identity()["server"] == "https://api.openai.com/v1"
    assert make_judge("openai:m?base_url=https://api.openai.com:443/v1").identity()["server"] == (
        "https://api.openai.com/v1")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    assert make_judge("openai:m").identity() == a
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    assert make_judge("anthropic:c").identity()["server"] == "https://api.anthropic.com"


def test_local_gguf_identity_is_its_sha256_computed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from knockout.judges import _models

    monkeypatch.setenv("KNOCKOUT_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 0) + bytes(range(256)) * 40)  # a header llama.cpp reads
    digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
    ident = make_judge(f"llamacpp:{gguf}").identity()
    assert ident == {"backend": "llamacpp", "model": "gguf", "sha256": digest}
    book = json.loads((tmp_path / "cache" / DIGESTS_FILE).read_text())
    st = gguf.stat()
    assert book == {f"{gguf.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}|{st.st_ino}": digest}

    def no_hash(path: Path) -> str:
        raise AssertionError("hashed again")

    monkeypatch.setattr(_models, "_sha256", no_hash)
    assert make_judge(f"llamacpp:{gguf}").identity() == ident  # from the digest cache
    monkeypatch.undo()
    monkeypatch.setenv("KNOCKOUT_CACHE", str(tmp_path / "cache"))
    copy = tmp_path / "elsewhere" / "renamed.gguf"
    copy.parent.mkdir()
    copy.write_bytes(gguf.read_bytes())
    assert make_judge(f"llamacpp:{copy}").identity() == ident  # the same bytes anywhere: the same judge
    gguf.write_bytes(gguf.read_bytes() + b"changed")  # other weights, same path
    os.utime(gguf, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    changed = make_judge(f"llamacpp:{gguf}").identity()
    assert changed["sha256"] == hashlib.sha256(gguf.read_bytes()).hexdigest() != digest


def test_flash_attention_is_part_of_the_embedded_judge(small_gguf: Path) -> None:
    """Another attention kernel rounds differently: its replies are cached as another judge's, and the default
    (off) keeps the identity, and so every cached reply, as it was."""
    plain = make_judge(f"llamacpp:{small_gguf}").identity()
    assert "flash_attn" not in plain
    assert make_judge(f"llamacpp:{small_gguf}?flash_attn=false").identity() == plain
    assert make_judge(f"llamacpp:{small_gguf}?flash_attn=true").identity() == {**plain, "flash_attn": True}


@needs_model
def test_embedded_gguf_by_path_is_the_embedded_model(small_gguf: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KNOCKOUT_CACHE", str(tmp_path))  # the digest cache only; the model file is not moved
    assert make_judge(f"llamacpp:{small_gguf}").identity() == make_judge(f"llamacpp:{SMALL_MODEL}").identity()


def _exam(path: Path) -> Path:
    rows: list[dict[str, Any]] = [{"type": "question", "id": "q1", "text": "What does DNS do?", "max_points": 2}]
    rows += [{"type": "answer", "id": f"a{i}", "question_id": "q1", "text": t, "human_score": s}
             for i, (t, s) in enumerate([("Resolves names.", 2), ("Routes packets.", 0), ("Caches.", 1)])]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _grade(data: Path, store: Path, spec: str, code: int = 0) -> dict[str, Any]:
    res = knockout("grade", str(data), "--judge", spec, "-o", str(store), "--json", "--quiet",
                   "--max-tokens", "48", "--readers", "judge",  # the judges' own grades are compared
                   env={"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""})
    assert res.returncode == code, res.stderr
    summary: dict[str, Any] = json.loads(res.stdout)
    return summary


def _results(store: Path, run_id: str) -> list[float | None]:
    res = knockout("export", str(store), "--run", run_id, "--format", "jsonl", "--partial")
    return [json.loads(line)["score"] for line in res.stdout.splitlines() if line.strip()]


def test_two_servers_never_share_a_cached_reply(tmp_path: Path) -> None:
    """Two OpenAI-compatible servers on loopback serving a model of the same name, answering
    differently, used through one store: each gets its own calls, and each run its own grades."""
    data, store = _exam(tmp_path / "exam.jsonl"), tmp_path / "one.db"
    with fake_api(lambda body, n: (200, chat_body("Explanation: good.\nScore: 2/2"))) as a, \
            fake_api(lambda body, n: (200, chat_body("Explanation: bad.\nScore: 0/2"))) as b:
        first = _grade(data, store, f"openai:small?base_url={a.url}")
        assert (first["judge_calls"], first["cache_hits"], a.hits) == (3, 0, 3)
        second = _grade(data, store, f"openai:small?base_url={b.url}")
        assert (second["judge_calls"], second["cache_hits"], b.hits) == (3, 0, 3)
        assert second["run_id"] != first["run_id"]
        assert _results(store, first["run_id"]) == [2.0, 2.0, 2.0]
        assert _results(store, second["run_id"]) == [0.0, 0.0, 0.0]
        again = _grade(data, store, f"openai:small?base_url={a.url.replace('http://', 'HTTP://')}/")
        assert (again["judge_calls"], again["cache_hits"], a.hits) == (0, 3, 3)  # same server, other spelling
        assert again["run_id"] == first["run_id"]


@needs_model
def test_real_server_and_fake_never_share_a_cached_reply(llama_server: str, tmp_path: Path) -> None:
    """The real llama.cpp server (model alias "small") after a fake one serving "small" into one store."""
    data, store = _exam(tmp_path / "exam.jsonl"), tmp_path / "one.db"
    with fake_api(lambda body, n: (200, chat_body("Score: 2/2"))) as fake:
        assert _grade(data, store, f"openai:small?base_url={fake.url}")["judge_calls"] == 3
    real = _grade(data, store, f"openai:small?base_url={llama_server}")
    assert real["cache_hits"] == 0 and real["judge_calls"] >= 3  # every request live (format retries add more)
    assert _grade(data, store, f"openai:small?base_url={llama_server}")["judge_calls"] == 0


# ---------------------------------------------------------------- malformed 200 replies


MALFORMED = [b'{"choices": []}', b'{"choices": [{"index": 0, "finish_reason": "stop", "message": null}]}',
             b"this is not JSON", b"{}", b"[1, 2]"]


def test_openai_malformed_200_replies_are_retried_then_fail() -> None:
    def answer(body: dict[str, Any], n: int) -> tuple[int, bytes]:
        return (200, MALFORMED[n - 1]) if n <= len(MALFORMED) else (200, chat_body("Score: 1/1"))

    with fake_api(answer) as fake:
        judge = make_judge(f"openai:m?base_url={fake.url}&retries={len(MALFORMED)}&backoff=0")
        comp = asyncio.run(judge.complete(JudgeRequest(PROMPT)))
        assert comp.text == "Score: 1/1" and fake.hits == len(MALFORMED) + 1

    with fake_api(lambda body, n: (200, b'{"choices": []}')) as fake:
        judge = make_judge(f"openai:m?base_url={fake.url}&retries=2&backoff=0.01")
        with pytest.raises(JudgeError, match=r"malformed reply after 3 attempt\(s\): no choices"):
            asyncio.run(judge.complete(JudgeRequest(PROMPT)))
        assert fake.hits == 3


def test_openai_reply_is_read_from_its_json() -> None:
    """The reply's JSON as the server sent it (no SDK model built): text, a refusal as the text, usage and
    finish reason where given, MalformedReply for anything without a text."""
    from knockout.judges._base import MalformedReply
    from knockout.judges._openai_compat import _reply

    full = {"choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": "Score"}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3.0, "total_tokens": 15}}
    c = _reply(full, 1)
    assert (c.text, c.prompt_tokens, c.completion_tokens, c.finish_reason, c.images_dropped) == \
           ("Score", 12, 3, "length", 1)
    refusal = _reply({"choices": [{"message": {"content": None, "refusal": "I cannot grade this."}}]}, 0)
    assert (refusal.text, refusal.prompt_tokens, refusal.finish_reason) == ("I cannot grade this.", 0, None)
    odd = _reply({"choices": [{"message": {"content": "x"}, "finish_reason": 3}], "usage": {"prompt_tokens": "7"}}, 0)
    assert (odd.prompt_tokens, odd.finish_reason) == (0, None)
    for bad in ({}, [], "text", {"choices": ["x"]}, {"choices": [{"message": "x"}]},
                {"choices": [{"message": {"content": 3}}]}):
        with pytest.raises(MalformedReply):
            _reply(bad, 0)


def test_anthropic_empty_content_is_retried_then_fails() -> None:
    replies = [messages_body([]), messages_body([{"type": "tool_use", "id": "t", "name": "x", "input": {}}]),
               b"not json", messages_body([{"type": "text", "text": "Score: 1/1"}])]

    with fake_api(lambda body, n: (200, replies[min(n, len(replies)) - 1])) as fake:
        judge = make_judge(f"anthropic:m?api_key=k&base_url={fake.url.removesuffix('/v1')}&retries=3&backoff=0")
        comp = asyncio.run(judge.complete(JudgeRequest(PROMPT)))
        assert comp.text == "Score: 1/1" and fake.hits == 4 and comp.prompt_tokens == 5

    with fake_api(lambda body, n: (200, messages_body([]))) as fake:
        judge = make_judge(f"anthropic:m?api_key=k&base_url={fake.url.removesuffix('/v1')}&retries=1&backoff=0")
        with pytest.raises(JudgeError, match="no content"):
            asyncio.run(judge.complete(JudgeRequest(PROMPT)))
        assert fake.hits == 2


def test_malformed_replies_in_a_run_are_failures_not_grades(tmp_path: Path) -> None:
    """Through the CLI: the server sends empty choices for one answer; that answer gets no grade, the
    request counts as failed (asked again on the next run), the others are graded."""
    data, store = _exam(tmp_path / "exam.jsonl"), tmp_path / "s.db"

    def answer(body: dict[str, Any], n: int) -> tuple[int, bytes]:
        return (200, b'{"choices": []}') if "Routes packets." in json.dumps(body) else (200, chat_body("Score: 1/2"))

    with fake_api(answer) as fake:
        # a request that failed for good: the run is incomplete, exit 3 (issue 35)
        summary = _grade(data, store, f"openai:m?base_url={fake.url}&retries=1&backoff=0", code=3)
        assert summary["status"] == "incomplete"
        assert (summary["valid"], summary["invalid"], summary["failed"], fake.hits) == (2, 1, 1, 4)
        assert _results(store, summary["run_id"]) == [1.0, None, 1.0]


def test_openai_body_is_what_the_sdk_would_send_and_pools_follow_concurrency(tmp_path: Path) -> None:
    """The openai backend POSTs its own body, skipping the SDK's request transform: the body must be one the
    transform leaves as it is (images as data URLs, every parameter set); requests in flight are spread over
    one client pool per 16, at most 64."""
    from knockout.judges import GenParams

    png = tmp_path / "f.png"
    png.write_bytes(bytes.fromhex("89504e470d0a1a0a") + b"\0" * 32)
    judge: Any = make_judge("openai:m?base_url=http://127.0.0.1:1/v1")
    request = JudgeRequest([Message(role="system", content="s"), Message(role="user", content="t", images=[str(png)])],
                           GenParams(temperature=0.1, max_tokens=64, seed=3, stop=["x"], top_p=0.9,
                                     frequency_penalty=0.1))
    body = judge.body(request)
    assert isinstance(body["messages"][1]["content"], list)
    assert judge._pool.wanted == 1
    judge.expect_concurrency(256)
    assert judge._pool.wanted == 16
    judge.expect_concurrency(100_000)
    assert judge._pool.wanted == 64
    try:  # the SDK's own (private) transform, where this SDK version has it
        from openai._utils import async_maybe_transform
        from openai.types.chat import completion_create_params as params
    except ImportError:
        pytest.skip("this openai SDK has no request transform to compare with")
    assert asyncio.run(async_maybe_transform(body, params.CompletionCreateParamsNonStreaming)) == body


def test_a_server_judge_sends_from_every_event_loop_that_uses_it_and_after_it_is_closed() -> None:
    """The SDK's aiohttp client is bound to the loop it was opened on: the same judge, used from a second
    ``asyncio.run`` and again after ``aclose()``, still answers (its clients are made per loop:
    knockout.judges._server.LoopClients)."""
    from knockout.judges import GenParams

    ask = JudgeRequest([Message(role="user", content="Grade: 2+2=4. Score: X/1")], GenParams(max_tokens=8))
    with fake_api(lambda body, n: (200, chat_body("Score: 1/1"))) as server:
        judge: Any = make_judge(f"openai:m?base_url={server.url}")

        async def twice(close: bool) -> list[str]:
            got = [(await judge.complete(ask)).text for _ in range(2)]
            if close:
                await judge.aclose()
            return got

        assert asyncio.run(twice(False)) == ["Score: 1/1"] * 2  # the first loop
        assert asyncio.run(twice(True)) == ["Score: 1/1"] * 2  # another loop: fresh clients, then closed
        assert asyncio.run(twice(True)) == ["Score: 1/1"] * 2  # after aclose(): made again
        assert server.hits == 6

        async def used() -> list[Any]:  # a loop that ends without aclose(): its clients are closed as it ends
            await judge.complete(ask)
            clients = list(judge._pool._clients)
            assert clients and not any(c.is_closed() for c in clients)
            return clients

        assert all(c.is_closed() for c in asyncio.run(used()))  # no aiohttp session left open
