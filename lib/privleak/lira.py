"""The statistics of S3's LiRa attack, from samples already drawn and scored by
`privleak.lira_sampling`: LiRa scores and the selected candidates, the attack's success rates
(per leaked domain and OVERALL) with their intervals, and the per-target tables that S3's
renderers and claims read (domain privacy C: `privleak.domain_privacy`).

Success-rate base. `rate` = successes / selected: of the non-empty samples the attack picked
(under j's reference for domain j; for OVERALL the union of the picks over j, a sample counted
once), the share that F_j flags. `rate_per_generation` = successes / every non-empty sample, the
paper's literal "#success / #non-empty generations"; with one pick per prompt and leaked domain
it cannot exceed (leaked domains) / (samples per prompt), so it measures the attack's pick count
as much as the leak. The official code's extraction script selects nothing: its success rate is
the flagged share of every non-empty generation (`official_rate` in S3's table).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

from privleak.claims.stats import bootstrap
from privleak.errors import require

OVERALL = "overall"
"""The key of the rate over every leaked domain in `lira_success_rates`."""


# ---------------------------------------------------------------- step 2: scores and selection


def lira_scores(target_nll, reference_nll) -> np.ndarray:
    """[n] log(ref_ppl) / log(target_ppl) = reference_nll / target_nll (both [n] mean NLLs);
    higher = the sample is more likely under the target w.r.t. the reference.

    NaN where either NLL is NaN (empty). A mean NLL is >= 0; target_nll == 0 (every token
    predicted with probability 1) scores +inf when reference_nll > 0 (the target is infinitely
    more confident: ranked first) and 1.0 when reference_nll is 0 too (the models agree)."""
    target, reference = np.asarray(target_nll, float), np.asarray(reference_nll, float)
    require(
        target.shape == reference.shape,
        f"target_nll has shape {target.shape}, reference_nll {reference.shape}",
    )
    finite = ~np.isnan(target) & ~np.isnan(reference)
    require(
        bool((target[finite] >= 0).all() and (reference[finite] >= 0).all()),
        "NLLs must be >= 0 (mean negative log-probs) or NaN",
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        scores = reference / target
    return np.where(finite & (target == 0) & (reference == 0), 1.0, scores)


def select_candidates(
    scores, prompt_ids: Sequence[Hashable], *, per_prompt: int | None = None, top: int | None = None
) -> np.ndarray:
    """[n] bool: the samples the attack selects from scores [n] (`lira_scores`) of samples whose
    prompts are prompt_ids [n]. Exactly one of:
    - per_prompt=m: each prompt's m highest-scoring samples;
    - top=n: the n highest-scoring samples over all prompts (Carlini et al.'s global ranking).
    NaN (empty) is never selected, so a group with fewer scored samples keeps them all; ties go to
    the earlier sample.

    The paper gives no count. The S3 stage uses per_prompt=1: the attacker's best guess for each
    context. Scores of different prompts are not on one scale (a prompt fixes how predictable its
    continuations are under both models), and a per-prompt choice keeps prompts independent, which
    the bootstrap over prompts needs (a global top-n couples every prompt to all others).
    per_prompt = samples selects every non-empty sample: the rate the official code reports."""
    values = np.asarray(scores, float)
    require(values.ndim == 1, f"scores must be one-dimensional, got shape {values.shape}")
    require(
        len(prompt_ids) == len(values), f"{len(values)} scores for {len(prompt_ids)} prompt_ids"
    )
    require(
        (per_prompt is None) != (top is None),
        f"give exactly one of per_prompt, top; got per_prompt={per_prompt}, top={top}",
    )
    count = per_prompt if top is None else top
    name = "per_prompt" if top is None else "top"
    require(isinstance(count, int) and count >= 1, f"{name} must be an int >= 1, got {count}")
    codes = np.zeros(len(values), int) if top is not None else prompt_codes(prompt_ids)
    # Sort by group, then score descending (NaN last), then index: a stable rank within groups.
    order = np.lexsort((np.arange(len(values)), -values, codes))
    starts = np.searchsorted(codes[order], codes[order], side="left")
    rank = np.empty(len(values), int)
    rank[order] = np.arange(len(values)) - starts
    return (rank < count) & ~np.isnan(values)


def prompt_codes(ids: Sequence[Hashable]) -> np.ndarray:
    """[n] an int per distinct id (by repr, as decoder group keys), in order of first use."""
    index: dict[str, int] = {}
    return np.array([index.setdefault(repr(key), len(index)) for key in ids], dtype=int)


# ---------------------------------------------------------------- step 3: success rate


class Rate(NamedTuple):
    """A LiRa success rate and its counts.

    rate: successes / selected, the share of the attack's non-empty picks that leak (NaN without
    a pick); rate_per_generation: successes / nonempty, the paper's literal #success /
    #non-empty generations (NaN without a non-empty sample)."""

    rate: float
    successes: int
    selected: int
    nonempty: int
    rate_per_generation: float


