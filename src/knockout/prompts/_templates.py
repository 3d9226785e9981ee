"""Prompt templates: presets shipped as TOML files with a citation, and user files.

A template file (TOML) has::

    name = "my-grader"
    kind = "individual"            # or "pairwise", "sbs" (side-by-side verdict A/B/C/D),
                                   # "solve" (an examinee answers {question}: knockout solve)
    language = "en"
    parser = "score"               # a registered parser ("score", "pairwise", ...)
    citation = "where the prompt comes from"
    changes = "what knockout changed in the cited prompt, and why"
    system = "optional system message"
    template = '''... {question} ... {answer} ... {max_points} ...'''
    reminder = '''sent after an unparseable reply; may use {error} and {max_points}'''
    example = '''optional few-shot example block (SciEx style), uses {grade}'''
    examples_header = '''text put before the examples when there are any'''
    rubric_block = '''the section {rubric} stands for when the question has a rubric (default by language;
    its own {rubric} is the rubric: a text, or the criteria one per line)'''
    # the verdict slot (docs/methods.md#the-verdict-slot): a template whose reply starts with its verdict
    slot = "score"                 # or "pair" (two grades: a match), "choice" (a side-by-side verdict A/B/C/D),
                                   # "criteria" (a criteria rubric: one field per criterion, each on its own
                                   # points, the grade their sum, computed); absent: no slot, free text only
    slot_fields = ["Score: "]      # the text before each value, written by knockout (criteria: one, repeated
                                   # per criterion, with {n} and {points}: ["\nCriterion {n}: "])
    slot_suffix = "/{max_points}"  # the text after each value
    slot_then = ""                 # what follows the verdict, after which the judge writes one free line
    slot_decimal = "."             # how half points are written ("," in German)
    slot_labels = { no = 0, yes = 1 }  # a score slot whose values are labels: each label's share of max points
                                   # (absent: the values are the grades 0..max_points)
    slot_values = ["1", "2", "3"]  # the allowed values, where they are not the default: a score slot's grades
                                   # (numbers; default 0..max_points in half points), a choice slot's classes
                                   # (words allowed: ["Assistant1", "Assistant2", "equally good"]; default
                                   # A, B, C, D)
    slot_reasoning = "Explanation: "  # reasoning first: the reply begins with this text and the judge's free
                                   # reasoning, which ends where it writes the first field (its first line that
                                   # is not blank, "Score:"); then the verdict is written in the slot (absent:
                                   # the verdict comes first); not with slot_then
    slot_auto = false              # --verdict auto reads this template's verdict from text; its slot is used
                                   # when a slot mode is named (--verdict expected|constrained); default true

A plain ``.txt``/``.md`` file is a template body alone; its kind is
``pairwise`` when it uses ``{answer1}`` and ``{answer2}``, else ``individual``.
Placeholders are ``{name}``; write ``{{`` and ``}}`` for literal braces.  A
placeholder that is not one of :data:`PLACEHOLDERS` is an error at load time.
"""

from __future__ import annotations

import functools
import math
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from knockout.errors import ConfigError
from knockout.prompts._parsers import parsers

PLACEHOLDERS = {
    "question": "question text (MT: the source segment)",
    "answer": "the answer being graded (MT: the translation)",
    "answer1": "first answer of a pair",
    "answer2": "second answer of a pair",
    "max_points": "maximum points of the question",
    "reference": "reference answer",
    "rubric": "the question's rubric as a section (the template's rubric_block); empty when the question has "
    "none (or with --rubric off): write it at the start of a line",
    "examples": "few-shot examples block",
    "grade": "a human grade (only inside an example block)",
    "error": "why the last reply could not be parsed (only in a reminder)",
}
# Templates of kind "meta" (meta-evaluation, knockout.meta) may also use these.
META_PLACEHOLDERS = {
    "text": "the text an evaluator scored (pointwise items)",
    "result1": "the first evaluator's assessment",
    "result2": "the second evaluator's assessment",
    "eval_result": "one evaluator's assessment",
    "transcript": "the debate so far",
    "side": "the debater's number (1 or 2)",
    "round": "the debate round",
    "criteria": "the sub-criteria (BSMEval)",
    "criterion": "one sub-criterion (BSMEval)",
    "max_criteria": "how many sub-criteria at most (BSMEval)",
}
#: the placeholders a template of one kind may use beyond :data:`PLACEHOLDERS`
KIND_PLACEHOLDERS = {"meta": META_PLACEHOLDERS}
_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")

