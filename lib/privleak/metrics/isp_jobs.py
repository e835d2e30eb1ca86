"""S1's n-ISP computations as independent jobs, so that `privleak.pipeline.workers` can run
several at once on a model of the tiny family.

A job is a dict {decoder: spec, n, expand, head_mass, batch_size, sequences}: `approximate_isp`
of the listed sequence indices under that decoder, n and expansion (`expand` None: the whole
vocabulary, exact n-ISP with bound 0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from privleak.metrics.sequence import IspResult, approximate_isp, decoder_transforms


def isp_jobs(
    decoders: Sequence[Mapping],
    ns: Sequence[int],
    sequences: Sequence[int],
    *,
    expand: int,
    sampling_expand: int,
    sampling_head_mass: float,
    batch_size: int,
) -> list[dict]:
    """One job per (decoder, n) over `sequences`: truncating decoders expand `expand`
    alternatives per node; regular sampling is 1-ISP only (the paper's Table 1), over the head
    holding `sampling_head_mass` of the mass, at most `sampling_expand` alternatives."""
    jobs = []
    for spec in decoders:
        sampling = spec["kind"] == "sampling"
        for n in ns:
            if sampling and n > 1:
                continue
            jobs.append(
                {"decoder": spec, "n": n,
                 "expand": sampling_expand if sampling else expand,
                 "head_mass": sampling_head_mass if sampling else None,
                 "batch_size": batch_size, "sequences": list(sequences)}
            )  # fmt: skip
    return jobs


def job_key(job: Mapping) -> tuple:
    """The job's checkpoint key: everything that decides its result but the model."""
    return (job["decoder"]["name"], job["n"], job["expand"], job["head_mass"],
            job["batch_size"], tuple(job["sequences"]))  # fmt: skip


def job_cost(job: Mapping, vocab: int) -> float:
    """Sequences times the alternatives a node may branch into to the power n: the relative
    size of the job's trees."""
    alternatives = vocab - 1 if job["expand"] is None else job["expand"]
    return len(job["sequences"]) * float(alternatives) ** job["n"]


def run_isp_job(
    job: Mapping,
    *,
    model,
    prefixes: Sequence[Sequence[int]],
    suffixes: Sequence[Sequence[int]],
    max_nodes: int,
    pad_id: int,
) -> IspResult:
    """`approximate_isp` of the job's sequences (indices into prefixes and suffixes)."""
    vocab = getattr(model, "privleak_real_vocab", None) or model.config.vocab_size
    return approximate_isp(
        model,
        [prefixes[i] for i in job["sequences"]],
        [suffixes[i] for i in job["sequences"]],
        job["n"],
        decoder_transforms(job["decoder"]),
        expand=vocab - 1 if job["expand"] is None else job["expand"],
        head_mass=job["head_mass"],
        batch_size=job["batch_size"],
        max_nodes=max_nodes,
        pad_id=pad_id,
    )