def _counted(success, selected, nonempty) -> Rate:
    """The Rate of [n] bool masks: successes and picks among the non-empty samples."""
    successes, picks, total = (int(np.sum(m & nonempty)) for m in (success, selected, nonempty))
    return Rate(
        successes / picks if picks else math.nan,
        successes,
        picks,
        total,
        successes / total if total else math.nan,
    )


def lira_success_rate(selected_mask, leaked_mask, nonempty_mask) -> Rate:
    """The LiRa attack success rate over n samples.

    selected_mask, leaked_mask: [n] for one leaked domain j (selected with M_{D without d_j}'s
    scores, flagged by F_j), or [J, n] for J domains. nonempty_mask: [n]. A sample succeeds when
    it is non-empty and, for some j, both selected under j's reference and flagged by F_j; it is
    a pick when it is non-empty and selected under some j. With [J, n] masks a sample counts once
    however many domains pick or leak it (the official code likewise counts a generation once
    when it is flagged for any target domain)."""
    selected, leaked = np.asarray(selected_mask, bool), np.asarray(leaked_mask, bool)
    nonempty = np.asarray(nonempty_mask, bool)
    require(nonempty.ndim == 1, f"nonempty_mask must be [n], got shape {nonempty.shape}")
    for name, mask in (("selected_mask", selected), ("leaked_mask", leaked)):
        require(
            mask.shape[-1:] == nonempty.shape and mask.ndim in (1, 2),
            f"{name} has shape {mask.shape}; allowed [n] or [J, n] with n = {len(nonempty)}",
        )
    require(selected.shape == leaked.shape, f"{selected.shape} selected vs {leaked.shape} leaked")
    per_domain = (-1, len(nonempty))
    success = (selected & leaked).reshape(per_domain).any(0)
    return _counted(success, selected.reshape(per_domain).any(0), nonempty)


class Picks(NamedTuple):
    """[n] bool masks over a target's samples: those the attack picked (non-empty by
    construction), and those that succeeded (picked and flagged)."""

    selected: np.ndarray
    success: np.ndarray


def lira_picks(
    scores: Mapping[str, np.ndarray],
    leaked: Mapping[str, np.ndarray],
    nonempty_mask,
    prompt_ids: Sequence[Hashable],
    *,
    per_prompt: int | None = None,
    top: int | None = None,
) -> dict[str, Picks]:
    """{domain j: Picks, OVERALL: Picks} for n target samples: scores[j] [n] are `lira_scores`
    under j's reference model, leaked[j] [n] F_j's verdicts. Selection per `select_candidates`,
    done separately for each j; OVERALL's masks are the union over j, so a sample that succeeds
    for several domains counts once. The per-sample masks let a caller resample prompts or
    contrast two targets prompt by prompt."""
    require(len(scores) >= 1, "give scores for at least one leaked domain")
    require(OVERALL not in scores, f"{OVERALL!r} is reserved for the overall rate")
    for domain in leaked:
        require(domain in scores, f"unknown domain {domain!r} in leaked; scored: {list(scores)}")
    for domain in scores:
        require(domain in leaked, f"domain {domain!r} has scores but no leaked mask")
    nonempty = np.asarray(nonempty_mask, bool)
    require(nonempty.ndim == 1, f"nonempty_mask must be [n], got shape {nonempty.shape}")
    picks = {}
    for domain in scores:
        flagged = np.asarray(leaked[domain], bool)
        require(
            flagged.shape == nonempty.shape,
            f"leaked[{domain!r}] has shape {flagged.shape}; expected {nonempty.shape}",
        )
        chosen = select_candidates(scores[domain], prompt_ids, per_prompt=per_prompt, top=top)
        require(
            chosen.shape == nonempty.shape,
            f"scores[{domain!r}] has shape {chosen.shape}; expected {nonempty.shape}",
        )
        picks[domain] = Picks(chosen & nonempty, chosen & flagged & nonempty)
    masks = list(picks.values())
    picks[OVERALL] = Picks(*(np.any([p[k] for p in masks], axis=0) for k in range(2)))
    return picks


def lira_success_rates(
    scores: Mapping[str, np.ndarray],
    leaked: Mapping[str, np.ndarray],
    nonempty_mask,
    prompt_ids: Sequence[Hashable],
    *,
    per_prompt: int | None = None,
    top: int | None = None,
) -> dict[str, Rate]:
    """{domain j: Rate, OVERALL: Rate}: each `lira_picks` mask's successes over its picks and
    over the non-empty samples (arguments as there)."""
    picks = lira_picks(scores, leaked, nonempty_mask, prompt_ids, per_prompt=per_prompt, top=top)
    nonempty = np.asarray(nonempty_mask, bool)
    return {key: _counted(p.success, p.selected, nonempty) for key, p in picks.items()}