DEFAULT_REMINDERS = {
    "individual": (
        "Your reply could not be read as a grade ({error}). Reply again and end with exactly one line "
        "in the format: Score: X/{max_points}"
    ),
    "pairwise": (
        "Your reply could not be read as two grades ({error}). Reply again and end with exactly "
        "this format: Answer 1: X/{max_points} Answer 2: Y/{max_points}"
    ),
    "sbs": (
        "Your reply could not be read as a verdict ({error}). Reply again and end with exactly one of "
        "[[A]], [[B]], [[C]] or [[D]]."
    ),
    "solve": "Your reply was empty ({error}). Please answer the exam question above.",
}
#: the section ``{rubric}`` stands for when a template sets no ``rubric_block`` (its ``{rubric}``: the rubric)
DEFAULT_RUBRIC_BLOCKS = {"en": "Grading rubric:\n{rubric}\n", "de": "Bewertungsschema:\n{rubric}\n"}
#: the verdict slots a template may declare: how many values each holds, and the template kind it is for
SLOT_FIELDS = {"score": 1, "pair": 2, "choice": 1, "criteria": 1}
SLOT_KINDS = {"score": ("individual", "meta"), "pair": ("pairwise",), "choice": ("sbs", "meta"),
              "criteria": ("individual",)}
#: what a slot's texts may use: {max_points}; a criteria slot's field and suffix, repeated per criterion, also
#: {n} (the criterion's number) and {points} (its points)
SLOT_PLACEHOLDERS = {"score": {"max_points"}, "pair": {"max_points"}, "choice": {"max_points"},
                     "criteria": {"max_points", "n", "points"}}
#: the values of a choice slot by default (a template's ``slot_values`` may name others): the side-by-side paper's
#: four classes
CHOICES = ("A", "B", "C", "D")
#: the template kinds whose reply is a verdict (a solve template's is an answer: knockout solve)
VERDICT_KINDS = frozenset({"individual", "pairwise", "sbs", "meta"})
DEFAULT_PARSERS = {"individual": "score", "pairwise": "pairwise", "sbs": "sbs", "solve": "answer"}
#: ``--prompt`` names that pick a preset per question (language, reference) from a family, like ``auto``.
FAMILIES = {
    "sciex-system": "SciEx grading prompt as the authors' code sends it (system message), by language and --reference",
    "knockout": "the knockout papers' prompts (explanation, then the grade), by method, language and --reference",
    "knockout-score": "the papers' prompts asking for the grade only (the verdict slot's default), by method, language "
    "and --reference",
    "knockout-first": "the papers' prompts asking for the grade first, then one sentence of explanation",
}
#: the preset suffix of each knockout family (their presets: knockout-KIND-LANG[-ref]SUFFIX)
KNOCKOUT_FAMILIES = {"knockout": "", "knockout-score": "-score", "knockout-first": "-first"}


def placeholders(text: str) -> set[str]:
    return set(_placeholders(text))


@functools.lru_cache(maxsize=1024)
def _placeholders(text: str) -> frozenset[str]:  # a template's few texts, asked once per request
    return frozenset(m.group(1) for m in _FIELD.finditer(text) if m.group(1))


def render(text: str, values: dict[str, str]) -> str:
    """Fill ``{name}`` placeholders; values are inserted verbatim (never re-parsed)."""
    out = []
    for literal, name in _pieces(text):
        out.append(literal)
        if name is not None:
            if name not in values:
                raise ConfigError(f"template needs a value for '{{{name}}}'")
            out.append(values[name])
    return "".join(out)


@functools.lru_cache(maxsize=1024)
def _pieces(text: str) -> tuple[tuple[str, str | None], ...]:
    """A template text split once into (literal text, placeholder name or None) pieces, ``{{``/``}}``
    already unescaped (a run renders the same few texts for every request)."""
    pieces: list[tuple[str, str | None]] = []
    literal, pos = "", 0
    for m in _FIELD.finditer(text):
        literal += text[pos:m.start()]
        pos = m.end()
        tok = m.group(0)
        if tok in ("{{", "}}"):
            literal += tok[0]
        else:
            pieces.append((literal, m.group(1)))
            literal = ""
    pieces.append((literal + text[pos:], None))
    return tuple(pieces)


