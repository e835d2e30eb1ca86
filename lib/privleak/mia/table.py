"""Every attack's score of every text under every scored model, as one long table.

Inputs (the mia_score stage's artifacts):
- texts: one row per text {text_id, kind, duplicates (0 for a non-member), is_member, text};
- stats: one row per (model, run, role, text_id) {logprob, mu, sigma: [T] arrays}; role "target"
  for an attacked model, "reference" for an offline-LiRA reference model (never saw any text).
Output rows {model, run, text_id, attack, score}, higher = more likely a member.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from privleak.errors import require
from privleak.mia import attacks, metrics

KEYS = ["model", "run", "text_id"]


def _own_scores(targets: pd.DataFrame, texts: pd.Series, k: float) -> pd.DataFrame:
    """LOSS, zlib, Min-K% and Min-K%++ of each target row."""
    rows = []
    for row in targets.itertuples(index=False):
        rows += [
            (row.model, row.run, row.text_id, "loss", attacks.loss(row.logprob)),
            (row.model, row.run, row.text_id, "zlib",
             attacks.zlib_ratio(row.logprob, texts[row.text_id])),
            (row.model, row.run, row.text_id, "min_k", attacks.min_k(row.logprob, k)),
            (row.model, row.run, row.text_id, "min_k_plus_plus",
             attacks.min_k_plus_plus(row.logprob, row.mu, row.sigma, k)),
        ]  # fmt: skip
    return pd.DataFrame(rows, columns=[*KEYS, "attack", "score"])


def _reference_scores(targets: pd.DataFrame, reference: str) -> pd.DataFrame:
    """The reference ratio of every other model against `reference` of the same run."""
    own = targets.set_index(["run", "text_id"])
    base = own[own["model"] == reference]["logprob"]
    require(len(base) > 0, f"mia reference model '{reference}' was not scored")
    rows = [
        (row.model, row.run, row.text_id, "reference",
         attacks.reference_ratio(row.logprob, base[(row.run, row.text_id)]))
        for row in targets[targets["model"] != reference].itertuples(index=False)
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=[*KEYS, "attack", "score"])


def _lira_scores(targets: pd.DataFrame, references: pd.DataFrame, variance: str) -> pd.DataFrame:
    """Offline LiRA of every target model that has reference models of its own size."""
    loss = lambda frame: frame.assign(score=[attacks.loss(v) for v in frame["logprob"]])  # noqa: E731
    targets, references = loss(targets), loss(references)
    out = []
    for model, own in references.groupby("model", sort=True):
        out_matrix = own.pivot(index="run", columns="text_id", values="score")
        for (_, run), target in targets[targets["model"] == model].groupby(["model", "run"]):
            target = target.set_index("text_id")["score"].reindex(out_matrix.columns)
            scores = attacks.lira_offline(target.to_numpy(), out_matrix.to_numpy(), variance)
            out.append(pd.DataFrame({"model": model, "run": run, "text_id": out_matrix.columns,
                                     "attack": "lira_offline", "score": scores}))  # fmt: skip
    return (
        pd.concat(out, ignore_index=True)
        if out
        else pd.DataFrame(columns=[*KEYS, "attack", "score"])
    )


def score_table(
    stats: pd.DataFrame,
    texts: pd.DataFrame,
    *,
    k: float,
    reference: str | None,
    lira_variance: str = "global",
) -> pd.DataFrame:
    """Every attack's score of every (target model, run, text); see the module docstring."""
    targets = stats[stats["role"] == "target"]
    references = stats[stats["role"] == "reference"]
    by_id = texts.set_index("text_id")["text"]
    parts = [_own_scores(targets, by_id, k)]
    if reference is not None:
        parts.append(_reference_scores(targets, reference))
    if len(references):
        parts.append(_lira_scores(targets, references, lira_variance))
    table = pd.concat(parts, ignore_index=True)
    require(bool(np.isfinite(table["score"]).all()), "an attack score is not finite")
    return table.merge(texts[["text_id", "kind", "duplicates", "is_member"]], on="text_id")


def member_groups(texts: pd.DataFrame) -> tuple[dict[str, list[str]], list[str]]:
    """({"all": member ids, "<count>": ids of the members planted that many times, ...},
    non-member ids), ids sorted; members of unknown count (0) are in "all" only."""
    members = texts[texts["is_member"].astype(bool)]
    groups = {"all": sorted(members["text_id"])}
    for count, frame in members[members["duplicates"] > 0].groupby("duplicates", sort=True):
        groups[str(int(count))] = sorted(frame["text_id"])
    return groups, sorted(texts.loc[~texts["is_member"].astype(bool), "text_id"])


def resampled(
    table: pd.DataFrame,
    attack: str,
    model: str,
    *,
    groups: dict[str, list[str]],
    non_members: list[str],
    fprs: Sequence[float],
    n_boot: int,
    seed: int,
    min_units: int = 2,
) -> dict[tuple[str, str], metrics.Resampled]:
    """crossed_bootstrap of one attack on one model, runs in sorted order."""
    wide = table[(table["attack"] == attack) & (table["model"] == model)].pivot(
        index="run", columns="text_id", values="score"
    )
    members = {g: wide[ids].to_numpy(float) for g, ids in groups.items()}
    return metrics.crossed_bootstrap(
        members,
        wide[non_members].to_numpy(float),
        fprs=fprs,
        n_boot=n_boot,
        seed=seed,
        min_units=min_units,
    )


def metric_table(
    table: pd.DataFrame,
    texts: pd.DataFrame,
    *,
    fprs: Sequence[float],
    n_boot: int,
    seed: int,
    alpha: float = 0.05,
    method: str = "percentile",
    min_units: int = 2,
) -> pd.DataFrame:
    """AUC and TPR at each FPR, with crossed intervals, per attack x model x member group.
    Rows {attack, model, duplicates ("all" or a count), metric, effect, low, high, members,
    non_members, runs}."""
    groups, non_members = member_groups(texts)
    rows = []
    for (attack, model), frame in table.groupby(["attack", "model"], sort=True):
        found = resampled(table, attack, model, groups=groups, non_members=non_members,
                          fprs=fprs, n_boot=n_boot, seed=seed, min_units=min_units)  # fmt: skip
        for (group, name), value in found.items():
            low, high = value.interval(alpha, method)
            rows.append({"attack": attack, "model": model, "duplicates": group, "metric": name,
                         "effect": value.effect, "low": low, "high": high,
                         "members": len(groups[group]), "non_members": len(non_members),
                         "runs": frame["run"].nunique()})  # fmt: skip
    return pd.DataFrame(rows)
