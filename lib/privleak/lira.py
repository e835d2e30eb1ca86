"""The statistics of S3's LiRa attack and of domain privacy, from samples already drawn and scored
by `privleak.lira_sampling`: LiRa scores and the selected candidates, the attack's success rates
(per leaked domain and OVERALL) with their intervals, the domain-privacy ratio C with its
bootstrap interval, and the per-target tables that S3's renderers and claims read.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

from privleak.claims.stats import Estimate, bootstrap
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
    codes = np.zeros(len(values), int) if top is not None else _codes(prompt_ids)
    # Sort by group, then score descending (NaN last), then index: a stable rank within groups.
    order = np.lexsort((np.arange(len(values)), -values, codes))
    starts = np.searchsorted(codes[order], codes[order], side="left")
    rank = np.empty(len(values), int)
    rank[order] = np.arange(len(values)) - starts
    return (rank < count) & ~np.isnan(values)


def _codes(ids: Sequence[Hashable]) -> np.ndarray:
    """[n] an int per distinct id (by repr, as decoder group keys), in order of first use."""
    index: dict[str, int] = {}
    return np.array([index.setdefault(repr(key), len(index)) for key in ids], dtype=int)


# ---------------------------------------------------------------- step 3: success rate


class Rate(NamedTuple):
    """#success / #non-empty generations (NaN when there are none) and its two counts."""

    rate: float
    successes: int
    nonempty: int


def lira_success_rate(selected_mask, leaked_mask, nonempty_mask) -> Rate:
    """The LiRa attack success rate over n samples.

    selected_mask, leaked_mask: [n] for one leaked domain j (selected with M_{D without d_j}'s
    scores, flagged by F_j), or [J, n] for J domains. nonempty_mask: [n]. A sample succeeds when
    it is non-empty and, for some j, both selected under j's reference and flagged by F_j: with
    [J, n] masks a sample counts once however many domains it leaks, so the overall rate is
    #samples that leak some domain / #non-empty (the official code likewise counts a generation
    once when it is flagged for any target domain)."""
    selected, leaked = np.asarray(selected_mask, bool), np.asarray(leaked_mask, bool)
    nonempty = np.asarray(nonempty_mask, bool)
    require(nonempty.ndim == 1, f"nonempty_mask must be [n], got shape {nonempty.shape}")
    for name, mask in (("selected_mask", selected), ("leaked_mask", leaked)):
        require(
            mask.shape[-1:] == nonempty.shape and mask.ndim in (1, 2),
            f"{name} has shape {mask.shape}; allowed [n] or [J, n] with n = {len(nonempty)}",
        )
    require(selected.shape == leaked.shape, f"{selected.shape} selected vs {leaked.shape} leaked")
    success = (selected & leaked).reshape(-1, len(nonempty)).any(0) & nonempty
    successes, total = int(success.sum()), int(nonempty.sum())
    return Rate(successes / total if total else math.nan, successes, total)


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
    """{domain j: Rate, OVERALL: Rate}: each `lira_picks` mask's successes over the non-empty
    samples (arguments as there)."""
    picks = lira_picks(scores, leaked, nonempty_mask, prompt_ids, per_prompt=per_prompt, top=top)
    total = int(np.asarray(nonempty_mask, bool).sum())
    return {
        key: Rate(int(p.success.sum()) / total if total else math.nan, int(p.success.sum()), total)
        for key, p in picks.items()
    }


def zero_success_interval(
    prompts: int, selected: int, nonempty: int, *, alpha: float
) -> tuple[float, float]:
    """(0, upper): the (1 - alpha) interval of a LiRa success rate that saw no success in
    `nonempty` samples of `prompts` prompts, `selected` of which the attack picked.

    A bootstrap over prompts has nothing to resample here (every resample reads 0), yet 0 of n is
    no proof the rate is 0. The bound counts prompts, the independent unit, not samples (a
    prompt's samples share its context): only picked samples can succeed, so the rate is at most
    q * selected / nonempty, q the chance that a prompt's picks leak. q's exact (Clopper-Pearson)
    two-sided upper bound at 0 successes of `prompts` is 1 - (alpha / 2) ** (1 / prompts)."""
    for name, count in (("prompts", prompts), ("selected", selected)):
        require(isinstance(count, int) and count >= 1, f"{name} must be an int >= 1, got {count}")
    require(
        isinstance(nonempty, int) and nonempty >= selected,
        f"nonempty must be an int >= selected ({selected}), got {nonempty}",
    )
    require(0 < alpha < 0.5, f"alpha must be in (0, 0.5), got {alpha}")
    q = stats.binomtest(0, prompts).proportion_ci(1 - alpha, method="exact").high
    return 0.0, q * selected / nonempty


