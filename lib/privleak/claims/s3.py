"""S3 (Safe generation in multi-domain dialogs) claims: LiRa success and domain privacy of the
fine-tuned targets, and their test perplexity.

Units are the attack prompts: every target continues the same prompts, so each target's LiRa
successes are paired with every other's prompt by prompt (`lira.prompt_successes`: one pick per
leaked domain j, by the score against M_(D without d_j); a pick succeeds when F_j flags it, as
in render_s3), and a target's rate is successes / non-empty picks over the drawn prompts.
Domain privacy Ĉ (the plain ratio) per policy and leaked domain is resampled over prompts with
the reference's samples of the same prompts; where the reference never flags, only a lower bound
on Ĉ exists, and the interval is [bound, inf). Test perplexity has no prompt: its unit is the
held-out test dialog, scored by every model, so a perplexity contrast is a paired difference of
token-weighted mean NLL (log perplexity) over the drawn dialogs.

Each claim compares fine-tuned targets, so it needs an interval over training runs
(docs/design.md §8): with `min_units` runs or more, runs and units are resampled as crossed
factors, run k of one target paired with run k of the other; with fewer, every claim stays
inconclusive whatever the prompts say (its note gives that reading). The classifier policy of
the embedded profile is a stand-in for the official fine-tuned roberta-base, and every claim on it
says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from privleak.claims.registry import NONE, Finding
from privleak.claims.stats import PLUS_MINUS_ONE, UNBOUNDED, Estimate
from privleak.domain_privacy import domain_privacy_interval
from privleak.lira import prompt_successes
from privleak.training.train_log import regime

Boot = Callable[..., Estimate]
POLICIES = ("keyword", "classifier")
BOOTSTRAP_KEYS = ("n_boot", "seed", "alpha", "min_units")  # of the claims params
REDACTED = ("Pub+Redacted", "JFT", "Redaction Schedule")  # trained on redacted data, in part


def load(interim: Path) -> dict[str, pd.DataFrame]:
    """s3_train's log, s3_attack's samples and held-out test NLLs, s3_prepare's redaction."""
    s3 = interim / "s3"
    return {
        "log": pd.read_parquet(s3 / "train" / "train_log.parquet"),
        "redaction": pd.read_parquet(s3 / "prepare" / "redaction.parquet"),
        "samples": pd.read_parquet(s3 / "attack" / "samples.parquet"),
        "test_nll": pd.read_parquet(s3 / "attack" / "test_nll.parquet"),
    }


def slug(name: str) -> str:
    return name.lower().replace("+", "_").replace(" ", "_")


@dataclass(frozen=True)
class Targets:
    """The trained targets of `log` (s3_train's train_log) and the runs the claims use."""

    log: pd.DataFrame
    runs: tuple[int, ...]  # every training run in the log
    crossed: bool  # enough runs to resample them crossed with units

    @property
    def used(self) -> tuple[int, ...]:
        """The runs a contrast pairs: all when crossed, else run 0."""
        return self.runs if self.crossed else (0,)

    def model(self, target: str, policy: str, run: int = 0) -> str:
        """The model of `target` under `policy` (its own redacted version where it has one) in
        training run `run`; "" when there is none."""
        of_policy = self.log["policy"].isna() | (self.log["policy"] == policy)
        rows = self.log[(self.log["target"] == target) & of_policy & (self.log["run"] == run)]
        return rows["model"].iloc[0] if len(rows) == 1 else ""


def targets(log: pd.DataFrame, min_units: int) -> Targets:
    runs = tuple(sorted(log["run"].unique()))
    return Targets(log, runs, len(runs) >= min_units)


def ratio_difference(rows: np.ndarray) -> float:
    """Rows [count a, total a, count b, total b] per unit: sum(count b) / sum(total b) minus
    sum(count a) / sum(total a), e.g. success rate b - success rate a."""
    return float(rows[:, 2].sum() / rows[:, 3].sum() - rows[:, 0].sum() / rows[:, 1].sum())


def paired(
    t: Targets,
    boot: Boot,
    a: tuple[str, str],
    b: tuple[str, str],
    rows_of,
    bounds: tuple[float, float] = UNBOUNDED,
) -> Estimate:
    """`ratio_difference` of (target, policy) b against a. rows_of(model, policy): a model's
    rows [count, total] indexed by unit. The sides are paired per unit and run, and units are
    resampled, crossed with runs when t.crossed. bounds: the effect's parameter space
    (PLUS_MINUS_ONE for a difference of two rates)."""
    if not all(t.model(*side, run) for side in (a, b) for run in t.used):
        return NONE
    per_run = [
        pd.concat([rows_of(t.model(*side, run), side[1]) for side in (a, b)], axis=1)
        for run in t.used
    ]
    rows = pd.concat(per_run, keys=t.used, names=["run", "unit"])
    crossing = {"runs": rows.index.get_level_values("run")} if t.crossed else {}
    groups = rows.index.get_level_values("unit")
    return boot(
        rows.to_numpy(dtype=float), ratio_difference, groups=groups, bounds=bounds, **crossing
    )