def fmt_points(x: float) -> str:
    return f"{x:g}"


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    kind: str
    template: str
    language: str = "en"
    parser: str = "score"
    citation: str = ""
    changes: str = ""
    description: str = ""
    system: str = ""
    reminder: str = ""
    example: str = ""
    examples_header: str = ""
    rubric_block: str = ""
    source: str = "preset"
    fields: frozenset[str] = field(default_factory=frozenset)
    slot: str = ""
    slot_fields: tuple[str, ...] = ()
    slot_suffix: str = ""
    slot_then: str = ""
    slot_decimal: str = "."
    slot_labels: tuple[tuple[str, float], ...] = ()
    #: the slot's allowed values where they are not the default (a score's grades, a choice's classes); empty: the
    #: default (:func:`knockout.prompts._slots.slot_for`)
    slot_values: tuple[str, ...] = ()
    #: a reasoning-first slot's opening text (None: the verdict comes first)
    slot_reasoning: str | None = None
    #: whether ``--verdict auto`` uses the slot (False: only a named slot mode does; auto reads text)
    slot_auto: bool = True

    @property
    def uses_reference(self) -> bool:
        return "reference" in self.fields

    @property
    def uses_examples(self) -> bool:
        return "examples" in self.fields

    @property
    def uses_rubric(self) -> bool:
        return "rubric" in self.fields


def _validate(t: PromptTemplate, where: str) -> PromptTemplate:
    for part, text in (("template", t.template), ("system", t.system), ("reminder", t.reminder),
                       ("example", t.example)):
        allowed = {**PLACEHOLDERS, **KIND_PLACEHOLDERS.get(t.kind, {})}
        unknown = placeholders(text) - set(allowed)
        if unknown:
            names = ", ".join("{" + u + "}" for u in sorted(unknown))
            known = ", ".join("{" + k + "}" for k in allowed)
            raise ConfigError(f"{where}: {part} uses unknown placeholder {names} (known: {known})")
    unknown = placeholders(t.rubric_block) - {"rubric"}
    if unknown or "rubric" not in placeholders(t.rubric_block):
        raise ConfigError(f"{where}: rubric_block must use {{rubric}} and no other placeholder"
                          + (f" (uses {', '.join('{' + u + '}' for u in sorted(unknown))})" if unknown else ""))
    if t.parser not in parsers:
        raise ConfigError(f"{where}: unknown parser '{t.parser}' (known: {', '.join(parsers.names())})")
    if t.slot:
        n = SLOT_FIELDS.get(t.slot)
        if n is None or t.kind not in SLOT_KINDS[t.slot]:
            raise ConfigError(f"{where}: slot '{t.slot}' is not a verdict slot of a {t.kind} template "
                              f"(slots: {', '.join(k + ' (' + ' or '.join(v) + ')' for k, v in SLOT_KINDS.items())})")
        if len(t.slot_fields) != n or not (all(t.slot_fields) or t.slot == "choice"):
            raise ConfigError(f"{where}: slot_fields must hold {n} non-empty field name(s) for slot '{t.slot}'")
        if t.slot_decimal not in (".", ","):
            raise ConfigError(f"{where}: slot_decimal must be '.' or ','")
        if t.slot_labels and (t.slot != "score" or len(t.slot_labels) < 2
                              or len({k for k, _ in t.slot_labels}) != len(t.slot_labels)
                              or not all(k.strip() and math.isfinite(v) and 0 <= v <= 1 for k, v in t.slot_labels)):
            raise ConfigError(f"{where}: slot_labels must map two or more distinct labels to their share of max "
                              "points (0..1), for slot 'score'")
        if t.slot_values and (t.slot not in ("score", "choice") or t.slot_labels or len(t.slot_values) < 2
                              or len(set(t.slot_values)) != len(t.slot_values)
                              or not all(v.strip() == v and v for v in t.slot_values)
                              or (t.slot == "score" and not all(_grade(v, t.slot_decimal) for v in t.slot_values))):
            raise ConfigError(f"{where}: slot_values must list two or more distinct values, for slot 'choice' (its "
                              "classes) or 'score' (its grades: numbers >= 0 written with slot_decimal), not with "
                              "slot_labels")
        if t.slot_reasoning is not None and (t.slot_then or not any(
                line.strip() for line in t.slot_fields[0].splitlines())):
            raise ConfigError(f"{where}: a reasoning-first slot (slot_reasoning) needs a first field that ends the "
                              "reasoning (its first line that is not blank) and no slot_then")
        may = SLOT_PLACEHOLDERS[t.slot]
        bad = (placeholders(t.slot_suffix + "".join(t.slot_fields)) - may) | (
            placeholders(t.slot_then + (t.slot_reasoning or "")) - {"max_points"})
        if bad:
            raise ConfigError(f"{where}: the slot's texts may use {', '.join('{' + a + '}' for a in sorted(may))} "
                              f"only (uses {', '.join('{' + u + '}' for u in sorted(bad))})")
    need = {"individual": {"answer"}, "pairwise": {"answer1", "answer2"}, "sbs": {"answer1", "answer2"},
            "solve": {"question"}}.get(t.kind)
    if need is not None and not need <= t.fields:
        missing = ", ".join("{" + n + "}" for n in sorted(need - t.fields))
        raise ConfigError(f"{where}: a {t.kind} template must use {missing}")
    return t


