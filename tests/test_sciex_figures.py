"""SciEx figures: caption bar (pixels), stacking, PDF rendering, content-addressed files, figures to judges."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from knockout.data import ItemSet, Question, load_items
from knockout.errors import ConfigError, InputError
from knockout.sciex import caption, prepare_figures, render_pdf, resolve_mode, stack, with_figures
from knockout.sciex._figures import BAR_HEIGHT, figure_names

EXAMPLE = Path(__file__).resolve().parents[1] / "src" / "knockout" / "examples" / "sciex" / "cs-basics-en"
RED = (220, 20, 20)


def test_caption_draws_a_black_bar_with_white_text_below_the_unchanged_image() -> None:
    img = Image.new("RGB", (300, 80), RED)
    out = caption(img, "Figure: img/f1.png")
    assert out.size == (300, 80 + BAR_HEIGHT)
    px = np.asarray(out)
    assert (px[:80] == RED).all()  # the figure itself is untouched
    bar = px[80:]
    dark = bar.max(axis=2) < 40
    light = bar.min(axis=2) > 215
    assert dark.mean() > 0.8  # a black bar ...
    assert light.sum() > 50  # ... with white text in it
    xs = np.nonzero(light.any(axis=0))[0]  # the text is centred, away from the edges
    assert xs.min() > 20 and xs.max() < 280 and xs.min() < 150 < xs.max()


def test_caption_wider_than_the_figure_widens_the_canvas() -> None:
    img = Image.new("RGB", (40, 40), RED)
    out = caption(img, "Figure: a/rather/long/path/to/the/figure.png")
    assert out.width > 40 and out.height == 40 + BAR_HEIGHT
    left = (out.width - 40) // 2
    assert (np.asarray(out)[:40, left:left + 40] == RED).all()
    assert out.getpixel((0, 0)) == (255, 255, 255)  # white beside the figure


def test_stack_puts_images_one_above_the_other_with_padding() -> None:
    a = Image.new("RGB", (100, 50), RED)
    b = Image.new("RGB", (60, 200), (20, 20, 220))
    out = stack([a, b])
    gap = int(200 * 0.05)
    assert out.size == (110, 50 + 200 + 3 * gap)
    assert out.getpixel(((110 - 100) // 2 + 5, gap + 5)) == RED
    assert out.getpixel(((110 - 60) // 2 + 5, gap + 50 + gap + 5)) == (20, 20, 220)
    assert out.getpixel((2, 2)) == (0, 0, 0)  # padding (black, as the authors' combine_images)


def test_pdf_figure_is_rendered_to_an_image() -> None:
    pages = render_pdf(EXAMPLE / "figures" / "bst.pdf")
    assert len(pages) == 1
    page = pages[0]
    assert page.mode == "RGB" and page.width >= 1000  # 300 dpi
    colours = page.convert("L").getextrema()
    assert colours[0] < 50 and colours[1] > 200  # black drawing on white


def test_bad_pdf_is_an_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "x.pdf"
    bad.write_bytes(b"not a pdf")
    with pytest.raises(InputError, match=r"x\.pdf"):
        render_pdf(bad)


def test_prepared_figures_are_written_once_content_addressed(tmp_path: Path) -> None:
    png, pdf = str(EXAMPLE / "figures" / "graph.png"), str(EXAMPLE / "figures" / "bst.pdf")
    names = ["figures/graph.png", "figures/bst.pdf"]
    sep = prepare_figures([png, pdf], names, "separate", tmp_path)
    assert len(sep.images) == 2 and not sep.left_out
    first = {p: Path(p).stat().st_mtime_ns for p in sep.images}
    again = prepare_figures([png, pdf], names, "separate", tmp_path)
    assert again == sep and {p: Path(p).stat().st_mtime_ns for p in again.images} == first  # not rewritten
    stacked = prepare_figures([png, pdf], names, "stacked", tmp_path)
    assert len(stacked.images) == 1 and stacked.images[0] not in sep.images
    with Image.open(stacked.images[0]) as im:
        assert im.height > 2 * BAR_HEIGHT
    none = prepare_figures([png, pdf], names, "none", tmp_path)
    assert none.images == () and none.left_out == tuple(names)
    other = prepare_figures([png], ["elsewhere.png"], "separate", tmp_path)  # another caption: another file
    assert other.images[0] not in sep.images


def test_figure_names_come_from_the_question_json() -> None:
    text = json.dumps({"Description": "d", "Figures": ["img/a.png"], "Subquestions": [{"Figures": ["img/b.pdf"]}]})
    assert figure_names(text, ["/x/img/a.png", "/x/img/b.pdf"]) == ["img/a.png", "img/b.pdf"]
    assert figure_names("plain text", ["/x/img/a.png"]) == ["a.png"]


def test_modes() -> None:
    assert resolve_mode("auto", True) == "separate"
    assert resolve_mode("auto", False) == "none"
    with pytest.raises(ConfigError, match="figures mode"):
        resolve_mode("sideways", True)


def test_items_for_a_multimodal_judge_carry_captioned_figures(tmp_path: Path) -> None:
    items = load_items(EXAMPLE)
    seen, left_out = with_figures(items, "separate", tmp_path)
    assert left_out == 0
    q2 = seen.questions["cs-basics-en/2"]
    assert len(q2.images) == 1 and Path(q2.images[0]).parent == tmp_path
    with Image.open(q2.images[0]) as im, Image.open(items.questions["cs-basics-en/2"].images[0]) as orig:
        assert im.height == orig.height + BAR_HEIGHT  # the path is drawn below the figure
    assert [a.id for a in seen] == [a.id for a in items]
    _, dropped = with_figures(items, "none", tmp_path)
    assert dropped == 2


def test_question_without_local_files_is_left_as_it_is(tmp_path: Path) -> None:
    q = Question(id="q", text="t", images=["https://example.org/a.png"])
    out, _ = with_figures(ItemSet([q], []), "separate", tmp_path)
    assert out.questions["q"].images == ["https://example.org/a.png"]
