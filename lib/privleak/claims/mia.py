"""Claims of membership inference against known ground truth (docs/design.md §11): the standard
findings of the MIA literature, judged on the family, whose membership is known by construction.

Each effect is a difference of AUCs (mean over training runs) between two paired settings that
share runs, and its interval is a t interval on the standard error of the crossed resampling of
`privleak.mia.metrics` (texts of each stratum and runs drawn independently; the two settings see
the same draws):
- model size: the largest model's AUC minus the smallest's, per attack, over all members, its
  note giving the AUC at every size; and each step of the ordering, a model's AUC minus the next
  smaller one's;
- duplication: on the largest model, the AUC of the members planted most often minus that of the
  members planted once, per attack: different texts at the two counts, so the contrast confounds
  duplication with the texts (and the tokenizer, trained on the duplicated corpus);
- attack order: Min-K%++ minus Min-K%, and Min-K% minus LOSS, per model.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import pandas as pd

from privleak.claims.procedures import bootstrap_t
from privleak.claims.registry import Finding
from privleak.claims.stats import PLUS_MINUS_ONE, Estimate, from_test
from privleak.mia.table import member_groups, resampled, score_table

SIZE_ATTACKS = ("loss", "zlib", "min_k", "min_k_plus_plus")
ORDER = (("min_k_plus_plus", "min_k"), ("min_k", "loss"))
STEP = "s1.mia.size.{attack}.{larger}_over_{smaller}"  # one step of the size ordering


def load(interim: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(texts, stats) of the mia_score stage."""
    return (pd.read_parquet(interim / "mia" / "texts.parquet"),
            pd.read_parquet(interim / "mia" / "stats.parquet"))  # fmt: skip


NONE = Estimate(float("nan"), float("nan"), float("nan"), 0)


def _estimate(difference, units: int, alpha: float, runs: int) -> Estimate:
    """A t interval on the standard error of a crossed bootstrap's draws, with the scarcer of the
    members and the training runs minus one degrees of freedom (the runs' small-sample
    correction: procedures.bootstrap_t)."""
    df = min(units, runs) - 1 if runs >= 2 else units - 1
    test = bootstrap_t(difference.effect, difference.draws, df, runs=runs if runs >= 2 else 0)
    return from_test(test, units, alpha, difference.effect, PLUS_MINUS_ONE)  # AUC differences


def ordering(aucs: list[float], models: list[str]) -> str:
    """The AUC at every size, smallest model first, with each step's sign ("h32 0.690 < h64
    0.780 >= h96 0.750"), and whether the point estimates increase with every step (each step's
    interval is its own claim)."""
    steps = list(itertools.pairwise(zip(models, aucs, strict=True)))
    text = f"{models[0]} {aucs[0]:.3f}" + "".join(
        f" {'<' if after > before else '>='} {model} {after:.3f}"
        for (_, before), (model, after) in steps
    )
    monotone = all(after > before for (_, before), (_, after) in steps)
    trend = "increasing" if monotone else "not increasing"
    return f"AUC by size (point estimates): {text} ({trend} in size)"


def findings(
    frames: tuple[pd.DataFrame, pd.DataFrame], mia: dict, settings: dict, seeds_rule: str
) -> list[Finding]:
    """The size, duplication and attack-order claims; `mia`: the params group, `settings`: the
    claims block. On the family (trained here) fewer than min_units training runs leave every
    claim inconclusive, `seeds_rule` saying why; listed pretrained models have one run."""
    texts, stats = frames
    variance = (mia.get("lira") or {}).get("variance", "global")
    table = score_table(stats, texts, k=mia["k"], reference=mia["reference"],
                        lira_variance=variance)  # fmt: skip
    groups, non_members = member_groups(texts)
    models = list(dict.fromkeys(stats.loc[stats["role"] == "target", "model"]))
    counts = sorted((g for g in groups if g != "all"), key=int)
    alpha = settings["alpha"]
    runs = stats.loc[stats["role"] == "target", "run"].nunique()
    short = seeds_rule if mia["models"] == "family" and runs < settings["min_units"] else ""
    done: dict[tuple[str, str], dict] = {}

    def auc(attack: str, model: str, group: str = "all"):
        """One crossed bootstrap per (attack, model): the same draws for every setting."""
        if (attack, model) not in done:
            done[(attack, model)] = resampled(
                table, attack, model, groups=groups, non_members=non_members, fprs=(),
                n_boot=settings["n_boot"], seed=settings["seed"], min_units=settings["min_units"],
            )  # fmt: skip
        return done[(attack, model)][(group, "auc")]

    def finding(spec: str, difference, units: int, fields: dict) -> Finding:
        return Finding(spec, _estimate(difference, units, alpha, runs), fields, missing=short)

    found = []
    members = len(groups["all"])
    for attack in SIZE_ATTACKS:
        fields = {"attack": attack, "large": models[-1], "small": models[0]}
        if len(models) < 2:
            found.append(Finding("s1.mia.size.{attack}", NONE, fields, missing="one scored model"))
            fields = {"attack": attack, "larger": models[-1], "smaller": "-"}
            found.append(Finding(STEP, NONE, fields, missing="one scored model"))
            continue
        difference = auc(attack, models[-1]) - auc(attack, models[0])
        ends = finding("s1.mia.size.{attack}", difference, members, fields)
        found.append(replace(ends, note=ordering([auc(attack, m).effect for m in models], models)))
        for smaller, larger in itertools.pairwise(models):
            step = auc(attack, larger) - auc(attack, smaller)
            fields = {"attack": attack, "larger": larger, "smaller": smaller}
            found.append(finding(STEP, step, members, fields))
    for attack in SIZE_ATTACKS:
        if len(counts) < 2:
            fields = {"attack": attack, "model": models[-1], "most": "-", "least": "-"}
            why = "the members carry fewer than two duplication counts"
            found.append(Finding("s1.mia.duplication.{attack}", NONE, fields, missing=why))
            continue
        most, least = counts[-1], counts[0]
        fields = {"attack": attack, "model": models[-1], "most": most, "least": least}
        difference = auc(attack, models[-1], most) - auc(attack, models[-1], least)
        units = min(len(groups[most]), len(groups[least]))
        found.append(finding("s1.mia.duplication.{attack}", difference, units, fields))
    for better, worse in ORDER:
        for model in models:
            fields = {"better": better, "worse": worse, "model": model}
            difference = auc(better, model) - auc(worse, model)
            spec = "s1.mia.order.{better}_over_{worse}.{model}"
            found.append(finding(spec, difference, len(groups["all"]), fields))
    return found
