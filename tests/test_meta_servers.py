"""``knockout meta --verdict expected`` over OpenAI-compatible servers that return token probabilities (issue 51;
docs/methods.md#the-verdict-slot, knockout.judges._expected): the meta presets' reasoning-first slots read from
the server's ``logprobs`` after the meta-judge's reasoning, a class as the most probable one, a 1-5 score as the
probability-weighted mean, a reply whose slot has too little probability (or none) invalid, never read from its text.

The servers are loopback fakes (tests/fake_server.py: real sockets with TCP_NODELAY, the real ``openai`` SDK); their
replies are SCRIPTED by the tests (reasoning, verdicts and probabilities written here, as each server documents its
reply: the OpenAI API's ``choices[0].logprobs.content``, vLLM's ``continue_final_message`` prefill probes).  The
reading itself on a real ``python -m llama_cpp.server`` is tests/test_expected_servers.py's; a meta call there (a
JDEval prompt of some 700 tokens, its reasoning, then a probe per node of the classes' trie) took about a minute of
CPU with the 0.5B GGUF, too long for the suite.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from knockout._verdict import Verdict
from knockout.judges import GenParams, make_judge
from knockout.meta import MetaConfig, MetaOptions, load_verdicts, run_meta
from knockout.storage._store import Store
from tests.fake_server import chat_body, fake_api
from tests.test_meta import write_verdicts

#: a meta-judge's reasoning, as the JDEval prompt asks for it (its own better answer included); the slot's tag follows
REASONING = ("<Reasoning_for_choosing_better_answer>\nAnswerA answers the question, AnswerB does not.\n"
             "</Reasoning_for_choosing_better_answer>\n<Better_answer>\nAnswerA\n</Better_answer>\n"
             "<Reasoning_for_choosing_better_assistant>\nOnly one assistant chose AnswerA.\n"
             "</Reasoning_for_choosing_better_assistant>\n")
SCORING = ("<Reasoning_for_choosing_better_answer>\nAnswerA answers the question.\n"
           "</Reasoning_for_choosing_better_answer>\n<Better_answer>\nAnswerA\n</Better_answer>\n"
           "<Reasoning_for_scoring_Assistant>\nThe assessment is partly reasonable.\n"
           "</Reasoning_for_scoring_Assistant>\n")
CHOICE_TAG, SCORE_TAG = "<Better_assistant>\n", "<Score_for_Assistant>\n"
#: the next token's probabilities after each text written after the slot's tag (scripted): the judge writes
#: ``Assistant2`` but puts more probability on ``Assistant1``; it writes the score 2 but expects about 3.75
CHOICE_TREE = {"": {"Assistant": 0.9, "equally": 0.1}, "Assistant": {"1": 0.6, "2": 0.35, "3": 0.05},
               "Assistant1": {"\n": 1.0}, "Assistant2": {"\n": 1.0}, "equally": {" good": 1.0},
               "equally good": {"\n": 1.0}}
SCORE_TREE = {"": {"4": 0.5, "3": 0.3, "5": 0.15, "2": 0.05}, "4": {"\n": 1.0}, "3": {"\n": 1.0}, "5": {"\n": 1.0},
              "2": {"\n": 1.0}}
EXPECTED_SCORE = 4 * 0.5 + 3 * 0.3 + 5 * 0.15 + 2 * 0.05


def _top(probs: dict[str, float]) -> list[dict[str, Any]]:
    return [{"token": t, "logprob": math.log(p), "bytes": list(t.encode())} for t, p in probs.items()]


def _reply(choice: dict[str, Any]) -> tuple[int, bytes]:
    return 200, json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice],
                            "usage": {"prompt_tokens": 700, "completion_tokens": 40}}).encode()


def _openai_reply(tokens: list[tuple[str, dict[str, float]]]) -> tuple[int, bytes]:
    """A SCRIPTED OpenAI API reply: the tokens written, each with its ``top_logprobs`` (``logprobs.content``)."""
    content = "".join(t for t, _ in tokens)
    items = [{"token": t, "logprob": math.log(alts.get(t, 0.5)), "bytes": list(t.encode()), "top_logprobs": _top(alts)}
             for t, alts in tokens]
    return _reply({"index": 0, "finish_reason": "stop", "logprobs": {"content": items},
                   "message": {"role": "assistant", "content": content}})


def _openai_api(reasoning: str, tag: str, written: list[str], tree: dict[str, dict[str, float]]) -> Any:
    """The OpenAI API (no prefill): one reply, the reasoning, the slot's tag, ``written`` (the value's tokens), the
    closing tag; each token of the value with the alternatives ``tree`` gives after the text before it."""

    def answer(body: dict[str, Any], n: int) -> tuple[int, bytes]:
        assert body["messages"][-1]["role"] == "user"  # no prefill on the OpenAI API
        tokens = [(reasoning, {reasoning: 1.0}), (tag, {tag: 1.0})]
        for i, t in enumerate(written):
            tokens.append((t, tree["".join(written[:i])]))
        tokens.append(("\n</" + tag[1:].strip(), {"\n</" + tag[1:].strip(): 1.0}))
        return _openai_reply(tokens)

    return answer


def _vllm(reasoning: str, tag: str, tree: dict[str, dict[str, float]]) -> Any:
    """vLLM (``continue_final_message``): a reasoning request (max_tokens > 1, stopping at the slot's tag) gets
    ``reasoning`` after the prefilled opening tag; a one-token probe the alternatives ``tree`` gives after the tag."""

    def answer(body: dict[str, Any], n: int) -> tuple[int, bytes]:
        assert body["continue_final_message"] is True and body["messages"][-1]["role"] == "assistant"
        prefill = body["messages"][-1]["content"]
        if body["max_tokens"] > 1:
            assert tag.strip() in body["stop"]
            return _reply({"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": reasoning.split("\n", 1)[1]}})
        top = tree[prefill[prefill.rindex(tag) + len(tag):]]
        first = max(top, key=top.__getitem__)
        return _reply({"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": first},
                       "logprobs": {"content": [{"token": first, "logprob": math.log(top[first]),
                                                 "top_logprobs": _top(top)}]}})

    return answer


def _meta(tmp_path: Path, server: Any, kind: str, framework: str, verdict: str = "expected", items: int = 2,
          retries: int = 2) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """One meta run of ``framework`` over the first ``items`` items of tests.test_meta's verdicts with an
    ``openai:`` meta-judge on ``server``: its summary, its results and the request bodies the server got."""
    vs = load_verdicts(write_verdicts(tmp_path / "v"))
    with fake_api(server) as api, Store(tmp_path / f"{framework}-{kind}-{verdict}.db") as store:
        judge = make_judge(f"openai:m?base_url={api.url}&server={kind}")
        cfg = MetaConfig(options=MetaOptions(framework=framework), params=GenParams(max_tokens=128), shuffles=20,
                         verdict=verdict, format_retries=retries)
        s = run_meta(vs, judge, store, cfg, limit=items).summary()
        return s, store.results(str(s["run_id"])), api.requests


@pytest.mark.parametrize("kind", ["openai", "vllm"])
def test_jdeval_reads_the_most_probable_class_after_the_reasoning(tmp_path: Path, kind: str) -> None:
    server = (_openai_api(REASONING, CHOICE_TAG, ["Assistant", "2"], CHOICE_TREE) if kind == "openai"
              else _vllm(REASONING, CHOICE_TAG, CHOICE_TREE))
    s, rows, asked = _meta(tmp_path, server, kind, "jdeval")
    assert s["verdict"] == "expected" and s["judgements"] == 6 and s["invalid"] == 0
    assert len(asked) == 6 * (1 if kind == "openai" else 7)  # vLLM: the reasoning, then one probe per node of the trie
    probes = asked if kind == "openai" else [b for b in asked if b["max_tokens"] == 1]
    assert len(probes) == 6 * (1 if kind == "openai" else 6)
    assert all(b["logprobs"] is True and b["top_logprobs"] == 20 for b in probes)
    for r in rows:
        v = r["details"]["attempts"][-1]["verdict"]
        assert v["mode"] == "expected" and v["via"] == kind
        probs = dict(zip(("Assistant1", "Assistant2", "equally good"), v["probs"][0], strict=True))
        assert probs["Assistant1"] == pytest.approx(0.54) and probs["Assistant2"] == pytest.approx(0.315)
        assert probs["equally good"] == pytest.approx(0.1)
        # the most probable class, not the one written (the OpenAI API's reply wrote Assistant2)
        assert r["details"]["winner"] == Verdict.A and r["score"] == 1.0
        assert r["details"]["answer"] == Verdict.A  # the judge's own better answer, read from its reasoning
        reply = r["details"]["attempts"][-1]["reply"]
        assert reply.startswith(REASONING) and reply.endswith("<Better_assistant>\n" + v["chosen"][0]
                                                              + "\n</Better_assistant>")
    assert s["position"]["first_wins"] == 1.0


@pytest.mark.parametrize("kind", ["openai", "vllm"])
def test_jdeval_i_reads_the_probability_weighted_score(tmp_path: Path, kind: str) -> None:
    server = (_openai_api(SCORING, SCORE_TAG, ["2"], SCORE_TREE) if kind == "openai"
              else _vllm(SCORING, SCORE_TAG, SCORE_TREE))
    s, rows, asked = _meta(tmp_path, server, kind, "jdeval-i")
    assert s["verdict"] == "expected" and s["judgements"] == 6 and s["invalid"] == 0
    assert len(asked) == 6 * (1 if kind == "openai" else 6)
    for r in rows:
        v = r["details"]["attempts"][-1]["verdict"]
        assert v["mode"] == "expected" and v["exact"] is True and v["mass"][0] == pytest.approx(1.0)
        assert r["score"] == pytest.approx(EXPECTED_SCORE) and r["details"]["score"] == pytest.approx(EXPECTED_SCORE)
    assert all(e["value"] == pytest.approx(EXPECTED_SCORE) for e in s["ranking"])


#: replies whose slot cannot be read (SCRIPTED): the allowed classes carry too little probability at the value; the
#: verdict is written in a form other than the slot's tag; no token probabilities at all.  Each reads as a valid
#: JDEval verdict with --verdict text.
LOW = _openai_api(REASONING, CHOICE_TAG, ["Assistant", "1"], {"": {"Assistant": 0.3, "I": 0.7},
                                                              "Assistant": {"1": 1.0}})
UNTAGGED = REASONING + "<Better_assistant>Assistant1</Better_assistant>"
BROKEN = {"low mass": (LOW, "0.30 of the probability"),
          "no slot": (lambda body, n: _openai_reply([(UNTAGGED, {UNTAGGED: 1.0})]), "writes no verdict"),
          "no logprobs": (lambda body, n: (200, chat_body(REASONING + CHOICE_TAG + "Assistant1\n</Better_assistant>")),
                          "no token probabilities")}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_slot_without_enough_probability_is_retried_then_invalid_never_read_from_text(tmp_path: Path,
                                                                                        case: str) -> None:
    server, why = BROKEN[case]
    s, rows, asked = _meta(tmp_path, server, "openai", "jdeval", items=1, retries=1)
    assert s["verdict"] == "expected" and s["judgements"] == 3 and s["invalid"] == 3 and s["valid"] == 0
    assert len(asked) == 3 * 2 and s["format_retries"] == 3  # asked again with the format reminder once, then invalid
    for r in rows:
        assert not r["valid"] and r["score"] is None and "winner" not in r["details"]
        attempts = r["details"]["attempts"]
        assert len(attempts) == 2 and all(why in a["verdict"]["invalid"] for a in attempts)
    text, rows, _ = _meta(tmp_path, server, "openai", "jdeval", verdict="text", items=1, retries=1)
    assert text["verdict"] == "text" and text["invalid"] == 0  # the same replies' text: a verdict the slot never read
    assert all(r["details"]["winner"] == Verdict.A for r in rows)


def test_meta_bench_pairs_the_slot_against_the_text_reading(tmp_path: Path) -> None:
    """bench/meta_mtbench.py --verdict expected --vs-text with the scripted meta-judge (a SIMULATION: plumbing, not
    an accuracy figure): each framework run twice, the agreement with the human labels paired on the same units."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    cmd = [sys.executable, str(ROOT / "bench/meta_mtbench.py"), "--verdicts", str(write_verdicts(tmp_path / "v")),
           "--meta-judge", "scripted?slot=true&noise=0", "--items", "6", "--shuffles", "20", "--verdict", "expected",
           "--vs-text", "--out", str(tmp_path / "m.db"), "--json", str(tmp_path / "s.json")]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120).stdout
    assert "paired against the text reading" in out
    saved = json.loads((tmp_path / "s.json").read_text())
    assert saved["jdeval (text)"]["verdict"] == "text" and saved["jdeval"]["verdict"] == "expected"
    jd, ji = saved["paired"]["jdeval"], saved["paired"]["jdeval-i"]
    # tests.test_meta's labels: 18 matches, 13 with a target (5 of two right assessments have none)
    assert jd["units"] == 13 and jd["n"] == 13 and jd["invalid_text"] == jd["invalid_slot"] == 0
    assert ji["units"] == ji["n"] > 0 and ji["delta_ci"] is not None
    bad = subprocess.run(["text" if a == "expected" else a for a in cmd], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--vs-text pairs a slot mode" in bad.stderr
