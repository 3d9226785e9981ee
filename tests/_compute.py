"""A module-level function for ``Engine.compute`` to run (in process or on a Ray worker): where it ran."""

from __future__ import annotations

import os
import threading


def probe(n: int) -> tuple[int, str, int, int]:
    """(process id, thread name, BLAS threads at most, ``n`` squared) where it runs, after a matrix product."""
    import numpy as np
    from threadpoolctl import threadpool_info

    _ = np.ones((128, 128), dtype=np.float32) @ np.ones((128, 128), dtype=np.float32)
    blas = [int(i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"]
    return os.getpid(), threading.current_thread().name, max(blas, default=0), n * n