def success_findings(samples, t: Targets, boot: Boot, domain: str, fill: Mapping):
    """Results, Fig. 1: the classifier against the keyword policy, the targets against
    `domain` Only, and the redacted targets against Public."""
    leaked = [
        c.removeprefix("nll_without_") for c in samples.columns if c.startswith("nll_without_")
    ]

    def successes(model: str, policy: str) -> pd.DataFrame:
        """Per prompt [successes, non-empty picks]: the success rate's count and base."""
        counts = prompt_successes(samples[samples["model"] == model], policy, leaked)
        return counts[["successes", "selected"]]

    def contrast(a, b) -> Estimate:
        return paired(t, boot, a, b, successes, PLUS_MINUS_ONE)  # a difference of success rates

    only = f"{domain} Only"
    for target in (only, "Public", "Private", *REDACTED):
        samples_of = (
            "each policy's own redacted model" if target in REDACTED else "the same samples"
        )
        yield Finding(
            "s3.classifier_finds_more_leaks.{target_slug}",
            contrast((target, "keyword"), (target, "classifier")),
            {**fill, "target": target, "target_slug": slug(target), "samples": samples_of},
        )
    for target in ("Public", "Private", *REDACTED):
        kept = target in ("Public", "Private")
        yield Finding(
            f"s3.{'not_' if kept else ''}below_{{only_slug}}.{{target_slug}}",
            contrast((only, "classifier"), (target, "classifier")),
            {**fill, "target": target, "target_slug": slug(target), "only": only,
             "only_slug": slug(only), "domain": domain},
        )  # fmt: skip
    for policy in POLICIES:
        for target in REDACTED:
            yield Finding(
                "s3.redaction_leaks_less_than_public.{target_slug}.{policy}",
                contrast(("Public", policy), (target, policy)),
                {**fill, "target": target, "target_slug": slug(target), "policy": policy},
            )


def domain_privacy_findings(samples, t: Targets, settings: Mapping, fill):
    """Public's Ĉ against each leaked domain's reference M_(D without d_j), per policy."""
    leaked = [
        c.removeprefix("nll_without_") for c in samples.columns if c.startswith("nll_without_")
    ]
    references = t.log.dropna(subset=["without"]).set_index("without")["model"].to_dict()
    for policy in POLICIES:
        public_runs = {t.model("Public", policy, run): run for run in t.used}
        public = samples[samples["model"].isin(public_runs)]
        crossing = {"target_runs": public["model"].map(public_runs).tolist()} if t.crossed else {}
        for j in leaked:
            reference = samples[samples["model"] == references[j]]
            yield Finding(
                "s3.public_not_domain_private.{policy}.{domain_j}",
                domain_privacy_interval(
                    public[f"leak_{policy}_{j}"].to_numpy(),
                    reference[f"leak_{policy}_{j}"].to_numpy(),
                    ~public["empty"].to_numpy(),
                    ~reference["empty"].to_numpy(),
                    public["prompt_id"].tolist(),
                    reference["prompt_id"].tolist(),
                    lower_bound_if_reference_clean=True,
                    **{key: settings[key] for key in BOOTSTRAP_KEYS},
                    **crossing,
                ),
                {**fill, "policy": policy, "domain_j": j},
            )


def perplexity_findings(test_nll: pd.DataFrame, t: Targets, boot: Boot, fill: Mapping):
    """JFT's better and the Redaction Schedule's worse test perplexity than Pub+Redacted's."""
    per_dialog = test_nll.set_index(["model", "dialog"])[["nll", "tokens"]]
    for policy in POLICIES:
        for target, better in (("JFT", "better"), ("Redaction Schedule", "worse")):
            yield Finding(
                f"s3.{slug(target)}_{better}_perplexity_than_pub_redacted.{{policy}}",
                paired(
                    t,
                    boot,
                    ("Pub+Redacted", policy),
                    (target, policy),
                    lambda model, _policy: per_dialog.loc[model],
                ),
                {**fill, "policy": policy},
            )


def findings(
    frames: dict[str, pd.DataFrame], boot: Boot, settings: Mapping, *, domain: str,
    seeds_rule: str,
) -> list[Finding]:  # fmt: skip
    """Every S3 claim on `load`'s frames. settings: the claims params block (the bootstrap of
    Ĉ); seeds_rule: the `missing` text of a claim on too few training runs."""
    t = targets(frames["log"], settings["min_units"])
    runs = f" x {len(t.runs)} training runs" if t.crossed else ""
    missing = "" if t.crossed else seeds_rule + f"; the artifacts hold {len(t.runs)}"
    fill = {"runs": runs}
    found = [
        *success_findings(frames["samples"], t, boot, domain, fill),
        *domain_privacy_findings(frames["samples"], t, settings, fill),
        *perplexity_findings(frames["test_nll"], t, boot, fill),
    ]
    note = regime(frames["log"], frames["redaction"])
    return [
        Finding(f.spec, f.estimate, f.fields, missing=missing, note=note, null=f.null)
        for f in found
    ]
