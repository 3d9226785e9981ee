"""The meta-evaluation authors' published prompts (meta-evaluation/meta-evaluation, meta-evaluator_prompts/) as
presets beside knockout's own: MDEval's judge and debater, BSMEval's branch and solve for OpenMEVA stories,
selected with MetaOptions(prompts="authors") / --prompts authors; the default is unchanged.  Meta-judge:
scripted (a SIMULATION)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knockout.errors import ConfigError
from knockout.judges import make_judge
from knockout.meta import MetaConfig, MetaOptions, load_verdicts, run_meta
from knockout.meta._parsers import parse_plan, parse_score_tag
from knockout.meta._run import MetaRun
from knockout.prompts._parsers import parsers
from knockout.prompts._templates import get_template
from knockout.storage._store import Store
from tests.test_meta import write_verdicts

AUTHORS = ("meta-mdeval-judge-authors", "meta-mdeval-debater-authors", "meta-bsmeval-branch-authors",
           "meta-bsmeval-solve-authors")


def test_presets_cite_the_authors_code_and_keep_its_wording() -> None:
    for name in AUTHORS:
        t = get_template(name)
        assert t.kind == "meta" and "meta-evaluation/meta-evaluation" in t.citation, name
        assert "meta-evaluator_prompts/" in t.citation, name
    judge = get_template("meta-mdeval-judge-authors")
    assert judge.system.startswith("##INSTRUCTIONS\nPlease act as an impartial Judge")
    assert "ask both assistants quetions" in judge.system  # verbatim, typos included
    assert "### AnswerA:\n{answer1}" in judge.system and "{transcript}" in judge.template
    debater = get_template("meta-mdeval-debater-authors")
    assert "You are a debater, an intelligent AI system" in debater.system
    assert "Here is your assessment:\n{result1}" in debater.system
    assert debater.template.endswith("Complete the next turn of debate as your role of Assistant{side} to persuade "
                                     "the judge.")
    branch = get_template("meta-bsmeval-branch-authors")
    assert "five-line story" in branch.template and not branch.fields  # the plan does not depend on the item
    solve = get_template("meta-bsmeval-solve-authors")
    assert {"text", "eval_result", "criterion"} == set(solve.fields) and "<Score>" in solve.template
    # knockout's own presets are still there, and what differs is said
    assert "written for this project" in get_template("meta-mdeval-debater").citation
    assert "written for this project" in get_template("meta-bsmeval-solve-text").citation


def test_plan_and_score_tag_parsers_read_the_authors_formats() -> None:
    assert parsers.get("meta-plan") is parse_plan and parsers.get("meta-score-tag") is parse_score_tag
    plan = parse_plan("Sure.\n<Evaluation Plan>\n1. Accuracy: does the score fit the story?\n- Depth: themes\n"
                      "3) Clarity - is it easy to follow\n</Evaluation Plan>")
    assert plan.value == ["Accuracy: does the score fit the story?", "Depth: themes", "Clarity - is it easy to follow"]
    assert not parse_plan("<Evaluation Plan>\n(output your evaluation plan)\n</Evaluation Plan>").ok
    # as the authors' recorded BSMEval replies have it (meta-evaluator_results/pointwise/BSMEval)
    assert parse_score_tag("Explanation:\nThe assessment is accurate.\n\nScore:\n5").value == {"score": 5.0,
                                                                                            "own": None}
    assert parse_score_tag("<Explanation>ok</Explanation>\n<Score>\n3\n</Score>").value["score"] == 3.0
    assert not parse_score_tag("<Score>\n(assign a score from 1 to 5)\n</Score>").ok
    assert not parse_score_tag("<Score>6</Score>").ok and not parse_score_tag("no score here").ok


def requests_of(db: Path, run_id: str) -> list[str]:
    with Store(db) as store:
        keys = [r[0] for r in store.db.execute("SELECT DISTINCT key FROM call_log WHERE run_id = ?", (run_id,))]
        return [json.dumps(store.request_of(store.db.execute("SELECT request FROM calls WHERE key = ?", (k,))
                                            .fetchone()[0])) for k in keys]


def test_mdeval_with_the_authors_prompts(tmp_path: Path) -> None:
    vs = load_verdicts(write_verdicts(tmp_path / "v"))
    db = tmp_path / "m.db"
    with Store(db) as store:
        own = run_meta(vs, make_judge("scripted?noise=0.05"), store,
                       MetaConfig(options=MetaOptions(framework="mdeval", rounds=2), shuffles=20)).summary()
        authors = run_meta(vs, make_judge("scripted?noise=0.05"), store,
                           MetaConfig(options=MetaOptions(framework="mdeval", rounds=2, prompts="authors"),
                                      shuffles=20)).summary()
    assert own["run_id"] != authors["run_id"] and own["prompts"] == "own" and authors["prompts"] == "authors"
    assert authors["invalid"] == 0 and authors["judgements"] == own["judgements"] == 18
    sent = requests_of(db, str(authors["run_id"]))
    assert any("You are a debater, an intelligent AI system" in r for r in sent)
    assert any("pursuade you that their own assessments" in r for r in sent)
    assert not any("You are assistant1, an AI assistant" in r for r in sent)  # knockout's own debater
    assert any("You are assistant1, an AI assistant" in r for r in requests_of(db, str(own["run_id"])))


def test_the_default_keeps_earlier_run_ids() -> None:
    from knockout.meta._verdicts import VerdictSet

    vs = VerdictSet(kind="pairwise", evaluators=[], items=[], source="x")
    own = MetaRun(vs, make_judge("scripted"), MetaConfig(options=MetaOptions(framework="mdeval")))
    assert "prompts" not in own.identity()["options"]
    authors = MetaRun(vs, make_judge("scripted"), MetaConfig(options=MetaOptions(framework="mdeval",
                                                                                   prompts="authors")))
    assert authors.identity()["options"]["prompts"] == "authors"


def openmeva(folder: Path) -> Path:
    """Pointwise verdicts on five-line stories (the OpenMEVA prompt), for the authors' BSMEval prompts."""
    path = write_verdicts(folder, "pointwise")
    for f in path.iterdir():
        rows = [json.loads(x) for x in f.read_text().splitlines()]
        f.write_text("".join(json.dumps({**r, "prompt": "rate the five-line story"}) + "\n" for r in rows))
    return path