# ---------------------------------------------------------------- domain privacy


@dataclass(frozen=True)
class DomainPrivacy:
    """The empirical C of one leaked domain and the counts it rests on.

    ratio: target_rate / reference_rate; target_rate, reference_rate: flagged non-empty samples /
    non-empty samples (pseudocounts included)."""

    ratio: float
    target_rate: float
    reference_rate: float
    target_flagged: int
    target_nonempty: int
    reference_flagged: int
    reference_nonempty: int


def _rate(flagged: float, nonempty: float, pseudocount: float) -> float:
    total = nonempty + 2 * pseudocount
    return (flagged + pseudocount) / total if total else math.nan


def _ratio(target_rate: float, reference_rate: float) -> float:
    """target / reference; inf for a positive target over 0, NaN for 0 / 0 or a NaN rate."""
    if reference_rate == 0:
        return math.inf if target_rate > 0 else math.nan
    return target_rate / reference_rate


def domain_privacy(
    target_flagged,
    reference_flagged,
    target_nonempty,
    reference_nonempty,
    *,
    pseudocount: float = 0.0,
) -> DomainPrivacy:
    """Pr_target[flagged by F_j] / Pr_reference[flagged by F_j] over all non-empty samples of
    each model (target masks [n_t], reference masks [n_r]; flags of empty samples are ignored).

    Zero denominators: with pseudocount 0 the plain ratio is returned, inf when the reference
    never leaks but the target does (no finite C bounds it), NaN when neither leaks (0 / 0: every
    C holds, none is estimated) or a model has no non-empty sample; the counts say which. A
    pseudocount a > 0 gives the add-a estimate (flagged + a) / (non-empty + 2a) per model (a = 0.5:
    Jeffreys' prior mean), finite and positive whenever both models have samples."""
    require(pseudocount >= 0, f"pseudocount must be >= 0, got {pseudocount}")
    counts = []
    for side, flagged, nonempty in (
        ("target", target_flagged, target_nonempty),
        ("reference", reference_flagged, reference_nonempty),
    ):
        flagged, nonempty = np.asarray(flagged, bool), np.asarray(nonempty, bool)
        require(
            flagged.shape == nonempty.shape and flagged.ndim == 1,
            f"{side}_flagged has shape {flagged.shape}, {side}_nonempty {nonempty.shape}",
        )
        counts += [int((flagged & nonempty).sum()), int(nonempty.sum())]
    target_rate = _rate(counts[0], counts[1], pseudocount)
    reference_rate = _rate(counts[2], counts[3], pseudocount)
    return DomainPrivacy(_ratio(target_rate, reference_rate), target_rate, reference_rate, *counts)


