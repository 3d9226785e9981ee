"""Planning and running an experiment file: every part is an ordinary run through the one lifecycle.

A *part* is one run: a method with a judge (grading), a prompt with a judge (side-by-side) or a framework
with a meta-judge (meta-evaluation), and, when the file asks for a jury, the jury of all judges per method
or prompt.  Parts run one after the other through :func:`knockout.runs.execute` on one store, so a second
``knockout run`` of the same file makes no judge call and one that was killed resumes where it stopped
(each part's run id is the one the equivalent ``knockout grade`` / ``sbs`` / ``meta`` command makes).
The comparison is then computed from the store alone (:func:`experiment_tables`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from knockout.errors import InputError
from knockout.experiments._file import ExperimentFile
from knockout.judges._base import GenParams
from knockout.jury._members import unique_labels
from knockout.runs import Run, run_id_for


@dataclass
class Part:
    row: str  # the method, prompt or framework
    column: str  # the judge (or the jury)
    run: Run[Any]
    run_id: str = ""
    status: str = "planned"
    summary: dict[str, Any] = field(default_factory=dict)
    #: a grid experiment's cell: judge, shots, source, reference
    cell: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.row} · {self.column}"


def _params(ef: ExperimentFile, base: GenParams) -> GenParams:
    if not ef.exp.params:
        return base
    try:
        return GenParams(**{**base.model_dump(), **ef.exp.params})
    except (ValidationError, TypeError) as exc:
        if isinstance(exc, ValidationError):
            e = exc.errors()[0]
            raise InputError(e["msg"], file=str(ef.path),
                             field="params." + ".".join(str(x) for x in e["loc"])) from None
        raise InputError(str(exc), file=str(ef.path), field="params") from None


def _check_data(ef: ExperimentFile) -> Path:
    p = ef.data_path
    if not p.exists():
        raise InputError(f"data not found: {p} (data.path = '{ef.exp.data.path}', relative to {ef.root}); the "
                         "examples read ../shared/data next to the repository", file=str(ef.path), field="data.path")
    return p


def plan(ef: ExperimentFile, judge_options: dict[str, str] | None = None) -> list[Part]:
    """Every part of the experiment, checked (data loaded, prompts rendered) before any judge is called.
    ``judge_options`` (``--judge-opt``) go to every judge, under each judge's own ``options``."""
    exp = ef.exp
    kv = dict(judge_options or {})
    path = _check_data(ef)
    labels = unique_labels(ef.members)
    #: the parts of each kind of experiment (``kind`` in the file)
    planner = _grid_parts if exp.grid is not None else {"grade": _grade_parts, "sbs": _sbs_parts,
                                                         "meta": _meta_parts}[exp.kind]
    parts = planner(ef, path, kv, labels)
    for part in parts:
        part.run.check()
        part.run_id = run_id_for(part.run.identity())
    return parts


def _grade_parts(ef: ExperimentFile, path: Path, kv: dict[str, str], labels: list[str]) -> list[Part]:
    exp, file = ef.exp, str(ef.path)
    parts: list[Part] = []
    from knockout.data import load_items
    from knockout.jury import grade_member_runs, make_jury
    from knockout.methods._base import MethodOptions, methods
    from knockout.methods._run import RunConfig

    items = load_items(path, exp.data.format, **exp.data.options).subset(
        limit=exp.data.limit, answers_per_question=exp.data.answers_per_question)
    params = _params(ef, GenParams())
    for m in exp.methods:
        methods.get(m.method)
        p = exp.prompt
        cfg = RunConfig(method=m.method,
                        options=MethodOptions(prompt=p.prompt, reference=p.reference, shots=p.shots,
                                              shot_source=p.shot_source, seed=p.seed, quoting=p.quoting,
                                              allow_fewer_shots=p.allow_fewer_shots, rubric=p.rubric, debias=m.debias,
                                              verdict=p.verdict, preference=p.preference,
                                              extra={k: str(v) for k, v in m.options.items()}),
                        params=params, concurrency=exp.concurrency, figures=p.figures,
                        format_retries=2 if exp.format_retries is None else exp.format_retries)
        runs = grade_member_runs(items, ef.members, cfg, kv, file=file)
        parts += [Part(m.label(), label, r) for label, r in zip(labels, runs, strict=True)]
        if exp.jury is not None:  # fresh member runs: each part's judges are closed after it
            jury = make_jury(grade_member_runs(items, ef.members, cfg, kv, file=file), ef.members,
                             aggregate=exp.jury.aggregate, trim=exp.jury.trim)
            parts.append(Part(m.label(), exp.jury.name, jury))
    return parts


