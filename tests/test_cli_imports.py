"""A fast command line: ``knockout --help`` and ``knockout grade --help`` load neither scipy, scikit-learn,
matplotlib nor the web stack (timings: bench/cli_startup.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

HEAVY = ("scipy", "sklearn", "matplotlib", "fastapi", "uvicorn", "numpy")


@pytest.mark.parametrize("args", [[], ["--help"], ["grade", "--help"], ["report", "--help"], ["sbs", "--help"]])
def test_cli_loads_no_heavy_module(args: list[str]) -> None:
    code = (
        "import sys\n"
        "import knockout.cli._main as m\n"
        "from knockout.cli import register_extensions\n"
        "register_extensions(m.app)\n"
        f"sys.argv = ['knockout', *{args!r}]\n"
        "try:\n    m.app()\nexcept SystemExit:\n    pass\n"
        f"print(','.join(n for n in {HEAVY!r} if n in sys.modules), file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.stderr.strip().splitlines()[-1:] in ([], [""]), r.stderr
