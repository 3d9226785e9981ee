"""Jury members: a judge with its backend options, and optionally its own prompt and generation parameters.

A member is written as a TOML table (in a jury file, ``--jury FILE``, and in an experiment file's
``[[judges]]``)::

    [[member]]
    judge = "llamacpp:qwen2.5-coder-0.5b"      # a judge spec; or backend = "...", model = "..."
    options = { threads = 2 }                  # backend options (merged over --judge-opt)
    prompt = "sciex-en-ref"                    # optional: this member's prompt preset or template file
    params = { temperature = 0.0, top_p = 0.1 }  # optional: generation parameters over the run's
    name = "0.5B"                              # optional: the member's label in tables

A jury file may also set ``aggregate`` (``mean``, ``median``, ``trimmed``; ``majority``, ``table8`` for
side-by-side) and ``trim``.  Every error names the file, the member and the field.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from knockout._bounds import MAX_NAME, MAX_SPEC, valid_unicode
from knockout._redact import redact_spec
from knockout.errors import InputError
from knockout.judges._base import GenParams

MEMBER_FIELDS = ("judge", "backend", "model", "options", "prompt", "params", "name")


@dataclass(frozen=True)
class MemberSpec:
    """One jury member (or one judge of an experiment)."""

    judge: str
    options: dict[str, str] = field(default_factory=dict)
    prompt: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    name: str | None = None

    def label(self) -> str:
        """The member's name in tables, in the jury's judge column and in its stored configuration: its
        ``name``, else its spec (with its prompt), redacted by the judge's own reading of it
        (:func:`knockout._redact.redact_spec`: ``api_key=***``; the judge alone holds the key)."""
        if self.name:
            return self.name
        return redact_spec(self.judge) + (f" + {self.prompt}" if self.prompt else "")

    def gen_params(self, base: GenParams, *, file: str = "<jury>", record: str = "") -> GenParams:
        """``base`` with this member's parameters over it (a bad value names the member and field)."""
        if not self.params:
            return base
        try:
            return GenParams(**{**base.model_dump(), **self.params})
        except ValidationError as exc:
            err = exc.errors()[0]
            name = ".".join(str(x) for x in err["loc"]) or "params"
            raise InputError(f"params: {err['msg']}", file=file, record=record or self.label(),
                             field=f"params.{name}") from None


def _option_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


#: an experiment or jury file is at most this large
MAX_TOML_BYTES = 4 << 20


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file (experiment, jury): read as a data file is (a FIFO or a device is refused, not waited
    on; at most :data:`MAX_TOML_BYTES`), and whatever ``tomllib`` raises on hostile input (bad syntax,
    nesting past its recursion bound, invalid UTF-8, NUL bytes) is one :class:`InputError`."""
    from knockout.data._io import InputPolicy, input_policy, read_text

    with input_policy(InputPolicy(max_bytes=MAX_TOML_BYTES)):
        text = read_text(path)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"not valid TOML ({exc})", file=str(path)) from None
    except RecursionError:
        raise InputError("not valid TOML (nested too deeply)", file=str(path)) from None


def member_from_table(t: Any, *, file: str, record: str) -> MemberSpec:
    """A member from its TOML table (``record`` names it in errors, e.g. ``member 2``)."""
    if not isinstance(t, dict):
        raise InputError("must be a table", file=file, record=record)
    unknown = sorted(set(t) - set(MEMBER_FIELDS))
    if unknown:
        raise InputError(f"unknown field (known: {', '.join(MEMBER_FIELDS)})", file=file, record=record,
                         field=unknown[0])
    if "judge" in t and ("backend" in t or "model" in t):
        raise InputError("give either judge (a spec) or backend/model, not both", file=file, record=record,
                         field="judge")
    if "judge" in t:
        spec = t["judge"]
    elif "backend" in t:
        spec = str(t["backend"]) + (f":{t['model']}" if t.get("model") else "")
    else:
        raise InputError("a member needs judge = \"SPEC\" (or backend = ...)", file=file, record=record,
                         field="judge")
    if not isinstance(spec, str) or not spec.strip():
        raise InputError("must be a non-empty judge spec", file=file, record=record, field="judge")
    for key in ("options", "params"):
        if key in t and not isinstance(t[key], dict):
            raise InputError("must be a table (key = value, ...)", file=file, record=record, field=key)
    for key in ("prompt", "name"):
        if key in t and (not isinstance(t[key], str) or not t[key].strip()):
            raise InputError("must be a non-empty string", file=file, record=record, field=key)
    for key, bound in (("judge", MAX_SPEC), ("prompt", MAX_SPEC), ("name", MAX_NAME)):
        if isinstance(t.get(key), str):
            try:
                valid_unicode(t[key])
            except ValueError as exc:
                raise InputError(str(exc), file=file, record=record, field=key) from None
            if len(t[key]) > bound:
                raise InputError(f"longer than {bound} characters", file=file, record=record, field=key)
    params = dict(t.get("params") or {})
    unknown_params = sorted(set(params) - set(GenParams.model_fields))
    if unknown_params:
        raise InputError(f"unknown generation parameter (known: {', '.join(GenParams.model_fields)})",
                         file=file, record=record, field=f"params.{unknown_params[0]}")
    m = MemberSpec(judge=spec.strip(), options={str(k): _option_text(v) for k, v in (t.get("options") or {}).items()},
                   prompt=t.get("prompt"), params=params, name=t.get("name"))
    m.gen_params(GenParams(), file=file, record=record)  # a bad value fails here, before anything runs
    return m


@dataclass
class JuryFile:
    members: list[MemberSpec]
    aggregate: str | None = None
    trim: int | None = None


def read_jury_file(path: Path) -> JuryFile:
    """A jury file: ``[[member]]`` tables, optional ``aggregate`` and ``trim``."""
    data = read_toml(path)
    file = str(path)
    unknown = sorted(set(data) - {"member", "members", "aggregate", "trim"})
    if unknown:
        raise InputError("unknown field (known: member, aggregate, trim)", file=file, field=unknown[0])
    tables = data.get("member", data.get("members"))
    if not isinstance(tables, list) or not tables:
        raise InputError("a jury file lists its members as [[member]] tables", file=file, field="member")
    members = [member_from_table(t, file=file, record=f"member {i + 1}") for i, t in enumerate(tables)]
    agg = data.get("aggregate")
    if agg is not None and not isinstance(agg, str):
        raise InputError("must be a string", file=file, field="aggregate")
    trim = data.get("trim")
    if trim is not None and (not isinstance(trim, int) or isinstance(trim, bool) or trim < 0):
        raise InputError("must be an integer >= 0", file=file, field="trim")
    return JuryFile(members, agg, trim)


def unique_labels(members: list[MemberSpec]) -> list[str]:
    """Each member's label, made unique with ``#2``, ``#3`` where two would read the same."""
    seen: dict[str, int] = {}
    out = []
    for m in members:
        label = m.label()
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} #{seen[label]}")
    return out
