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
