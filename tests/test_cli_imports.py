"""A fast command line: ``knockout --help`` and ``knockout grade --help`` load neither scipy, scikit-learn,
matplotlib nor the web stack, and ``knockout --help`` no pydantic (timings: bench/cli_startup.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

HEAVY = ("scipy", "sklearn", "matplotlib", "fastapi", "uvicorn", "numpy")


def loaded(args: list[str], names: tuple[str, ...]) -> list[str]:
    """The modules of ``names`` that ``knockout ARGS`` has loaded when it ends."""
    code = (
        "import sys\n"
        "import knockout.cli._main as m\n"
        "from knockout.cli import register_extensions\n"
        "register_extensions(m.app)\n"
        f"sys.argv = ['knockout', *{args!r}]\n"
        "try:\n    m.app()\nexcept SystemExit:\n    pass\n"
        f"print('loaded:' + ','.join(n for n in {names!r} if n in sys.modules), file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("loaded:"), r.stderr
    return [n for n in last.removeprefix("loaded:").split(",") if n]


@pytest.mark.parametrize("args", [[], ["--help"], ["grade", "--help"], ["report", "--help"], ["sbs", "--help"]])
def test_cli_loads_no_heavy_module(args: list[str]) -> None:
    assert loaded(args, HEAVY) == []


@pytest.mark.parametrize("args", [[], ["--help"]])
def test_cli_start_up_loads_no_pydantic(args: list[str]) -> None:
    """``knockout --help`` builds no pydantic model (``knockout._bounds`` is imported by the commands that use
    it, 157 ms of start-up before); a command's own ``--help`` does load pydantic: typer 0.29 reads its
    parameters through pydantic's TypeAdapter."""
    assert loaded(args, ("pydantic", "knockout._bounds")) == []