def _from_mapping(data: dict[str, object], where: str, source: str) -> PromptTemplate:
    template = data.get("template")
    if not isinstance(template, str) or not template.strip():
        raise ConfigError(f"{where}: field 'template' is missing or empty")
    kind = str(data.get("kind") or ("pairwise" if "answer1" in placeholders(template) else "individual"))
    fields_ = frozenset(placeholders(template) | placeholders(str(data.get("system", ""))))
    t = PromptTemplate(
        name=str(data.get("name") or Path(where).stem),
        kind=kind,
        template=template,
        language=str(data.get("language", "en")),
        parser=str(data.get("parser") or DEFAULT_PARSERS.get(kind, "score")),
        citation=str(data.get("citation", "")),
        changes=str(data.get("changes", "")),
        description=str(data.get("description", "")),
        system=str(data.get("system", "")),
        reminder=str(data.get("reminder") or DEFAULT_REMINDERS.get(kind, "")),
        example=str(data.get("example", "")),
        examples_header=str(data.get("examples_header", "")),
        rubric_block=str(data.get("rubric_block") or DEFAULT_RUBRIC_BLOCKS.get(
            str(data.get("language", "en"))[:2].lower(), DEFAULT_RUBRIC_BLOCKS["en"])),
        source=source,
        fields=fields_,
        slot=str(data.get("slot", "")),
        slot_fields=_strings(data.get("slot_fields", ()), where, "slot_fields"),
        slot_suffix=str(data.get("slot_suffix", "")),
        slot_then=str(data.get("slot_then", "")),
        slot_decimal=str(data.get("slot_decimal", ".")),
        slot_labels=_labels(data.get("slot_labels", {}), where),
        slot_values=_strings(data.get("slot_values", ()), where, "slot_values"),
        slot_reasoning=None if data.get("slot_reasoning") is None else str(data.get("slot_reasoning")),
        slot_auto=_flag(data.get("slot_auto", True), where, "slot_auto"),
    )
    return _validate(t, where)


def _grade(value: str, decimal: str) -> bool:
    """Whether ``value`` is a grade a score slot may allow: a finite number >= 0 written with ``decimal``."""
    other = "," if decimal == "." else "."
    if other in value:
        return False
    try:
        x = float(value.replace(",", "."))
    except ValueError:
        return False
    return math.isfinite(x) and x >= 0


def _labels(value: object, where: str) -> tuple[tuple[str, float], ...]:
    """A template's ``slot_labels``: a table of label = share of max points."""
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool) for k, v in value.items()):
        raise ConfigError(f"{where}: field 'slot_labels' must be a table of label = share of max points (0..1)")
    return tuple((k, float(v)) for k, v in value.items())


