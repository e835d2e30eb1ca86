"""privleak.metrics.isp_jobs: s1_isp's n-ISP jobs, each the approximate_isp call it stands for,
and the exact expansion split one job per sequence without changing a number."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import torch

from privleak.metrics import sequence as seq
from privleak.metrics.isp_jobs import isp_jobs, job_cost, job_key, run_isp_job
from privleak.pipeline.workers import completed, one_thread
from tests.conftest import tiny_llama

DECODERS = [
    {"name": "greedy", "kind": "greedy"},
    {"name": "sampling", "kind": "sampling"},
    {"name": "top-k 2", "kind": "top_k", "value": 2},
]


def _sequences():
    gen = torch.Generator().manual_seed(1)
    prefixes = [torch.randint(3, 12, (k,), generator=gen).tolist() for k in (4, 6, 5)]
    suffixes = [torch.randint(3, 12, (3,), generator=gen).tolist() for _ in prefixes]
    return prefixes, suffixes


def test_one_job_per_decoder_and_n_with_sampling_at_one_isp_only():
    jobs = isp_jobs(DECODERS, [1, 2], range(3), expand=4, sampling_expand=8,
                    sampling_head_mass=0.9, batch_size=2)  # fmt: skip
    assert [(j["decoder"]["name"], j["n"], j["expand"], j["head_mass"]) for j in jobs] == [
        ("greedy", 1, 4, None), ("greedy", 2, 4, None), ("sampling", 1, 8, 0.9),
        ("top-k 2", 1, 4, None), ("top-k 2", 2, 4, None),
    ]  # fmt: skip
    assert all(j["sequences"] == [0, 1, 2] and j["batch_size"] == 2 for j in jobs)
    assert len({job_key(j) for j in jobs}) == len(jobs)
    assert job_cost(jobs[1], vocab=12) == 3 * 4.0**2
    assert job_cost({**jobs[2], "expand": None, "sequences": [0]}, vocab=12) == 11.0


def test_a_job_is_the_approximate_isp_call_it_stands_for():
    model, (prefixes, suffixes) = tiny_llama(vocab_size=12, seed=3), _sequences()
    job = isp_jobs(DECODERS, [2], [0, 2], expand=3, sampling_expand=8, sampling_head_mass=0.9,
                   batch_size=2)[1]  # fmt: skip
    got = run_isp_job(job, model=model, prefixes=prefixes, suffixes=suffixes, max_nodes=64,
                      pad_id=0)  # fmt: skip
    direct = seq.approximate_isp(
        model, [prefixes[0], prefixes[2]], [suffixes[0], suffixes[2]], 2,
        seq.decoder_transforms(DECODERS[2]), expand=3, batch_size=2, max_nodes=64,
    )  # fmt: skip
    np.testing.assert_array_equal(got.approx, direct.approx)
    np.testing.assert_array_equal(got.bound, direct.bound)
    assert got.leaves == direct.leaves


@pytest.mark.parametrize("workers", [1, 2])  # 2: the model itself crosses to the processes
def test_the_exact_expansion_one_sequence_per_job_equals_one_job_over_all(workers):
    model, (prefixes, suffixes) = tiny_llama(vocab_size=12, seed=3), _sequences()
    exact = {"decoder": DECODERS[1], "n": 1, "expand": None, "head_mass": None, "batch_size": 1}
    run = partial(run_isp_job, model=model, prefixes=prefixes, suffixes=suffixes, max_nodes=64,
                  pad_id=0)  # fmt: skip
    with one_thread():  # as every job runs
        whole = run({**exact, "sequences": [0, 1, 2]})
    jobs = [{**exact, "sequences": [i]} for i in range(3)]
    parts = [result for _, result in sorted(completed(run, jobs, workers=workers))]
    np.testing.assert_array_equal(np.concatenate([p.approx for p in parts]), whole.approx)
    np.testing.assert_allclose(whole.bound, 0.0, atol=1e-12)
    truth = [seq.exact_isp(model, p, s, 1, []) for p, s in zip(prefixes, suffixes, strict=True)]
    np.testing.assert_allclose(whole.approx, truth, rtol=1e-4, atol=1e-9)
