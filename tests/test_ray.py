"""The Ray executor: a local Ray instance (2 CPUs) whose actors hold the judge; the driver alone writes the
store (cache, resume and accounting as in process).  The real-judge test uses the 0.5B GGUF, a handful of
calls; the others use the scripted judge (a simulation) for the run kinds' plumbing."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from knockout.data._records import Answer, ItemSet, Question
from knockout.engine._executors import parse_executor
from knockout.errors import ConfigError
from knockout.judges import GenParams, make_judge
from knockout.methods import MethodOptions, RunConfig, run
from knockout.sbs import SbsConfig, SbsItem, run_sbs
from knockout.storage import Store
from tests.conftest import ROOT, SMALL_MODEL, needs_model

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs ray (knockout[ray])")


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    import ray

    # workers import knockout from this checkout
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), before or ""])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
    if before is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = before


def items(n_q: int = 2, n_a: int = 4) -> ItemSet:
    qs = [Question(id=f"q{i}", text=f"What is {i} + {i}?", max_points=2) for i in range(n_q)]
    answers = [Answer(id=f"q{i}a{j}", question_id=f"q{i}", examinee=f"e{j}", text=f"{2 * i + j % 2} (answer {j})",
                      human_scores={"h": float(2 if j % 2 == 0 else 0)}) for i in range(n_q) for j in range(n_a)]
    return ItemSet(qs, answers, source="ray-test")


def test_executor_specs() -> None:
    assert parse_executor("local") == ("local", None, {})
    assert parse_executor("ray") == ("ray", None, {})
    assert parse_executor("ray://head:10001?workers=4") == ("ray", "ray://head:10001", {"workers": "4"})
    assert parse_executor("ray:auto") == ("ray", "auto", {})
    with pytest.raises(ConfigError, match="unknown executor"):
        parse_executor("dask")


def test_scripted_knockout_and_sbs_on_ray_same_as_in_process(ray_local: None, tmp_path: Path) -> None:
    """Every method and run kind works unchanged: the same results as in process, the store written by the
    driver only, and a rerun is all cache hits."""
    data = items(3, 5)
    cfg = RunConfig(method="knockout", options=MethodOptions(debias=True), concurrency=4)
    with Store(tmp_path / "local.db") as s:
        local = run(data, make_judge("scripted?noise=0.2"), s, cfg)
    with Store(tmp_path / "ray.db") as s:
        remote = run(data, make_judge("scripted?noise=0.2"), s, cfg, executor="ray?workers=2&cpus=0")
        assert remote.stats["judge_calls"] == local.stats["judge_calls"] > 0
        assert [r.score for r in remote.results] == [r.score for r in local.results]
        assert s.live_calls(remote.run_id) == remote.stats["judge_calls"]
        again = run(data, make_judge("scripted?noise=0.2"), s, cfg, executor="ray?workers=2&cpus=0")
        assert again.stats["judge_calls"] == 0
        assert again.stats["cache_hits"] == remote.stats["judge_calls"] + remote.stats["cache_hits"]
    pairs = [SbsItem(id=f"i{k}", question=f"q{k}", candidate=f"c{k}", baseline=f"b{k}",
                     human_verdicts={"h": "A"}) for k in range(3)]
    with Store(tmp_path / "sbs.db") as s:
        rep = run_sbs(pairs, make_judge("scripted"), s, SbsConfig(), source="t", executor="ray?workers=2&cpus=0")
        assert rep.summary()["judge_calls"] == 6


def test_bad_executor_specs_fail_before_the_run_is_written(tmp_path: Path) -> None:
    for spec, message in (("ray?wrokers=2", "unknown executor option"), ("ray?workers=0", "must be >= 1"),
                          ("ray?cpus=x", "must be an integer"), ("spark", "unknown executor")):
        with Store(tmp_path / "x.db") as s, pytest.raises(ConfigError, match=message):
            run(items(1, 2), make_judge("scripted"), s, RunConfig(), executor=spec)
        with Store(tmp_path / "x.db") as s:
            assert s.runs() == []


@needs_model
@pytest.mark.model
def test_gguf_judge_on_two_ray_workers(ray_local: None, small_gguf: Path, tmp_path: Path) -> None:
    """The 0.5B GGUF loaded in each of 2 Ray actors (not in the driver): 4 calls, stored by the driver."""
    from knockout.judges import _llamacpp

    data = items(2, 2)
    loaded_before = set(_llamacpp._LOADED)  # models other tests of this process loaded
    judge = make_judge(f"llamacpp:{SMALL_MODEL}?threads=1")
    cfg = RunConfig(params=GenParams(max_tokens=24, temperature=0.0), format_retries=0)
    with Store(tmp_path / "g.db") as s:
        rep = run(data, judge, s, cfg, executor="ray?workers=2&cpus=1")
        assert rep.stats["judge_calls"] == 4 and rep.stats["failed"] == 0
        assert s.live_calls(rep.run_id) == 4 and s.repeated_calls() == 0
        assert set(_llamacpp._LOADED) == loaded_before  # the model was loaded by the workers, not here
        again = run(data, make_judge(f"llamacpp:{SMALL_MODEL}?threads=1"), s, cfg, executor="ray?workers=2&cpus=1")
        assert again.stats["judge_calls"] == 0