def _flag(value: object, where: str, name: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: field '{name}' must be true or false")
    return value


def _strings(value: object, where: str, name: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: field '{name}' must be a list of strings")
    return tuple(value)


def load_template_file(path: str | Path) -> PromptTemplate:
    """Load a user template (TOML with fields, or a plain text body)."""
    p = Path(path)
    try:
        found = p.exists()
    except (OSError, ValueError) as exc:  # a name too long for a path, a NUL character
        raise ConfigError(f"prompt template file not found: {str(p)[:200]} ({exc})") from None
    if not found:
        raise ConfigError(f"prompt template file not found: {p}")
    if not p.is_file():
        raise ConfigError(f"{p}: a prompt template must be a regular file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text (byte {exc.start}); save the template as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the prompt template ({exc.strerror or exc})") from None
    if p.suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{p}: invalid TOML ({exc})") from None
        except RecursionError:
            raise ConfigError(f"{p}: invalid TOML (nested too deeply)") from None
        return _from_mapping(data, str(p), source=str(p))
    return _from_mapping({"name": p.stem, "template": text}, str(p), source=str(p))


_PRESETS: dict[str, PromptTemplate] | None = None


def presets() -> dict[str, PromptTemplate]:
    """All shipped presets, by name."""
    global _PRESETS
    if _PRESETS is None:
        found: dict[str, PromptTemplate] = {}
        folder = resources.files("knockout.prompts") / "presets"
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):
            if entry.name.endswith(".toml"):
                data = tomllib.loads(entry.read_text(encoding="utf-8"))
                t = _from_mapping(data, f"preset {entry.name}", source="preset")
                found[t.name] = t
        _PRESETS = found
    return _PRESETS


def get_template(name_or_path: str) -> PromptTemplate:
    """A preset by name, or a user template file by path."""
    all_presets = presets()
    if name_or_path in all_presets:
        return all_presets[name_or_path]
    try:
        is_file = Path(name_or_path).suffix in (".toml", ".txt", ".md") or Path(name_or_path).exists()
    except (OSError, ValueError):  # a name too long for a path, a NUL character
        is_file = False
    if is_file:
        return load_template_file(name_or_path)
    raise ConfigError(
        f"unknown prompt '{name_or_path}': not a preset ({', '.join(sorted(all_presets))}) nor a file"
    )


#: the languages the auto presets are written in
PRESET_LANGUAGES = ("en", "de")
_LANGUAGE_NAMES = {"english": "en", "eng": "en", "german": "de", "deutsch": "de", "deu": "de", "ger": "de"}


def preset_language(language: str) -> str | None:
    """The preset language of a question's language: ``en``/``de`` and their regional forms (``en-GB``,
    ``de_AT``) or names; None for any other language (no preset: an auto prompt refuses it)."""
    low = language.strip().lower()
    primary = _LANGUAGE_NAMES.get(low, low.replace("_", "-").split("-", 1)[0])
    return primary if primary in PRESET_LANGUAGES else None


def auto_preset(kind: str, *, language: str, task: str, reference: bool, shots: int, family: str = "auto",
                criteria: bool = False, slot: bool = False) -> str:
    """The paper preset that fits a question: MT, SciEx (few-shot) or knockout prompts; with ``family``
    (:data:`FAMILIES`) the family's preset for the question's language and reference; ``criteria`` (a
    question with a criteria rubric, graded individually without few-shot examples): knockout's criteria
    preset, which asks for a verdict per criterion; ``slot`` (the judge fills a verdict slot): the family
    ``knockout-score`` (the grade only; with few-shot examples too, shown as graded answers)."""
    ref = "-ref" if reference else ""
    if family == "auto" and slot and not criteria:
        family = "knockout-score"
    if family in KNOCKOUT_FAMILIES:
        suffix = KNOCKOUT_FAMILIES[family]
        if task == "mt":
            return f"knockout-{kind}-mt{suffix}"
        lang = preset_language(language)
        if lang is None:
            raise ConfigError(f"no '{family}' preset in language '{language}' (presets: "
                              f"{', '.join(PRESET_LANGUAGES)}); choose a prompt with --prompt NAME")
        if shots > 0 and not suffix:
            raise ConfigError(f"prompt family '{family}' has no few-shot examples; use knockout-score or "
                              "knockout-first (or sciex)")
        return f"knockout-{kind}-{lang}{ref}{suffix}"
    if task == "mt" and family == "auto":
        return f"knockout-{kind}-mt"
    lang = preset_language(language)
    if lang is None:
        fam = family if family != "auto" else ("sciex" if shots > 0 and kind == "individual" else f"knockout-{kind}")
        raise ConfigError(f"no '{fam}' preset in language '{language}' (presets: {', '.join(PRESET_LANGUAGES)}); "
                          f"choose a prompt with --prompt NAME (e.g. {fam}-en{ref})")
    if family != "auto":
        if family not in FAMILIES or kind != "individual":
            raise ConfigError(f"prompt family '{family}' is for individual grading (families: {', '.join(FAMILIES)})")
        return f"{family}-{lang}{ref}"
    if shots > 0 and kind == "individual":
        return f"sciex-{lang}{ref}"
    if criteria and kind == "individual":
        return f"knockout-individual-{lang}{ref}-criteria"
    return f"knockout-{kind}-{lang}{ref}"
