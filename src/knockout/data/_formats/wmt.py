"""WMT direct assessment (DA) scores in the mt-metrics-eval layout (google-research/mt-metrics-eval), with the
knockout thesis's filtering (Sandan 2025, section 4.1.1.2): identical translations of the same source
removed, only sources with at least four translations kept, optionally only some languages.

A test set folder (``wmt23/``) holds, for each language pair ``SRC-TGT``::

    sources/SRC-TGT.txt                      one source segment per line
    references/SRC-TGT.NAME.txt              a reference translation per line (NAME e.g. refA)
    system-outputs/SRC-TGT/SYSTEM.txt        one translation per line, aligned with the sources
    human-scores/SRC-TGT.SCORE.seg.score     "SYSTEM SCORE" lines: a block per system, one line per
                                             segment in order; None where a segment was not scored
    documents/SRC-TGT.docs                   "DOMAIN DOCNAME" per line (optional)

The path may be a test set folder or a folder of test sets (``mt-metrics-eval-v2/``).  One question per
source segment (id ``<testset>/<pair>/<line>``, ``task="mt"``, ``max_points=100``, ``language`` = the
target language, ``exam_id`` = ``<testset>/<pair>`` so that ``--level exam`` is system level per pair),
one answer per system (id ``<question>/<system>``, ``examinee`` = system, ``human_scores`` =
``{SCORE: value}``).  Translations without a score, and empty ones, are skipped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knockout.data._io import build, item_set, read_text, to_number
from knockout.data._records import Answer, ItemSet, Question
from knockout.errors import ConfigError, InputError

log = logging.getLogger(__name__)

LAYOUT = ("sources", "system-outputs", "human-scores")
#: Human score files on the 0-100 DA scale, in the order ``human="auto"`` tries them: WMT23's DA+SQM,
#: WMT24's ESA, the raw DA scores of earlier years, WMT22's Appraise DA.
DA_SCORES = ("da-sqm", "esa", "wmt-raw", "wmt-appraise", "da", "raw")
#: The thesis's languages (those the Llama models support).
THESIS_LANGUAGES = "en,de,fr,it,pt,hi,es,th"
DUPLICATES = ("first", "mean", "drop", "keep")


def is_testset(path: Path) -> bool:
    return path.is_dir() and all((path / d).is_dir() for d in LAYOUT)


def sniff(path: Path) -> bool:
    """A test set folder (sources/, system-outputs/, human-scores/), or a folder of them."""
    if not path.is_dir():
        return False
    return is_testset(path) or any(is_testset(p) for p in path.iterdir() if p.is_dir())


def _split(value: str | None) -> list[str] | None:
    return None if value is None else [v.strip() for v in value.split(",") if v.strip()]


def _lines(path: Path) -> list[str]:
    """A file's lines (a final newline does not make an extra line)."""
    text = read_text(path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln.rstrip("\r") for ln in lines]


@dataclass
class _Translation:
    system: str
    text: str
    score: float
    same: list[tuple[str, float]] = field(default_factory=list)  # identical translations by other systems


