"""Independent jobs on worker processes: results in job order, one thread per job whatever the
number of workers, a job's error raised, and a stage's units saved as each finishes."""

from __future__ import annotations

import pytest
import torch

from privleak.errors import PrivleakError, require
from privleak.pipeline import checkpoint
from privleak.pipeline.workers import check_workers, completed, run_jobs
from tests.test_checkpoint import VALUES, project  # noqa: F401  (the fixture)


def threads_and_square(job: int) -> tuple[int, int]:
    """Importable by a spawned worker: its intra-op threads and job²."""
    return torch.get_num_threads(), job * job


def fails_at_three(job: int) -> int:
    require(job != 3, f"job {job} failed")
    return job


def seeded_draw(job: int) -> list[float]:
    """A torch computation whose float result would show a thread-count dependence."""
    generator = torch.Generator().manual_seed(job)
    a = torch.randn(64, 256, generator=generator)
    return (a @ a.T).sum(-1).tolist()


@pytest.mark.parametrize("workers", [1, 2])
def test_jobs_come_back_in_job_order_each_on_one_thread(workers):
    before = torch.get_num_threads()
    assert run_jobs(threads_and_square, [3, 1, 2], workers=workers) == [(1, 9), (1, 1), (1, 4)]
    assert torch.get_num_threads() == before  # the in-process path restores the threads


def test_results_do_not_depend_on_the_number_of_workers():
    jobs = list(range(4))
    assert run_jobs(seeded_draw, jobs, workers=1) == run_jobs(seeded_draw, jobs, workers=2)


def test_completed_yields_every_index_once_highest_priority_first_submitted():
    done = dict(completed(threads_and_square, [1, 5, 2], workers=2, priority=lambda j: j))
    assert done == {0: (1, 1), 1: (1, 25), 2: (1, 4)}


@pytest.mark.parametrize("workers", [1, 2])
def test_a_jobs_error_is_raised_with_its_message(workers):
    with pytest.raises(PrivleakError, match="job 3 failed"):
        run_jobs(fails_at_three, [1, 2, 3, 4], workers=workers)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, None])
def test_workers_must_be_a_positive_integer(bad):
    with pytest.raises(PrivleakError, match=r"^params s3\.workers must be an integer >= 1, got "):
        check_workers(bad, "s3.workers")


def test_map_on_workers_saves_each_unit_and_resumes_like_the_serial_map(project):  # noqa: F811
    items = [2, 7, 3]
    serial = checkpoint.open_stage("toy", VALUES).map("serial", items, threads_and_square)
    store = checkpoint.open_stage("toy", VALUES)
    parallel = store.map("parallel", items, threads_and_square, workers=2)
    assert [square for _, square in parallel] == [square for _, square in serial]
    assert all(threads == 1 for threads, _ in parallel)
    assert store.computed["parallel"] == 3 and all(
        store.path(("parallel", item)).exists() for item in items
    )
    store.path(("parallel", 7)).unlink()  # an interrupted run: one unit missing
    again = checkpoint.open_stage("toy", VALUES)
    assert again.map("parallel", items, threads_and_square, workers=2) == parallel
    assert (again.resumed["parallel"], again.computed["parallel"]) == (2, 1)
