"""Independent jobs on worker processes: results in job order, one thread per job whatever the
number of workers, the longest job first, a job's error raised after the running jobs finish, a
stage's units saved as each finishes, and `workers` outside the checkpoint fingerprint."""

from __future__ import annotations

import time

import pytest
import torch
import yaml

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


def started_at(seconds: float) -> tuple[float, float]:
    """When the job started and ended (the system's clock, shared by every process)."""
    start = time.time()
    time.sleep(seconds)
    return start, time.time()


@pytest.mark.parametrize("workers", [1, 2])
def test_jobs_come_back_in_job_order_each_on_one_thread(workers):
    before = torch.get_num_threads()
    assert run_jobs(threads_and_square, [3, 1, 2], workers=workers) == [(1, 9), (1, 1), (1, 4)]
    assert torch.get_num_threads() == before  # the in-process path restores the threads


def test_the_pool_starts_the_highest_priority_first():
    # Two workers, three jobs: the lowest-priority job starts only once another has finished.
    # (Start times alone would not do: a worker that spawns late starts its first job late.)
    spans = dict(completed(started_at, [0.1, 0.6, 0.3], workers=2, priority=lambda s: s))
    assert sorted(spans) == [0, 1, 2]
    start, end = {i: s for i, (s, _) in spans.items()}, {i: e for i, (_, e) in spans.items()}
    assert start[0] >= min(end[1], end[2])


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


def test_a_failed_job_keeps_the_jobs_that_finished_before_the_error():
    done = []
    with pytest.raises(PrivleakError, match="job 3 failed"):
        for index, value in completed(fails_at_three, [1, 2, 3], workers=2):
            done.append((index, value))
    assert sorted(done) == [(0, 1), (1, 2)]


def test_workers_is_outside_the_checkpoint_fingerprint(project):  # noqa: F811
    stage = yaml.safe_load((project / "dvc.yaml").read_text())
    stage["stages"]["toy"]["params"].append("s3.${profile}.workers")
    (project / "dvc.yaml").write_text(yaml.safe_dump(stage))

    def fingerprint(**values):
        inputs = checkpoint.fingerprint_inputs("toy", VALUES | {"workers": 1} | values)
        return checkpoint.fingerprint(inputs)

    assert fingerprint(workers=2) == fingerprint(workers=1)
    assert fingerprint(seed=4) != fingerprint()
