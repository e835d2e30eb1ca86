"""Deterministic figure and table writers: same data, same bytes (a second dvc repro is a no-op)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

# No timestamps or random ids in the files, so identical data gives identical bytes.
matplotlib.rcParams["svg.hashsalt"] = "privleak"
_METADATA = {
    "png": {"Software": None},
    "pdf": {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None},
    "svg": {"Date": None, "Creator": None},
}


def save_figure(
    fig: plt.Figure, stem: Path, formats: tuple[str, ...] = ("png", "pdf")
) -> list[Path]:
    """Write fig to stem.<fmt> for each format and close it; returns the written paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        target = stem.with_suffix(f".{fmt}")
        fig.savefig(target, format=fmt, metadata=_METADATA[fmt], dpi=150, bbox_inches="tight")
        written.append(target)
    plt.close(fig)
    return written


def save_table(table: pd.DataFrame, stem: Path, float_format: str = ".4g") -> list[Path]:
    """Write table to stem.csv (full precision) and stem.md (rounded, for reading)."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    csv, markdown = stem.with_suffix(".csv"), stem.with_suffix(".md")
    table.to_csv(csv, index=False)
    markdown.write_text(table.to_markdown(index=False, floatfmt=float_format) + "\n")
    return [csv, markdown]