def domain_privacy_interval(
    target_flagged,
    reference_flagged,
    target_nonempty,
    reference_nonempty,
    target_prompt_ids: Sequence[Hashable],
    reference_prompt_ids: Sequence[Hashable],
    *,
    n_boot: int,
    seed: int,
    alpha: float = 0.05,
    pseudocount: float = 0.0,
    min_units: int = 2,
    method: str = "percentile",
    target_runs: Sequence[Hashable] | None = None,
) -> Estimate:
    """`domain_privacy`'s ratio and its (1 - alpha) bootstrap interval over prompts (min_units
    and method as in `privleak.claims.bootstrap`).

    The unit is the prompt: a prompt's samples come from one context, so they are not
    independent, and a drawn prompt brings all of its samples under both models along (the same
    contexts drive target and reference, so the two rates stay paired). `privleak.claims.bootstrap`
    gives no interval, with a note, when a resample's ratio is not finite (a reference with no
    flagged sample; a pseudocount > 0 avoids it) or fewer than two prompts.

    target_runs: the training run of each target sample, when the target was trained several
    times (every run with the same samples per prompt); runs and prompts are then resampled as
    crossed factors, each run's samples of a prompt paired with the (one) reference's samples of
    that prompt (fewer than min_units runs: no interval)."""
    target_flagged, reference_flagged = np.asarray(target_flagged), np.asarray(reference_flagged)
    require(
        len(target_prompt_ids) == len(target_flagged),
        f"{len(target_flagged)} target samples for {len(target_prompt_ids)} target_prompt_ids",
    )
    require(
        len(reference_prompt_ids) == len(reference_flagged),
        f"{len(reference_flagged)} reference samples for {len(reference_prompt_ids)} "
        "reference_prompt_ids",
    )
    # The point estimate's checks (mask shapes, pseudocount) hold for the resampled rows too.
    domain_privacy(
        target_flagged,
        reference_flagged,
        target_nonempty,
        reference_nonempty,
        pseudocount=pseudocount,
    )
    target = _flag_rows(1.0, target_flagged, target_nonempty)
    reference = _flag_rows(0.0, reference_flagged, reference_nonempty)
    target_groups, reference_groups = list(target_prompt_ids), list(reference_prompt_ids)
    crossing, copies = {}, 1
    if target_runs is not None:
        require(
            len(target_runs) == len(target_flagged),
            f"{len(target_flagged)} target samples for {len(target_runs)} target_runs",
        )
        # Each run's cell of a prompt: that run's samples of it and the reference's samples of it.
        run_codes = _codes(target_runs)
        runs = range(int(run_codes.max()) + 1)
        copies = len(runs)  # a resample draws len(runs) runs, each with the reference's rows
        reference = np.concatenate([reference] * copies)
        reference_groups = reference_groups * len(runs)
        crossing["runs"] = np.r_[run_codes, np.repeat(runs, len(reference_flagged))]
    rows = np.r_[target, reference]
    return bootstrap(
        rows,
        partial(_ratio_of_rows, pseudocount=pseudocount, reference_copies=copies),
        n_boot=n_boot,
        seed=seed,
        alpha=alpha,
        min_units=min_units,
        method=method,
        groups=_codes([*target_groups, *reference_groups]),
        **crossing,
    )


def _flag_rows(is_target: float, flagged, nonempty) -> np.ndarray:
    """Rows [is_target, flagged and non-empty, non-empty], one per sample."""
    flagged, nonempty = np.asarray(flagged, bool), np.asarray(nonempty, bool)
    return np.c_[np.full(len(flagged), is_target), flagged & nonempty, nonempty]


def _ratio_of_rows(drawn: np.ndarray, pseudocount: float, reference_copies: int = 1) -> float:
    """domain_privacy's ratio of `_flag_rows` rows (target and reference rows together), where
    the reference's rows come `reference_copies` times (once per drawn training run)."""
    target = drawn[:, 0] == 1
    flagged, nonempty = drawn[:, 1], drawn[:, 2]
    return _ratio(
        _rate(flagged[target].sum(), nonempty[target].sum(), pseudocount),
        _rate(
            flagged[~target].sum() / reference_copies,
            nonempty[~target].sum() / reference_copies,
            pseudocount,
        ),
    )


# ---------------------------------------------------------------- tables of one target's samples


def _share(rows: np.ndarray) -> float:
    """successes / non-empty samples of rows [success, non-empty]; NaN without a sample."""
    total = rows[:, 1].sum()
    return rows[:, 0].sum() / total if total else math.nan


def success_rate_interval(
    success, selected, nonempty, prompt_ids, *, n_boot: int, seed: int, alpha: float
) -> tuple[float, float]:
    """The success rate's bootstrap interval over prompts.

    With no success, where every resample reads 0, the exact bound of `zero_success_interval`
    over the prompts with a pick.

    Args:
        success, selected, nonempty: shape (n,) bool, per sample.
        prompt_ids: n prompt ids, the bootstrap's groups.
        n_boot, seed, alpha: as in `privleak.claims.bootstrap`.

    Returns:
        (low, high).
    """
    if not success.any() and selected.any():
        prompts = len(set(np.asarray(prompt_ids, dtype=object)[selected]))
        counts = int(selected.sum()), int(nonempty.sum())
        return zero_success_interval(prompts, *counts, alpha=alpha)
    rows = np.c_[np.asarray(success, float), np.asarray(nonempty, float)]
    estimate = bootstrap(rows, _share, n_boot=n_boot, seed=seed, alpha=alpha, groups=prompt_ids)
    return estimate.low, estimate.high


