"""The frontier figure: one panel per leakage measure, accuracy on x, each defense's curve from
its most private setting to the undefended system, the Pareto set ringed."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from privleak.figures import outside_legend
from privleak.frontier.points import KNOBS

FLOOR = 1e-12
"""Secret mass below this is drawn at it (log axis)."""
TITLES = {"secret_mass": f"cued secret mass, Σ P(secret | cue) (< {FLOOR:g} at it)",
          "emitted": "sampled: secrets repeated verbatim"}  # fmt: skip
LABELS = {"none": "none", "static": "Static", "pad": "PAD", "cid": "CID",
          "bounded_cid": "bounded CID", "dp_icl": "DP-ICL", "dist": "Dist.", "summ": "Summ.",
          "redact_keyword": "redaction (keyword)",
          "redact_classifier": "redaction (classifier)"}  # fmt: skip


def frontier_figure(table: pd.DataFrame, curves: dict[str, list[int]], title: str) -> plt.Figure:
    """table: `summary.point_table`'s rows in points order; curves: {defense: positions}."""
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.8), squeeze=False)
    for ax, leak in zip(axes[0], TITLES, strict=True):
        values = table[leak].to_numpy(dtype=float)
        shown = np.maximum(values, FLOOR) if leak == "secret_mass" else values
        x = table["accuracy"].to_numpy(dtype=float)
        for i, defense in enumerate(d for d in KNOBS if d in curves):
            path = curves[defense]
            ax.plot(x[path], shown[path], marker="o", ms=3.5, lw=1.2, color=f"C{i}",
                    label=LABELS[defense])  # fmt: skip
        ringed = table[f"pareto_{leak}"].to_numpy(dtype=bool)
        ax.scatter(x[ringed], shown[ringed], s=80, facecolors="none", edgecolors="0.2",
                   linewidths=0.8, label="Pareto set")  # fmt: skip
        none = table["defense"].tolist().index("none")
        line = np.linspace(0.0, x[none], 50)
        refusal = line / x[none] * values[none] if x[none] > 0 else line
        ax.plot(line, np.maximum(refusal, FLOOR) if leak == "secret_mass" else refusal,
                color="0.5", ls="--", lw=1.0, label="random refusal")  # fmt: skip
        ax.scatter([x[none]], [shown[none]], marker="*", s=90, color="0.1", zorder=3,
                   label="no defense")  # fmt: skip
        ax.set(title=TITLES[leak], xlabel="accuracy (names the disease)",
               yscale="log" if leak == "secret_mass" else "linear")  # fmt: skip
    axes[0][0].set_ylabel("leakage per attack prompt")
    outside_legend(fig, axes[0][-1])
    fig.suptitle(title)
    return fig
