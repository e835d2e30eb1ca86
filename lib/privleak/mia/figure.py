"""The membership-inference figures: ROC curves on log axes, and S1's ESP against a score."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from privleak.figures import outside_legend, short_name
from privleak.mia import metrics

LABELS = {"loss": "LOSS", "zlib": "zlib", "min_k": "Min-K%", "min_k_plus_plus": "Min-K%++",
          "reference": "reference", "lira_offline": "LiRA (offline)"}  # fmt: skip
GRID = np.logspace(-4, 0, 200)  # FPRs the run-averaged curves are read at


def mean_roc(frame: pd.DataFrame) -> np.ndarray:
    """TPR at GRID's FPRs, averaged over the runs of one attack on one model (each run's ROC
    is read at each FPR as its largest TPR there)."""
    curves = []
    for _, run in frame.groupby("run"):
        false_pos, true_pos = metrics.roc_points(run["score"], run["is_member"])
        curves.append([true_pos[false_pos <= f + 1e-12].max() for f in GRID])
    return np.mean(curves, 0)


def roc_figure(table: pd.DataFrame, models: Sequence[str], title: str) -> plt.Figure:
    """One panel per model: each attack's run-averaged ROC, log-log, with the chance line."""
    fig, axes = plt.subplots(1, len(models), figsize=(3.2 * len(models), 3.4), sharey=True,
                             squeeze=False)  # fmt: skip
    for ax, model in zip(axes[0], models, strict=True):
        own = table[table["model"] == model]
        for i, attack in enumerate(a for a in LABELS if a in set(own["attack"])):
            ax.plot(GRID, mean_roc(own[own["attack"] == attack]), color=f"C{i}",
                    label=LABELS[attack])  # fmt: skip
        ax.plot(GRID, GRID, color="0.6", ls=":", label="chance")
        ax.set(xscale="log", yscale="log", xlim=(1e-4, 1), ylim=(1e-4, 1.05),
               title=short_name(model),
               xlabel="false-positive rate")  # fmt: skip
    axes[0][0].set_ylabel("true-positive rate")
    outside_legend(fig, axes[0][-1])
    fig.suptitle(title)
    return fig


def esp_figure(joined: pd.DataFrame, model: str, attack: str) -> plt.Figure:
    """Each member on each run of `model`: S1's log10 ESP against the attack's score, one panel
    per sequence kind (their ESPs live on different scales)."""
    own = joined[joined["model"] == model]
    kinds = sorted(own["kind"].unique()) or ["none"]
    fig, axes = plt.subplots(1, len(kinds), figsize=(4.0 * len(kinds), 3.4), squeeze=False)
    if own.empty:
        shown = f"S1 scored no ESP on {short_name(model)}"
        axes[0][0].text(0.5, 0.5, shown, ha="center", va="center",
                        transform=axes[0][0].transAxes)  # fmt: skip
        return fig
    counts = sorted(own["duplicates"].unique())
    for ax, kind in zip(axes[0], kinds, strict=True):
        for i, count in enumerate(counts):
            group = own[(own["kind"] == kind) & (own["duplicates"] == count)]
            ax.scatter(group["log10_esp"], group["score"], s=9, alpha=0.6, color=f"C{i}",
                       label=f"planted {count}x")  # fmt: skip
        ax.set(xlabel="log10 ESP (S1, sampling, full prefix)", title=f"{short_name(model)}, {kind}")
    axes[0][0].set_ylabel(f"{LABELS[attack]} score")
    outside_legend(fig, axes[0][-1])
    return fig
