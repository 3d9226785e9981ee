"""Secrets redacted by structure, not by length (issue 60 item 5): a short key a server echoes, a key in a
``base_url``'s path, the value of any key-like field.  Before: values under 8 characters were not scrubbed, and a
path segment was stored as written.  End to end through the loopback fake server (tests/fake_server.py), which
echoes each request's key in a 401 error and in its replies; every table of the store is searched
(tests/test_secrets.py's reader)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from knockout._redact import redact, redact_all, redact_url, scrub, spec_secrets, url_secrets
from tests.fake_server import FakeAPI, chat_body, fake_api, write_exam
from tests.test_secrets import ENV, texts_of_store

SHORT = "zq7x5"  # five characters, as the issue's
PATH_KEY = "sk-pathkey-0042"


def _echoing(box: list[FakeAPI]) -> Any:
    def answer(body: dict[str, Any], n: int) -> tuple[int, bytes]:
        auth = (box[0].authorizations[n - 1] or "").removeprefix("Bearer ")
        if n % 4 == 0:
            return 401, json.dumps({"error": {"message": f"Incorrect API key provided: {auth}. You passed "
                                              f"'{auth}' for {box[0].paths[n - 1]}",
                                              "code": "invalid_api_key"}}).encode()
        return 200, chat_body(f"Explanation: you sent {auth} to {box[0].paths[n - 1]}.\nScore: {n % 3}/2")
    return answer


def test_a_short_key_and_a_key_in_the_path_are_never_stored(tmp_path: Path) -> None:
    data = write_exam(tmp_path / "exam.jsonl", questions=1, answers=8)
    box: list[FakeAPI] = []
    with fake_api(_echoing(box)) as server:
        box.append(server)
        base = server.url.removesuffix("/v1") + f"/gw/{PATH_KEY}/v1"
        spec = f"openai:m?base_url={base}&api_key={SHORT}"
        db = tmp_path / "s.db"
        res = subprocess.run([sys.executable, "-m", "knockout.cli", "grade", str(data), "--judge", spec, "-o",
                              str(db), "-q"], capture_output=True, text=True, timeout=300, env={**os.environ, **ENV})
        assert any(a and SHORT in a for a in server.authorizations)  # the key did reach the server
        assert any(PATH_KEY in p for p in server.paths), server.paths[:3]
    printed = res.stdout + res.stderr
    assert SHORT not in printed and PATH_KEY not in printed, printed
    n = 0
    for where, text in texts_of_store(db):
        assert SHORT not in text and PATH_KEY not in text, (where, text[:2000])
        n += 1
    assert n > 10


def test_short_secrets_are_scrubbed_as_tokens_only() -> None:
    assert scrub("provided: ab3d9. ('ab3d9')", ["ab3d9"]) == "provided: ***. ('***')"
    assert scrub("xab3d9 ab3d9x ab3d9-x", ["ab3d9"]) == "xab3d9 ab3d9x ab3d9-x"  # not inside a longer token
    assert scrub("a k b", ["k"]) == "a k b"  # one or two characters: no credential, not scrubbed from text


@pytest.mark.parametrize("url", [
    "https://gw.example/v1/sk-abc123/chat", "https://gw.example/key/abcde/v1", "https://gw.example/token/t0/v1",
    "https://gw.example/api_key=abc/v1", "https://gw.example/v1/0123456789abcdef0123456789abcdef/x",
    "https://gw.example/p/hf_abcdefgh/v1", "https://gw.example/v1;api_key=abc",
])
def test_a_key_in_a_url_path_is_hidden(url: str) -> None:
    hidden = redact_url(url)
    assert "***" in hidden and hidden.startswith("https://gw.example/"), hidden
    secret = next(iter(s for s in url_secrets(url) if s not in ("v1", "x")))
    assert secret not in hidden and secret not in redact(f"error at {url}")
    assert url_secrets(url) & spec_secrets(f"openai:m?base_url={url}")


@pytest.mark.parametrize("url", ["https://api.openai.com/v1", "http://127.0.0.1:8080/v1/chat/completions",
                                 "https://x.example/openai/deployments/gpt-4o-2024-08-06/chat",
                                 "https://x.example/models/meta-llama/Llama-3.1-8B-Instruct/v1",
                                 "https://x.example/models/Qwen2-7B-Instruct-GPTQ-Int4/v1"])
def test_an_ordinary_path_is_kept(url: str) -> None:
    assert redact_url(url) == url and url_secrets(url) == set()


def test_any_key_like_field_is_hidden_whatever_its_length() -> None:
    assert redact_all({"api_key": "x1", "key": "k", "access_token": "t", "model": "m", "n": 3}) == {
        "api_key": "***", "key": "***", "access_token": "***", "model": "m", "n": 3}
    text = redact('server echoed {"api_key": "q1", "model": "m"}; x-auth-token: t2; Password: pw; Answer key: A.')
    assert "q1" not in text and "t2" not in text and "pw" not in text and "Answer key: A." in text, text
