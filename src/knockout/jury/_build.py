"""Building a jury's member runs from member specs (the command line, jury files and experiment files)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from knockout.judges import make_judge
from knockout.jury._members import MemberSpec, unique_labels
from knockout.jury._run import JuryRun


def grade_member_runs(items: Any, members: Sequence[MemberSpec], cfg: Any, judge_options: dict[str, str],
                      *, file: str = "<command line>") -> list[Any]:
    """One ``GradeRun`` per member: ``cfg`` with the member's prompt and generation parameters."""
    from knockout.methods._run import GradeRun

    runs = []
    for m in members:
        judge = make_judge(m.judge, {**judge_options, **m.options})
        options = replace(cfg.options, prompt=m.prompt) if m.prompt else cfg.options
        runs.append(GradeRun(items, judge, replace(cfg, options=options,
                                                   params=m.gen_params(cfg.params, file=file))))
    return runs


def sbs_member_runs(items: Any, members: Sequence[MemberSpec], cfg: Any, judge_options: dict[str, str], *,
                    source: str, file: str = "<command line>") -> list[Any]:
    """One ``SbsRun`` per member: ``cfg`` with the member's prompt and generation parameters."""
    from knockout.sbs._run import SbsRun

    runs = []
    for m in members:
        judge = make_judge(m.judge, {**judge_options, **m.options})
        mc = replace(cfg, prompt=m.prompt or cfg.prompt, params=m.gen_params(cfg.params, file=file))
        runs.append(SbsRun(items, judge, mc, source=source))
    return runs


def make_jury(runs: Sequence[Any], members: Sequence[MemberSpec], *, aggregate: str | None = None,
              trim: int | None = None) -> JuryRun:
    return JuryRun(runs, unique_labels(list(members)), aggregate=aggregate, trim=1 if trim is None else trim)
