"""Provider batch APIs (openai-batch, anthropic-batch) against loopback fakes of their batch endpoints:
one batch job per wave, results mapped back by request key, per-request errors counted as failed calls,
and a run killed between submit and completion resumes by polling the same batch (0 resubmitted)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from knockout.data import write_jsonl
from knockout.data._records import Answer, ItemSet, Question
from knockout.judges import make_judge
from knockout.methods import MethodOptions, RunConfig, run
from knockout.storage import Store
from tests.batch_fakes import FakeBatchServer
from tests.conftest import ROOT


def items(fail: bool = False) -> ItemSet:
    qs = [Question(id=f"q{i}", text=f"Name {i + 2} prime numbers.", max_points=2) for i in range(2)]
    answers = [Answer(id=f"q{i}a{j}", question_id=f"q{i}", examinee=f"e{j}",
                      text=("FAIL-ME" if fail and (i, j) == (0, 0) else "x" * (j + 1) + f" answer {i}"),
                      human_scores={"h": float(j % 3)}) for i in range(2) for j in range(3)]
    return ItemSet(qs, answers, source="batch-test")


@pytest.mark.parametrize("backend", ["openai-batch", "anthropic-batch"])
def test_one_batch_per_wave_and_per_request_errors(backend: str, tmp_path: Path) -> None:
    with FakeBatchServer() as fake, Store(tmp_path / "b.db") as store:
        base = fake.url + ("/v1" if backend.startswith("openai") else "")
        spec = f"{backend}:m?base_url={base}&api_key=k&poll=0.05"
        rep = run(items(fail=True), make_judge(spec), store, RunConfig(format_retries=0))
        assert len(fake.created) == 1  # one wave, one batch
        assert rep.stats["judge_calls"] == 5 and rep.stats["failed"] == 1
        assert sum(r.valid for r in rep.results) == 5
        assert store.batches(rep.run_id)[0]["status"] == "completed"
        # the failed request is asked again (a new batch of one); nothing else is
        again = run(items(fail=True), make_judge(spec), store, RunConfig(format_retries=0))
        assert len(fake.created) == 2 and fake.batches["batch_0002"]["requests"].__len__() == 1
        assert again.stats["judge_calls"] == 0 and again.stats["cache_hits"] == 5
        # a knockout: each round of the lock-step schedule is one batch
        ko = run(items(), make_judge(spec), store, RunConfig(method="knockout", lockstep=True,
                                                                options=MethodOptions(debias=True)))
        assert len(fake.created) - 2 == ko.stats["waves"] == 2
        assert ko.stats["failed"] == 0 and all(r.valid for r in ko.results)


def test_batch_judge_identity_is_the_live_backends() -> None:
    live = make_judge("openai:m?base_url=http://127.0.0.1:9/v1&api_key=k")
    batch = make_judge("openai-batch:m?base_url=http://127.0.0.1:9/v1&api_key=k")
    assert batch.identity() == live.identity()


def test_killed_between_submit_and_completion_resumes_the_same_batch(tmp_path: Path) -> None:
    data = tmp_path / "exam.jsonl"
    write_jsonl(items(), data)
    db = tmp_path / "k.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    with FakeBatchServer() as fake:
        cmd = [sys.executable, "-m", "knockout.cli", "grade", str(data), "--judge",
               f"openai-batch:m?base_url={fake.url}/v1&api_key=k&poll=0.05", "--out", str(db), "--quiet", "--json"]
        fake.hold = True
        first = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            fake.wait_for_batches(1, timeout=120)
            time.sleep(0.3)  # polling the held batch
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
        with Store(db) as store:
            (recorded,) = store.batches()
            assert recorded["status"] == "submitted" and recorded["id"] == fake.created[0]
            assert store.runs()[0].status == "interrupted"
        fake.hold = False
        second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 0, second.stderr
        summary = json.loads(second.stdout)
        assert fake.created == ["batch_0001"]  # 0 resubmitted batches
        assert summary["status"] == "complete" and summary["judge_calls"] == 6 and summary["failed"] == 0
        with Store(db) as store:
            assert store.batches()[0]["status"] == "completed"
            assert store.repeated_calls() == 0