def _scores(path: Path, n: int, systems: set[str]) -> dict[str, list[float | None]]:
    """system -> its n segment scores (None: not scored) from a ``.seg.score`` file."""
    blocks: dict[str, list[float | None]] = {}
    for k, line in enumerate(_lines(path), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2:
            raise InputError(f"expected 'SYSTEM SCORE', found {len(parts)} fields", file=str(path),
                             record=f"line {k}")
        system, value = parts
        x = None if value == "None" else to_number(value, file=path, record=f"line {k}", field="score")
        blocks.setdefault(system, []).append(x)
    for system, got in blocks.items():
        if len(got) != n:
            raise InputError(f"system {system} has {len(got)} segment scores; the source has {n} segments",
                             file=str(path), record=f"system {system}")
        if system not in systems:
            raise InputError(f"system {system} has scores but no output file system-outputs/.../{system}.txt",
                             file=str(path), record=f"system {system}")
    return blocks


def _pick_score(testset: Path, pair: str, human: str) -> Path | None:
    folder = testset / "human-scores"
    names = DA_SCORES if human == "auto" else (human,)
    for name in names:
        p = folder / f"{pair}.{name}.seg.score"
        if p.is_file():
            return p
    return None


def _pairs(testset: Path) -> list[str]:
    return sorted(p.stem for p in (testset / "sources").glob("*.txt"))


def _load_pair(testset: Path, pair: str, scores_file: Path, *, include_references: bool, reference: str | None,
               duplicates: str, min_translations: int, segments: int | None
               ) -> tuple[list[Question], list[Answer], dict[str, int]]:
    name = testset.name
    score_name = scores_file.name.removeprefix(f"{pair}.").removesuffix(".seg.score")
    src_lang, _, tgt_lang = pair.partition("-")
    sources = _lines(testset / "sources" / f"{pair}.txt")
    n = len(sources)
    ref_dir = testset / "references"
    refs = {p.name.removeprefix(f"{pair}.").removesuffix(".txt"): p
            for p in sorted(ref_dir.glob(f"{pair}.*.txt"))} if ref_dir.is_dir() else {}
    ref_name = None
    if reference == "auto":
        ref_name = "refA" if "refA" in refs else next(iter(refs), None)
    elif reference is not None:
        if reference not in refs:
            raise ConfigError(f"{testset}: no reference '{reference}' for {pair} (found: {', '.join(refs) or 'none'})")
        ref_name = reference
    ref_lines = _lines(refs[ref_name]) if ref_name else None
    if ref_lines is not None and len(ref_lines) != n:
        raise InputError(f"{len(ref_lines)} lines; the source has {n}", file=str(refs[ref_name or ""]))
    docs_file = testset / "documents" / f"{pair}.docs"
    docs = _lines(docs_file) if docs_file.is_file() else None
    if docs is not None and len(docs) != n:
        raise InputError(f"{len(docs)} lines; the source has {n}", file=str(docs_file))

    out_dir = testset / "system-outputs" / pair
    outputs = {p.stem: p for p in sorted(out_dir.glob("*.txt"))} if out_dir.is_dir() else {}
    scores = _scores(scores_file, n, set(outputs))
    texts: dict[str, list[str]] = {}
    for system in scores:
        lines = _lines(outputs[system])
        if len(lines) != n:
            raise InputError(f"{len(lines)} lines; the source has {n}", file=str(outputs[system]))
        texts[system] = lines

    counts = {"unscored": 0, "empty": 0, "duplicates": 0, "small_groups": 0, "references": 0}
    questions: list[Question] = []
    answers: list[Answer] = []
    for i in range(n):
        group: dict[str, _Translation] = {}  # translation text -> the one kept
        dropped: set[str] = set()
        for system in sorted(scores):
            if system in refs and not include_references:
                counts["references"] += 1
                continue
            value = scores[system][i]
            text = texts[system][i].strip()
            if value is None:
                counts["unscored"] += 1
                continue
            if not text:
                counts["empty"] += 1
                continue
            first = group.get(text)
            if first is None or duplicates == "keep":
                group[text if first is None else f"{text}\x00{system}"] = _Translation(system, text, value)
                continue
            counts["duplicates"] += 1
            first.same.append((system, value))
            if duplicates == "drop":
                dropped.add(text)
        kept = [t for key, t in group.items() if key.split("\x00")[0] not in dropped]
        if duplicates == "drop":
            counts["duplicates"] += len(group) - len(kept)
        if len(kept) < min_translations:
            counts["small_groups"] += 1
            continue
        qid = f"{name}/{pair}/{i + 1}"
        where = f"{pair} segment {i + 1}"
        meta: dict[str, Any] = {"testset": name, "pair": pair, "segment": i + 1, "source_language": src_lang}
        if docs is not None:
            domain, _, doc = docs[i].partition(" ")
            meta |= {"domain": domain.strip(), "doc": doc.strip()}
        q = {"id": qid, "text": sources[i], "task": "mt", "max_points": 100.0, "language": tgt_lang,
             "human_scale": "points" if score_name in DA_SCORES else score_name, "exam_id": f"{name}/{pair}",
             "reference": ref_lines[i] if ref_lines is not None and ref_lines[i].strip() else None, "meta": meta}
        questions.append(build(Question, q, file=testset / "sources" / f"{pair}.txt", record=where,
                               rename={"text": "source"}))
        for t in kept:
            score = t.score
            extra: dict[str, Any] = {}
            if t.same:
                extra["same_as"] = {s: v for s, v in t.same}
                if duplicates == "mean":
                    score = (t.score + sum(v for _, v in t.same)) / (1 + len(t.same))
            a = {"id": f"{qid}/{t.system}", "question_id": qid, "examinee": t.system, "text": t.text,
                 "human_scores": {score_name: score}, "meta": extra}
            answers.append(build(Answer, a, file=scores_file, record=f"{where} system {t.system}"))
        if segments is not None and len(questions) >= segments:
            break
    return questions, answers, counts


def load(
    path: Path,
    *,
    testsets: str | None = None,
    pairs: str | None = None,
    languages: str | None = None,
    human: str = "auto",
    include_references: bool = False,
    reference: str | None = "auto",
    duplicates: str = "first",
    min_translations: int = 4,
    segments: int | None = None,
) -> ItemSet:
    """Options: ``testsets`` (comma-separated, when ``path`` holds several; default all), ``pairs``
    (``en-de,de-en``; default every pair with a DA score file), ``languages`` (keep a pair only when both
    its languages are listed; the thesis: ``en,de,fr,it,pt,hi,es,th``), ``human`` (the score file's
    name, ``human-scores/PAIR.NAME.seg.score``; ``auto``: the first of da-sqm, esa, wmt-raw,
    wmt-appraise, da, raw), ``include_references`` (keep human translations scored as systems),
    ``reference`` (which reference becomes Question.reference: ``auto`` = refA or the first, a name, or
    None), ``duplicates`` (identical translations of one source: ``first`` keeps the first system's in
    name order, ``mean`` keeps it with the mean of their scores, ``drop`` removes them all, ``keep``
    keeps every copy), ``min_translations`` (4: sources left with fewer translations are dropped),
    ``segments`` (the first N kept sources per pair)."""
    if duplicates not in DUPLICATES:
        raise ConfigError(f"option duplicates must be one of {', '.join(DUPLICATES)} (got {duplicates!r})")
    if min_translations < 1 or (segments is not None and segments < 1):
        raise ConfigError("options min_translations and segments must be >= 1")
    if reference is not None and reference.lower() == "none":
        reference = None
    if is_testset(path):
        sets = [path]
    else:
        sets = sorted(p for p in path.iterdir() if is_testset(p))
        wanted = _split(testsets)
        if wanted is not None:
            missing = sorted(set(wanted) - {p.name for p in sets})
            if missing:
                raise ConfigError(f"{path}: no test set {', '.join(missing)} (found: "
                                  f"{', '.join(p.name for p in sets) or 'none'})")
            sets = [p for p in sets if p.name in wanted]
    want_pairs, langs = _split(pairs), _split(languages)
    questions: list[Question] = []
    answers: list[Answer] = []
    totals: dict[str, int] = {}
    found = 0
    for ts in sets:
        for pair in _pairs(ts):
            if want_pairs is not None and pair not in want_pairs:
                continue
            if langs is not None and not all(code in langs for code in pair.split("-")):
                continue
            scores_file = _pick_score(ts, pair, human)
            if scores_file is None:
                if want_pairs is not None or human != "auto":
                    name = human if human != "auto" else "<" + "|".join(DA_SCORES) + ">"
                    raise InputError(f"no human score file {pair}.{name}.seg.score", file=str(ts / "human-scores"),
                                     record=pair)
                continue
            found += 1
            qs, ans, counts = _load_pair(ts, pair, scores_file, include_references=include_references,
                                         reference=reference, duplicates=duplicates,
                                         min_translations=min_translations, segments=segments)
            questions += qs
            answers += ans
            for k, v in counts.items():
                totals[k] = totals.get(k, 0) + v
    if not found:
        raise InputError("no language pair with a DA score file (options testsets, pairs, languages, human)",
                         file=str(path))
    log.info("%s: %d sources, %d translations kept; left out: %s", path, len(questions), len(answers),
             ", ".join(f"{v} {k}" for k, v in totals.items()))
    return item_set(questions, answers, path)
