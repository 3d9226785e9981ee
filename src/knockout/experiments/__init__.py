"""Experiment files: the data, judges, prompt, methods and comparison of a study in one TOML file, run
part by part through the one run lifecycle (``knockout run FILE``).  See docs/experiments.md."""

from knockout.experiments._file import Experiment, ExperimentFile, read_experiment
from knockout.experiments._report import experiment_report, experiment_tables
from knockout.experiments._run import Part, plan, run_parts

__all__ = [
    "Experiment",
    "ExperimentFile",
    "Part",
    "experiment_report",
    "experiment_tables",
    "plan",
    "read_experiment",
    "run_parts",
]