def _scores_and_flags(drawn, policy: str, leaked: Sequence[str]) -> tuple[dict, dict]:
    """Per leaked domain j: the samples' `lira_scores` against M_(D without d_j), and F_j's flags
    under `policy` (columns nll_self, nll_without_<j>, leak_<policy>_<j> of `drawn`)."""
    scores = {j: lira_scores(drawn["nll_self"], drawn[f"nll_without_{j}"]) for j in leaked}
    flags = {j: drawn[f"leak_{policy}_{j}"].to_numpy() for j in leaked}
    return scores, flags


def prompt_successes(drawn, policy: str, leaked: Sequence[str]) -> pd.DataFrame:
    """Per prompt, the LiRa successes (OVERALL, one pick per prompt and leaked domain) and the
    non-empty samples of one target's samples: the unit rows of a paired contrast of targets.

    Args:
        drawn: the target's samples, columns as in `lira_success_table`.
        policy, leaked: as in `lira_success_table`.

    Returns:
        A frame indexed by prompt_id with integer columns successes and nonempty.
    """
    drawn = drawn.reset_index(drop=True)
    nonempty = ~drawn["empty"].to_numpy()
    scores, flags = _scores_and_flags(drawn, policy, leaked)
    picks = lira_picks(scores, flags, nonempty, drawn["prompt_id"].tolist(), per_prompt=1)
    counts = pd.DataFrame({"successes": picks[OVERALL].success, "nonempty": nonempty})
    return counts.groupby(drawn["prompt_id"]).sum()


def lira_success_table(
    drawn, policy: str, leaked: Sequence[str], *, n_boot: int, seed: int, alpha: float
) -> dict[str, dict]:
    """LiRa success of one target's samples under `policy`, one pick per prompt.

    Args:
        drawn: the target's n samples, a frame with columns prompt_id, empty, nll_self,
            nll_without_<j> and leak_<policy>_<j> for every leaked domain j.
        policy: the policy whose flags decide success.
        leaked: the leaked domains j.
        n_boot, seed, alpha: the bootstrap over prompts (`success_rate_interval`).

    Returns:
        Per key in [OVERALL, *leaked]: {rate, low, high, successes, nonempty}.
    """
    ids, nonempty = drawn["prompt_id"].tolist(), ~drawn["empty"].to_numpy()
    scores, flags = _scores_and_flags(drawn, policy, leaked)
    rates = lira_success_rates(scores, flags, nonempty, ids, per_prompt=1)
    picks = lira_picks(scores, flags, nonempty, ids, per_prompt=1)  # the samples behind them
    out = {}
    for key in [OVERALL, *leaked]:
        low, high = success_rate_interval(
            picks[key].success,
            picks[key].selected,
            nonempty,
            ids,
            n_boot=n_boot,
            seed=seed,
            alpha=alpha,
        )
        out[key] = {
            "rate": rates[key].rate,
            "low": low,
            "high": high,
            "successes": rates[key].successes,
            "nonempty": rates[key].nonempty,
        }
    return out


def domain_privacy_table(
    drawn,
    references: Mapping[str, object],
    policy: str,
    *,
    n_boot: int,
    seed: int,
    alpha: float,
    pseudocount: float,
) -> dict[str, dict]:
    """Domain privacy C of one target's samples against each leaked domain's reference.

    Args:
        drawn: the target's samples, a frame with columns prompt_id, empty and
            leak_<policy>_<j>.
        references: per leaked domain j, the reference M_(D without d_j)'s samples (same
            columns); its keys are the leaked domains, in table order.
        policy: the policy whose flags count as leaks.
        n_boot, seed, alpha: the bootstrap over prompts (`domain_privacy_interval`).
        pseudocount: added to both rates (`domain_privacy`).

    Returns:
        Per leaked domain j: {ratio, low, high, target_rate, reference_rate}.
    """
    out = {}
    for j, reference in references.items():
        masks = (
            drawn[f"leak_{policy}_{j}"].to_numpy(),
            reference[f"leak_{policy}_{j}"].to_numpy(),
            ~drawn["empty"].to_numpy(),
            ~reference["empty"].to_numpy(),
        )
        point = domain_privacy(*masks, pseudocount=pseudocount)
        estimate = domain_privacy_interval(
            *masks,
            drawn["prompt_id"].tolist(),
            reference["prompt_id"].tolist(),
            n_boot=n_boot,
            seed=seed,
            alpha=alpha,
            pseudocount=pseudocount,
        )
        out[j] = {
            "ratio": point.ratio,
            "low": estimate.low,
            "high": estimate.high,
            "target_rate": point.target_rate,
            "reference_rate": point.reference_rate,
        }
    return out
