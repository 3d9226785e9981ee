"""Confined inputs: image and file paths stay inside the data folder (or an allowed root), URLs only on
request, no FIFO/device/folder read as a file (and no hang), files over the size bound refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from knockout.data import detect_format, load_items
from knockout.data._io import read_text
from knockout.errors import ConfigError
from tests.test_data_loaders import FIX, jsonl, raises_input

Q = {"type": "question", "id": "q1", "text": "What is shown?", "max_points": 2}
A = {"type": "answer", "id": "a1", "question_id": "q1", "text": "A red dot.", "human_score": 1}
PNG = FIX / "sciex/tiny_exam/img/f1.png"


def knockout(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "knockout.cli", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture()
def layout(tmp_path: Path) -> dict[str, Path]:
    """data/ (the exam, an image, a symlink out, a symlink in) and secret/ beside it."""
    data, secret = tmp_path / "data", tmp_path / "secret"
    data.mkdir()
    secret.mkdir()
    shutil.copy(PNG, data / "fig.png")
    shutil.copy(PNG, secret / "private.png")
    (data / "out.png").symlink_to(secret / "private.png")
    (data / "in.png").symlink_to(data / "fig.png")
    return {"data": data, "secret": secret}


def exam(folder: Path, images: list[Any], name: str = "exam.jsonl") -> Path:
    return jsonl(folder / name, {**Q, "images": images}, A)


def test_images_inside_the_data_folder_load(layout: dict[str, Path]) -> None:
    data = layout["data"]
    items = load_items(exam(data, ["fig.png", "in.png", str(data / "fig.png"), "./sub/../fig.png"]))
    assert items.questions["q1"].images == [str(data / "fig.png"), str(data / "in.png")] + [str(data / "fig.png")] * 2


@pytest.mark.parametrize(
    ("image", "why"),
    [
        ("../secret/private.png", "outside the data folder"),
        ("SECRET_ABS", "outside the data folder"),
        ("out.png", "outside the data folder"),  # a symlink that leads out
        ("/etc/passwd", "outside the data folder"),
        ("https://example.org/x.png", "allow_urls=true"),
        ("data:image/png;base64,AAAA", "allow_urls=true"),
        ("file:///etc/passwd", "allow_urls=true"),
    ],
)
def test_escaping_images_are_refused(layout: dict[str, Path], image: str, why: str) -> None:
    image = image.replace("SECRET_ABS", str(layout["secret"] / "private.png"))
    path = exam(layout["data"], ["fig.png", image])
    with raises_input("exam.jsonl", "record line 1", "field 'images'", why):
        load_items(path)


def test_allow_root_and_allow_urls(layout: dict[str, Path]) -> None:
    data, secret = layout["data"], layout["secret"]
    path = exam(data, ["../secret/private.png", "out.png"])
    items = load_items(path, allow_root=str(secret))
    assert items.questions["q1"].images == [str(secret / "private.png"), str(data / "out.png")]
    assert load_items(path, allow_root=[secret]).questions["q1"].images  # a list of roots from Python
    with pytest.raises(ConfigError, match="allow_root: no such folder"):
        load_items(path, allow_root=str(data / "nope"))
    url = exam(data, ["https://example.org/x.png"], "urls.jsonl")
    assert load_items(url, allow_urls="true").questions["q1"].images == ["https://example.org/x.png"]
    with pytest.raises(ConfigError, match="allow_urls must be bool"):
        load_items(url, allow_urls="perhaps")


def test_cli_allow_root_and_refusal(layout: dict[str, Path], tmp_path: Path) -> None:
    path = exam(layout["data"], ["../secret/private.png"])
    store = tmp_path / "s.db"
    res = knockout("grade", str(path), "--judge", "scripted", "-o", str(store), "--quiet", "--json")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert all(p in res.stderr for p in ("exam.jsonl", "record line 1", "field 'images'", "outside the data folder"))
    assert not store.exists()
    res = knockout("grade", str(path), "--judge", "scripted", "-o", str(store), "--quiet", "--json",
                   "--data-opt", f"allow_root={layout['secret']}", "--figures", "none")  # a text-only judge
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["valid"] == 1


def sciex_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "exam" / "tiny_exam"
    shutil.copytree(FIX / "sciex/tiny_exam", folder)
    return folder


def test_sciex_figure_escaping_is_refused(tmp_path: Path) -> None:
    folder = sciex_copy(tmp_path)
    (tmp_path / "private.png").write_bytes(PNG.read_bytes())
    exam_file = folder / "tiny_exam_en.json"
    data = json.loads(exam_file.read_text())
    data["Questions"][0]["Figures"] = ["../../private.png"]
    exam_file.write_text(json.dumps(data))
    with raises_input("tiny_exam_en.json", "record Index", "field 'Figures'", "outside the data folder"):
        load_items(folder)
    assert load_items(folder, allow_root=tmp_path).questions  # explicitly allowed


def test_sciex_answer_file_symlinked_out_is_refused(tmp_path: Path) -> None:
    folder = sciex_copy(tmp_path)
    answers = sorted((folder / "answers").iterdir())
    outside = tmp_path / "elsewhere.json"
    shutil.move(answers[0], outside)
    answers[0].symlink_to(outside)
    with raises_input(answers[0].name, "outside the data folder"):
        load_items(folder)


def test_fifo_device_and_folder_are_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "exam.jsonl"
    os.mkfifo(fifo)
    for fmt in ("auto", "jsonl", "csv"):
        with raises_input("exam.jsonl", "not a regular file"):
            load_items(fifo, fmt)
    with raises_input("exam.jsonl", "not a regular file"):
        detect_format(fifo)
    with raises_input("/dev/zero", "not a regular file"):
        load_items("/dev/zero", "jsonl")
    with raises_input("not a regular file"):
        read_text(Path("/dev/zero"))
    folder = tmp_path / "folder.jsonl"
    folder.mkdir()
    with raises_input("folder.jsonl", "is a folder; expected a file"):
        load_items(folder, "jsonl")


def test_fifo_inside_a_folder_or_as_image_does_not_hang(tmp_path: Path) -> None:
    folder = sciex_copy(tmp_path)
    answer = sorted((folder / "answers").iterdir())[0]
    answer.unlink()
    os.mkfifo(answer)
    with raises_input(answer.name, "not a regular file"):
        load_items(folder)
    data = tmp_path / "d"
    data.mkdir()
    os.mkfifo(data / "fig.png")
    with raises_input("exam.jsonl", "field 'images'", "not a regular file"):
        load_items(exam(data, ["fig.png"]))
    with raises_input("exam.jsonl", "field 'images'", "not a regular file"):
        load_items(exam(data, ["/dev/zero"]), allow_root="/dev")


def test_cli_fifo_exits_2_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "exam.jsonl"
    os.mkfifo(fifo)
    res = knockout("grade", str(fifo), "--judge", "scripted", "-o", str(tmp_path / "s.db"), "--quiet")
    assert res.returncode == 2 and "not a regular file" in res.stderr and "Traceback" not in res.stderr
    res = knockout("grade", "/dev/zero", "--format", "jsonl", "--judge", "scripted", "-o", str(tmp_path / "s.db"))
    assert res.returncode == 2 and "not a regular file" in res.stderr


def test_size_bound(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "big.jsonl", Q, *({**A, "id": f"a{i}"} for i in range(50)))
    assert path.stat().st_size > 2048
    with raises_input("big.jsonl", "over the", "max_file_mb"):
        load_items(path, max_file_mb=0.002)
    assert len(load_items(path, max_file_mb="1")) == 50
    with pytest.raises(ConfigError, match="max_file_mb must be a number > 0"):
        load_items(path, max_file_mb=0)
    img = exam(tmp_path, ["big.png"], "img.jsonl")
    (tmp_path / "big.png").write_bytes(b"\x89PNG" + bytes(5000))
    with raises_input("img.jsonl", "field 'images'", "over the"):
        load_items(img, max_file_mb=0.004)
    res = knockout("grade", str(path), "--judge", "scripted", "--data-opt", "max_file_mb=0.002",
                   "-o", str(tmp_path / "s.db"))
    assert res.returncode == 2 and "over the" in res.stderr


def test_unknown_common_option_hint(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="known: columns, delimiter, allow_root, allow_urls, max_file_mb"):
        load_items(FIX / "tiny.csv", allow_rot="x")
