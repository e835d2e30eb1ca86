"""A stage's independent jobs on several processes, one intra-op thread each.

Tiny models are overhead-bound: one job per core on one thread beats one job using both cores'
threads. Every job runs on exactly one thread whatever `workers` is (in this process when it is
1), so a job that seeds its own random numbers gets the same numbers however many workers ran
it. A job's function and arguments
cross a process boundary: the function must be importable (a library function or a
`functools.partial` of one), not a notebook's own.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, TypeVar

from privleak.errors import require

T = TypeVar("T")


def check_workers(workers: Any, name: str) -> int:
    """`workers` if it is an integer >= 1, else a one-line error naming the param `name`."""
    require(
        isinstance(workers, int) and not isinstance(workers, bool) and workers >= 1,
        f"params {name} must be an integer >= 1, got {workers!r}",
    )
    return workers


def _one_thread_worker() -> None:
    import torch

    torch.set_num_threads(1)


@contextmanager
def one_thread() -> Iterator[None]:
    """torch on one intra-op thread inside the block, as a worker process runs."""
    import torch  # here, not at the top: the stage runner imports this module without torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def completed(
    function: Callable[[Any], T],
    jobs: Sequence[Any],
    *,
    workers: int,
    priority: Callable[[Any], float] | None = None,
) -> Iterator[tuple[int, T]]:
    """(index, function(jobs[index])) for every job, as each one finishes.

    workers 1 runs the jobs here, in order, each on one thread. More run in that many processes
    (spawned: a fork of a process whose torch thread pools already started can deadlock) that
    take the jobs in descending `priority` (the longest first, so it does not start last on an
    otherwise idle pool), else in order. After a job's error no further job starts; the jobs
    already running finish and are yielded, then the error is raised. A job that draws random
    numbers seeds its own generator, or its draws depend on what ran before it.
    """
    if workers == 1 or len(jobs) <= 1:
        for index, job in enumerate(jobs):
            with one_thread():
                result = function(job)
            yield index, result
        return
    order = sorted(range(len(jobs)), key=lambda i: -priority(jobs[i])) if priority else None
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        min(workers, len(jobs)), mp_context=context, initializer=_one_thread_worker
    )
    error = None
    try:
        pending = {pool.submit(function, jobs[i]): i for i in (order or range(len(jobs)))}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                index = pending.pop(future)
                if future.cancelled():
                    continue
                if future.exception() is None:
                    yield index, future.result()
                elif error is None:
                    error = future.exception()
                    for queued in pending:
                        queued.cancel()  # those not yet started; the running ones finish
        if error is not None:
            raise error
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def run_jobs(
    function: Callable[[Any], T],
    jobs: Sequence[Any],
    *,
    workers: int,
    priority: Callable[[Any], float] | None = None,
) -> list[T]:
    """[function(job) for job in jobs] in job order, run as `completed` runs them."""
    results: dict[int, T] = dict(completed(function, jobs, workers=workers, priority=priority))
    return [results[i] for i in range(len(jobs))]
