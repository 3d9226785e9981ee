"""Prompts: preset templates with citations, user templates, the one rendering path, few-shot selection,
parsers."""

from knockout.prompts._fewshot import SHOT_SOURCES, Shot, select_shots
from knockout.prompts._parsers import Parsed, Parser, parse_pairwise, parse_score, parsers
from knockout.prompts._render import Rendered, judge_messages
from knockout.prompts._templates import (
    PromptTemplate,
    auto_preset,
    get_template,
    load_template_file,
    presets,
    render,
)

# The parsers of other features, as lazy entries: a template names one and its module is imported only then.
for _name, _where in (
    ("sbs", "knockout.sbs._verdicts:parse_sbs"),
    ("meta-better", "knockout.meta._parsers:parse_better"),
    ("meta-debate", "knockout.meta._parsers:parse_debate"),
    ("meta-score", "knockout.meta._parsers:parse_score"),
    ("meta-criteria", "knockout.meta._parsers:parse_criteria"),
    ("meta-argument", "knockout.meta._parsers:parse_argument"),
    ("meta-plan", "knockout.meta._parsers:parse_plan"),
    ("meta-score-tag", "knockout.meta._parsers:parse_score_tag"),
    ("answer", "knockout.sciex._parse:parse_answer"),
    ("sciex-score", "knockout.sciex._parse:parse_sciex_score"),
):
    parsers.add(_name, _where)

__all__ = [
    "SHOT_SOURCES",
    "Parsed",
    "Parser",
    "PromptTemplate",
    "Rendered",
    "Shot",
    "auto_preset",
    "get_template",
    "judge_messages",
    "load_template_file",
    "parse_pairwise",
    "parse_score",
    "parsers",
    "presets",
    "render",
    "select_shots",
]
