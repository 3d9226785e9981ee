"""Where the engine sends the requests it did not find in the cache: an *executor*.

The engine keeps everything that must stay exact in the driver (cache look-ups, leases, storing each
reply the moment it arrives, parsing, retries, accounting); an executor only turns one request into one
completion, somewhere:

* :class:`LocalExecutor` (default): the judge's own ``complete`` in this process;
* :class:`knockout.engine._ray.RayExecutor` (``--executor ray[://ADDRESS]``): Ray actors that each hold
  a judge (an embedded GGUF per worker, or a client of an OpenAI-compatible endpoint per worker);
* :class:`knockout.engine._batch.BatchExecutor`: chosen by a judge that talks to a provider's batch API
  (``openai-batch``, ``anthropic-batch``): the requests of a wave become one batch job.

An executor spec is ``local``, ``ray``, ``ray://HOST:PORT`` (Ray client) or ``ray:auto``, with options
after ``?`` (``ray?workers=2&cpus=1``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from knockout.engine._events import Info, Observer
from knockout.errors import ConfigError
from knockout.judges._base import Completion, Judge, JudgeRequest
from knockout.judges._options import parse_query

if TYPE_CHECKING:
    pass

T = TypeVar("T")

_JOBS: queue.SimpleQueue[tuple[Callable[[], Any], asyncio.AbstractEventLoop, asyncio.Future[Any]]] = \
    queue.SimpleQueue()
_THREADS: list[threading.Thread] = []
_POOL_LOCK = threading.Lock()
#: one entry per computation running in a compute thread
_RUNNING: list[int] = []


def compute_threads() -> int:
    """Threads of this process's compute pool: every core but one (the event loop's), at least one."""
    return max(1, (os.cpu_count() or 1) - 1)


def computations_in_flight() -> int:
    """Computations still running in the compute pool (a command stopped by a signal exits at once when there are,
    as it does with llama.cpp calls: nothing waits for the computation's end)."""
    return len(_RUNNING)


def _settle(fut: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if not fut.done():
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)


def _serve() -> None:
    while True:
        job, loop, fut = _JOBS.get()
        if fut.cancelled():  # its run stopped before it started
            continue
        _RUNNING.append(1)
        try:
            value, ok = job(), True
        except BaseException as exc:  # handed to the awaiting task
            value, ok = exc, False
        finally:
            _RUNNING.pop()
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits for it
            loop.call_soon_threadsafe(_settle, fut, ok, value)


def _start_pool() -> None:
    """The compute threads, started on first use: daemons, so a run stopped by a signal exits without waiting for
    a computation in progress (a pool of ``concurrent.futures`` would be joined at exit)."""
    with _POOL_LOCK:
        while len(_THREADS) < compute_threads():
            t = threading.Thread(target=_serve, name=f"knockout-compute-{len(_THREADS)}", daemon=True)
            t.start()
            _THREADS.append(t)


def one_blas_thread() -> None:
    """The BLAS libraries loaded in this process (numpy's, scipy's) limited to one thread each: a compute thread's
    matrix products do not spread over the cores the judge's requests and the other compute threads need (issue
    59: the encoder took 29.4 ms of CPU per answer with two BLAS threads, 13.3 ms with one, in the same wall
    time).  The limit is the process's (BLAS keeps one); set again before each computation, it also reaches a
    library loaded since."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


def _one_blas_call(fn: Callable[..., T], args: tuple[Any, ...]) -> T:
    one_blas_thread()
    return fn(*args)


async def compute_here(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a thread of this process's compute pool (:func:`compute_threads` daemon threads, one BLAS
    thread each): the event loop keeps answering meanwhile."""
    _start_pool()
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[T] = loop.create_future()
    _JOBS.put((lambda: _one_blas_call(fn, args), loop, fut))
    return await fut


class Executor(ABC):
    """Turns a request (with its cache key) into a completion; raises on a failed request."""

    #: requests in flight the executor can take (None: the judge's default)
    concurrency: int | None = None
    #: where :meth:`emit` sends its lines (the engine's observer, set by the engine)
    observer: Observer | None = None

    @abstractmethod
    async def complete(self, key: str, request: JudgeRequest) -> Completion:
        """Send one request.  ``key`` is its cache key (a batch maps its results back by it)."""

    async def compute(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` computed off the event loop, where this executor's judge runs (in process: a thread of
        the compute pool with one BLAS thread, :func:`compute_here`).  ``fn`` is a module-level function and
        ``args`` picklable: an executor with remote workers sends both there."""
        return await compute_here(fn, *args)

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release workers, clients, jobs."""

    def info(self) -> dict[str, Any]:
        """What the executor adds to the run's summary (the Ray executor: ``workers_over_time``)."""
        return {}

    def emit(self, text: str) -> None:
        """One line for the observer (an :class:`Info` event)."""
        if self.observer is not None:
            self.observer(Info(text))


class LocalExecutor(Executor):
    """The judge's own ``complete``, in this process."""

    def __init__(self, judge: Judge) -> None:
        self.judge = judge

    async def complete(self, key: str, request: JudgeRequest) -> Completion:
        return await self.judge.complete(request)


def parse_executor(spec: str) -> tuple[str, str | None, dict[str, str]]:
    """``local`` | ``ray`` | ``ray://HOST:PORT`` | ``ray:auto`` (options after ``?``) -> (kind, address,
    options)."""
    spec = spec.strip()
    head, _, query = spec.partition("?")
    options = parse_query(query, f"executor '{spec}'")
    if head in ("", "local"):
        if options:
            raise ConfigError(f"executor 'local' takes no options (got {', '.join(options)})")
        return "local", None, {}
    if head == "ray":
        address = None
    elif head.startswith("ray://"):
        address = head
    elif head.startswith("ray:"):
        address = head[4:] or None
    else:
        raise ConfigError(f"unknown executor '{spec}' (local, ray, ray://HOST:PORT or ray:ADDRESS)")
    ray_options(options)  # checked here, before a run is started
    return "ray", address, options


#: the Ray executor's options: name -> (smallest, largest value) (``window`` and ``deadline`` are seconds)
RAY_OPTIONS = {"workers": (1, 1024), "cpus": (0, 1024), "gpus": (0, 1024), "per_worker": (1, 4096),
               "window": (1, 86_400), "deadline": (1, 86_400)}


def ray_options(options: dict[str, str]) -> dict[str, int]:
    """The Ray executor's options as integers, or a ConfigError naming the option: a whole number written in
    ASCII digits alone (no space, sign, ``_`` or other script's digits, which Python's ``int`` would take),
    within its bounds."""
    unknown = sorted(set(options) - set(RAY_OPTIONS))
    if unknown:
        raise ConfigError(f"unknown executor option(s) {', '.join(unknown)} for ray "
                          f"(accepted: {', '.join(RAY_OPTIONS)})")
    out: dict[str, int] = {}
    for name, raw in options.items():
        low, high = RAY_OPTIONS[name]
        if not (isinstance(raw, int) and not isinstance(raw, bool)) and not (
                isinstance(raw, str) and raw.isascii() and raw.isdigit() and len(raw) <= 20):
            raise ConfigError(f"executor option {name}={raw!r} must be an integer written in ASCII digits alone "
                              f"(no spaces or signs), {low} to {high}")
        value = int(raw)
        if value < low:
            raise ConfigError(f"executor option {name} must be >= {low} (got {value})")
        if value > high:
            raise ConfigError(f"executor option {name} must be <= {high} (got {value})")
        out[name] = value
    return out


def judge_recipe(judge: Judge) -> tuple[type[Judge], str, dict[str, Any]]:
    """What rebuilds ``judge`` elsewhere (a Ray worker): its class, model and options (secrets in clear)."""
    from pydantic import SecretStr

    opts = {k: (v.get_secret_value() if isinstance(v, SecretStr) else v)
            for k, v in judge.options.model_dump().items() if k in judge.options.model_fields_set}
    return type(judge), judge.model, opts