def _grid_parts(ef: ExperimentFile, path: Path, kv: dict[str, str], labels: list[str]) -> list[Part]:
    """SciEx's grid: per reference setting, number of shots and shot source (zero-shot: one), one individual
    grading run per judge (knockout.sciex._grid lays them out as the paper's Tables 4, 9, 10 and 11)."""
    exp, file = ef.exp, str(ef.path)
    grid = exp.grid
    assert grid is not None
    from knockout.data import load_items
    from knockout.jury import grade_member_runs
    from knockout.methods._base import MethodOptions
    from knockout.methods._run import RunConfig

    items = load_items(path, exp.data.format, **exp.data.options).subset(
        limit=exp.data.limit, answers_per_question=exp.data.answers_per_question)
    params = _params(ef, GenParams())
    p = exp.prompt
    parts: list[Part] = []
    for ref in grid.reference:
        for k in grid.shots:
            for src in (grid.shot_sources if k else [p.shot_source]):
                cfg = RunConfig(method="individual",
                                options=MethodOptions(prompt=p.prompt, reference=ref, shots=k, shot_source=src,
                                                      seed=p.seed, quoting=p.quoting, verdict=p.verdict,
                                                      allow_fewer_shots=p.allow_fewer_shots),
                                params=params, concurrency=exp.concurrency, figures=p.figures,
                                format_retries=2 if exp.format_retries is None else exp.format_retries)
                row = f"{k}-shot" + (f" {src}" if k else "") + (" ref" if ref else "")
                runs = grade_member_runs(items, ef.members, cfg, kv, file=file)
                parts += [Part(row, label, r, cell={"judge": label, "shots": k, "source": src if k else "",
                                                    "reference": ref})
                          for label, r in zip(labels, runs, strict=True)]
    return parts


def _sbs_parts(ef: ExperimentFile, path: Path, kv: dict[str, str], labels: list[str]) -> list[Part]:
    exp, file = ef.exp, str(ef.path)
    parts: list[Part] = []
    from knockout.jury import make_jury, sbs_member_runs
    from knockout.sbs._data import load_sbs
    from knockout.sbs._run import DEFAULT_PARAMS, SbsConfig

    sbs_items = load_sbs(path, tie=exp.data.tie, candidate=exp.data.candidate)[:exp.data.limit]
    params = _params(ef, DEFAULT_PARAMS)
    for sp in exp.prompts:
        try:
            sp_params = GenParams(**{**params.model_dump(), **sp.params}) if sp.params else params
        except ValidationError as exc:
            raise InputError(exc.errors()[0]["msg"], file=file, record=sp.label(), field="params") from None
        scfg = SbsConfig(prompt=sp.prompt, debate=sp.debate, params=sp_params,
                         format_retries=0 if exp.format_retries is None else exp.format_retries,
                         concurrency=exp.concurrency, window=exp.sbs.window, stride=exp.sbs.stride)
        runs = sbs_member_runs(sbs_items, ef.members, scfg, kv, source=str(path), file=file)
        parts += [Part(sp.label(), label, r) for label, r in zip(labels, runs, strict=True)]
        if exp.jury is not None:
            jury = make_jury(sbs_member_runs(sbs_items, ef.members, scfg, kv, source=str(path), file=file),
                             ef.members, aggregate=exp.jury.aggregate, trim=exp.jury.trim)
            parts.append(Part(sp.label(), exp.jury.name, jury))
    return parts


def _meta_parts(ef: ExperimentFile, path: Path, kv: dict[str, str], labels: list[str]) -> list[Part]:
    exp, file = ef.exp, str(ef.path)
    parts: list[Part] = []
    from knockout.judges import make_judge
    from knockout.meta import MetaConfig, MetaOptions, MetaRun, load_verdicts

    vs = load_verdicts(path, human_field=exp.data.human)
    params = _params(ef, GenParams())
    for f in exp.frameworks:
        opts = MetaOptions(framework=f.framework, draws=f.draws, both_orders=f.both_orders, rounds=f.rounds,
                           seed=f.seed)
        if f.max_criteria is not None:
            opts.max_criteria = f.max_criteria
        if f.truncate is not None:
            opts.truncate = f.truncate
        for label, member in zip(labels, ef.members, strict=True):
            mcfg = MetaConfig(options=opts, params=member.gen_params(params, file=file), k=f.k,
                              shuffles=f.shuffles, self_name=f.self_name, concurrency=exp.concurrency,
                              format_retries=2 if exp.format_retries is None else exp.format_retries,
                              verdict=f.verdict)
            judge = make_judge(member.judge, {**kv, **member.options})
            parts.append(Part(f.label(), label, MetaRun(vs, judge, mcfg, limit=exp.data.limit)))
    return parts


Runner = Callable[[Path, Run[Any], str], Any]


def run_parts(parts: list[Part], store: Path, runner: Runner) -> None:
    """Run every part in order through ``runner(store, run, label)`` (the CLI's ``execute_in_store``)."""
    for part in parts:
        report = runner(store, part.run, part.name)
        part.run_id = report.run_id
        part.summary = report.summary()
        part.status = str(part.summary.get("status", "complete"))
