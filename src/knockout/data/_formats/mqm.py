"""MQM segment scores (Freitag et al. 2021; google/wmt-mqm-human-evaluation), e.g. the TED set.

Two files per language pair: ``<name>_<pair>.tsv`` (one row per error annotation, with source and
target text) and ``<name>_<pair>.avg_seg_scores.tsv`` (system, mqm_avg_score, seg_id).
"""

from __future__ import annotations

import csv
import logging
import re
from pathlib import Path

from knockout.data._io import CsvRows, build, item_set, natural_key, read_text, to_number
from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import InputError

log = logging.getLogger(__name__)
SCORES = ".avg_seg_scores.tsv"
TAGS = re.compile(r"</?v>")


def sniff(path: Path) -> bool:
    """A ``.tsv`` file, or a folder with ``mqm_*.tsv`` files."""
    if path.is_dir():
        return any(path.glob("mqm_*.tsv"))
    return path.suffix.lower() == ".tsv" and path.is_file()


def _system(name: str) -> str:
    """The error file says "ref" / "refB" where the score file says "ref-A" / "ref-B"."""
    m = re.fullmatch(r"ref-?([A-Za-z]?)", name)
    return f"ref-{(m.group(1) or 'A').upper()}" if m else name


def _locate(path: Path, pair: str | None) -> tuple[Path, Path]:
    """(error annotations file, segment scores file)."""
    if path.is_dir():
        texts = sorted(p for p in path.glob(f"*_{pair or 'ende'}.tsv"))
        if len(texts) != 1:
            raise InputError(
                f"expected one *_{pair or 'ende'}.tsv file here, found {len(texts)}"
                " (the option pair chooses the language pair)",
                file=str(path),
            )
        path = texts[0]
    if path.name.endswith(SCORES):
        path = path.with_name(path.name.removesuffix(SCORES) + ".tsv")
    scores = path.with_name(path.name.removesuffix(".tsv") + SCORES)
    for p in (path, scores):
        if not p.is_file():
            raise InputError(
                "file not found (MQM needs both the .tsv and the .avg_seg_scores.tsv)", file=str(p)
            )
    return path, scores


def _texts(path: Path) -> tuple[dict[tuple[str, str], str], dict[str, dict[str, str]]]:
    """(system, seg_id) -> target and ("", seg_id) -> source, <v> error marks removed; seg_id -> doc."""
    rows = CsvRows(read_text(path), file=path, delimiter="\t", quoting=csv.QUOTE_NONE)
    header = [h.strip() for h in next(rows, [])]
    for name in ("system", "seg_id", "source", "target"):
        if name not in header:
            raise InputError(f"no column '{name}' in the header", file=str(path), record="line 1", field=name)
    col = {name: i for i, name in enumerate(header)}
    seen: dict[tuple[str, str], tuple[str, int]] = {}  # key -> (text, line of its first row)
    docs: dict[str, dict[str, str]] = {}
    for row in rows:
        n = rows.line_num
        if not any(row):
            continue
        if len(row) < len(col):
            raise InputError(
                f"expected {len(header)} tab-separated fields, found {len(row)}",
                file=str(path),
                record=f"line {n}",
            )
        seg, system = row[col["seg_id"]].strip(), _system(row[col["system"]].strip())
        docs.setdefault(seg, {k: row[col[k]].strip() for k in ("doc", "doc_id") if k in col})
        for field, key in (("source", ("", seg)), ("target", (system, seg))):
            text = TAGS.sub("", row[col[field]]).strip()
            first = seen.setdefault(key, (text, n))
            if first[0] != text:
                raise InputError(
                    f"{field} text of segment {seg} differs from line {first[1]}",
                    file=str(path),
                    record=f"line {n}",
                    field=field,
                )
    return {k: text for k, (text, _) in seen.items()}, docs


def load(
    path: Path,
    *,
    pair: str | None = None,
    include_reference_systems: bool = False,
    segments: int | None = None,
    reference_system: str | None = "ref-A",
) -> ItemSet:
    """Options: ``pair`` ("ende" default, "zhen") when ``path`` is a folder; ``include_reference_systems``
    keeps the human translations (systems ``ref-*``) as answers; ``segments`` keeps the first N
    segments; ``reference_system`` names the system whose translation becomes Question.reference
    (None: no reference)."""
    texts_file, scores_file = _locate(path, pair)
    code = texts_file.stem.rsplit("_", 1)[-1]
    src_lang, tgt_lang = (code[:2], code[2:]) if len(code) == 4 else ("", "en")
    texts, docs = _texts(texts_file)

    lines = read_text(scores_file).split("\n")
    header = lines[0].split()
    for name in ("system", "mqm_avg_score", "seg_id"):
        if name not in header:
            raise InputError(
                f"no column '{name}' in the header", file=str(scores_file), record="line 1", field=name
            )
    col = {name: i for i, name in enumerate(header)}
    by_seg: dict[str, list[Answer]] = {}
    no_score = no_text = 0
    for n, line in enumerate(lines[1:], 2):
        parts = line.split()  # the file mixes tabs and spaces
        if not parts:
            continue
        if len(parts) != len(header):
            raise InputError(
                f"expected {len(header)} fields, found {len(parts)}",
                file=str(scores_file),
                record=f"line {n}",
            )
        system, value, seg = (parts[col[k]] for k in ("system", "mqm_avg_score", "seg_id"))
        system = _system(system)
        if system.startswith("ref-") and not include_reference_systems:
            continue
        if value == "None":
            no_score += 1
            continue
        if (system, seg) not in texts:
            no_text += 1
            continue
        score = to_number(value, file=scores_file, record=f"line {n}", field="mqm_avg_score")
        a = {
            "id": f"{code}/{seg}/{system}",
            "question_id": f"{code}/{seg}",
            "examinee": system,
            "text": texts[system, seg],
            "human_scores": {"mqm": score},
        }
        by_seg.setdefault(seg, []).append(
            build(
                Answer, a, file=texts_file, record=f"segment {seg} system {system}", rename={"text": "target"}
            )
        )
    if no_score or no_text:
        log.info(
            "%s: skipped %d answers without an MQM score and %d without a text",
            scores_file,
            no_score,
            no_text,
        )

    questions, answers = [], []
    for seg in sorted(by_seg, key=natural_key)[:segments]:
        q = {
            "id": f"{code}/{seg}",
            "text": texts[("", seg)],
            "task": "mt",
            "max_points": 100.0,
            "human_scale": "mqm",
            "language": tgt_lang,
            "reference": texts.get((reference_system, seg)) if reference_system else None,
            "meta": {"seg_id": seg, "source_language": src_lang, **docs[seg]},
        }
        questions.append(
            build(Question, q, file=texts_file, record=f"segment {seg}", rename={"text": "source"})
        )
        answers += by_seg[seg]
    return item_set(questions, answers, texts_file)
