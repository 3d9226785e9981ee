"""Exam figures as SciEx hands them to models: captioned, stacked, PDFs rendered.

Dinh et al. (2024, section 3.1) pass figures to multimodal models "by mentioning the image caption
within the question text, and add the text caption to the image"; models that take one image (Llava)
get the figures "concatenated into one, with blank padding around the images as separators"; text-only
models get the question without its figures.  The authors' code (TuAnh23/SciEx ``utils.py``) does it
this way, and so does this module (with Pillow, and pypdfium2 instead of PyMuPDF):

* :func:`caption` — ``add_title``: a 50-pixel black bar under the image with ``Figure: <path>`` in white,
  20-point type, centred; ``<path>`` is the figure's path as the question's JSON gives it.  Where the
  text is wider than the image, knockout widens the canvas (white beside the image) so that the path
  stays readable (the authors' text would be cut off).
* :func:`stack` — ``combine_images``: the images one above the other, centred, on a black canvas 10%
  wider than the widest, with a gap of 5% of the tallest image's height above, between and below.
* :func:`render_pdf` — ``pdf2pil``: each page of a PDF figure rendered at 300 dpi; every page gets the
  PDF's caption.

:func:`prepare_figures` writes the images a request sends once, content-addressed (the file name is a
hash of the source files' contents and of what was done to them) under a folder (the user cache by
default), so the same figures always give the same file, the same bytes and the same cache key.

Modes (``--figures``): ``none`` (text-only: the figures are left out and counted), ``separate``
(every figure captioned, one image each), ``stacked`` (captioned, then stacked into one image), ``auto``
(``separate`` for a model that accepts images, else ``none``).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from knockout.data._records import ItemSet, Question
from knockout.errors import ConfigError, InputError

FIGURE_MODES = ("auto", "none", "separate", "stacked")
#: Bump when the drawing changes: it is part of every prepared file's name.
DRAWING_VERSION = 1
BAR_HEIGHT = 50
FONT_SIZE = 20
PDF_DPI = 300


def _pil() -> Any:
    try:
        from PIL import Image
    except ImportError:
        raise ConfigError("exam figures need Pillow: pip install 'knockout[sciex]'") from None
    return Image


def _font(size: int) -> Any:
    from PIL import ImageFont

    return ImageFont.load_default(size=size)


def resolve_mode(mode: str, supports_images: bool) -> str:
    """``auto`` made concrete for a model; an unknown mode is a ConfigError."""
    if mode not in FIGURE_MODES:
        raise ConfigError(f"unknown figures mode '{mode}' (known: {', '.join(FIGURE_MODES)})")
    if mode == "auto":
        return "separate" if supports_images else "none"
    return mode


def caption(img: Any, text: str) -> Any:
    """``img`` with a black bar at the bottom holding ``text`` in white (SciEx's ``add_title``)."""
    image_mod = _pil()
    from PIL import ImageDraw

    img = img.convert("RGB")
    font = _font(FONT_SIZE)
    probe = ImageDraw.Draw(image_mod.new("RGB", (1, 1)))
    text_w = int(probe.textlength(text, font=font)) + 1
    width = max(img.width, text_w + 20)
    out = image_mod.new("RGB", (width, img.height + BAR_HEIGHT), color="white")
    out.paste(img, ((width - img.width) // 2, 0))
    out.paste(image_mod.new("RGB", (width, BAR_HEIGHT), color="black"), (0, img.height))
    draw = ImageDraw.Draw(out)
    draw.text(((width - text_w) // 2, img.height + (BAR_HEIGHT - FONT_SIZE) // 2), text, fill="white", font=font)
    return out


def stack(images: Sequence[Any]) -> Any:
    """The images one above the other with padding (SciEx's ``combine_images``)."""
    image_mod = _pil()
    if not images:
        raise ValueError("nothing to stack")
    width = max(int(im.width * 1.1) for im in images)
    gap = max(int(im.height * 0.05) for im in images)
    height = sum(im.height for im in images) + gap * (len(images) + 1)
    out = image_mod.new("RGB", (width, height))
    y = gap
    for im in images:
        out.paste(im.convert("RGB"), ((width - im.width) // 2, y))
        y += im.height + gap
    return out


def _pdfium() -> Any:
    try:
        import pypdfium2 as pdfium
    except ImportError:
        raise ConfigError("PDF figures need pypdfium2: pip install 'knockout[sciex]'") from None
    return pdfium


def _open_pdf(path: str | Path) -> Any:
    pdfium = _pdfium()
    try:
        return pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        raise InputError(f"cannot read the PDF figure ({exc})", file=str(path)) from None


def render_pdf(path: str | Path, dpi: int = PDF_DPI) -> list[Any]:
    """Every page of a PDF as an RGB image (pypdfium2)."""
    pdf = _open_pdf(path)
    try:
        pages = []
        for i in range(len(pdf)):
            page = pdf[i]
            bitmap = page.render(scale=dpi / 72)
            pages.append(bitmap.to_pil().convert("RGB"))
            page.close()
        return pages
    finally:
        pdf.close()


def page_count(path: str | Path) -> int:
    """Pages of a PDF figure (1 for an image file)."""
    if not str(path).lower().endswith(".pdf"):
        return 1
    pdf = _open_pdf(path)
    try:
        return len(pdf)
    finally:
        pdf.close()


def load_figure(path: str | Path) -> list[Any]:
    """The images of one figure file: a PDF's pages, or the image itself."""
    if str(path).lower().endswith(".pdf"):
        return render_pdf(path)
    image_mod = _pil()
    try:
        with image_mod.open(path) as im:
            im.load()
            return [im.convert("RGB")]
    except OSError as exc:
        raise InputError(f"cannot read the figure ({exc})", file=str(path)) from None


def figure_names(question_text: str, images: Sequence[str]) -> list[str]:
    """The path of each figure as the question shows it: the ``Figures`` of a SciEx question's JSON (the
    question and its subquestions, in the order the loader reads them), else each file's name."""
    names: list[str] = []
    try:
        obj = json.loads(question_text)
    except ValueError:
        obj = None
    if isinstance(obj, dict):
        names = [str(f) for f in obj.get("Figures") or []]
        for sub in obj.get("Subquestions") or []:
            if isinstance(sub, dict):
                names += [str(f) for f in sub.get("Figures") or []]
    if len(names) != len(images):
        names = [os.path.basename(p) for p in images]
    return names


def default_folder() -> Path:
    from knockout.judges._models import cache_dir

    return cache_dir() / "figures"


def _digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _save(img: Any, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        img.save(tmp, format="PNG")
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class Prepared:
    """What a request sends for one question's figures: the files, and the figures left out."""

    images: tuple[str, ...]
    left_out: tuple[str, ...] = ()


def prepare_figures(images: Sequence[str], names: Sequence[str], mode: str, folder: Path | None = None) -> Prepared:
    """The figures of one question as ``mode`` (concrete, not ``auto``) wants them sent; files written once
    under ``folder`` (default: the user cache's ``figures``), named by a hash of their content and making."""
    if not images:
        return Prepared(())
    if mode == "none":
        return Prepared((), tuple(names))
    local = [(p, n) for p, n in zip(images, names, strict=True) if os.path.isfile(p)]
    if len(local) != len(images):  # URLs: sent as they are
        return Prepared(tuple(images))
    folder = folder or default_folder()
    key = hashlib.sha256(json.dumps(
        {"v": DRAWING_VERSION, "mode": mode, "figures": [[_digest(p), n] for p, n in local]}, sort_keys=True
    ).encode()).hexdigest()[:24]
    if mode == "stacked":
        target = folder / f"{key}-stacked.png"
        if not target.is_file():
            _save(stack([caption(im, f"Figure: {n}") for p, n in local for im in load_figure(p)]), target)
        return Prepared((str(target),))
    if mode != "separate":
        raise ConfigError(f"unknown figures mode '{mode}' (known: {', '.join(FIGURE_MODES)})")
    out: list[str] = []
    for i, (p, n) in enumerate(local):
        targets = [folder / f"{key}-{i}-{j}.png" for j in range(page_count(p))]
        if not all(t.is_file() for t in targets):
            for target, page in zip(targets, load_figure(p), strict=True):
                _save(caption(page, f"Figure: {n}"), target)
        out += [str(t) for t in targets]
    return Prepared(tuple(out))


def question_figures(question: Question, mode: str, folder: Path | None = None) -> Prepared:
    """:func:`prepare_figures` for one question's images, captioned with the paths its text gives."""
    return prepare_figures(question.images, figure_names(question.text, question.images), mode, folder)


def with_figures(items: ItemSet, mode: str, folder: Path | None = None) -> tuple[ItemSet, int]:
    """``items`` whose questions carry their figures as ``mode`` (concrete) sends them; also how many
    figures were left out.  The answers and every id are unchanged."""
    questions = []
    left_out = 0
    for q in items.questions.values():
        if not q.images:
            questions.append(q)
            continue
        prepared = question_figures(q, mode, folder)
        left_out += len(prepared.left_out)
        questions.append(q.model_copy(update={"images": list(prepared.images)}))
    return ItemSet(questions, items.answers, source=items.source), left_out
