"""Which executor a run's engine sends its requests through: the local one, Ray actors, or a batch judge's
provider jobs (each module imported only when chosen)."""

from __future__ import annotations

from knockout.engine._cache import Cache
from knockout.engine._executors import Executor, LocalExecutor, parse_executor
from knockout.errors import ConfigError
from knockout.judges._base import Judge


def make_executor(spec: str | None, judge: Judge, cache: Cache, run_id: str | None) -> Executor:
    """The executor for ``judge``: a batch judge's own batch executor, else the one ``spec`` names."""
    batch = getattr(judge, "batch_api", None)
    kind, address, options = parse_executor(spec or "local")
    if batch is not None:
        if kind != "local":
            raise ConfigError(f"judge {judge.spec} submits batch jobs to its provider; it takes no executor "
                              f"(got '{spec}')")
        from knockout.engine._batch import BatchExecutor

        return BatchExecutor(judge, cache, run_id)
    if kind == "ray":
        from knockout.engine._ray import RayExecutor

        return RayExecutor(judge, address=address, options=options)
    return LocalExecutor(judge)
