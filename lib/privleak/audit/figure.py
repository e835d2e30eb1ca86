"""The audit figures: for one mechanism, nominal epsilon against the audited lower bounds over
its epsilon setting (both axes logarithmic; bounds <= 0 are left out and stay in the table)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import NullFormatter

TITLES = {"dp_rag": "DP-RAG (DP-ICL tokens)", "cid": "bounded CID", "pad": "PAD"}
SETTINGS = {"dp_rag": "response budget ε", "cid": "per-token ε", "pad": "PAD ε (ε_base)"}
# (column, label, style): what each panel draws when the column has a positive value.
SERIES = (
    ("nominal_token", "nominal, per token", {"ls": "-", "marker": "", "color": "C0"}),
    ("audited_token", "exact worst token loss", {"ls": "", "marker": "o", "color": "C0"}),
    (
        "nominal_epsilon",
        "nominal (ε, δ), per response (PAD: all steps)",
        {"ls": "--", "marker": "", "color": "C1"},
    ),  # fmt: skip
    ("nominal_response", "nominal pure, per response", {"ls": ":", "marker": "", "color": "C1"}),
    ("nominal_relaxed", "nominal γ-relaxed (ε, δ), PLD", {"ls": "--", "marker": "", "color": "C4"}),
    (
        "nominal_paper",
        "paper's γ-relaxed ε (RDP, α = 10)",
        {"ls": "-.", "marker": "", "color": "C4"},
    ),
    (
        "event_relaxed_low",
        "γ-relaxed event bound",
        {"ls": "", "marker": "D", "color": "C4", "mfc": "none"},
    ),  # fmt: skip
    ("wb_epsilon_low", "white-box lower bound (95 %)", {"ls": "", "marker": "^", "color": "C1"}),
    (
        "event_epsilon_low",
        "white-box event bound",
        {"ls": "", "marker": "D", "color": "C1", "mfc": "none"},
    ),  # fmt: skip
    (
        "audited_response",
        "largest |loss| of a candidate",
        {"ls": "", "marker": "s", "color": "C1", "mfc": "none"},
    ),  # fmt: skip
    (
        "wb_relaxed_low",
        "γ-relaxed white-box lower bound (95 %)",
        {"ls": "", "marker": "^", "color": "C4"},
    ),  # fmt: skip
    ("bb_epsilon_low", "black-box lower bound (95 %)", {"ls": "", "marker": "v", "color": "C2"}),
)
BROKEN_BOUNDS = ("audited_token", "event_epsilon_low", "wb_epsilon_low", "bb_epsilon_low",
                 "event_relaxed_low")  # fmt: skip


def _positive(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """The rows whose `column` holds a finite number > 0 (a log axis shows nothing else)."""
    if column not in frame:
        return frame.iloc[0:0]
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
    keep = np.flatnonzero(np.isfinite(values) & (values > 0))
    return frame.iloc[keep].assign(**{column: values[keep]})


def audit_figure(table: pd.DataFrame, mechanism: str) -> plt.Figure:
    """One mechanism's rows of the audit table (`table.summarise`): nominal lines and audited
    markers over the setting; broken controls are red crosses at their setting, on their
    largest audited bound."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0), layout="constrained")
    rows = table[table["mechanism"] == mechanism].sort_values("setting")
    correct, broken = rows[~rows["broken"].astype(bool)], rows[rows["broken"].astype(bool)]
    for column, label, style in SERIES:
        shown = _positive(correct, column)
        if len(shown):
            ax.plot(shown["setting"], shown[column], label=label, **style)
    for _, row in broken.iterrows():
        bounds = [row.get(c) for c in BROKEN_BOUNDS]
        bounds = [float(b) for b in bounds if b is not None and np.isfinite(b) and b > 0]
        if bounds:
            ax.plot([row["setting"]], [max(bounds)], "x", color="C3", ms=9,
                    label="broken control, largest audited bound")  # fmt: skip
    ax.set(xscale="log", yscale="log", title=TITLES[mechanism], xlabel=SETTINGS[mechanism],
           ylabel="ε")  # fmt: skip
    settings = sorted(set(rows["setting"]))
    ax.set_xticks(settings, [f"{x:g}" for x in settings])  # only the audited settings
    ax.xaxis.set_minor_formatter(NullFormatter())
    fig.legend(loc="outside right upper")
    return fig


def conformance_figure(suite: pd.DataFrame) -> plt.Figure:
    """The conformance suite (`mutants.run_suite`): each mechanism's audited lower bound over its
    claimed epsilon (log axis; an infinite bound at the right edge, 0 at the left), correct
    mechanisms and seeded bugs apart, a line at 1 where a claim is exceeded."""
    rows = suite.sort_values(["correct", "family", "mechanism"], ascending=[False, True, True])
    ratio = (rows["audited"] / rows["claimed"]).to_numpy(dtype=float)
    low, high = 1e-2, 1e2
    shown = np.clip(np.where(np.isfinite(ratio), ratio, high), low, high)
    fig, ax = plt.subplots(figsize=(6.4, 0.25 * len(rows) + 1.2), layout="constrained")
    colours = ["C0" if c else "C3" for c in rows["correct"]]
    ax.barh(np.arange(len(rows)), shown - low, color=colours, left=low)
    ax.axvline(1.0, color="black", lw=1)
    ax.set_yticks(np.arange(len(rows)), list(rows["mechanism"]))
    ax.invert_yaxis()
    ax.set(xscale="log", xlim=(low, high), xlabel="audited ε lower bound / claimed ε",
           title="Conformance check: correct mechanisms (blue) and seeded bugs (red)")  # fmt: skip
    return fig