def test_bsmeval_with_the_authors_prompts(tmp_path: Path) -> None:
    vs = load_verdicts(openmeva(tmp_path / "stories"))
    assert {it.task for it in vs.items} == {"openmeva"}
    db = tmp_path / "b.db"
    with Store(db) as store:
        s = run_meta(vs, make_judge("scripted?noise=0"), store,
                     MetaConfig(options=MetaOptions(framework="bsmeval", prompts="authors"), shuffles=20)).summary()
        rows = store.results(str(s["run_id"]))
    # one branch call for all 6 items (the plan shows no item), then 18 assessments x 2 criteria (identical
    # requests, the same score and explanation of the same text, are asked once)
    assert s["judge_calls"] + s["cache_hits"] == 6 + 36 and s["invalid"] == 0
    assert len({r["details"]["branch"]["attempts"][0]["key"] for r in rows}) == 1
    assert [r["evaluator"] for r in s["ranking"]] == ["good", "fair", "poor"]  # type: ignore[index]
    assert rows[0]["details"]["criteria"][0].startswith("Verdict:")
    sent = requests_of(db, str(s["run_id"]))
    assert any("propose an evaluation plan" in r for r in sent) and any("Evaluation Criterion:" in r for r in sent)


def test_authors_prompts_are_refused_where_the_authors_have_none(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="mdeval and bsmeval"):
        MetaOptions(framework="jdeval", prompts="authors").check()
    with pytest.raises(ConfigError, match="unknown prompt set"):
        MetaOptions(framework="mdeval", prompts="theirs").check()
    summeval = load_verdicts(write_verdicts(tmp_path / "s", "pointwise"))
    with Store(tmp_path / "x.db") as store, pytest.raises(ConfigError, match="OpenMEVA stories only"):
        run_meta(summeval, make_judge("scripted"), store,
                 MetaConfig(options=MetaOptions(framework="bsmeval", prompts="authors")))
