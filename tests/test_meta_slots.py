"""The meta-judge's verdict in a slot (issue 51; docs/meta-evaluation.md#the-verdict-slot): the meta presets that
give a verdict (JDEval's and MDEval's better assistant, JDEval-i's and BSMEval's solve score) declare a
reasoning-first slot that ``knockout meta --verdict expected|constrained`` fills; ``auto`` fills it too for the
frameworks whose accuracy gate found no loss (JDEval, JDEval-i: bench/meta_mtbench.py --vs-text) and reads the
others' free text; ``text`` reads the free text as before.  Meta-judge: scripted with ``slot=true`` (a SIMULATION
that says it is one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from knockout._verdict import Verdict
from knockout.errors import ConfigError
from knockout.judges import make_judge
from knockout.meta import MetaConfig, MetaOptions, load_verdicts, run_meta
from knockout.meta._parsers import parse_better, parse_score, parse_score_tag
from knockout.meta._run import MetaRun
from knockout.meta._slots import MetaSlotParse
from knockout.prompts._slots import gives_verdict, slot_for, slot_words, verdict_modes
from knockout.prompts._templates import get_template, load_template_file, presets
from knockout.storage._store import Store
from tests.test_meta import write_verdicts
from tests.test_meta_authors import openmeva
from tests.test_meta_cli import knockout

META = sorted(n for n in presets() if n.startswith("meta-"))
#: the meta presets whose gate (bench/meta_mtbench.py --verdict expected --vs-text, docs/methods.md) found no loss:
#: --verdict auto reads their slot; MDEval's judge and BSMEval's solve step keep text there until theirs is run
GATED = {n for n in META if n == "meta-jdeval" or n.startswith("meta-jdeval-i-")}
CLASSES = ("Assistant1", "Assistant2", "equally good")
#: the text parser of each verdict-giving preset, and the value it reads from the slot's written reply
TEXT_READ = {"meta-better": (parse_better, "Assistant2", "winner", Verdict.B),
             "meta-debate": (parse_better, "equally good", "winner", Verdict.TIE),
             "meta-score": (parse_score, "4", "score", 4.0), "meta-score-tag": (parse_score_tag, "4", "score", 4.0)}


@pytest.mark.parametrize("name", META)
def test_every_meta_verdict_has_a_reasoning_first_slot_that_auto_uses_once_gated(name: str) -> None:
    t = presets()[name]
    if not gives_verdict(t):  # a debater's argument, BSMEval's criteria: free text
        assert not t.slot and slot_for(t, 5) is None and set(verdict_modes(t).values()) == {"-"}
        assert "not a verdict" in slot_words(t)
        return
    slot = slot_for(t, 5)
    assert slot is not None and slot.reasoning is not None and t.slot_auto == (name in GATED)
    assert slot.values == (CLASSES if slot.kind == "choice" else ("1", "2", "3", "4", "5"))
    first = slot.reasoning_stop()
    assert first.startswith("<") and first in t.template + t.system  # the tag the prompt asks the verdict in
    assert slot.reasoning.strip() in t.template + t.system  # the reply begins where the prompt's format does
    assert "verdict slot" in t.changes and ("slot_auto = false" in t.changes) == (not t.slot_auto)
    assert verdict_modes(t)["llamacpp"] == ("expected" if t.slot_auto else "text; the slot when named")
    # the reply the slot writes reads the same with the text parser: the slot asks what the prompt asks
    parse, value, key, read = TEXT_READ[t.parser]
    written = slot.written([value], "my reasoning")
    assert parse(written, 5).value[key] == read
    assert MetaSlotParse(slot, 5).read_verdict({"mode": "constrained", "chosen": [value]}, written).value[key] == read


def test_the_verdict_is_the_slot_never_the_text() -> None:
    slot = slot_for(get_template("meta-jdeval"), 0)
    assert slot is not None
    planted = ("<Better_answer>AnswerA</Better_answer>\n<Better_assistant>Assistant1</Better_assistant>\n"
               "<Better_assistant>\nAssistant2\n</Better_assistant>")
    parse = MetaSlotParse(slot, 0, ("an answer",))
    assert parse.read_verdict({"mode": "constrained", "chosen": ["Assistant2"]}, planted).value == {
        "winner": Verdict.B, "answer": Verdict.A}  # the meta-judge's own better answer: a diagnostic beside it
    assert not parse.read_verdict(None, planted).ok and not parse(planted).ok  # no slot verdict: invalid
    expected = {"mode": "expected", "probs": [[0.2, 0.1, 0.6]], "chosen": ["equally good"]}
    assert parse.read_verdict(expected, "").value["winner"] == Verdict.TIE  # the most probable class
    bad = parse.read_verdict({"mode": "constrained", "chosen": ["Assistant3"]}, "")
    assert not bad.ok and "allowed values" in str(bad.error)
    score = slot_for(get_template("meta-jdeval-i-openmeva"), 5)
    assert score is not None
    story = "<Reasoning_for_scoring_story>fine</Reasoning_for_scoring_story>\n<Score_for_story>2</Score_for_story>"
    read = MetaSlotParse(score, 5).read_verdict({"mode": "expected", "probs": [[0, 0, 0.5, 0.5, 0]],
                                                 "chosen": ["3"]}, story)
    assert read.value == {"score": 3.5, "own": 2.0}  # the expected score; its own score of the story beside it


def _run(tmp_path: Path, framework: str, verdict: str, kind: str = "pairwise",
         judge: str = "scripted?slot=true&noise=0", db: str = "m.db",
         **kw: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    vs = load_verdicts(openmeva(tmp_path / "stories") if kind == "openmeva" else
                       write_verdicts(tmp_path / f"v-{kind}", kind))
    with Store(tmp_path / db) as store:
        cfg = MetaConfig(options=MetaOptions(framework=framework, **kw), shuffles=20, verdict=verdict)
        s = run_meta(vs, make_judge(judge), store, cfg).summary()
        return s, store.results(str(s["run_id"]))


def _attempts(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [a for r in results for a in r["details"]["attempts"]]


def test_jdeval_reads_its_slot_under_auto_and_text_when_named(tmp_path: Path) -> None:
    auto, auto_rows = _run(tmp_path, "jdeval", "auto")
    text, text_rows = _run(tmp_path, "jdeval", "text")
    named, rows = _run(tmp_path, "jdeval", "constrained")
    assert text["verdict"] == "text" and all("verdict" not in a for a in _attempts(text_rows))  # as before slots
    assert auto["verdict"] == "expected" and auto["run_id"] not in (text["run_id"], named["run_id"])  # gated
    assert auto["invalid"] == 0 and all(a["verdict"]["mode"] == "expected" for a in _attempts(auto_rows))
    assert named["verdict"] == "constrained" and named["run_id"] != text["run_id"] and named["invalid"] == 0
    assert named["judge_calls"] == 18  # the slot is in the cache key: asked again
    for r in rows:
        a = r["details"]["attempts"][-1]
        assert a["verdict"]["mode"] == "constrained" and a["verdict"]["chosen"][0] in CLASSES
        assert a["reply"].startswith("<Reasoning_for_choosing_better_answer>\nsimulated reasoning (scripted judge).")
        assert r["details"]["winner"] == Verdict.parse(a["verdict"]["chosen"][0])
    assert [e["evaluator"] for e in named["ranking"]] == [e["evaluator"] for e in text["ranking"]]
    # MDEval's judge is not gated yet: auto reads its text, as before slots
    md, _ = _run(tmp_path, "mdeval", "auto", draws=1, db="md.db")
    assert md["verdict"] == "text"


def test_mdeval_asks_a_decision_written_as_text_again_in_the_slot(tmp_path: Path) -> None:
    s, rows = _run(tmp_path, "mdeval", "constrained", draws=1)
    # the scripted judge asks at round 0 and decides in round 1 (text): the decision asked again in the slot
    assert s["verdict"] == "constrained" and s["invalid"] == 0 and s["judge_calls"] == 6 * 5
    calls = rows[0]["details"]["calls"]
    assert "verdict" not in calls[-2]["attempts"][0]  # the text decision, not read as the verdict
    slot = calls[-1]["attempts"][0]
    assert slot["verdict"]["mode"] == "constrained"
    assert rows[0]["details"]["winner"] == Verdict.parse(slot["verdict"]["chosen"][0])
    last, rows = _run(tmp_path, "mdeval", "expected", draws=1, rounds=1, db="last.db")
    # with one round the judge asks at round 0, then must decide: in the slot at once
    assert last["invalid"] == 0 and last["judge_calls"] == 6 * 4
    assert rows[0]["details"]["calls"][-1]["attempts"][0]["verdict"]["mode"] == "expected"


def test_scores_take_the_expected_value_and_bsmeval_keeps_its_criteria_text(tmp_path: Path) -> None:
    s, rows = _run(tmp_path, "jdeval-i", "expected", kind="pointwise")
    assert s["verdict"] == "expected" and s["invalid"] == 0
    assert s["scores"]["good"]["mean"] == pytest.approx((4 * 0.15 + 5 * 0.7) / 0.85)  # type: ignore[index]
    b, rows = _run(tmp_path, "bsmeval", "constrained", kind="openmeva", prompts="authors", db="b.db")
    assert b["verdict"] == "constrained" and b["invalid"] == 0
    solve = [c for r in rows for c in r["details"]["solve"].values()]
    assert solve and all(c["attempts"][0]["verdict"]["mode"] == "constrained" for c in solve)
    assert all(c["attempts"][0]["reply"].startswith("<Explanation>\n") for c in solve)
    assert all("verdict" not in a for r in rows for a in r["details"]["branch"]["attempts"])  # criteria: text


def test_a_mode_the_meta_judge_lacks_is_refused(tmp_path: Path) -> None:
    vs = load_verdicts(write_verdicts(tmp_path / "v"))
    with pytest.raises(ConfigError, match="offers no 'expected' verdict slot"):
        MetaRun(vs, make_judge("scripted"), MetaConfig(verdict="expected"))
    with pytest.raises(ConfigError, match="unknown verdict mode"):
        MetaRun(vs, make_judge("scripted"), MetaConfig(verdict="slot"))


def test_cli_verdict_option_and_presets_listing(tmp_path: Path) -> None:
    folder = write_verdicts(tmp_path / "v")
    res = knockout("meta", str(folder), "--meta-judge", "scripted?slot=true", "--framework", "jdeval-i",
                   "--verdict", "constrained", "-o", str(tmp_path / "m.db"), "--json", "-q", "--shuffles", "20")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["verdict"] == "constrained"
    res = knockout("meta", str(folder), "--meta-judge", "scripted?slot=true", "--framework", "jdeval-i",
                   "-o", str(tmp_path / "m.db"), "--json", "-q", "--shuffles", "20")
    assert res.returncode == 0 and json.loads(res.stdout)["verdict"] == "expected"  # auto: the gated slot
    res = knockout("meta", str(folder), "--meta-judge", "scripted?slot=true", "--framework", "jdeval-i",
                   "--verdict", "text", "-o", str(tmp_path / "m.db"), "-q", "--shuffles", "20")
    assert res.returncode == 0 and "verdicts read from free text" in " ".join(res.stdout.split())
    res = knockout("meta", str(folder), "--meta-judge", "scripted", "--verdict", "expected", "-o",
                   str(tmp_path / "m.db"))
    assert res.returncode == 2 and "offers no 'expected' verdict slot" in res.stderr
    listed = {p["name"]: p for p in json.loads(knockout("presets", "--json").stdout)}
    assert listed["meta-jdeval"]["slot"] == "one of Assistant1 / Assistant2 / equally good, reasoning first"
    assert listed["meta-bsmeval-solve-text"]["slot"] == "grade 1-5, reasoning first"
    assert listed["meta-jdeval-i-summeval"]["verdict"]["anthropic"] == "constrained"
    assert listed["meta-bsmeval-solve-text"]["verdict"]["anthropic"] == "text; the slot when named"
    assert listed["meta-mdeval-debater"]["verdict"]["llamacpp"] == "-"


@pytest.mark.parametrize(("lines", "message"), [
    ('slot = "score"\nslot_fields = ["S: "]\nslot_values = ["1", "two"]', "slot_values must list"),
    ('slot = "choice"\nslot_fields = ["V: "]\nslot_values = ["yes", "yes"]', "slot_values must list"),
    ('slot = "score"\nslot_fields = ["S: "]\nslot_values = ["0", "1"]\nslot_labels = { no = 0, yes = 1 }',
     "slot_values must list"),
    ('slot = "pair"\nslot_fields = ["A: ", "B: "]', "not a verdict slot of a meta template"),
])
def test_slot_values_are_checked(tmp_path: Path, lines: str, message: str) -> None:
    f = tmp_path / "t.toml"
    f.write_text(f'kind = "meta"\nparser = "meta-score"\ntemplate = "Score {{eval_result}}"\n{lines}\n')
    with pytest.raises(ConfigError, match=message):
        load_template_file(f)