def zero_success_interval(picks_per_prompt, *, alpha: float) -> tuple[float, float]:
    """(0, upper): the (1 - alpha) interval of a LiRa success rate (successes / picks) that saw
    no success among the picks of len(picks_per_prompt) prompts, picks_per_prompt [prompts] the
    number of non-empty picks of each prompt (>= 1).

    A bootstrap over prompts has nothing to resample here (every resample reads 0), yet 0 of n is
    no proof the rate is 0. The bound counts prompts, the independent unit, not samples (a
    prompt's samples share its context): with q the chance that some pick of a prompt leaks, the
    rate sum(leaks) / sum(picks) is at most q * max(picks) / mean(picks) (a leaking prompt adds at
    most its own picks, at most max(picks)), which is q when every prompt has as many picks. q's
    exact (Clopper-Pearson) two-sided upper bound at 0 successes of `prompts` is
    1 - (alpha / 2) ** (1 / prompts). Capped at 1."""
    picks = np.asarray(picks_per_prompt)
    require(
        picks.ndim == 1 and picks.size >= 1,
        f"picks_per_prompt must be [prompts] with at least one prompt, got shape {picks.shape}",
    )
    require(
        np.issubdtype(picks.dtype, np.integer) and bool((picks >= 1).all()),
        f"picks_per_prompt must be ints >= 1 (prompts without a pick left out), got {picks}",
    )
    require(0 < alpha < 0.5, f"alpha must be in (0, 0.5), got {alpha}")
    q = stats.binomtest(0, picks.size).proportion_ci(1 - alpha, method="exact").high
    return 0.0, min(1.0, q * picks.max() / picks.mean())


# ---------------------------------------------------------------- tables of one target's samples


def ratio_of_sums(rows: np.ndarray) -> float:
    """sum(rows[:, 0]) / sum(rows[:, 1]) of rows [count, total]; NaN when the total is 0."""
    total = rows[:, 1].sum()
    return rows[:, 0].sum() / total if total else math.nan


def success_rate_interval(
    success,
    selected,
    prompt_ids: Sequence[Hashable],
    *,
    n_boot: int,
    seed: int,
    alpha: float,
    runs: Sequence[Hashable] | None = None,
) -> tuple[float, float]:
    """The (1 - alpha) interval of the success rate successes / selected, by a bootstrap over the
    prompts with a pick.

    Where no pick succeeds, or every pick does, every resample reads the same: the interval is
    then `zero_success_interval`'s exact bound over those prompts on the successes (0, upper) or
    on the failures (1 - upper, 1).

    Args:
        success, selected: [n] bool per sample, success a subset of selected (the non-empty
            picks, as `lira_picks` gives them).
        prompt_ids: n prompt ids, the bootstrap's groups.
        n_boot, seed, alpha: as in `privleak.claims.bootstrap`.
        runs: n training-run labels, when the samples come from several runs of a target (each
            run with the same samples per prompt): runs and prompts are resampled as crossed
            factors, and the exact bound counts (run, prompt) cells.

    Returns:
        (low, high); NaN without a pick.
    """
    success, selected = np.asarray(success, bool), np.asarray(selected, bool)
    require(
        success.shape == selected.shape == (len(prompt_ids),),
        f"success {success.shape}, selected {selected.shape} and {len(prompt_ids)} prompt_ids "
        "must all be [n]",
    )
    require(not (success & ~selected).any(), "success must be a subset of selected")
    if not selected.any():
        return math.nan, math.nan
    prompts = prompt_codes(prompt_ids)
    wins = success[selected]
    if not wins.any() or wins.all():
        # A prompt's runs share its context: the exact bound counts prompts, their picks summed
        # over runs.
        _, high = zero_success_interval(
            np.unique(prompts[selected], return_counts=True)[1], alpha=alpha
        )
        return (0.0, high) if not wins.any() else (1.0 - high, 1.0)
    if runs is None:
        rows, groups, crossing = np.c_[wins, np.ones(len(wins))], prompts[selected], {}
    else:  # every sample is a row, so each (run, prompt) cell holds the same number of rows
        rows, groups = np.c_[success, selected].astype(float), prompts
        crossing = {"runs": prompt_codes(runs)}
    estimate = bootstrap(
        rows, ratio_of_sums, n_boot=n_boot, seed=seed, alpha=alpha, groups=groups, **crossing
    )
    return estimate.low, estimate.high


def _scores_and_flags(drawn, policy: str, leaked: Sequence[str]) -> tuple[dict, dict]:
    """Per leaked domain j: the samples' `lira_scores` against M_(D without d_j), and F_j's flags
    under `policy` (columns nll_self, nll_without_<j>, leak_<policy>_<j> of `drawn`)."""
    scores = {j: lira_scores(drawn["nll_self"], drawn[f"nll_without_{j}"]) for j in leaked}
    flags = {j: drawn[f"leak_{policy}_{j}"].to_numpy() for j in leaked}
    return scores, flags


def _one_pick_each(
    drawn, policy: str, leaked: Sequence[str], runs: Sequence[Hashable] | None = None
) -> tuple[list, np.ndarray, dict[str, Picks]]:
    """(prompt ids [n], non-empty [n], `lira_picks`) of a target's n samples, one pick per prompt
    (per prompt and training run when `runs` labels the samples of several runs)."""
    ids, nonempty = drawn["prompt_id"].tolist(), ~drawn["empty"].to_numpy()
    scores, flags = _scores_and_flags(drawn, policy, leaked)
    contexts = ids if runs is None else list(zip(runs, ids, strict=True))
    return ids, nonempty, lira_picks(scores, flags, nonempty, contexts, per_prompt=1)


def prompt_successes(drawn, policy: str, leaked: Sequence[str]) -> pd.DataFrame:
    """Per prompt, the LiRa counts of one target's samples (OVERALL, one pick per prompt and
    leaked domain): the unit rows of a paired contrast of targets, [successes, selected] for the
    success rate, [successes, nonempty] for the rate per generation.

    Args:
        drawn: the target's samples, columns as in `lira_success_table`.
        policy, leaked: as in `lira_success_table`.

    Returns:
        A frame indexed by prompt_id with integer columns successes (picks flagged), selected
        (non-empty picks, a sample picked for several domains counted once) and nonempty.
    """
    drawn = drawn.reset_index(drop=True)
    _, nonempty, picks = _one_pick_each(drawn, policy, leaked)
    overall = picks[OVERALL]
    counts = pd.DataFrame(
        {"successes": overall.success, "selected": overall.selected, "nonempty": nonempty}
    )
    return counts.groupby(drawn["prompt_id"]).sum()


def lira_success_table(
    drawn,
    policy: str,
    leaked: Sequence[str],
    *,
    n_boot: int,
    seed: int,
    alpha: float,
    runs: Sequence[Hashable] | None = None,
) -> dict[str, dict]:
    """LiRa success of one target's samples under `policy`, one pick per prompt (per prompt and
    training run when `runs` labels the samples of several runs: `success_rate_interval`).

    Args:
        drawn: the target's n samples, a frame with columns prompt_id, empty, nll_self,
            nll_without_<j> and leak_<policy>_<j> for every leaked domain j.
        policy: the policy whose flags decide success.
        leaked: the leaked domains j.
        n_boot, seed, alpha: the bootstrap over prompts (`success_rate_interval`).

    Returns:
        Per key in [OVERALL, *leaked]: {rate, low, high, successes, selected, nonempty,
        rate_per_generation}, as in `Rate`; (low, high) is the interval of rate. OVERALL also
        holds official_rate: the official extraction script's rate, which picks nothing, the
        share of every non-empty sample flagged for some leaked domain.
    """
    ids, nonempty, picks = _one_pick_each(drawn, policy, leaked, runs)
    out = {}
    for key in [OVERALL, *leaked]:
        rate = _counted(picks[key].success, picks[key].selected, nonempty)
        low, high = success_rate_interval(
            picks[key].success,
            picks[key].selected,
            ids,
            n_boot=n_boot,
            seed=seed,
            alpha=alpha,
            runs=runs,
        )
        out[key] = {
            "rate": rate.rate,
            "low": low,
            "high": high,
            "successes": rate.successes,
            "selected": rate.selected,
            "nonempty": rate.nonempty,
            "rate_per_generation": rate.rate_per_generation,
        }
    flagged = drawn[[f"leak_{policy}_{j}" for j in leaked]].to_numpy().any(axis=1) & nonempty
    out[OVERALL]["official_rate"] = flagged.sum() / nonempty.sum() if nonempty.any() else math.nan
    return out


def cell_counts(
    drawn, policy: str, leaked: Sequence[str], runs: Sequence[Hashable] | None = None
) -> dict[str, np.ndarray]:
    """Per key in [OVERALL, *leaked]: [prompts, 2] (successes, non-empty picks) of each prompt
    with a pick, summed over its training runs (a prompt's runs share its context), picks as in
    `lira_success_table` (per prompt and run): the unit rows of a rate's error correction
    (`privleak.policy_quality.corrected_rate_interval`)."""
    ids, _, picks = _one_pick_each(drawn, policy, leaked, runs)
    out = {}
    for key in [OVERALL, *leaked]:
        counts = pd.DataFrame({"s": picks[key].success, "n": picks[key].selected})
        summed = counts.groupby(prompt_codes(ids)).sum()
        out[key] = summed[summed["n"] > 0].to_numpy(dtype=float)
    return out
